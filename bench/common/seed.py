"""Every direct write a bench makes into a Grimoire, in one place.

Benches seed stores without a daemon (bench_store, bench_curator, bench_recall, bench_styx,
bench_vault, bench_warnings, bench_locomo, bench_scale, the ecology and recall_options
scenarios). They do it only through these functions, so that when the store's write door
changes (its `remember`, `remember_many`, `local_batch` and `transaction()` becoming private
to the grimoire package, `crossing.remember_warning` going) this is the one file to adapt.
Each function does exactly what the store call it wraps does: the same transactions, the same
rules, the same timings for the benches that measure them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from daemon.embedding.embedder import EmbeddingInfo
from daemon.grimoire import Entry, Grimoire, NewEntry
from daemon.grimoire.crossing import remember_warning
from daemon.grimoire.store import LocalIdentity
from daemon.grimoire.vectors import VectorIndex

__all__ = ["seed_entries", "seed_entry", "seed_warning", "warning_index_supported"]


def seed_entry(store: Grimoire, new: NewEntry, identity: LocalIdentity) -> Entry:
    """One local entry in a transaction of its own (one fsync'd commit); the entry as stored."""
    return store.remember(new, identity=identity)


def seed_entries(store: Grimoire, news: Sequence[NewEntry], identity: LocalIdentity) -> list[Entry]:
    """Local entries in one transaction (all or none), in order; the entries as stored."""
    return store.remember_many(news, identity=identity)


def warning_index_supported() -> bool:
    """True when `seed_warning` can find close warnings in a `VectorIndex` (`index=`), False when
    the code under test scans the store instead (bench_warnings compares the two)."""
    return "index" in inspect.signature(remember_warning).parameters


def seed_warning(store: Grimoire, new: NewEntry, identity: LocalIdentity, *, vector: NDArray[np.float32],
                 info: EmbeddingInfo, now_ms: int,
                 index: Callable[[Grimoire], VectorIndex] | None = None) -> tuple[Entry, float | None]:
    """A warning written with its vector under the repeat hold (held when it repeats one gossiped
    in the last 24 h); the entry and, when held, the cosine to the one it repeats. `index` is
    passed on only when given (see `warning_index_supported`)."""
    extra: dict[str, Any] = {} if index is None else {"index": index}
    return remember_warning(store, new, identity, vector=vector, info=info, now_ms=now_ms, **extra)

