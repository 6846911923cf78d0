"""The promotion gate (DESIGN.md "What crosses"): which of this golem's entries its siblings get.

Pure: decisions over entry fields and the time. The static part (`crdt.may_cross`: public,
of a kind that may ever cross) is necessary; on top of it

- warning, anti_knowledge, regime_shift, death_reflection cross at once;
- insight, fact, causal_link cross once confidence >= 0.6 and quality > 0.55;
- heuristic, constraint once confidence >= 0.7, active >= 10 curator ticks, confirms > contradicts;

the latter two at the curator cycle that finds them ready ("promotion"). Siblings'
entries are relayed as they came: their author promoted them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from crdt import EntryBody, Kind, may_cross

from .records import Entry

__all__ = ["CROSS_AT_ONCE", "ready_to_promote", "sync_gate"]

CROSS_AT_ONCE = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION})
_EVIDENCE_KINDS = frozenset({Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK})
_RULE_KINDS = frozenset({Kind.HEURISTIC, Kind.CONSTRAINT})
PROMOTABLE = _EVIDENCE_KINDS | _RULE_KINDS


def ready_to_promote(entry: Entry, *, now_ms: int, tick_seconds: float, ticks: int = 10) -> bool:
    """True if an own, active, not yet promoted entry now passes its kind's threshold."""
    body = entry.body
    if entry.status != "active" or entry.archived or not may_cross(body) or body.kind not in PROMOTABLE:
        return False
    if body.kind in _EVIDENCE_KINDS:
        return entry.confidence >= 0.6 and body.quality > 0.55
    active_ms = now_ms - body.created.ms
    return (entry.confidence >= 0.7 and active_ms >= ticks * tick_seconds * 1000
            and entry.confirms > entry.contradicts)


def sync_gate(local_replica: str, promoted: Collection[str]) -> Callable[[EntryBody], bool]:
    """The gate for sending ops: may cross, and (a sibling's, crosses at once, or promoted)."""

    def gate(body: EntryBody) -> bool:
        if not may_cross(body):
            return False
        return body.author != local_replica or body.kind in CROSS_AT_ONCE or body.id in promoted

    return gate
