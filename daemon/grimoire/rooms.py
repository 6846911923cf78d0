"""Named writes for the rooms whose tables live in grimoire.db beside the entries.

`RoomWrites` is mixed into `Grimoire` (store.py). Code outside daemon/grimoire never gets the
store's connection (tests/test_door_closed.py checks): it calls one of these methods, which
opens its own IMMEDIATE transaction (all or none), runs the room's SQL — kept in that room's
module (vitality.py, trust_store.py, drift_store.py, agent_store.py) — and commits. Own entries
are never written here: they pass the write door (write_door.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .drift_store import DriftState, clear_drift, read_baseline, write_baseline, write_drift_state
from .trust import AuthorView, TrustPolicy
from .trust_store import author_views, record_suspects, set_distrust
from .vitality import Vitality, write_vitality

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from daemon.embedding.embedder import EmbeddingInfo

__all__ = ["DriftVerdict", "RoomWrites"]

# Given the stored baseline of the space (None: none yet), the check's verdict and, when none
# was stored, the baseline to keep (the references' vectors just embedded).
DriftVerdict = Callable[["NDArray[np.float32] | None"], DriftState]


class RoomWrites:
    """Writes of the rooms' own tables, each one transaction (see the module docstring)."""

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # Grimoire's

    def set_vitality(self, vitality: Vitality, *, now_ms: int) -> Vitality:
        """Store the reported vitality (vitality.py, `write_vitality`); returns it as stored."""
        with self._transaction() as conn:
            return write_vitality(conn, vitality, now_ms=now_ms)

    def set_distrust(self, author: str, *, distrusted: bool, now_ms: int) -> dict[str, Any]:
        """The operator distrusts `author` or trusts it again (trust_store.py, `set_distrust`)."""
        with self._transaction() as conn:
            return set_distrust(conn, author, distrusted=distrusted, now_ms=now_ms)

    def record_suspects(self, policy: TrustPolicy, *, now_ms: int) -> list[AuthorView]:
        """Read every author's trust under `policy` and persist the alert state in one transaction;
        returns the authors that turned suspect since the last call (trust_store.py)."""
        with self._transaction() as conn:
            return record_suspects(conn, author_views(conn, now_ms=now_ms, policy=policy), now_ms=now_ms)

    def record_drift(self, info: EmbeddingInfo, vectors: NDArray[np.float32], verdict: DriftVerdict) -> DriftState:
        """One drift check's record (drift_store.py), in one transaction: `verdict(baseline)` judges
        the references' `vectors` against the stored baseline of `info`'s space; with none stored,
        `vectors` become the baseline. Returns the state recorded."""
        with self._transaction() as conn:
            baseline = read_baseline(conn, info)
            if baseline is None:
                write_baseline(conn, info, vectors)
            state = verdict(baseline)
            write_drift_state(conn, state)
        return state

    def clear_vectors(self) -> None:
        """Drop every stored vector and the drift baselines (a full rebuild under a new model):
        all or none, so the store never holds vectors of two models. Callers make sure no daemon
        owns the store (its index would not know)."""
        with self._transaction() as conn:
            conn.execute("UPDATE entries SET embedding = NULL, embedding_model = NULL, embedding_model_version = NULL, "
                         "embedding_preprocess_hash = NULL, embedding_created_ms = NULL")
            clear_drift(conn)  # the model as it maps text now is accepted: a new baseline at the next check
