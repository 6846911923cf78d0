"""The golem's vitality as its runtime (or its owner) reports it, kept in the store's meta table.

Two ways to say it, which may come together:

- the vitality state — the `economic` and `epistemic` clocks (0..1) and the `age_factor` (≥ 0) —
  from which the phase is derived by the architecture's rules (mortality.py: the composite score,
  its thresholds, hysteresis upward; the derived phase is kept so the next report moves from it);
- a reported `phase` (thriving, stable, conservation, declining, terminal), which overrides the
  derived one while it is set.

`hayflick_ratio` (0..1, optional) is the stochastic clock's replication budget used. From declining
on, or past a Hayflick ratio of 0.85, the curator pushes the golem's legacy (promotion.legacy_due);
the phase also sets the Styx death reserve's share and the curator's pace (mortality.py). A PUT
replaces the whole report: what it leaves out is no longer reported.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from crdt import InvalidValue

from .mortality import PHASES, composite, curator_period_factor, legacy_confidence, phase_for, reserve_share
from .promotion import legacy_due

__all__ = ["Clocks", "Vitality", "read_vitality", "write_vitality"]

_PHASE_KEY = "vitality_phase"  # the reported phase (the override)
_HAYFLICK_KEY = "vitality_hayflick"
_CLOCKS_KEY = "vitality_clocks"  # "economic epistemic age_factor"
_DERIVED_KEY = "vitality_derived"  # the phase the clocks gave last (hysteresis starts from it)
_UPDATED_KEY = "vitality_updated_ms"
_KEYS = (_PHASE_KEY, _HAYFLICK_KEY, _CLOCKS_KEY, _DERIVED_KEY, _UPDATED_KEY)
MAX_AGE_FACTOR = 100.0


@dataclass(frozen=True, slots=True)
class Clocks:
    """The vitality state's scores (mortality.py)."""

    economic: float
    epistemic: float
    age_factor: float = 0.0

    @property
    def composite(self) -> float:
        return composite(self.economic, self.epistemic, self.age_factor)


def _unit(name: str, value: object, *, top: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= top:
        raise InvalidValue(name, f"must be a number in 0..{top:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Vitality:
    reported: str | None = None  # the phase reported, overriding the derived one
    hayflick_ratio: float | None = None
    updated_ms: int | None = None
    clocks: Clocks | None = None
    derived: str | None = None  # the phase the clocks give (None without clocks)

    @classmethod
    def checked(cls, phase: object = None, hayflick_ratio: object = None, *, economic: object = None,
                epistemic: object = None, age_factor: object = None, updated_ms: int | None = None) -> Vitality:
        """A report, checked (`derived` is filled in by `write_vitality`). Raises `InvalidValue`
        naming the bad field: a phase not among `PHASES`, a clock outside its range, one of
        economic/epistemic without the other, or neither a phase nor the clocks."""
        if phase is not None and (not isinstance(phase, str) or phase not in PHASES):
            raise InvalidValue("phase", f"must be one of {', '.join(PHASES)}; got {phase!r}")
        ratio = None if hayflick_ratio is None else _unit("hayflick_ratio", hayflick_ratio)
        clocks: Clocks | None = None
        if economic is not None or epistemic is not None or age_factor is not None:
            for name, value in (("economic", economic), ("epistemic", epistemic)):
                if value is None:
                    raise InvalidValue(name, "is needed with the other clocks (economic and epistemic, "
                                             "age_factor optional)")
            clocks = Clocks(_unit("economic", economic), _unit("epistemic", epistemic),
                            0.0 if age_factor is None else _unit("age_factor", age_factor, top=MAX_AGE_FACTOR))
        if phase is None and clocks is None:
            raise InvalidValue("phase", "give a phase, or the vitality state (economic and epistemic), or both")
        return cls(phase if isinstance(phase, str) else None, ratio, updated_ms, clocks)

    @property
    def phase(self) -> str:
        """The phase in force: the reported one, else the derived one, else stable."""
        return self.reported or self.derived or "stable"

    @property
    def source(self) -> str:
        return "reported" if self.reported else "derived" if self.derived else "default"

    @property
    def composite(self) -> float | None:
        return None if self.clocks is None else self.clocks.composite

    @property
    def legacy(self) -> bool:
        return legacy_due(self.phase, self.hayflick_ratio)

    @property
    def legacy_confidence(self) -> float:
        return legacy_confidence(self.phase)

    @property
    def reserve_share(self) -> float:
        """The share of the month's Styx cap kept for the death protocol (mortality.reserve_share)."""
        return reserve_share(self.phase, self.composite if self.source == "derived" else None)

    @property
    def curator_period_factor(self) -> float:
        return curator_period_factor(self.phase)

    def to_json(self) -> dict[str, Any]:
        c = self.clocks
        score = self.composite
        return {"phase": self.phase, "source": self.source, "reported": self.reported, "derived": self.derived,
                "composite": None if score is None else round(score, 4),
                "economic": None if c is None else c.economic, "epistemic": None if c is None else c.epistemic,
                "age_factor": None if c is None else c.age_factor, "hayflick_ratio": self.hayflick_ratio,
                "legacy": self.legacy, "legacy_confidence": self.legacy_confidence,
                "reserve_share": round(self.reserve_share, 4), "curator_period_factor": self.curator_period_factor,
                "updated_ms": self.updated_ms}


def _clocks(text: object) -> Clocks | None:
    try:
        economic, epistemic, age = (float(x) for x in str(text).split())
        return Clocks(_unit("economic", economic), _unit("epistemic", epistemic),
                      _unit("age_factor", age, top=MAX_AGE_FACTOR))
    except (ValueError, InvalidValue):
        return None  # a meta row this code did not write: as if no clocks were reported


def read_vitality(conn: sqlite3.Connection) -> Vitality:
    """The stored vitality (stable by default, until one is reported)."""
    rows = dict(conn.execute(f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * len(_KEYS))})",
                             _KEYS).fetchall())
    phase = rows.get(_PHASE_KEY)
    reported = str(phase) if phase in PHASES else None
    clocks = None if rows.get(_CLOCKS_KEY) is None else _clocks(rows[_CLOCKS_KEY])
    derived = rows.get(_DERIVED_KEY)
    ratio, updated = rows.get(_HAYFLICK_KEY), rows.get(_UPDATED_KEY)
    return Vitality(reported, None if ratio is None else float(ratio), None if updated is None else int(updated),
                    clocks, str(derived) if clocks is not None and derived in PHASES else None)


def write_vitality(conn: sqlite3.Connection, vitality: Vitality, *, now_ms: int) -> Vitality:
    """Store the report `vitality` inside the caller's transaction, deriving the phase from its
    clocks (moving from the phase they gave last); returns it as stored."""
    previous = read_vitality(conn).derived
    derived = None if vitality.clocks is None else phase_for(vitality.clocks.composite, previous)
    upsert = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"

    def put(key: str, value: object) -> None:
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            conn.execute(upsert, (key, value))

    c = vitality.clocks
    put(_PHASE_KEY, vitality.reported)
    put(_HAYFLICK_KEY, vitality.hayflick_ratio)
    put(_CLOCKS_KEY, None if c is None else f"{c.economic!r} {c.epistemic!r} {c.age_factor!r}")
    put(_DERIVED_KEY, derived)
    put(_UPDATED_KEY, now_ms)
    return Vitality(vitality.reported, vitality.hayflick_ratio, now_ms, c, derived)
