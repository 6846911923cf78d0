"""Redial backoff, holds and the anti-entropy ticker on trio's `MockClock` (`autojump_clock`),
with exact counts, as trio's `test_serve_listeners_accept_capacity_error` does.

The parts are driven through fake ports (a host that refuses or accepts dials, a daemon
that only counts); the jitter source always returns its upper bound, so every delay is
known: 1 s, 2 s, 4 s … capped at 30 s after the n-th failure (`peers.redial_delay`). The
real network is covered by the real-daemon tests (test_p2p_sync.py, test_p2p_hostile.py).
Saving the known siblings (peers.json) from concurrent admissions runs on real threads.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from crdt import CausalContext
from daemon.grimoire import atomic_write
from daemon.p2p import dialing as dialing_module
from daemon.p2p import messages
from daemon.p2p.admission import HOLD_S, Admission
from daemon.p2p.catchup import CatchUp
from daemon.p2p.dialing import CANDIDATE_DIALS, Dialing
from daemon.p2p.frames import encode_frame
from daemon.p2p.links import TRANSPORT_ERRORS
from daemon.p2p.neighbourhood import Connection
from daemon.p2p.peers import PeerBook

PEER = "12D3KooWPeerUnderTest"
ADDR = f"/ip4/127.0.0.1/tcp/4001/p2p/{PEER}"


class TopOfRange(random.Random):
    """Jitter at its upper bound: U(a, b) is always b."""

    def uniform(self, a: float, b: float) -> float:
        return b


class FakeDaemon:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def now_ms(self) -> int:
        return 1_000

    def publish(self, event: str, data: dict[str, Any]) -> None:
        self.events.append((event, data))

    async def on_writer(self, fn: Callable[[Any], Any]) -> Any:
        raise AssertionError("the store is not used here")

    async def on_writer_short(self, fn: Callable[[Any], Any]) -> Any:
        raise AssertionError("the store is not used here")

    async def on_reader(self, fn: Callable[[Any], Any]) -> Any:
        raise AssertionError("the store is not used here")

    def ingesting(self) -> Any:
        raise AssertionError("nothing is joined here")


class FakeLinks:
    """A host whose dials fail with `error` (or succeed if None), recording when each came."""

    def __init__(self, error: Exception | None = None, *, refuse: bool = True) -> None:
        self.error = error if error is not None or not refuse else OSError("connection refused")
        self.dials: list[float] = []
        self.up: set[str] = set()
        self.dropped: list[tuple[float, str]] = []
        self.shut: list[tuple[float, str]] = []
        self.let: list[tuple[float, str]] = []
        self.on_dialed: Callable[[str], None] = lambda peer: None
        self.stream_error: Exception = OSError("no route")
        self.admitted_peers: set[str] = set()
        self.conns: dict[str, list[Connection]] = {}  # set by a test: a peer's connections beyond `up`
        self.closed: list[tuple[float, str, int]] = []
        self._changed = trio.Event()  # set (and renewed) by `admit`, `forget` and `drop`

    def listen_addrs(self) -> list[str]:
        return []

    def connected(self, peer_id: str) -> bool:
        return peer_id in self.up

    def connections(self, peer_id: str) -> list[Connection]:
        return list(self.conns.get(peer_id, ()))

    def drop_stale_gossip(self, peer_id: str) -> None:
        pass

    async def close_connection(self, peer_id: str, key: int) -> None:
        self.closed.append((trio.current_time(), peer_id, key))
        self.conns[peer_id] = [c for c in self.conns.get(peer_id, ()) if c.key != key]

    async def dial(self, peer_id: str, addrs: list[str]) -> None:
        self.dials.append(trio.current_time())
        await trio.sleep(0)  # a checkpoint, as a real dial has (no time passes)
        if self.error is not None:
            raise self.error
        self.up.add(peer_id)
        self.on_dialed(peer_id)

    async def drop(self, peer_id: str) -> None:
        self.dropped.append((trio.current_time(), peer_id))
        self.up.discard(peer_id)
        self._changed_now()

    async def open_stream(self, peer_id: str, protocol: str) -> Any:
        raise self.stream_error

    async def open_stream_of(self, peer_id: str, protocols: Any) -> Any:
        raise self.stream_error

    async def publish(self, topic: str, data: bytes) -> None:
        pass

    def shut_out(self, peer_id: str) -> None:
        self.shut.append((trio.current_time(), peer_id))

    def let_in(self, peer_id: str) -> None:
        self.let.append((trio.current_time(), peer_id))

    def admit(self, peer_id: str) -> None:
        self.admitted_peers.add(peer_id)
        self._changed_now()

    def forget(self, peer_id: str) -> None:
        self.admitted_peers.discard(peer_id)
        self._changed_now()

    def admitted(self, peer_id: str) -> bool:
        return peer_id in self.admitted_peers and peer_id in self.up

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_admitted(self, peer_id: str, timeout_s: float) -> bool:
        """Woken by `admit`, `forget` and `drop` (a test that edits `up` itself wakes nobody)."""
        with trio.move_on_after(timeout_s):
            while not self.admitted(peer_id) and peer_id in self.up:
                await self._changed.wait()
        return self.admitted(peer_id)

    async def open_gossip(self, peer_id: str) -> None:
        pass


def split(addr: str) -> tuple[str, str]:
    transport, sep, peer_id = addr.partition("/p2p/")
    if not sep or not peer_id:
        raise ValueError(f"{addr!r} has no /p2p/PEERID")
    return peer_id, transport


def dialing(links: FakeLinks, tmp_path: Path) -> tuple[Dialing, FakeDaemon]:
    daemon = FakeDaemon()
    part = Dialing(daemon, links, PeerBook(), me="12D3KooWMe", known_path=tmp_path / "peers.json",
                   rng=TopOfRange(), parse_addr=split, dial_errors=TRANSPORT_ERRORS)
    return part, daemon


async def run_for(seconds: float, *, start: Callable[..., Any] | None = None,
                  soon: tuple[Callable[[], Any], ...] = ()) -> None:
    """Start `start` (it reports readiness), then `soon`; after `seconds` of (mock) time, cancel."""
    async with trio.open_nursery() as nursery:
        if start is not None:
            await nursery.start(start)
        for task in soon:
            nursery.start_soon(task)
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()


# 0.5 s × 2^failures, capped at 30 s: a refused sibling is redialed at these times (from 0).
BACKOFF_TIMES = [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 61.0, 91.0]


async def test_a_refusing_sibling_is_redialed_with_capped_exponential_backoff(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks()
    part, daemon = dialing(links, tmp_path)
    start = trio.current_time()
    assert part.add_bootstrap(ADDR) == PEER
    await run_for(100.0, start=part.run)
    assert [round(t - start, 6) for t in links.dials] == BACKOFF_TIMES
    assert daemon.counters["dials_failed"] == len(BACKOFF_TIMES) and daemon.counters["internal_errors"] == 0
    record = part.book.get(PEER)
    assert record.failures == len(BACKOFF_TIMES) and record.dial  # a bootstrap sibling is never given up


async def test_a_learned_address_is_given_up_after_candidate_dials(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks()
    part, daemon = dialing(links, tmp_path)
    part.learn_sibling(ADDR)
    await run_for(3600.0, start=part.run)
    assert len(links.dials) == CANDIDATE_DIALS == daemon.counters["dials_failed"]
    assert not part.book.get(PEER).dial


async def test_a_held_peer_is_neither_dialed_nor_accepted_until_its_hold_ends(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks(refuse=False)
    part, daemon = dialing(links, tmp_path)
    links.on_dialed = part.on_connected
    start = trio.current_time()
    part.add_bootstrap(ADDR)
    links.up.add(PEER)
    assert part.on_connected(PEER)  # connected before the hold: greet it
    record = part.book.get(PEER)

    async def scenario() -> None:
        await part.disconnect(PEER, hold_s=300.0)
        part.on_disconnected(PEER)
        await trio.sleep(100.0)
        links.up.add(PEER)  # the held peer dials us: dropped at once, and counted
        assert part.on_connected(PEER) is None
        await trio.sleep(0.001)
        links.up.discard(PEER)

    await run_for(400.0, start=part.run, soon=(scenario,))
    assert [(round(t - start, 3), p) for t, p in links.dropped] == [(0.0, PEER), (100.0, PEER)]
    assert daemon.counters["connections_refused_held"] == 1
    assert [round(t - start, 3) for t in links.dials] == [300.0]  # not one dial during the hold
    assert [round(t - start, 3) for t, _ in links.shut] == [0.0]
    assert [round(t - start, 3) for t, _ in links.let] == [300.0]  # GossipSub lets it in when the hold ends
    assert record.connected and not record.blacklisted


def neighbourhood(links: FakeLinks, tmp_path: Path, known: int) -> tuple[Dialing, list[str]]:
    """A dialer with target 4 (cap 6), rotating every 60 s, that knows `known` siblings;
    a dial that succeeds connects a member (`on_connected`), as a hello would admit it."""
    part = Dialing(FakeDaemon(), links, PeerBook(), me="12D3KooWMe", known_path=tmp_path / "peers.json",
                   rng=TopOfRange(7), parse_addr=split, dial_errors=TRANSPORT_ERRORS, target=4, rotate_s=60.0)
    siblings = [f"12D3KooWSibling{i:02d}" for i in range(known)]
    for peer_id in siblings:
        record = part.book.add_addr(peer_id, f"/ip4/127.0.0.1/tcp/{4100 + len(part.book.all())}")
        record.dial = record.member = True

    def dialed(peer_id: str) -> None:
        part.on_connected(peer_id)
        part.book.get(peer_id).member = True

    links.on_dialed = dialed
    return part, siblings


async def test_the_dialer_keeps_a_random_target_of_the_known_siblings_and_rotates_one_per_period(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks(refuse=False)
    part, _siblings = neighbourhood(links, tmp_path, 30)
    async with trio.open_nursery() as nursery:
        await nursery.start(part.run)
        await trio.sleep(1.0)
        first = set(links.up)
        assert len(first) == 4 and len(links.dials) == 4  # not the 30 it knows
        await trio.sleep(72.0)  # 60 s × 1.2: one swap
        assert len(links.up) == 4 and len(first - links.up) == 1 and len(links.dials) == 5
        assert part.counters["neighbours_rotated"] == 1 and [p for _, p in links.dropped] == list(first - links.up)
        nursery.cancel_scope.cancel()


async def test_inbound_beyond_the_cap_is_trimmed_to_it_keeping_the_newcomers_and_a_pin_is_always_dialed(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks(refuse=False)
    part, siblings = neighbourhood(links, tmp_path, 30)
    async with trio.open_nursery() as nursery:
        await nursery.start(part.run)
        await trio.sleep(1.0)
        dialed = set(links.up)
        inbound = [p for p in siblings if p not in dialed][:3]
        for peer_id in inbound:  # 4 + 3 = 7 > cap 6
            links.up.add(peer_id)
            part.on_connected(peer_id)
        await trio.sleep(1.0)
        assert len(links.up) == 6 and set(inbound) <= links.up  # one of the settled ones went, not a newcomer
        assert part.counters["neighbours_trimmed"] == 1
        pinned = part.add_bootstrap("/ip4/127.0.0.1/tcp/4999/p2p/12D3KooWPinned", pin=True)
        await trio.sleep(1.0)
        assert pinned in links.up and len(links.up) == 6  # dialed though full; another made room
        await trio.sleep(600.0)  # ten rotations: the pin is never the one swapped out
        assert pinned in links.up and pinned not in {p for _, p in links.dropped}
        nursery.cancel_scope.cancel()


async def test_a_second_connection_is_closed_after_the_fresh_period_by_the_smaller_id_only_when_idle_then_hello(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks(refuse=False)
    part, siblings = neighbourhood(links, tmp_path, 1)
    smaller = "12D3KooWAlpha"  # sorts before "12D3KooWMe": that end closes, not this one
    record = part.book.add_addr(smaller, "/ip4/127.0.0.1/tcp/4200")
    record.dial = record.member = True
    larger = siblings[0]
    greeted: list[str] = []
    part.regreet = greeted.append
    async with trio.open_nursery() as nursery:
        await nursery.start(part.run)
        await trio.sleep(1.0)
        assert links.up == {larger, smaller}
        links.conns[larger] = [Connection(1, outbound=True, busy=False), Connection(2, outbound=False, busy=True)]
        links.conns[smaller] = [Connection(3, outbound=True, busy=False), Connection(4, outbound=False, busy=False)]
        start = trio.current_time()
        await trio.sleep(dialing_module.FRESH_S + 2.0)
        assert links.closed == [] and greeted == []  # its inbound one is busy; the other is not ours to close
        links.conns[larger][1] = Connection(2, outbound=False, busy=False)
        await trio.sleep(dialing_module.IDLE_WAKE_S + 0.1)
        assert [(p, k) for _, p, k in links.closed] == [(larger, 2)] and greeted == [larger]
        assert links.closed[0][0] - start >= dialing_module.FRESH_S
        assert part.counters["duplicate_connections_closed"] == 1 and len(links.conns[smaller]) == 2
        nursery.cancel_scope.cancel()


async def test_a_bug_in_a_dial_is_logged_with_its_traceback_and_not_counted_as_a_failed_dial(
        autojump_clock: trio.testing.MockClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    links = FakeLinks(error=KeyError("a bug, not the network"))
    part, daemon = dialing(links, tmp_path)
    start = trio.current_time()
    part.add_bootstrap(ADDR)
    with caplog.at_level(logging.ERROR, logger="clade.p2p"):
        await run_for(10.0, start=part.run)
    assert [round(t - start, 6) for t in links.dials] == [0.0, 1.0, 3.0, 7.0]  # still backed off
    assert daemon.counters["internal_errors"] == 4 and daemon.counters["dials_failed"] == 0
    bugs = [r for r in caplog.records if r.exc_info is not None]
    assert len(bugs) == 4 and all(isinstance(r.exc_info[1], KeyError) for r in bugs if r.exc_info)


async def test_siblings_admitted_together_are_saved_one_at_a_time_and_all_of_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight admissions at once (a newcomer dialing every sibling): each asks for a save.
    Concurrent saves used to race on one temp file and fail a hello with FileNotFoundError;
    now they run one at a time, the last one writes every sibling, and the calls a running
    save covers cost no write of their own."""
    part, daemon = dialing(FakeLinks(refuse=False), tmp_path)
    writes: list[bytes] = []
    real_write = dialing_module.atomic_write

    def counting_write(path: Path, data: bytes) -> None:
        writes.append(data)
        real_write(path, data)

    monkeypatch.setattr(dialing_module, "atomic_write", counting_write)
    peers = [f"12D3KooWSibling{i}" for i in range(8)]

    async def admitted(peer_id: str) -> None:
        part.add_bootstrap(f"/ip4/127.0.0.1/tcp/{4001 + peers.index(peer_id)}/p2p/{peer_id}")
        await part.save_known()  # raises nothing, whatever the others do meanwhile

    async with trio.open_nursery() as nursery:
        for peer_id in peers:
            nursery.start_soon(admitted, peer_id)
    assert set(json.loads((tmp_path / "peers.json").read_bytes())) == set(peers)
    assert 1 <= len(writes) <= 2 and daemon.counters["known_save_failed"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["peers.json"]  # no temp file left behind


async def test_a_save_that_fails_is_counted_and_does_not_raise(tmp_path: Path) -> None:
    """The disk, not the sibling being admitted, is at fault: the hello must not fail for it."""
    daemon = FakeDaemon()
    part = Dialing(daemon, FakeLinks(), PeerBook(), me="12D3KooWMe", known_path=tmp_path / "gone" / "peers.json",
                   rng=TopOfRange(), parse_addr=split, dial_errors=TRANSPORT_ERRORS)
    part.add_bootstrap(ADDR)
    await part.save_known()
    await part.save_known()  # a failed save is tried again by the next call
    assert daemon.counters["known_save_failed"] == 2


def test_atomic_write_from_several_threads_at_once_leaves_one_whole_file(tmp_path: Path) -> None:
    """Threads replacing one file at once (trio.to_thread): none fails, the file is one of
    the writes whole. With one temp file per process, most of them raised FileNotFoundError."""
    target = tmp_path / "peers.json"
    payloads = [bytes([65 + i]) * (50_000 + i) for i in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(payloads))

    def writer(data: bytes) -> None:
        start.wait()
        for _ in range(20):
            try:
                atomic_write(target, data)
            except OSError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(data,)) for data in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["peers.json"]


def catchup(links: FakeLinks, interval_s: float) -> tuple[CatchUp, FakeDaemon]:
    daemon = FakeDaemon()
    book = PeerBook()
    record = book.get(PEER)
    record.member = record.connected = True
    return CatchUp(daemon, links, book, me="12D3KooWMe", max_skew_ms=60_000, sync_interval_s=interval_s,
                   rng=TopOfRange()), daemon


async def test_the_anti_entropy_ticker_pulls_once_per_interval(autojump_clock: trio.testing.MockClock) -> None:
    links = FakeLinks()
    part, daemon = catchup(links, 30.0)
    await run_for(200.0, soon=(part.run,))  # at 36, 72, 108, 144, 180 s (30 s × 1.2)
    assert daemon.counters["sync_failed"] == 5 and daemon.counters["internal_errors"] == 0


async def test_a_bug_in_a_sync_is_counted_as_internal_not_as_sync_failed(
        autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    links = FakeLinks()
    links.stream_error = TypeError("a bug, not the network")
    part, daemon = catchup(links, 30.0)
    with caplog.at_level(logging.ERROR, logger="clade.p2p"):
        assert await part.sync_with(PEER) is None
    assert daemon.counters["internal_errors"] == 1 and daemon.counters["sync_failed"] == 0
    (bug,) = [r for r in caplog.records if r.exc_info is not None]
    assert bug.exc_info is not None and isinstance(bug.exc_info[1], TypeError)
    links.stream_error = OSError("connection reset")  # the same call, a network error: counted as such
    assert await part.sync_with(PEER) is None
    assert daemon.counters["internal_errors"] == 1 and daemon.counters["sync_failed"] == 1


class BytesStream:
    """A stream that yields `data` and then ends; what is written to it is kept."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.written = b""

    async def read(self, n: int | None = None) -> bytes:
        size = len(self.data) if n is None else n
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk

    async def write(self, data: bytes) -> None:
        self.written += data

    async def close(self) -> None:
        pass


async def test_a_peer_that_breaks_the_hello_is_held_off_for_hold_s_then_accepted(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    links = FakeLinks()
    part, daemon = dialing(links, tmp_path)
    admission = Admission(daemon, links, part.book, membership=None,  # type: ignore[arg-type]  # never read here
                          revocations=None, persist_revocations=lambda _: None, siblings=part, syncer=None)  # type: ignore[arg-type]
    start = trio.current_time()
    links.up.add(PEER)
    assert part.on_connected(PEER)
    # a want where the hello belongs: a broken hello is a failed membership check
    await admission.serve_hello(BytesStream(encode_frame(messages.encode(messages.Want(CausalContext())))), PEER)
    assert daemon.counters["hello_refused_malformed"] == 1 and links.dropped == [(start, PEER)]
    record = part.book.get(PEER)
    assert record.refused == "malformed" and record.hold_until == start + HOLD_S
    part.on_disconnected(PEER)
    await trio.sleep(HOLD_S - 0.001)
    links.up.add(PEER)  # it connects again just before its hold ends: dropped at once
    assert part.on_connected(PEER) is None
    assert daemon.counters["connections_refused_held"] == 1
    links.up.discard(PEER)
    part.on_disconnected(PEER)
    await trio.sleep(0.001)
    links.up.add(PEER)  # the hold is over: this connection is greeted
    assert part.on_connected(PEER)
    assert daemon.counters["connections_refused_held"] == 1


async def test_a_pull_prompted_within_the_gap_runs_when_the_gap_ends(autojump_clock: trio.testing.MockClock) -> None:
    """Gossip refused for its time prompts a pull from its publisher; a second refusal within the
    gap (5 s) must not be dropped — the refused message may hold an op the first pull missed —
    but pulled when the gap ends."""
    links = FakeLinks()
    part, daemon = catchup(links, 3600.0)
    attempts: list[float] = []
    links.stream_error = OSError("no route")

    async def prompts() -> None:
        part.pull_soon(PEER)
        await trio.sleep(1.0)
        part.pull_soon(PEER)  # within the gap: owed
        part.pull_soon(PEER)  # still one pull owed, not two
        await trio.sleep(20.0)
        attempts.append(daemon.counters["sync_failed"])

    await run_for(30.0, soon=(part.run, prompts))
    assert attempts == [2]  # at 0 s and at 5 s (the sync ticker waits an hour)
    assert daemon.counters["sync_pulls_prompted"] == 2
