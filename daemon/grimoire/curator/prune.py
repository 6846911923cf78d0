"""Pruning, pure: which live entries the curator archives, and why.

Two reasons, checked in this order:

1. **below the eviction threshold** (`below_threshold`): decay took the local confidence
   under `EVICTION_THRESHOLD` (warnings and anti_knowledge cannot get there: their floor is 0.3);
2. **over the Grimoire's budget** (`over_capacity`): the Grimoire holds at most `capacity`
   live entries (one budget for every kind, `[curator] capacity`, default `DEFAULT_CAPACITY`).
   The excess is archived in *eviction class* order (`eviction_class`):

   - class 0, `records`: strategy_outcome, episode_summary, and insights with no evidence
     beyond their write (never used, confirmed or re-validated) — what other entries distil;
   - class 1, `knowledge`: every other kind (facts, causal links, preferences, regime
     shifts, death reflections, insights with evidence);
   - class 2, `rules`: heuristic, constraint, warning, anti_knowledge — what the golem acts by.

   Within a class the lowest *keep score* (local confidence × the importance composite)
   goes first; ties break oldest first, then by id, so the choice is deterministic whatever
   the input order.

`DEFAULT_CAPACITY` (50,000) is the store size the retrieval latency and memory figures are
measured at (docs/design/retrieval.md: search p99 ≤ 50 ms, daemon RSS ~400 MiB under
`MemoryMax=1G`); a golem writing a hundred entries a day (a strategy outcome per trade every
quarter hour and then some) has 36,500 in a year, and decay archives what is not used long
before that. The budget protects the machine, not a price list.

Archiving is local and reversible (`clade unarchive ID`): it writes no op, the entry stays
readable by id and its ops still replicate. Retracted, superseded and already archived
entries are not live and are never chosen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crdt import Kind

from .decay import EVICTION_THRESHOLD, FLOOR_KINDS, KIND_FLOOR

__all__ = ["CLASS_NAMES", "DEFAULT_CAPACITY", "Candidate", "Prune", "capacity_counts", "eviction_class",
           "select_prunes"]

DEFAULT_CAPACITY = 50_000
CLASS_NAMES = ("records", "knowledge", "rules")
_RECORD_KINDS = frozenset({Kind.STRATEGY_OUTCOME, Kind.EPISODE_SUMMARY})
_RULE_KINDS = frozenset({Kind.HEURISTIC, Kind.CONSTRAINT, Kind.WARNING, Kind.ANTI_KNOWLEDGE})


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live entry as pruning sees it (its confidence already decayed to now)."""

    id: str
    kind: Kind
    confidence: float  # local, decayed
    keep_score: float  # higher is kept longer
    created_ms: int
    evidence: int = 1  # the write, uses, confirmations, re-validations


@dataclass(frozen=True, slots=True)
class Prune:
    id: str
    reason: str  # "below_threshold" | "over_capacity"
    kind: Kind
    confidence: float


def eviction_class(kind: Kind, evidence: int) -> int:
    """0 (archived first for capacity) .. 2 (last); see the module docstring."""
    if kind in _RECORD_KINDS or (kind is Kind.INSIGHT and evidence <= 1):
        return 0
    if kind in _RULE_KINDS:
        return 2
    return 1


def select_prunes(
    live: Iterable[Candidate],
    *,
    eviction_threshold: float = EVICTION_THRESHOLD,
    capacity: int = DEFAULT_CAPACITY,
) -> list[Prune]:
    """The entries to archive, in a deterministic order: below the threshold (by id), then
    over capacity (in eviction order). At most `capacity` live entries remain."""
    if capacity < 0:
        raise ValueError(f"capacity must be non-negative, got {capacity}")
    prunes: list[Prune] = []
    kept: list[Candidate] = []
    for c in sorted(live, key=lambda c: c.id):
        if c.confidence < eviction_threshold and not (c.kind in FLOOR_KINDS and c.confidence >= KIND_FLOOR):
            prunes.append(Prune(c.id, "below_threshold", c.kind, c.confidence))
        else:
            kept.append(c)
    excess = len(kept) - capacity
    if excess > 0:
        kept.sort(key=lambda c: (eviction_class(c.kind, c.evidence), c.keep_score, c.created_ms, c.id))
        prunes.extend(Prune(c.id, "over_capacity", c.kind, c.confidence) for c in kept[:excess])
    return prunes


def capacity_counts(prunes: Iterable[Prune]) -> dict[str, int]:
    """Capacity archives counted by kind (sorted by kind): what the operator is told."""
    counts: dict[str, int] = {}
    for p in prunes:
        if p.reason == "over_capacity":
            counts[p.kind.value] = counts.get(p.kind.value, 0) + 1
    return dict(sorted(counts.items()))
