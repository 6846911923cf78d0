"""Two of the daemon's parts on their own (daemon/service/hub.py, daemon/service/store_access.py):
the event hub's delivery, counting and dropping; the writer's order, short joins on the loop's
thread, and the readers' refusal to write."""

from __future__ import annotations

import functools
import itertools
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

from crdt import CausalContext, Delta, EntryBody, Kind, Mutator, Timestamp
from crypto import Identity
from daemon.embedding.check_plan import CheckPlan
from daemon.embedding.embedder import expected_info
from daemon.embedding.shipped import Shipped, VectorShipping
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.ingest import join_gossip
from daemon.grimoire.store import WAL_AUTOCHECKPOINT_PAGES, wall_clock_ms
from daemon.service.hub import SUBSCRIBER_BUFFER, EventHub
from daemon.service.index import SHORT_ROOM, SharedIndex
from daemon.service.store_access import READERS, SHORT_WRITES_PER_CHECKPOINT, StoreAccess
from tests.helpers.seed import seed_one


async def test_an_event_reaches_every_subscriber_and_observer_and_is_counted() -> None:
    counters: Counter[str] = Counter()
    hub = EventHub(counters)
    seen: list[tuple[str, dict[str, Any]]] = []
    hub.observers.append(lambda event, data: seen.append((event, data)))
    async with hub.subscribe() as first, hub.subscribe() as second:
        hub.publish("entry_written", {"id": "e1"})
        with trio.fail_after(5):
            assert await first.receive() == ("entry_written", {"id": "e1"})
            assert await second.receive() == ("entry_written", {"id": "e1"})
    assert seen == [("entry_written", {"id": "e1"})]
    assert counters == Counter({"event_entry_written": 1})


async def test_a_lagging_subscriber_misses_events_counted_and_a_gone_one_is_forgotten() -> None:
    counters: Counter[str] = Counter()
    hub = EventHub(counters)
    async with hub.subscribe() as lagging:
        for n in range(SUBSCRIBER_BUFFER + 3):
            hub.publish("tick", {"n": n})
        assert counters["events_dropped"] == 3
        received = [lagging.receive_nowait()[1]["n"] for _ in range(SUBSCRIBER_BUFFER)]
        assert received == list(range(SUBSCRIBER_BUFFER))  # the first ones, in order: the late ones missed
    hub.publish("tick", {"n": -1})  # nobody listens: nothing dropped, nothing raised
    assert counters["events_dropped"] == 3
    assert counters["event_tick"] == SUBSCRIBER_BUFFER + 4


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "g.db", create=True) as opened:
        yield opened


async def test_writes_run_one_at_a_time_off_the_trio_thread(store: Grimoire) -> None:
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    me = Identity.generate()
    threads: set[int] = set()
    running = 0
    most = 0

    def write(n: int) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        threads.add(threading.get_ident())
        try:
            return seed_one(store, NewEntry(kind=Kind.INSIGHT, content=f"note {n}"), identity=me).id
        finally:
            running -= 1

    ids: list[str] = []

    async def later(n: int) -> None:
        ids.append(await access.on_writer(lambda s: write(n)))

    try:
        for n in range(5):
            await later(n)
        async with trio.open_nursery() as nursery:  # side by side: still one at a time
            for n in range(5, 10):
                nursery.start_soon(later, n)
        listed = await access.on_reader(lambda r: r.list_entries(limit=100))
    finally:
        access.close()
    assert most == 1  # never two writes at once
    assert len(ids) == 10 and {e.id for e in listed} == set(ids)
    assert threads and threading.get_ident() not in threads  # never on the trio thread


ME = Identity(b"\x21" * 32)
SIB = Identity(b"\x33" * 32)
_SEQ = itertools.count(1)


def _gossip(content: str, shipping: VectorShipping | None = None) -> tuple[str, Callable[[Grimoire], object]]:
    """A sibling's new entry as gossip brings it: its id, and its join (two ops, not durable;
    with `shipping`, the vector its author shipped, a random unit one)."""
    now = Timestamp(wall_clock_ms())  # within the join's allowed skew
    body = EntryBody(author=SIB.peer_id, kind=Kind.WARNING, content=content, created=now)
    ops = Mutator(SIB.peer_id, SIB.sign, next_seq=lambda: next(_SEQ), now=lambda: now).create(body, 0.8)
    shipped: tuple[tuple[str, Shipped], ...] = ()
    if shipping is not None:
        vec = np.random.default_rng(next(_SEQ)).standard_normal(shipping.info.dim).astype(np.float32)
        shipped = ((SIB.peer_id, Shipped(shipping.space, {body.id: vec / np.linalg.norm(vec)})),)
    return body.id, functools.partial(join_gossip, delta=Delta(tuple(ops), CausalContext()),
                                      withheld=CausalContext(), local_replica=ME.peer_id, max_skew_ms=60_000,
                                      shipping=shipping, shipped=shipped)


async def test_a_short_join_runs_on_the_loops_thread_and_every_32nd_on_the_writers(store: Grimoire) -> None:
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    ran_on: list[int] = []
    hooked_on: list[int] = []
    access.after_write(lambda s: hooked_on.append(threading.get_ident()))

    def join(fn: Callable[[Grimoire], object], s: Grimoire) -> object:
        ran_on.append(threading.get_ident())
        return fn(s)

    ids = []
    try:
        for n in range(2 * SHORT_WRITES_PER_CHECKPOINT):
            entry_id, fn = _gossip(f"pool {n} drained by a sandwich")
            ids.append(entry_id)
            await access.on_writer_short(functools.partial(join, fn))
        stored = {e.id for e in await access.on_reader(lambda r: r.list_entries(limit=1_000))}
    finally:
        access.close()
    loop = threading.get_ident()
    assert stored == set(ids)
    off_loop = [n + 1 for n, thread in enumerate(ran_on) if thread != loop]
    assert off_loop == [SHORT_WRITES_PER_CHECKPOINT, 2 * SHORT_WRITES_PER_CHECKPOINT]
    assert access.short_writes_on_thread == 2
    assert hooked_on == ran_on  # each call's hooks, where it ran
    # Back to the store's own settings after each short write on the loop.
    assert store.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert store.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES


async def test_a_short_join_whose_index_refresh_needs_a_new_buffer_runs_on_the_writers_thread(
        store: Grimoire) -> None:
    """Replacing the vector index's buffer copies every vector: the short join that would need
    it is handed to the writer thread, and the joins after it, with room again, stay on the loop."""
    info = expected_info("sentence-transformers/all-MiniLM-L6-v2")
    assert info is not None
    shipping = VectorShipping(info, CheckPlan.flat(0.0))
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    index = SharedIndex(access, Counter())
    ran_on: list[int] = []

    def join(fn: Callable[[Grimoire], object], s: Grimoire) -> object:
        ran_on.append(threading.get_ident())
        return fn(s)

    try:
        for n in range(SHORT_ROOM + 6):  # stored before the index loads: the load sizes it to fit them
            await access.on_writer(_gossip(f"stored {n}", shipping)[1])
        loaded = await index.loaded(info)
        assert index._index is not None and index._index.headroom() == 0 and len(loaded) == SHORT_ROOM + 6
        ids = []
        for n in range(3):
            entry_id, fn = _gossip(f"joined {n}", shipping)
            ids.append(entry_id)
            await access.on_writer_short(functools.partial(join, fn))
        current = index.current()
    finally:
        access.close()
    loop = threading.get_ident()
    assert [thread == loop for thread in ran_on] == [False, True, True]
    assert access.short_writes_held_long == 1 and access.short_writes_on_thread == 1
    assert current is not None and all(current.vector(i) is not None for i in ids)  # each refresh published it
    assert index._index.headroom() >= SHORT_ROOM


async def test_a_short_join_on_a_store_another_process_locked_waits_off_the_loop(store: Grimoire) -> None:
    """The loop never waits the busy timeout: the join goes to the writer thread, which does,
    and lands once the other writer lets go."""
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    other = sqlite3.connect(store.path, isolation_level=None)
    entry_id, fn = _gossip("a router that front-runs")
    done = trio.Event()

    async def join() -> None:
        await access.on_writer_short(fn)
        done.set()

    try:
        other.execute("BEGIN IMMEDIATE")
        with trio.fail_after(5):  # the store's busy timeout is 10 s: waiting on the loop would trip this
            async with trio.open_nursery() as nursery:
                nursery.start_soon(join)
                await trio.testing.wait_all_tasks_blocked()
                assert not done.is_set() and access.short_writes_on_thread == 1
                assert await access.on_reader(lambda r: r.rows_by_id("id", [entry_id])) == []
                other.execute("COMMIT")
        assert (await access.on_reader(lambda r: r.get(entry_id))).id == entry_id
    finally:
        other.close()
        access.close()


async def test_a_reader_refuses_to_write_and_never_waits_for_the_writer(store: Grimoire) -> None:
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    try:
        with pytest.raises(sqlite3.OperationalError):
            await access.on_reader(lambda r: r.connection.execute("DELETE FROM entries"))
        store.connection.execute("BEGIN IMMEDIATE")  # the writer's connection holds the write lock
        try:
            with trio.fail_after(5):
                counts = await access.on_reader(lambda r: r.counts())
        finally:
            store.connection.execute("ROLLBACK")
        assert counts.entries == 0
    finally:
        access.close()


def _files_open_on(db: Path) -> int:
    """How many of this process's file descriptors are `db` or its WAL."""
    names = {str(db), f"{db}-wal"}
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += str(fd.readlink()) in names
        except OSError:
            continue  # closed while we looked
    return count


async def test_the_readers_open_at_start_and_reads_open_no_more(store: Grimoire) -> None:
    """The soak read a reader pool that filled on first need as open files growing for an hour;
    opened at start, the count is fixed before the first read and stays there under load."""
    seed_one(store, NewEntry(kind=Kind.INSIGHT, content="one note"), identity=Identity.generate())
    before = _files_open_on(store.path)
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    try:
        access.open_readers()
        opened = _files_open_on(store.path)
        assert opened > before  # each reader holds the database (and its WAL once it reads)
        access.open_readers()  # a second call opens nothing more
        assert _files_open_on(store.path) == opened
        def read(r: Grimoire) -> int:
            return r.counts().entries

        async with trio.open_nursery() as nursery:
            for _ in range(4 * READERS):
                nursery.start_soon(access.on_reader, read)
        counted = await access.on_reader(lambda r: r.counts().entries)
        assert counted == 1
        after = _files_open_on(store.path)
        assert after <= opened + READERS  # a WAL each reader may open at its first read, no more
        assert len({id(r) for r in access._all_readers}) == READERS
    finally:
        access.close()
    # SQLite keeps a closed connection's descriptors while another connection of the process
    # has the file open (closing one would drop the others' POSIX locks) and reuses them: a
    # pool opened again holds no more than the first did.
    again = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    try:
        again.open_readers()
        await again.on_reader(lambda r: r.counts().entries)
        assert _files_open_on(store.path) <= after
    finally:
        again.close()


def test_recall_follows_a_reload_of_the_trust_section(store: Grimoire, tmp_path: Path) -> None:
    """SIGHUP swaps the daemon's config; recall and the digest (the search service's `Recall`) must
    read `[trust]` from it at their next call, as the rest of the daemon does, not keep the policy
    of their first use."""
    from daemon.config import Config, TrustConfig
    from daemon.service.embedding import Embedding
    from daemon.service.index import SharedIndex
    from daemon.service.search import Search
    from daemon.service.styx_link import StyxLink

    running = [Config()]
    access = StoreAccess(store, busy_timeout_ms=lambda: 1_000)
    embedding = Embedding(access, model_dir=tmp_path / "model", config=lambda: running[0], counters=Counter())
    search = Search(access, embedding, SharedIndex(access, Counter()),
                    StyxLink(access, config=lambda: running[0], counters=Counter(), golem="g",
                             playbook_path=tmp_path / "PLAYBOOK.md", now_ms=lambda: 0),
                    membership=lambda: None, config=lambda: running[0], now_ms=lambda: 0)
    assert search.recall_path.policy().trust == Config().trust.policy()
    running[0] = Config(trust=TrustConfig(enabled=False, budget_entries=7))  # what a reload installs
    assert search.recall_path.policy().trust == running[0].trust.policy()
    assert not search.recall_path.policy().trust.enabled and search.recall_path.policy().trust.budget_entries == 7
