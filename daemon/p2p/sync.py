"""Anti-entropy on `/clade/sync/1.0.0`: the asking side pulls what it lacks, in rounds.

    asker                                  responder
      want(my context)          ───▶
                                ◀───       delta × ≤ ROUND_DELTAS (each ≤ 1 MiB, ≤ 4,096 ops)
                                ◀───       end(more, responder's context)
      (verify, apply each delta in one transaction; if more: want(new context) …)

Backpressure: the responder extracts the next round only when asked, so at most one
round (≤ 4 MiB) is in flight, and the asker reads a whole round before applying it (a
slow reader would otherwise be reset by Yamux). A round resumes from the asker's context,
so a sync cut short (peer killed, stream reset) loses nothing: the next one continues.
Only gated ops are ever extracted (see `grimoire.promotion`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from crdt import ApplyReport, CausalContext, RemoteProtocolError

from . import messages
from .frames import encode_frame, read_frame

__all__ = ["ROUND_DELTAS", "PullResult", "SyncRefused", "SyncStream", "pull", "serve"]

ROUND_DELTAS = 4
MAX_ROUNDS = 10_000
STALL_ROUNDS = 3  # rounds in a row that say "more" but bring nothing: the responder is stuck or lying
READ_TIMEOUT_S = 60.0


class SyncStream(Protocol):
    async def read(self, n: int | None = None) -> bytes: ...
    async def write(self, data: bytes) -> None: ...


@dataclass
class PullResult:
    rounds: int = 0
    deltas: int = 0
    report: ApplyReport = field(default_factory=ApplyReport)
    bytes_in: int = 0
    bytes_out: int = 0
    remote_context: CausalContext | None = None
    first_round_ms: float | None = None


class SyncRefused(Exception):
    """The responder refused the sync (e.g. it does not count us as a member)."""


async def _send(stream: SyncStream, message: messages.Message) -> int:
    frame = encode_frame(messages.encode(message))
    await stream.write(frame)
    return len(frame)


async def _receive(stream: SyncStream) -> tuple[messages.Message, int]:
    with trio.fail_after(READ_TIMEOUT_S):
        payload = await read_frame(stream)
    return messages.decode(payload), len(payload)


async def pull(
    stream: SyncStream,
    *,
    local_context: Callable[[], Awaitable[CausalContext]],
    apply: Callable[[bytes], Awaitable[ApplyReport]],
) -> PullResult:
    """Ask until the responder has nothing we lack. Raises `RemoteProtocolError`, `SyncRefused`,
    `trio.TooSlowError` (the caller counts them); applied rounds stay applied."""
    result = PullResult()
    stalled = 0
    previous: CausalContext | None = None
    while result.rounds < MAX_ROUNDS:
        started = trio.current_time()
        context = await local_context()
        stalled = stalled + 1 if context == previous else 0
        if stalled >= STALL_ROUNDS:
            raise RemoteProtocolError("stalled", f"{STALL_ROUNDS} rounds said 'more' and brought nothing new")
        previous = context
        result.bytes_out += await _send(stream, messages.Want(context))
        frames: list[bytes] = []
        while True:
            message, size = await _receive(stream)
            result.bytes_in += size
            if isinstance(message, messages.DeltaFrame):
                if len(frames) >= ROUND_DELTAS:
                    raise RemoteProtocolError("oversized", f"more than {ROUND_DELTAS} deltas in one round")
                frames.append(message.delta)
            elif isinstance(message, messages.End):
                break
            elif isinstance(message, messages.Refused):
                raise SyncRefused(f"{message.reason}: {message.detail}")
            else:
                raise RemoteProtocolError("malformed", f"unexpected {type(message).__name__} in a sync round")
        if result.first_round_ms is None:
            result.first_round_ms = (trio.current_time() - started) * 1000
        result.rounds += 1
        result.remote_context = message.context
        for frame in frames:
            result.report.add(await apply(frame))
            result.deltas += 1
        if not message.more:
            break
    return result


Extract = Callable[[CausalContext], Awaitable[tuple[list[bytes], bool, CausalContext]]]


async def serve(stream: SyncStream, *, extract: Extract,
                on_round: Callable[[CausalContext, CausalContext, bool], None],
                counters: Counter[str]) -> dict[str, Any]:
    """Answer wants until the asker closes the stream; returns traffic figures.

    `on_round(asker's context, ours, more)` is called after each round is extracted."""
    sent = received = rounds = 0
    while True:
        try:
            message, size = await _receive(stream)
        except EOFError:
            break
        received += size
        if not isinstance(message, messages.Want):
            raise RemoteProtocolError("malformed", f"expected a want, got {type(message).__name__}")
        deltas, more, local = await extract(message.context)
        on_round(message.context, local, more)
        for delta in deltas:
            sent += await _send(stream, messages.DeltaFrame(delta))
        sent += await _send(stream, messages.End(more, local))
        rounds += 1
        counters["sync_rounds_served"] += 1
    return {"rounds": rounds, "bytes_in": received, "bytes_out": sent}

