"""Forgetting, pure: local confidence as a function of the time since the last evidence.

DESIGN.md ("Scoring", "Curator") gives the Ebbinghaus curve

    c(t) = c₀ · exp(−Δt / S),   S = window · max(1, ln(evidence))

where c₀ is the entry's *base* local confidence (what this golem holds it at by provenance
and its own validation: 0.7 as written, 0.4 from a sibling, …), Δt the time since the last
evidence, and `evidence` counts the entry's write plus every later use (cited or fed back),
confirmation and re-validation. As in spaced repetition, evidence resets the clock (the
confidence returns to c₀, Δt to 0) *and* makes the memory more stable (S grows with ln of
the evidence): knowledge used every few days never fades, knowledge used once fades within
weeks. Warnings and anti_knowledge never fall below 0.3 (nor rise to it by decay: an entry
held below 0.3 stays where it is).

The curve is a pure function of the anchor, not a per-cycle multiplier, so it does not drift
with how often the curator runs, a missed cycle loses nothing, and `project` answers "what
will this be worth in N days" with the same function the cycle uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crdt import Kind

__all__ = [
    "DECAY_WINDOW_DAYS",
    "EVICTION_THRESHOLD",
    "FLOOR_KINDS",
    "KIND_FLOOR",
    "RETRIEVAL_THRESHOLD",
    "Retention",
    "decayed",
    "stability_days",
]

MS_PER_DAY = 86_400_000
# An unused entry written at 0.7 falls below the retrieval threshold after ~19.5 days and is
# archived after ~26 days; at 0.4 (a sibling's) after ~14 and ~21 days.
DECAY_WINDOW_DAYS = 10.0
RETRIEVAL_THRESHOLD = 0.1  # below this, recall and digests leave the entry out ("fades")
EVICTION_THRESHOLD = 0.05  # below this, the curator archives it (reversible, local)
KIND_FLOOR = 0.3
FLOOR_KINDS = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE})


@dataclass(frozen=True, slots=True)
class Retention:
    """What the forgetting curve needs of one entry."""

    kind: Kind
    base: float  # c₀: local confidence right after the last evidence, 0..1
    anchor_ms: int  # when the last evidence arrived (the write, a use, a confirmation)
    evidence: int  # ≥ 1: the write plus every later use, confirmation and re-validation


def stability_days(evidence: int, window_days: float = DECAY_WINDOW_DAYS) -> float:
    """S: the e-folding time of the curve, in days (window · max(1, ln evidence))."""
    return window_days * max(1.0, math.log(max(1, evidence)))


def decayed(r: Retention, now_ms: int, *, window_days: float = DECAY_WINDOW_DAYS) -> float:
    """The local confidence at `now_ms` (never above `r.base`; clock skew backwards counts as 0)."""
    days = max(0, now_ms - r.anchor_ms) / MS_PER_DAY
    value = r.base * math.exp(-days / stability_days(r.evidence, window_days))
    if r.kind in FLOOR_KINDS:
        value = max(value, min(r.base, KIND_FLOOR))
    return min(r.base, max(0.0, value))
