"""Forgetting, pure: local confidence as a function of the time since the last evidence.

The Ebbinghaus curve (docs/design/forgetting.md):

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

The window depends on the kind (`DEFAULT_WINDOW_DAYS`): structural knowledge of a DeFi
protocol (a constraint, a fact, a causal mechanism) changes on governance and release
timescales — months — while an observation of the market (a regime, an insight, a
strategy's outcome) is stale within days or weeks. An unused entry written at 0.7 fades
(below 0.1) after ln 7 ≈ 1.95 windows and is archived (below 0.05) after ln 14 ≈ 2.64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from crdt import Kind

__all__ = [
    "BLOODSTAIN_WINDOW",
    "DECAY_WINDOW_DAYS",
    "DEFAULT_WINDOW_DAYS",
    "EVICTION_THRESHOLD",
    "FLOOR_KINDS",
    "KIND_FLOOR",
    "RETRIEVAL_THRESHOLD",
    "Retention",
    "decayed",
    "stability_days",
    "windows_with",
]

MS_PER_DAY = 86_400_000
# The window of a kind without a reason to differ (an insight): an unused entry written at 0.7
# falls below the retrieval threshold after ~19.5 days and is archived after ~26 days; at 0.4
# (a sibling's) after ~14 and ~21 days.
DECAY_WINDOW_DAYS = 10.0
# Per kind, in days (S for one piece of evidence; the half-life is S · ln 2). Each reason is
# the timescale on which that kind of DeFi knowledge stops being true when nobody uses it.
DEFAULT_WINDOW_DAYS: Mapping[Kind, float] = MappingProxyType({
    # Hard limits (position caps, a protocol's LTV or fee tier, a chain's finality) move by
    # governance votes and releases: months. Fades after ~6 months unused.
    Kind.CONSTRAINT: 90.0,
    # The owner's standing choices (chains, protocols, risk appetite): changed by hand, rarely.
    Kind.PREFERENCE: 90.0,
    # A protocol's mechanics (oracle source, liquidation path, reward schedule): releases and
    # votes, months. Baseline facts are superseded by the next baseline long before.
    Kind.FACT: 60.0,
    # A mechanism ("utilisation above the kink doubles the borrow rate") holds while the
    # protocol's code does: months.
    Kind.CAUSAL_LINK: 60.0,
    # Something believed and disproved stays disproved; it never falls below 0.3 anyway.
    Kind.ANTI_KNOWLEDGE: 60.0,
    # A dead golem's last lesson, bloodstained: rare and expensive; kept for a season.
    Kind.DEATH_REFLECTION: 60.0,
    # A rule of thumb outlives one market phase but needs re-validation by use: weeks.
    Kind.HEURISTIC: 30.0,
    # An acute danger (an exploit, a depeg, a paused bridge) is mostly over within two weeks;
    # the 0.3 floor keeps it in sight after that.
    Kind.WARNING: 14.0,
    # How a strategy did reflects the conditions of its run: a fortnight.
    Kind.STRATEGY_OUTCOME: 14.0,
    # An observation of the market: days to weeks (the window every kind had before).
    Kind.INSIGHT: DECAY_WINDOW_DAYS,
    # Condensed raw experience; consolidation turns what repeats into facts.
    Kind.EPISODE_SUMMARY: DECAY_WINDOW_DAYS,
    # "Volatility regime changed", "funding turned": true for days; the next shift replaces it.
    Kind.REGIME_SHIFT: 5.0,
})
RETRIEVAL_THRESHOLD = 0.1  # below this, recall and digests leave the entry out ("fades")
EVICTION_THRESHOLD = 0.05  # below this, the curator archives it (reversible, local)
KIND_FLOOR = 0.3
# Demurrage: the cost of holding knowledge is its decay. A bloodstained entry (learned from a
# death: rare, and paid for with a golem) is charged a third of it — its window is 3× longer.
BLOODSTAIN_WINDOW = 3.0
FLOOR_KINDS = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE})


@dataclass(frozen=True, slots=True)
class Retention:
    """What the forgetting curve needs of one entry."""

    kind: Kind
    base: float  # c₀: local confidence right after the last evidence, 0..1
    anchor_ms: int  # when the last evidence arrived (the write, a use, a confirmation)
    evidence: int  # ≥ 1: the write plus every later use, confirmation and re-validation
    bloodstain: bool = False  # a lesson paid for with a death: its window is BLOODSTAIN_WINDOW × longer


def windows_with(overrides: Mapping[str, float] | None = None, *, every: float | None = None
                 ) -> dict[Kind, float]:
    """Every kind's window: `DEFAULT_WINDOW_DAYS`, or `every` for all kinds when given, then
    `overrides` (kind name -> days). Raises `ValueError` naming an unknown kind or a window ≤ 0."""
    windows = {k: (DEFAULT_WINDOW_DAYS[k] if every is None else every) for k in Kind}
    for name, days in (overrides or {}).items():
        try:
            kind = Kind(name)
        except ValueError:
            raise ValueError(f"{name!r} is not a kind (one of {', '.join(k.value for k in Kind)})") from None
        if not days > 0:
            raise ValueError(f"{name}: the window must be more than 0 days, got {days!r}")
        windows[kind] = float(days)
    return windows


def stability_days(evidence: int, window_days: float = DECAY_WINDOW_DAYS) -> float:
    """S: the e-folding time of the curve, in days (window · max(1, ln evidence))."""
    return window_days * max(1.0, math.log(max(1, evidence)))


def decayed(r: Retention, now_ms: int, *, window_days: float | None = None) -> float:
    """The local confidence at `now_ms` (never above `r.base`; clock skew backwards counts as 0).
    `window_days`: None for the kind's default (`DEFAULT_WINDOW_DAYS`)."""
    days = max(0, now_ms - r.anchor_ms) / MS_PER_DAY
    window = (DEFAULT_WINDOW_DAYS[r.kind] if window_days is None else window_days) * (
        BLOODSTAIN_WINDOW if r.bloodstain else 1.0)
    value = r.base * math.exp(-days / stability_days(r.evidence, window))
    if r.kind in FLOOR_KINDS:
        value = max(value, min(r.base, KIND_FLOOR))
    return min(r.base, max(0.0, value))
