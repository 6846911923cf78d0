"""Pruning, pure: which live entries the curator archives, and why.

Two reasons, checked in this order:

1. **below the eviction threshold**: decay took the local confidence under
   `EVICTION_THRESHOLD` (warnings and anti_knowledge cannot get there: their floor is 0.3);
2. **over a tier's capacity**: each tier holds at most its capacity of live entries; the
   excess goes lowest *keep score* first (local confidence × DESIGN's importance composite),
   and warnings and anti_knowledge above the floor go only after every other kind of their
   tier. Ties break oldest first, then by id, so the choice is deterministic.

Tiers group kinds by what they are for (capacities configurable, `[curator] capacity_*`):
`rules` (heuristic, constraint, preference, strategy_outcome: what the PLAYBOOK holds, 100),
`knowledge` (insight, fact, causal_link, warning, anti_knowledge, regime_shift,
death_reflection: 5,000) and `summaries` (episode_summary: 50,000).

Archiving is local and reversible (`clade unarchive ID`): it writes no op, the entry stays
readable by id and its ops still replicate. Retracted, superseded and already archived
entries are not live and are never chosen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from crdt import Kind

from .decay import EVICTION_THRESHOLD, FLOOR_KINDS, KIND_FLOOR

__all__ = ["DEFAULT_CAPACITY", "TIERS", "Candidate", "Prune", "select_prunes", "tier_of"]

TIERS: Mapping[str, frozenset[Kind]] = {
    "rules": frozenset({Kind.HEURISTIC, Kind.CONSTRAINT, Kind.PREFERENCE, Kind.STRATEGY_OUTCOME}),
    "knowledge": frozenset({Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK, Kind.WARNING, Kind.ANTI_KNOWLEDGE,
                            Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION}),
    "summaries": frozenset({Kind.EPISODE_SUMMARY}),
}
DEFAULT_CAPACITY: Mapping[str, int] = {"rules": 100, "knowledge": 5_000, "summaries": 50_000}
_TIER_OF = {kind: tier for tier, kinds in TIERS.items() for kind in kinds}


def tier_of(kind: Kind) -> str:
    return _TIER_OF[kind]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live entry as pruning sees it (its confidence already decayed to now)."""

    id: str
    kind: Kind
    confidence: float  # local, decayed
    keep_score: float  # higher is kept longer
    created_ms: int


@dataclass(frozen=True, slots=True)
class Prune:
    id: str
    reason: str  # "below_threshold" | "over_capacity"
    tier: str
    confidence: float


def select_prunes(
    live: Iterable[Candidate],
    *,
    eviction_threshold: float = EVICTION_THRESHOLD,
    capacity: Mapping[str, int] = DEFAULT_CAPACITY,
) -> list[Prune]:
    """The entries to archive, in a deterministic order (threshold first, then by tier)."""
    prunes: list[Prune] = []
    kept: dict[str, list[Candidate]] = {tier: [] for tier in TIERS}
    for c in sorted(live, key=lambda c: c.id):
        tier = tier_of(c.kind)
        if c.confidence < eviction_threshold and not (c.kind in FLOOR_KINDS and c.confidence >= KIND_FLOOR):
            prunes.append(Prune(c.id, "below_threshold", tier, c.confidence))
        else:
            kept[tier].append(c)
    for tier, members in kept.items():
        excess = len(members) - capacity.get(tier, DEFAULT_CAPACITY[tier])
        if excess <= 0:
            continue
        members.sort(key=lambda c: (c.kind in FLOOR_KINDS and c.confidence >= KIND_FLOOR, c.keep_score,
                                    c.created_ms, c.id))
        prunes.extend(Prune(c.id, "over_capacity", tier, c.confidence) for c in members[:excess])
    return prunes
