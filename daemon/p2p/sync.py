"""The trio loops that drive `sync_state` over a stream (the protocol is documented there).

`pull` and `serve` only move messages between a stream and a `PullState` / `ServeState`,
call the host's store functions when an event asks for them, and time the reads. Errors:
`RemoteProtocolError` (a bad frame, message or round: count it under its reason),
`SyncRefused` (pull: the responder said no), `EOFError` (pull: the stream ended inside a
round), `trio.TooSlowError` (no frame for READ_TIMEOUT_S) and whatever the stream raises;
`LocalProtocolError` only if the host's own functions broke the protocol (a bug here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from crdt import ApplyReport, CausalContext

from . import messages
from .errors import SyncRefused
from .frames import encode_frame, read_frame
from .sync_state import ROUND_DELTAS, PeerRefused, PullState, RoundEnded, ServeState, WantReceived

__all__ = ["READ_TIMEOUT_S", "ROUND_DELTAS", "PullResult", "ServeResult", "SyncStream", "pull", "serve"]

READ_TIMEOUT_S = 60.0

Extract = Callable[[CausalContext], Awaitable[tuple[list[bytes], bool, CausalContext]]]
"""Serve side: the deltas (≤ ROUND_DELTAS) the asker's context lacks, whether there are
more, and our context as of that snapshot."""


class SyncStream(Protocol):
    async def read(self, n: int | None = None) -> bytes: ...
    async def write(self, data: bytes) -> None: ...


@dataclass
class PullResult:
    """What a pull brought: rounds and deltas, what applying them did, traffic, the
    responder's last context, and how long the first round took (a round-trip estimate)."""

    rounds: int = 0
    deltas: int = 0
    report: ApplyReport = field(default_factory=ApplyReport)
    bytes_in: int = 0
    bytes_out: int = 0
    remote_context: CausalContext | None = None
    first_round_ms: float | None = None


@dataclass
class ServeResult:
    rounds: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


async def _flush(stream: SyncStream, state: PullState | ServeState) -> int:
    sent = 0
    while (message := state.next_message()) is not None:
        frame = encode_frame(messages.encode(message))
        await stream.write(frame)
        sent += len(frame)
    return sent


async def _receive(stream: SyncStream, timeout_s: float) -> tuple[messages.Message, int]:
    with trio.fail_after(timeout_s):
        payload = await read_frame(stream)
    return messages.decode(payload), len(payload)


async def pull(
    stream: SyncStream,
    *,
    local_context: Callable[[], Awaitable[CausalContext]],
    apply: Callable[[list[bytes]], Awaitable[ApplyReport]],
    read_timeout_s: float = READ_TIMEOUT_S,
) -> PullResult:
    """Ask until the responder has nothing we lack; `apply` joins one round's deltas (in
    order; it may verify one while joining another). Applied deltas stay applied whatever
    is raised (see the module docstring for what may be)."""
    state = PullState()
    result = PullResult()
    started = trio.current_time()
    state.start(await local_context())
    while not state.done:
        result.bytes_out += await _flush(stream, state)
        ended: RoundEnded | None = None
        while ended is None:
            message, size = await _receive(stream, read_timeout_s)
            result.bytes_in += size
            for event in state.receive(message):
                if isinstance(event, PeerRefused):
                    raise SyncRefused(event.reason, event.detail)
                ended = event
        if result.first_round_ms is None:
            result.first_round_ms = (trio.current_time() - started) * 1000
        result.rounds = state.rounds
        result.remote_context = ended.context
        if ended.deltas:
            result.report.add(await apply(list(ended.deltas)))
            result.deltas += len(ended.deltas)
        state.round_applied(await local_context())
    return result


async def serve(
    stream: SyncStream,
    *,
    extract: Extract,
    on_round: Callable[[CausalContext, CausalContext, bool], None],
    read_timeout_s: float = READ_TIMEOUT_S,
) -> ServeResult:
    """Answer wants until the asker closes its end; returns traffic figures.

    `on_round(asker's context, ours, more)` is called after each round is extracted."""
    state = ServeState()
    result = ServeResult()
    while not state.closed:
        try:
            message, size = await _receive(stream, read_timeout_s)
        except EOFError:
            events = state.receive_eof()
        else:
            result.bytes_in += size
            events = state.receive(message)
        for event in events:
            if isinstance(event, WantReceived):
                deltas, more, local = await extract(event.context)
                on_round(event.context, local, more)
                state.answer(deltas, more=more, context=local)
            # Closed: the loop ends (`state.closed`)
        result.bytes_out += await _flush(stream, state)
    result.rounds = state.rounds
    return result
