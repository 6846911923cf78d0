"""The store behind its two doors: one writer thread and a few reader threads.

SQLite sees one writer: every write runs through `on_writer`, on a worker thread with a
capacity of one, so the trio loop never blocks on disk (nor on anything else `fn` does). The
one exception is `on_writer_short`: a join of a few gossip ops, which commits without waiting
for the disk, runs on the loop's own thread once the writer is free: handing it to the worker
thread and back held each received warning ~3 ms longer than the join itself takes (~1 ms).
Reads (search, digest, status, listings) run through `on_reader`, on read-only connections of
their own: in WAL mode they never wait for the writer, and up to `READERS` run side by side.
"""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable
from typing import TypeVar

import trio

from daemon.errors import StoreBusy
from daemon.grimoire import Grimoire
from daemon.grimoire.store import wall_clock_ms

__all__ = ["READERS", "SHORT_WRITES_PER_CHECKPOINT", "StoreAccess"]

T = TypeVar("T")
READERS = 3  # read connections; 2 cores: more only queue
SHORT_WRITES_PER_CHECKPOINT = 32  # every this many `on_writer_short` calls, one runs on the writer thread


class StoreAccess:
    """The daemon's way into its `grimoire.db`: the writer connection and a pool of readers."""

    def __init__(self, store: Grimoire, *, busy_timeout_ms: Callable[[], int],
                 wall_ms: Callable[[], int] = wall_clock_ms) -> None:
        """`wall_ms`: the clock the readers' connections are given (the daemon's `Clock.now_ms`)."""
        self.store = store
        self._busy_timeout_ms = busy_timeout_ms
        self._wall_ms = wall_ms
        self._writer = trio.CapacityLimiter(1)
        self._reader_slots = trio.CapacityLimiter(READERS)
        self._readers: queue.SimpleQueue[Grimoire] = queue.SimpleQueue()
        self._all_readers: list[Grimoire] = []
        self._after_write: list[Callable[[Grimoire], None]] = []
        self._short_while: list[Callable[[], bool]] = []
        self._short_writes = 0
        self.short_writes_on_thread = 0  # `on_writer_short` calls run on the writer thread instead (every 32nd, locked)
        self.short_writes_held_long = 0  # of which because a hook's next call would be long (`short_while`)

    def after_write(self, hook: Callable[[Grimoire], None]) -> None:
        """Call `hook(store)` after every `on_writer` call, on the writer thread (after an
        `on_writer_short` call, on the thread that ran it), once its work is
        committed (the vector index publishes what changed: service/index.py). A hook must not
        raise."""
        self._after_write.append(hook)

    def short_while(self, check: Callable[[], bool]) -> None:
        """An `on_writer_short` call runs on the loop's thread only while `check()` is true,
        else on the writer thread: how a hook says its work after the next short write would not
        be short (the vector index's next row needs a new buffer: a copy of every vector, 37–468 ms
        at 50,000 entries, service/index.py). Called on the loop's thread, with
        the writer held; must be cheap and must not raise."""
        self._short_while.append(check)

    async def on_writer(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(store)` on the single writer thread and return its result.

        One call at a time, in the order they came (a FIFO limiter of one): `fn` may write, and
        sees every write of the calls before it. Waiting callers can be cancelled; a call
        already running finishes (SQLite work is never abandoned halfway). The `after_write`
        hooks run in the same call, after `fn`, whether it wrote or failed."""
        return await trio.to_thread.run_sync(functools.partial(self._run, fn), limiter=self._writer)

    async def on_writer_short(self, fn: Callable[[Grimoire], T]) -> T:
        """`on_writer` for a short write that does not wait for the disk (a few gossip ops
        joined with `durable=False`): once the writer is free, `fn(store)` and the
        `after_write` hooks run on the calling (trio) thread, in turn with `on_writer` calls.
        A received warning's join takes ~1 ms; handing it to the writer thread and back held
        the warning ~3 ms longer for the same CPU: a sibling's p50 went from 1.75–2.28× the
        raw GossipSub probe to 1.33–1.44× (bench/RESULTS.md, 2026-11-30, "received gossip
        joined on the loop's thread").

        Meanwhile the connection neither waits for a lock nor checkpoints the WAL
        (`Grimoire.not_waiting`). If another process holds the store's lock, the call runs on
        the writer thread instead, which waits the busy timeout; so does every
        `SHORT_WRITES_PER_CHECKPOINT`-th call, whose commit checkpoints as usual, so a golem
        that only receives still keeps its WAL short. `fn` must be short, must not wait for
        the disk, and must leave nothing behind when it raises (one transaction): it may run
        twice. So does every call made while a `short_while` check says no."""
        self._short_writes += 1
        turn = self._short_writes
        async with self._writer:
            short = bool(turn % SHORT_WRITES_PER_CHECKPOINT)
            if short and not all(check() for check in self._short_while):
                short = False
                self.short_writes_held_long += 1
            if short:
                try:
                    with self.store.not_waiting():
                        return self._run(fn)
                except StoreBusy:
                    pass  # another process holds the lock: wait for it off the loop
            self.short_writes_on_thread += 1
            # The limiter is held here, so the writer thread is ours: no limiter of its own.
            return await trio.to_thread.run_sync(functools.partial(self._run, fn))

    def _run(self, fn: Callable[[Grimoire], T]) -> T:
        """`fn(store)`, then the `after_write` hooks once no transaction is open."""
        try:
            return fn(self.store)
        finally:
            if not self.store.in_transaction:
                for hook in self._after_write:
                    hook(self.store)

    def open_readers(self) -> None:
        """Open the `READERS` read connections now rather than on first need (the daemon calls
        this at start): its open files are then fixed from the start, not a count that creeps
        up the first few times reads happen to run side by side (the soak read that as growth).
        Raises `StoreError` if the store cannot be opened for reading."""
        while len(self._all_readers) < READERS:
            reader = self._open_reader()
            self._all_readers.append(reader)
            self._readers.put(reader)

    def _open_reader(self) -> Grimoire:
        return Grimoire.open_reader(self.store.path, busy_timeout_ms=self._busy_timeout_ms(), wall_ms=self._wall_ms)

    async def on_reader(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(reader)` on a reader thread, over a read-only connection of its own (opened on
        first need, then reused); never queued behind the writer. `fn` must not write: the
        connection refuses it. At most `READERS` calls run at once."""
        def run() -> T:
            try:
                reader = self._readers.get_nowait()
            except queue.Empty:
                reader = self._open_reader()
                self._all_readers.append(reader)
            try:
                return fn(reader)
            finally:
                self._readers.put(reader)

        return await trio.to_thread.run_sync(run, limiter=self._reader_slots)

    def close(self) -> None:
        """Close the read connections (at shutdown, once no read runs). The writer's connection
        is the store's: its owner closes it."""
        for reader in self._all_readers:
            reader.close()
        self._all_readers.clear()
