"""The golem's vitality as its owner (or its runtime) reports it, kept in the store's meta table.

`phase` is one of thriving, stable, conservation, declining, terminal; `hayflick_ratio` (0..1,
optional) is how much of its replication budget it has used. From declining on, or past a
Hayflick ratio of 0.85, the curator pushes the golem's legacy (promotion.legacy_due).
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from crdt import InvalidValue

from .promotion import PHASES, legacy_due

__all__ = ["Vitality", "read_vitality", "write_vitality"]

_PHASE_KEY = "vitality_phase"
_HAYFLICK_KEY = "vitality_hayflick"


@dataclass(frozen=True, slots=True)
class Vitality:
    phase: str = "stable"
    hayflick_ratio: float | None = None
    updated_ms: int | None = None

    @classmethod
    def checked(cls, phase: object, hayflick_ratio: object = None, *, updated_ms: int | None = None) -> Vitality:
        """Raises `InvalidValue` naming the bad field."""
        if not isinstance(phase, str) or phase not in PHASES:
            raise InvalidValue("phase", f"must be one of {', '.join(PHASES)}; got {phase!r}")
        ratio: float | None = None
        if hayflick_ratio is not None:
            if isinstance(hayflick_ratio, bool) or not isinstance(hayflick_ratio, int | float) \
                    or not math.isfinite(hayflick_ratio) or not 0 <= hayflick_ratio <= 1:
                raise InvalidValue("hayflick_ratio", f"must be a number in 0..1, got {hayflick_ratio!r}")
            ratio = float(hayflick_ratio)
        return cls(phase, ratio, updated_ms)

    @property
    def legacy(self) -> bool:
        return legacy_due(self.phase, self.hayflick_ratio)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "hayflick_ratio": self.hayflick_ratio, "legacy": self.legacy,
                "updated_ms": self.updated_ms}


def read_vitality(conn: sqlite3.Connection) -> Vitality:
    """The stored vitality (stable, no ratio, until one is set)."""
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?, ?)",
                             (_PHASE_KEY, _HAYFLICK_KEY, "vitality_updated_ms")).fetchall())
    phase = rows.get(_PHASE_KEY)
    if phase not in PHASES:
        return Vitality()
    ratio = rows.get(_HAYFLICK_KEY)
    updated = rows.get("vitality_updated_ms")
    return Vitality(str(phase), None if ratio is None else float(ratio), None if updated is None else int(updated))


def write_vitality(conn: sqlite3.Connection, vitality: Vitality, *, now_ms: int) -> Vitality:
    """Store `vitality` inside the caller's transaction; returns it as stored."""
    upsert = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    conn.execute(upsert, (_PHASE_KEY, vitality.phase))
    conn.execute(upsert, ("vitality_updated_ms", now_ms))
    if vitality.hayflick_ratio is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (_HAYFLICK_KEY,))
    else:
        conn.execute(upsert, (_HAYFLICK_KEY, vitality.hayflick_ratio))
    return Vitality(vitality.phase, vitality.hayflick_ratio, now_ms)
