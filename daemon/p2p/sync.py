"""The trio loops that drive `sync_state` over a stream (the protocol is documented there).

`pull` and `serve` only move messages between a stream and a `PullState` / `ServeState`,
call the host's store functions when an event asks for them, and time the reads. Errors:
`RemoteProtocolError` (a bad frame, message or round: count it under its reason),
`SyncRefused` (pull: the responder said no), `EOFError` (pull: the stream ended inside a
round), `trio.TooSlowError` (no frame for READ_TIMEOUT_S) and whatever the stream raises;
`LocalProtocolError` only if the host's own functions broke the protocol (a bug here).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from crdt import ApplyReport, CausalContext

from . import messages
from .errors import SyncRefused
from .frames import encode_frame, read_frame
from .sync_state import (
    ROUND_DELTAS,
    DeltaArrived,
    PeerRefused,
    PullState,
    RoundEnded,
    ServeState,
    SummaryReceived,
    WantReceived,
)

__all__ = ["READ_TIMEOUT_S", "ROUND_DELTAS", "Apply", "ExtractSeals", "PullResult", "ServeResult", "SyncStream", "pull",
           "serve"]

READ_TIMEOUT_S = 60.0

Apply = Callable[[trio.MemoryReceiveChannel[bytes]], Awaitable[ApplyReport]]
"""Pull side: join one round's deltas in the order they come through the channel, each as it
comes, until the channel closes; what joining them did. A round cut short closes the channel
early: join what came."""

Extract = Callable[[CausalContext, trio.MemorySendChannel[bytes]], Awaitable[tuple[bool, CausalContext]]]
"""Serve side: send the deltas (≤ ROUND_DELTAS) the asker's context lacks through the
channel, each as soon as it is encoded; then whether there are more, and our context."""

ExtractSeals = Callable[[tuple[tuple[str, int], ...], trio.MemorySendChannel[bytes]], Awaitable[None]]
"""Serve side, v3: send at most one delta holding the seals a want asked for (and no op)."""


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
    complete: bool = False  # the last round said nothing more was left (not cut at MAX_ROUNDS)


@dataclass
class ServeResult:
    rounds: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


async def _flush(stream: SyncStream, state: PullState | ServeState) -> int:
    sent = 0
    while (message := state.next_message()) is not None:
        frame = encode_frame(messages.encode(message, state.version))
        await stream.write(frame)
        sent += len(frame)
    return sent


async def _receive(stream: SyncStream, timeout_s: float, version: int) -> tuple[messages.Message, int]:
    with trio.fail_after(timeout_s):
        payload = await read_frame(stream)
    return messages.decode(payload, version), len(payload)


async def pull(
    stream: SyncStream,
    *,
    local_context: Callable[[], Awaitable[CausalContext]],
    apply: Apply,
    read_timeout_s: float = READ_TIMEOUT_S,
    version: int = 1,
    seal_asks: tuple[tuple[str, int], ...] = (),
) -> PullResult:
    """Ask until the responder has nothing we lack; `apply` joins each round's deltas while
    the round is still arriving. Joined deltas stay joined whatever is raised (see the
    module docstring for what may be), those of a round cut short included. `version`: the
    stream's protocol (1, 2 on `/clade/sync/2.0.0`, 3 on `/clade/sync/3.0.0`: `sync_state`);
    `seal_asks` (v3): whose seals we lack, sent with the first want."""
    state = PullState(version=version, seal_asks=seal_asks)
    result = PullResult()
    started = trio.current_time()
    state.start(await local_context())
    while not state.done:
        result.bytes_out += await _flush(stream, state)
        ended, joined = await _pull_round(stream, state, apply, result, read_timeout_s)
        if result.first_round_ms is None:
            result.first_round_ms = (trio.current_time() - started) * 1000
        result.rounds = state.rounds
        result.remote_context = ended.context
        result.complete = not ended.more
        result.deltas += ended.deltas
        result.report.add(joined)
        state.round_applied(await local_context())
    return result


async def _pull_round(stream: SyncStream, state: PullState, apply: Apply, result: PullResult,
                      read_timeout_s: float) -> tuple[RoundEnded, ApplyReport]:
    """Read one round, handing each delta to `apply` as it arrives; its end and what joining
    it did, once every delta is joined. If reading fails, the deltas that arrived are joined
    first, then the reading's error is raised; if `apply` fails, reading stops and its error
    is raised."""
    send, arrivals = trio.open_memory_channel[bytes](ROUND_DELTAS)  # a round never blocks the reader
    joined = ApplyReport()
    ended: RoundEnded | None = None

    async def join() -> None:
        nonlocal joined
        async with arrivals:
            joined = await apply(arrivals)

    async def read() -> None:
        nonlocal ended
        with send:  # closed whatever happens: `apply` then ends with what came
            ended = await _read_round(stream, state, send, result, read_timeout_s)

    await _alongside(join, read)
    assert ended is not None  # reading returns its end or raises
    return ended, joined


async def _alongside(task: Callable[[], Awaitable[None]], main: Callable[[], Awaitable[None]]) -> None:
    """Run `task` in the background while `main` runs here: if `task` fails, `main` is cancelled.
    Once both have ended, the first failure is raised, unwrapped (not in an ExceptionGroup)."""
    failures: list[Exception] = []

    async def background(cancel_main: trio.CancelScope) -> None:
        try:
            await task()
        except Exception as exc:  # noqa: BLE001 - raised below, unwrapped
            failures.append(exc)
            cancel_main.cancel()

    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as main_scope:
            nursery.start_soon(background, main_scope)
            try:
                await main()
            except Exception as exc:  # noqa: BLE001 - raised below, once `task` has ended
                failures.append(exc)
    if failures:
        raise failures[0]


async def _read_round(stream: SyncStream, state: PullState, send: trio.MemorySendChannel[bytes],
                      result: PullResult, read_timeout_s: float) -> RoundEnded:
    while True:
        message, size = await _receive(stream, read_timeout_s, state.version)
        result.bytes_in += size
        for event in state.receive(message):
            if isinstance(event, PeerRefused):
                raise SyncRefused(event.reason, event.detail)
            if isinstance(event, DeltaArrived):
                await send.send(event.delta)
            else:
                return event
        result.bytes_out += await _flush(stream, state)  # v2: the rows an ask named


async def serve(
    stream: SyncStream,
    *,
    extract: Extract,
    on_round: Callable[[CausalContext, CausalContext, bool], None],
    local_context: Callable[[], Awaitable[CausalContext]] | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
    version: int = 1,
    extract_seals: ExtractSeals | None = None,
) -> ServeResult:
    """Answer wants until the asker closes its end; returns traffic figures.

    `on_round(asker's context, ours, more)` is called after each round is extracted.
    `version` 2 needs `local_context` (our context, to reconcile the asker's summary with);
    on version 3, `extract_seals` answers a want's seal asks first, in its round."""
    if version != 1 and local_context is None:
        raise ValueError("sync v2 serves with local_context")
    state = ServeState(version=version)
    result = ServeResult()
    while not state.closed:
        try:
            message, size = await _receive(stream, read_timeout_s, version)
        except EOFError:
            events = state.receive_eof()
        else:
            result.bytes_in += size
            events = state.receive(message)
        if any(isinstance(event, SummaryReceived) for event in events):
            assert local_context is not None
            events = state.reconcile(await local_context())
        for event in events:
            if isinstance(event, WantReceived):
                seals = functools.partial(extract_seals, event.seal_asks) \
                    if extract_seals is not None and event.seal_asks else None
                more, local = await _serve_round(stream, state, extract, event.context, result, seals)
                on_round(event.context, local, more)
                state.end(more=more, context=local)
            # Closed: the loop ends (`state.closed`)
        result.bytes_out += await _flush(stream, state)
    result.rounds = state.rounds
    return result


async def _serve_round(stream: SyncStream, state: ServeState, extract: Extract, context: CausalContext,
                       result: ServeResult, seals: Callable[[trio.MemorySendChannel[bytes]], Awaitable[None]] | None,
                       ) -> tuple[bool, CausalContext]:
    """Send each delta `extract` hands over while it extracts the next; its answer (more, our
    context). If sending fails, `extract` is stopped (its channel breaks) and the sending
    error raised; if `extract` fails, sending stops and its error is raised."""
    send, extracted = trio.open_memory_channel[bytes](ROUND_DELTAS)  # extraction never waits for the network
    answer: tuple[bool, CausalContext] | None = None

    async def produce() -> None:
        nonlocal answer
        async with send:
            if seals is not None:
                await seals(send)
            answer = await extract(context, send)

    async def deliver() -> None:
        with extracted:  # closed whatever happens: a blocked `extract` then fails instead of waiting
            async for delta in extracted:
                state.send_delta(delta)
                result.bytes_out += await _flush(stream, state)

    await _alongside(produce, deliver)
    assert answer is not None  # `extract` returned, or failed above
    return answer
