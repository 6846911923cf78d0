"""The trio loops of `daemon.p2p.sync` (pull and serve) over `trio.testing.memory_stream_pair`:
truncated rounds, refusals, stalls, timeouts, hostile askers, hang-ups mid-round.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import trio
import trio.testing

from crdt import ApplyReport, CausalContext, RemoteProtocolError, encode_delta, extract_deltas
from daemon.p2p import messages
from daemon.p2p.errors import SyncRefused
from daemon.p2p.frames import encode_frame, read_frame
from daemon.p2p.sync import PullResult, ServeResult, pull, serve
from daemon.p2p.sync_state import (
    ROUND_DELTAS,
    STALL_ROUNDS,
)
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.sync_sim import END, MORE, REFUSED, WANT, drive, extract_round, replica_with


class Stream:
    """A trio stream with the read/write surface of a libp2p stream (b"" at the end)."""

    def __init__(self, inner: trio.StapledStream[Any, Any]) -> None:
        self.inner = inner

    async def read(self, n: int | None = None) -> bytes:
        return bytes(await self.inner.receive_some(n))

    async def write(self, data: bytes) -> None:
        await self.inner.send_all(data)

    async def close(self) -> None:
        await self.inner.aclose()


T = TypeVar("T")


async def beside(main: Callable[[], Awaitable[T]], *others: Callable[[], Awaitable[object]]) -> T:
    """Run `main` with `others` beside it; `main`'s own exception is re-raised as itself (not
    wrapped in an exception group), once the others have finished."""
    error: Exception | None = None
    result: T | None = None
    async with trio.open_nursery() as nursery:
        for other in others:
            nursery.start_soon(other)
        try:
            result = await main()
        except Exception as exc:
            error = exc
    if error is not None:
        raise error
    assert result is not None
    return result


def pair() -> tuple[Stream, Stream]:
    a, b = trio.testing.memory_stream_pair()
    return Stream(a), Stream(b)


def store_functions(asker: SimReplica) -> tuple[Callable[[], Awaitable[CausalContext]],
                                                  Callable[[list[bytes]], Awaitable[ApplyReport]]]:
    async def local_context() -> CausalContext:
        return asker.state.context.copy()

    async def apply(arrivals: trio.MemoryReceiveChannel[bytes]) -> ApplyReport:
        total = ApplyReport()
        async for data in arrivals:
            total.add(asker.receive(data))
        return total

    return local_context, apply


def asking(stream: Stream, local_context: Callable[[], Awaitable[CausalContext]],
           apply: Callable[[trio.MemoryReceiveChannel[bytes]], Awaitable[ApplyReport]]
           ) -> Callable[[], Awaitable[PullResult]]:
    """The asker's side of an exchange: pull over `stream`, then close it."""
    async def asker_side() -> PullResult:
        try:
            return await pull(stream, local_context=local_context, apply=apply)
        finally:
            await stream.close()

    return asker_side


async def serve_replica(stream: Stream, responder: SimReplica, *, max_ops: int = 4096) -> ServeResult:
    async def extract(context: CausalContext, send: trio.MemorySendChannel[bytes]) -> tuple[bool, CausalContext]:
        deltas, more = extract_round(responder, context, max_ops=max_ops)
        for delta in deltas:
            await send.send(delta)
        return more, responder.state.context.copy()

    try:
        return await serve(stream, extract=extract, on_round=lambda *_: None)
    finally:
        await stream.close()


async def test_pull_and_serve_loops_converge_two_replicas_over_a_stream() -> None:
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(30)
    mine, theirs = pair()
    local_context, apply = store_functions(asker)
    served: list[ServeResult] = []

    async def responder_side() -> None:
        served.append(await serve_replica(theirs, responder, max_ops=2))

    with trio.fail_after(10):
        result = await beside(asking(mine, local_context, apply), responder_side)
    assert asker.digest() == responder.digest()
    assert (result.rounds, result.deltas, result.report.applied) == (8, 31, 60)
    assert served[0].rounds == 8 and served[0].bytes_in == result.bytes_out - 8  # one length byte per want
    assert result.remote_context == responder.state.context


async def answer_with(stream: Stream, *chunks: bytes) -> int:
    """A hostile responder: read the want, answer with these raw bytes, hang up. Returns wants read."""
    assert isinstance(messages.decode(await read_frame(stream)), messages.Want)
    for chunk in chunks:
        await stream.write(chunk)
    await stream.close()
    return 1


def frame(message: messages.Message) -> bytes:
    return encode_frame(messages.encode(message))


async def pull_against(responder: Callable[[Stream], Awaitable[object]],
                       asker: SimReplica) -> PullResult:
    mine, theirs = pair()
    local_context, apply = store_functions(asker)

    return await beside(asking(mine, local_context, apply), lambda: responder(theirs))


async def test_pull_loop_keeps_the_whole_deltas_of_a_round_whose_end_is_truncated() -> None:
    asker, source = SimReplica(IDENTITIES[1]), replica_with(2)
    first, second = list(extract_deltas(source.state, CausalContext(), max_ops=1))[:2]
    frames = [frame(messages.DeltaFrame(encode_delta(d))) for d in (first, second)]
    with trio.fail_after(10), pytest.raises(RemoteProtocolError) as caught:
        await pull_against(lambda s: answer_with(s, *frames, frame(END)[:-1]), asker)
    assert caught.value.reason == "truncated"
    # both deltas were joined as they came; the next pull asks from there and loses nothing
    assert first.ops[0].dot in asker.state.context and second.ops[0].dot in asker.state.context
    await pull_against(lambda s: serve_replica(s, source), asker)
    assert asker.digest() == source.digest()


async def test_pull_loop_joins_what_arrived_when_the_stream_ends_inside_a_round() -> None:
    asker, source = SimReplica(IDENTITIES[1]), replica_with(1)
    (delta,) = extract_deltas(source.state, CausalContext())
    before = asker.digest()
    with trio.fail_after(10), pytest.raises(EOFError):
        await pull_against(lambda s: answer_with(s, frame(messages.DeltaFrame(encode_delta(delta)))), asker)
    assert asker.digest() != before and asker.state.body(delta.ops[0].entry_id) is not None


async def test_pull_loop_stops_reading_when_joining_a_delta_fails() -> None:
    """A delta the host cannot join (here a malformed one) ends the pull with the host's
    error at once: the reader does not wait for the rest of the round."""
    asker = SimReplica(IDENTITIES[1])
    mine, theirs = pair()
    local_context, _ = store_functions(asker)
    joined: list[bytes] = []

    async def apply(arrivals: trio.MemoryReceiveChannel[bytes]) -> ApplyReport:
        async for data in arrivals:
            joined.append(data)
            raise RemoteProtocolError("malformed", "not a delta")
        return ApplyReport()

    async def silent_after_one_delta(stream: Stream) -> None:
        assert isinstance(messages.decode(await read_frame(stream)), messages.Want)
        await stream.write(frame(messages.DeltaFrame(b"junk")))
        with pytest.raises(EOFError):  # neither more deltas nor the end: the asker hangs up
            await read_frame(stream)

    with trio.fail_after(10), pytest.raises(RemoteProtocolError) as caught:
        await beside(asking(mine, local_context, apply), lambda: silent_after_one_delta(theirs))
    assert caught.value.reason == "malformed" and joined == [b"junk"]


async def test_pull_loop_raises_sync_refused_for_a_refusal() -> None:
    with trio.fail_after(10), pytest.raises(SyncRefused) as caught:
        await pull_against(lambda s: answer_with(s, frame(REFUSED)), SimReplica(IDENTITIES[1]))
    assert caught.value.reason == "not_a_member"


async def test_pull_loop_sends_exactly_stall_rounds_wants_to_a_stuck_responder() -> None:
    wants: list[messages.Message] = []

    async def stuck(stream: Stream) -> None:
        while True:
            try:
                wants.append(messages.decode(await read_frame(stream)))
            except EOFError:
                return
            await stream.write(frame(MORE))

    with trio.fail_after(10), pytest.raises(RemoteProtocolError) as caught:
        await pull_against(stuck, SimReplica(IDENTITIES[1]))
    assert caught.value.reason == "stalled" and len(wants) == STALL_ROUNDS


async def test_pull_loop_times_out_on_a_silent_responder_after_exactly_the_read_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    mine, theirs = pair()
    local_context, apply = store_functions(SimReplica(IDENTITIES[1]))
    started = trio.current_time()
    with pytest.raises(trio.TooSlowError):
        await pull(mine, local_context=local_context, apply=apply, read_timeout_s=42.0)
    assert trio.current_time() - started == pytest.approx(42.0)
    assert isinstance(messages.decode(await read_frame(theirs)), messages.Want)  # it did ask


@pytest.mark.parametrize(("data", "reason"), [
    (frame(messages.DeltaFrame(b"x")), "malformed"),
    (frame(WANT) + encode_frame(b"\xc1"), "malformed"),
    (encode_frame(b"\x92\xa4junk\x01")[:-2], "truncated"),
    (b"\xff" * 12, "oversized"),
], ids=["delta-first", "want-then-garbage", "truncated", "huge-length"])
async def test_serve_loop_raises_the_remote_error_for_a_hostile_asker(data: bytes, reason: str) -> None:
    mine, theirs = pair()
    responder = replica_with(2)

    async def hostile_asker() -> None:
        await mine.write(data)
        await mine.inner.send_eof()
        with pytest.raises(EOFError):
            while True:  # drain whatever comes back until the responder hangs up
                await read_frame(mine)

    with trio.fail_after(10), pytest.raises(RemoteProtocolError) as caught:
        await beside(lambda: serve_replica(theirs, responder), hostile_asker)
    assert caught.value.reason == reason


async def test_serve_loop_ends_cleanly_when_the_asker_closes_between_rounds() -> None:
    mine, theirs = pair()
    responder = replica_with(2)
    async def asker() -> None:
        await mine.write(frame(WANT))
        while not isinstance(messages.decode(await read_frame(mine)), messages.End):
            pass
        await mine.close()

    with trio.fail_after(10):
        result = await beside(lambda: serve_replica(theirs, responder), asker)
    assert result.rounds == 1 and result.bytes_out > 0


async def test_a_delta_is_joined_while_the_responder_still_extracts_the_round() -> None:
    """Streaming, both ends: the responder's extraction waits until the asker has joined the
    first delta before it hands over the second. Were either end to hold the round back
    (send only once extracted, join only once read), this would never finish."""
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(1)
    count = len(list(extract_deltas(responder.state, CausalContext(), max_ops=1)))
    assert 2 <= count <= ROUND_DELTAS
    first_joined = trio.Event()
    mine, theirs = pair()
    local_context, _ = store_functions(asker)

    async def apply(arrivals: trio.MemoryReceiveChannel[bytes]) -> ApplyReport:
        total = ApplyReport()
        async for data in arrivals:
            total.add(asker.receive(data))
            first_joined.set()
        return total

    async def extract(context: CausalContext, send: trio.MemorySendChannel[bytes]) -> tuple[bool, CausalContext]:
        deltas = [encode_delta(d) for d in extract_deltas(responder.state, context, max_ops=1)]
        await send.send(deltas[0])
        await first_joined.wait()
        for data in deltas[1:]:
            await send.send(data)
        return False, responder.state.context.copy()

    async def responder_side() -> None:
        try:
            await serve(theirs, extract=extract, on_round=lambda *_: None)
        finally:
            await theirs.close()

    with trio.fail_after(10):
        result = await beside(asking(mine, local_context, apply), responder_side)
    assert result.rounds == 1 and result.deltas == count and asker.digest() == responder.digest()


async def test_serve_loop_stops_extracting_when_the_asker_hangs_up_mid_round() -> None:
    """The asker goes away after the first delta: sending fails, the extraction waiting to
    hand over more is stopped (its channel breaks) rather than left hanging. The extraction
    goes on only once the asker is gone, and has more to hand over than the channel holds:
    it cannot end on its own."""
    mine, theirs = pair()
    extraction_ended: list[BaseException] = []
    hung_up = trio.Event()

    async def extract(context: CausalContext, send: trio.MemorySendChannel[bytes]) -> tuple[bool, CausalContext]:
        try:
            await send.send(bytes([0]) * 100_000)
            await hung_up.wait()
            for i in range(1, 2 * ROUND_DELTAS + 2):  # more than the channel's ROUND_DELTAS
                await send.send(bytes([i]) * 100_000)
        except BaseException as exc:
            extraction_ended.append(exc)
            raise
        return False, CausalContext()

    async def asker() -> None:
        await mine.write(frame(WANT))
        await read_frame(mine)  # the first delta
        await mine.inner.aclose()  # gone, mid-round
        hung_up.set()

    with trio.fail_after(10), pytest.raises(trio.BrokenResourceError):
        await beside(lambda: serve(theirs, extract=extract, on_round=lambda *_: None), asker)
    assert len(extraction_ended) == 1 and isinstance(extraction_ended[0], trio.BrokenResourceError | trio.Cancelled)


def test_random_interleavings_of_two_replicas_converge() -> None:
    """Three replicas with disjoint writes; pulls in a seeded random order converge."""
    rng = random.Random(8)
    replicas = [replica_with(rng.randint(0, 12), i) for i in range(3)]
    for _ in range(12):
        a, b = rng.sample(replicas, 2)
        drive(a, b, max_ops=rng.choice([1, 3, 4096]))
    for a in replicas:
        for b in replicas:
            if a is not b:
                drive(a, b)
    assert len({r.digest() for r in replicas}) == 1
