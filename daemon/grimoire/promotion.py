"""The crossing gates (docs/design/ecology.md, "What crosses"): which of this golem's entries its siblings get.

Pure: decisions over hand-made inputs and the time. The static part (`crdt.may_cross`: public,
of a kind that may ever cross) is necessary; on top of it

- warning, anti_knowledge, regime_shift, death_reflection cross at once — except a warning or
  anti_knowledge the daemon held as a repeat of one it gossiped in the last 24 h: cosine ≥ 0.95
  and the same figures (`WARNING_REPEAT`, `figures`: "gas above 80 gwei" after "gas above 200
  gwei" is an update, not a repeat, though the model barely tells numbers apart; held locally,
  still stored and searchable);
- insight, fact, causal_link once confidence ≥ 0.6 and the admission score (admission.py)
  admits them (reason `admitted`);
- heuristic, constraint once confidence ≥ 0.7, active ≥ 10 curator ticks, and positive evidence
  outnumbers negative with at least `RULE_MIN_POSITIVE` (2) positives: evidence = this golem's
  outcomes plus siblings' endorsements (confirms / contradicts count, but are never required)
  (`validated`). One lucky first positive no longer passes a bad rule (a rule that helps one
  time in four gets there first with p = 0.25; two positives before more negatives, ≈ 0.1);
- nothing the clade's evidence refuted (belief.py) crosses, by any rule;
- legacy (`legacy_due`: vitality declining or terminal, or Hayflick ratio > 0.85): entries held
  at confidence ≥ 0.4 (`LEGACY_CONFIDENCE`, the architecture's lowered bar near death, not the
  0.6 / 0.7 of the rules above; 0.1 in terminal, mortality.legacy_confidence) that do not yet
  pass the tick, outcome or score rule cross too
  (`legacy`), as long as their evidence is not negative on balance and they are not
  near-duplicates.

Entries held (`crossing_hold`: a repeated warning, an inherited entry not yet validated) are
never sent, whoever wrote them. Siblings' entries are otherwise relayed as they came.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from crdt import EntryBody, Kind, may_cross

from .mortality import PHASES

__all__ = ["CROSS_AT_ONCE", "EVIDENCE_KINDS", "PHASES", "PROMOTABLE", "RULE_KINDS", "RULE_MIN_POSITIVE",
           "WARNING_REPEAT", "Candidate", "crossing_reason", "figures", "legacy_due", "refusal_reason",
           "sync_gate"]

CROSS_AT_ONCE = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION})
EVIDENCE_KINDS = frozenset({Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK})
RULE_KINDS = frozenset({Kind.HEURISTIC, Kind.CONSTRAINT})
PROMOTABLE = EVIDENCE_KINDS | RULE_KINDS
REPEATABLE_KINDS = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE})
EVIDENCE_CONFIDENCE = 0.6
RULE_CONFIDENCE = 0.7
RULE_TICKS = 10
RULE_MIN_POSITIVE = 2
LEGACY_CONFIDENCE = 0.4  # near death the bar drops: what the golem half-believes is better passed on than lost
LEGACY_PHASES = frozenset({"declining", "terminal"})
LEGACY_HAYFLICK = 0.85


@dataclass(frozen=True, slots=True)
class WarningRepeat:
    """A warning this close (cosine) to one gossiped within `window_ms` is held."""

    similarity: float = 0.95
    window_ms: int = 24 * 3_600_000


WARNING_REPEAT = WarningRepeat()
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")


def figures(text: str) -> tuple[str, ...]:
    """The numbers a text states, in order. Two warnings repeat each other only if they state the
    same figures: embeddings hardly see numbers, and a changed figure is news, not a repeat."""
    return tuple(_FIGURE.findall(text))


@dataclass(frozen=True, slots=True)
class Candidate:
    """An own, active, unpromoted, crossable entry as the gate sees it."""

    kind: Kind
    confidence: float  # the author's
    created_ms: int
    positive: int = 0  # this golem's outcomes
    negative: int = 0
    confirms: int = 0  # siblings' endorsements
    contradicts: int = 0
    admitted: bool = False  # the admission score's verdict (evidence kinds)
    near_duplicate: bool = False
    refuted: bool = False  # the pooled belief refutes it (belief.py)


def legacy_due(phase: str, hayflick_ratio: float | None) -> bool:
    """Whether the golem should push its legacy: declining or terminal, or Hayflick ratio > 0.85."""
    return phase in LEGACY_PHASES or (hayflick_ratio is not None and hayflick_ratio > LEGACY_HAYFLICK)


def crossing_reason(c: Candidate, *, now_ms: int, tick_seconds: float, ticks: int = RULE_TICKS,
                    legacy: bool = False, legacy_confidence: float = LEGACY_CONFIDENCE) -> str | None:
    """Why `c` crosses now (`admitted`, `validated`, `legacy`), or None if it does not yet.
    `legacy`: legacy is due, from `legacy_confidence` (the phase's bar, mortality.legacy_confidence)."""
    positive, negative = c.positive + c.confirms, c.negative + c.contradicts
    if c.refuted:
        return None
    bequeathing = legacy and c.confidence >= legacy_confidence and positive >= negative
    if c.kind in EVIDENCE_KINDS:
        if c.near_duplicate:
            return None
        if c.admitted and c.confidence >= EVIDENCE_CONFIDENCE:
            return "admitted"
        return "legacy" if bequeathing else None
    if c.kind in RULE_KINDS:
        old_enough = now_ms - c.created_ms >= ticks * tick_seconds * 1000
        if c.confidence >= RULE_CONFIDENCE and old_enough and positive >= RULE_MIN_POSITIVE and positive > negative:
            return "validated"
        return "legacy" if bequeathing else None
    return None


def refusal_reason(c: Candidate, *, now_ms: int, tick_seconds: float, ticks: int = RULE_TICKS) -> str:
    """Why `c` does not cross now (when `crossing_reason` gave None, legacy aside): `refuted`;
    for evidence kinds `near_duplicate`, `low_confidence` (< 0.6) or `low_score` (the
    admission score); for rules `low_confidence` (< 0.7), `too_young` (fewer than `ticks`
    curator ticks) or `unproven` (fewer than `RULE_MIN_POSITIVE` positives, or not more
    positive than negative evidence); `kind` for a kind that is never promoted."""
    if c.refuted:
        return "refuted"
    if c.kind in EVIDENCE_KINDS:
        if c.near_duplicate:
            return "near_duplicate"
        return "low_confidence" if c.confidence < EVIDENCE_CONFIDENCE else "low_score"
    if c.kind in RULE_KINDS:
        if c.confidence < RULE_CONFIDENCE:
            return "low_confidence"
        if now_ms - c.created_ms < ticks * tick_seconds * 1000:
            return "too_young"
        return "unproven"
    return "kind"


def sync_gate(local_replica: str, promoted: Collection[str], held: Collection[str] = ()
              ) -> Callable[[EntryBody], bool]:
    """The gate for sending ops: may cross, not held, and (a sibling's, crosses at once, or promoted)."""

    def gate(body: EntryBody) -> bool:
        if not may_cross(body) or body.id in held:
            return False
        return body.author != local_replica or body.kind in CROSS_AT_ONCE or body.id in promoted

    return gate
