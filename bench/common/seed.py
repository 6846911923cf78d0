"""Every direct write a bench makes into a Grimoire, in one place: through the write door.

Benches seed stores without a daemon (bench_store, bench_curator, bench_recall, bench_styx,
bench_vault, bench_warnings, bench_locomo, bench_scale, the ecology and recall_options
scenarios). They do it only through these functions, which write as an agent's writes do
(`daemon/grimoire/write_door.py`, `write_entries`: one transaction per call, all or none, the
repeat hold for a warning written with its vector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from daemon.embedding.embedder import EmbeddingInfo
from daemon.grimoire import Entry, Grimoire, NewEntry, wall_clock_ms
from daemon.grimoire.promotion import WARNING_REPEAT
from daemon.grimoire.store import LocalIdentity
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.write_door import Prepared, write_entries

__all__ = ["seed_entries", "seed_entry", "seed_warning", "warning_index_supported"]


def seed_entry(store: Grimoire, new: NewEntry, identity: LocalIdentity) -> Entry:
    """One local entry in a transaction of its own (one fsync'd commit); the entry as stored."""
    return seed_entries(store, [new], identity)[0]


def seed_entries(store: Grimoire, news: Sequence[NewEntry], identity: LocalIdentity) -> list[Entry]:
    """Local entries in one transaction (all or none), in order; the entries as stored. No
    vectors: a warning among them is written unchecked, as without a model."""
    return write_entries(store, identity, Prepared.unembedded(news), now_ms=wall_clock_ms()).created


def warning_index_supported() -> bool:
    """True: `seed_warning` finds close warnings in a `VectorIndex` when given one (`index=`);
    without one the door scans the store (bench_warnings compares the two against older code)."""
    return True


def seed_warning(store: Grimoire, new: NewEntry, identity: LocalIdentity, *, vector: NDArray[np.float32],
                 info: EmbeddingInfo, now_ms: int,
                 index: Callable[[Grimoire], VectorIndex] | None = None) -> tuple[Entry, float | None]:
    """A warning written with its vector under the repeat hold (held when it repeats one gossiped
    in the last 24 h); the entry and, when held, the cosine to the one it repeats. `index`: the
    close entries are found in it (brought up to date from the store), else by a scan."""
    near = None if index is None else (lambda s, v: index(s).current.within(v, WARNING_REPEAT.similarity))
    done = write_entries(store, identity, Prepared((new,), (vector,), info, near), now_ms=now_ms)
    entry = done.created[0]
    return entry, done.held.get(entry.id)
