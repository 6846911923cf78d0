"""Seeding a store in tests: own entries through the write door, and raw writes for a test's setup.

`seed` and `seed_one` write own entries the way every writer does (daemon/grimoire/write_door.py,
`write_entries`), with no model at hand: a public warning is then written unchecked, as
`Grimoire.remember` used to write it. `raw_write` opens the store's write transaction for a test
that sets up a state no public method makes (a corrupt row, a back-dated column); code outside
daemon/grimoire never does that (tests/test_door_closed.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from daemon.grimoire import Entry, Grimoire, NewEntry, wall_clock_ms
from daemon.grimoire.promotion import WARNING_REPEAT
from daemon.grimoire.store import LocalIdentity
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.write_door import Prepared, write_entries

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from daemon.embedding.embedder import EmbeddingInfo

__all__ = ["raw_write", "seed", "seed_one", "seed_warning"]


def seed(store: Grimoire, news: Sequence[NewEntry], *, identity: LocalIdentity, now_ms: int | None = None
         ) -> list[Entry]:
    """Write `news` as own entries through the write door, all or none; returns them in order."""
    done = write_entries(store, identity, Prepared.unembedded(news),
                         now_ms=wall_clock_ms() if now_ms is None else now_ms)
    return done.created


def seed_one(store: Grimoire, new: NewEntry, *, identity: LocalIdentity, now_ms: int | None = None) -> Entry:
    """`seed` of one entry."""
    return seed(store, [new], identity=identity, now_ms=now_ms)[0]


def seed_warning(store: Grimoire, new: NewEntry, identity: LocalIdentity, *, vector: NDArray[np.float32],
                 info: EmbeddingInfo, now_ms: int, index: Callable[[Grimoire], VectorIndex] | None = None
                 ) -> tuple[Entry, float | None]:
    """A warning or anti_knowledge through the write door with its vector (the repeat hold
    applies); returns the entry and, when held, the cosine to the one it repeats. With `index`,
    the close entries are found there (as the daemon's `Writes.prepare` does), else scanned."""
    near = None if index is None else (lambda s, v: index(s).within(v, WARNING_REPEAT.similarity))
    done = write_entries(store, identity, Prepared((new,), (vector,), info, near), now_ms=now_ms)
    return done.created[0], done.held.get(done.created[0].id)


def raw_write(store: Grimoire) -> AbstractContextManager[sqlite3.Connection]:
    """The store's IMMEDIATE write transaction, for a test's setup (commit on success)."""
    return store._transaction()
