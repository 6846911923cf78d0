"""The daemon's vector index: loaded once on a reader, then kept current by the writer.

`SharedIndex` holds the `VectorIndex` of the entries' vector space (grimoire/vector_index.py).
Its first load (every vector: ~0.5 s at 50,000 entries) runs on a reader thread the first time
a search, the curator or a warning's repeat check needs it; from then on `StoreAccess` calls
`after_write` on the writer thread after every write, so a snapshot with what was just
committed is published before the write returns (read-your-writes), and readers take the
current snapshot without a lock.

A refresh that finds the index busy (the first load running on a reader) leaves a mark, and
the running refresh reads again before it lets go, so no commit is missed and the writer never
waits for a load.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING

import trio

from daemon.grimoire.vector_index import IndexSnapshot, VectorIndex

if TYPE_CHECKING:
    from daemon.embedding.embedder import EmbeddingInfo
    from daemon.grimoire import Grimoire
    from daemon.service.store_access import StoreAccess

__all__ = ["SHORT_ROOM", "SharedIndex"]

log = logging.getLogger("clade.search")
SHORT_ROOM = 64  # index rows a short write's refresh may add without a new buffer (it adds ≤ 8)


class SharedIndex:
    """One vector space's index for the whole daemon (a new space, after a model change, starts
    a new index)."""

    def __init__(self, access: StoreAccess, counters: Counter[str]) -> None:
        self.access = access
        self.counters = counters
        self._index: VectorIndex | None = None
        self._busy = threading.Lock()
        self._missed = False
        self._load_lock = trio.Lock()
        access.after_write(self.after_write)
        access.short_while(self.refresh_is_short)

    def current(self) -> IndexSnapshot | None:
        """The current snapshot, None before the first load."""
        index = self._index
        return None if index is None or index.published == 0 else index.current

    async def loaded(self, info: EmbeddingInfo) -> IndexSnapshot:
        """The current snapshot of `info`'s space, loaded first (on a reader) if it is not."""
        index = self._index
        if index is not None and index.info == info and index.published:
            return index.current
        async with self._load_lock:
            if self._index is None or self._index.info != info:
                self._index = VectorIndex(info)
            fresh = self._index
            if not fresh.published:
                await self.access.on_reader(lambda r: self._refresh(fresh, r))
                self.counters["vector_index_loads"] += 1
            return fresh.current

    def refresh_is_short(self) -> bool:
        """Whether the refresh after a short write (`StoreAccess.on_writer_short`, ≤ 8 ops
        joined on the loop's thread) stays short: not when fewer than `SHORT_ROOM` rows are left
        before the index replaces its buffer (a copy of every vector: 73 MiB and 37–468 ms at
        50,000 entries, bench/RESULTS.md), which then happens on the writer thread."""
        index = self._index
        return index is None or not index.published or index.headroom() >= SHORT_ROOM

    def after_write(self, store: Grimoire) -> None:
        """After a commit, on the writer thread: publish what changed (no index loaded yet: nothing
        to do, the first load reads everything)."""
        index = self._index
        if index is None:
            return
        if not index.published:  # the first load is running (or about to): it reads this commit too
            self._missed = True
            return
        try:
            self._refresh(index, store)
        except Exception as exc:  # noqa: BLE001 - the write committed; the next refresh reads it again
            self.counters["vector_index_refresh_failures"] += 1
            log.warning("vector index not refreshed after a write (%s); the next write or search tries again", exc)

    def _refresh(self, index: VectorIndex, store: Grimoire) -> None:
        if not self._busy.acquire(blocking=store is not self.access.store):
            self._missed = True  # the running refresh reads again before it ends
            return
        try:
            while True:
                self._missed = False
                index.refresh(store)
                if not self._missed:
                    return
        finally:
            self._busy.release()
