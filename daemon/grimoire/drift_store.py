"""Embedding drift in grimoire.db's meta table: the reference baseline of each vector space and
the last check's verdict (daemon/embedding/drift.py measures; daemon/service/embedding.py acts).

Keys: `drift_baseline:<model>|<version>|<preprocess>` holds the references' float32 vectors (row
major, `dim` wide); `drift_state` the last check as JSON (`DriftState`). A rebuild (every vector
re-embedded with the current model) clears both: the next check takes a new baseline.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from daemon.embedding.drift import REFERENCE_DOCS
from daemon.embedding.embedder import EmbeddingInfo

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["DriftState", "clear_drift", "read_baseline", "read_drift_state", "space_key", "write_baseline",
           "write_drift_state"]

_STATE_KEY = "drift_state"
_UPSERT = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def space_key(info: EmbeddingInfo) -> str:
    return f"{info.model}|{info.model_version}|{info.preprocess_hash}"


def _baseline_key(info: EmbeddingInfo) -> str:
    return f"drift_baseline:{space_key(info)}"


def read_baseline(conn: sqlite3.Connection, info: EmbeddingInfo) -> NDArray[np.float32] | None:
    """The references' baseline vectors in `info`'s space, or None (none taken, or unreadable)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_baseline_key(info),)).fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) != 4 * info.dim * len(REFERENCE_DOCS):
        return None
    return np.frombuffer(row[0], dtype=np.float32).reshape(len(REFERENCE_DOCS), info.dim).copy()


def write_baseline(conn: sqlite3.Connection, info: EmbeddingInfo, vectors: NDArray[np.float32]) -> None:
    if vectors.shape != (len(REFERENCE_DOCS), info.dim):
        raise ValueError(f"a baseline is {len(REFERENCE_DOCS)} x {info.dim}, got {vectors.shape}")
    conn.execute(_UPSERT, (_baseline_key(info), np.ascontiguousarray(vectors, dtype=np.float32).tobytes()))


@dataclass(frozen=True, slots=True)
class DriftState:
    """The last check: its space, verdict and figures, and when."""

    space: str
    verdict: str  # healthy, warning, critical, baseline (the first check took the baseline)
    checked_ms: int
    figures: dict[str, Any]

    @property
    def paused(self) -> bool:
        return self.verdict == "critical"

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "verdict": self.verdict, "checked_ms": self.checked_ms,
                "vector_writes_paused": self.paused, **self.figures}


def read_drift_state(conn: sqlite3.Connection) -> DriftState | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_STATE_KEY,)).fetchone()
    if row is None:
        return None
    try:
        doc = json.loads(str(row[0]))
        return DriftState(str(doc["space"]), str(doc["verdict"]), int(doc["checked_ms"]), dict(doc["figures"]))
    except (ValueError, KeyError, TypeError):
        return None  # a row this code did not write: as if never checked


def write_drift_state(conn: sqlite3.Connection, state: DriftState) -> None:
    conn.execute(_UPSERT, (_STATE_KEY, json.dumps({"space": state.space, "verdict": state.verdict,
                                                   "checked_ms": state.checked_ms, "figures": state.figures})))


def clear_drift(conn: sqlite3.Connection) -> None:
    """Forget every baseline and the verdict (after a full rebuild)."""
    conn.execute("DELETE FROM meta WHERE key = ? OR key LIKE 'drift_baseline:%'", (_STATE_KEY,))
