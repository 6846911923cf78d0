"""Rows to records: the entries columns a stored `Entry` and a ranking candidate are read from.

`entry_from_row` rebuilds the body from its columns and checks it still hashes to its id (a
corrupt row is a `StoreError`, never a wrong entry); `rank_fields` reads what ranking needs
without building a body. Pure: both take a `sqlite3.Row` the store already fetched.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crdt import EntryBody, Kind, Pad, Timestamp
from crdt.body import Category, Origin, Sensitivity
from daemon.errors import StoreError

from .records import Entry

__all__ = ["ENTRY_COLUMNS", "ENTRY_COLUMN_NAMES", "RANK_COLUMNS", "RANK_COLUMN_COUNT", "RankFields", "entry_from_row",
           "rank_fields"]

# Every column an `Entry` is built from, by name (`entry_from_row` reads a sqlite3.Row).
ENTRY_COLUMN_NAMES = (
    "id", "author", "kind", "category", "content", "tokens", "chains", "protocols", "tags", "strategy_id",
    "importance", "quality", "sensitivity", "pad_pleasure", "pad_arousal", "pad_dominance", "origin",
    "generation", "bloodstain", "created_hlc", "confidence", "status", "superseded_by", "provenance",
    "local_confidence", "access_count", "last_accessed_ms", "archived", "stored_ms", "confirms", "contradicts",
    "cite_weight", "outcomes_positive", "outcomes_negative", "outcomes_neutral", "promoted_reason", "crossing_hold",
    "occurred_ms",
)
ENTRY_COLUMNS = ", ".join(ENTRY_COLUMN_NAMES)


@dataclass(frozen=True, slots=True)
class RankFields:
    """What ranking reads of an entry, without building (and re-hashing) its body: retrieval
    ranks ~130 candidates per query and reads the full, verified entry only for its results."""

    id: str
    kind: Kind
    sensitivity: Sensitivity
    archived: bool
    status: str
    local_confidence: float
    importance: float
    access_count: int
    created_ms: int
    pad: tuple[float, float, float] | None
    provenance: str
    origin: str
    generation: int
    bloodstain: bool
    base_confidence: float  # local confidence before decay (curator/decay.py)
    last_used_ms: int | None = None  # the last citation or feedback (NULL: never used)
    validated_ms: int | None = None  # the forgetting curve's anchor, set by evidence (NULL: none since stored)
    category: Category | None = None
    occurred_ms: int | None = None  # event time (NULL: unknown)

    @property
    def event_ms(self) -> int:
        """The entry's time: its event time when one is given, else when it was written."""
        return self.created_ms if self.occurred_ms is None else self.occurred_ms


RANK_COLUMNS = ("id, kind, sensitivity, archived, status, local_confidence, importance, access_count, created_hlc, "
                 "pad_pleasure, pad_arousal, pad_dominance, provenance, origin, generation, bloodstain, "
                 "coalesce(decay_base, local_confidence) AS base_confidence, last_accessed_ms, decay_anchor_ms, "
                 "category, occurred_ms")
RANK_COLUMN_COUNT = 21  # the columns `rank_fields` reads; a query may select more after them
# Kind(v) and Sensitivity(v) go through Enum.__call__ (~1 µs each); ranking converts ~130 rows a query.
_KINDS = {k.value: k for k in Kind}
_SENSITIVITIES = {s.value: s for s in Sensitivity}
_CATEGORIES = {c.value: c for c in Category}


def rank_fields(row: Sequence[Any]) -> RankFields:
    """A row of `RANK_COLUMNS` (a tuple or a `sqlite3.Row`, read by position) as `RankFields`."""
    (entry_id, kind, sensitivity, archived, status, local_confidence, importance, access_count, created_hlc,
     pp, pa, pd, provenance, origin, generation, bloodstain, base_confidence, last_used_ms,
     validated_ms, category, occurred_ms) = row[:RANK_COLUMN_COUNT]
    return RankFields(
        id=entry_id, kind=_KINDS[kind] if kind in _KINDS else Kind(kind),
        sensitivity=_SENSITIVITIES[sensitivity] if sensitivity in _SENSITIVITIES else Sensitivity(sensitivity),
        archived=bool(archived), status=status, local_confidence=local_confidence, importance=importance,
        access_count=access_count, created_ms=Timestamp.unpack(created_hlc).ms,
        pad=None if pp is None else (pp, pa, pd), provenance=provenance, origin=origin, generation=generation,
        bloodstain=bool(bloodstain), base_confidence=base_confidence, last_used_ms=last_used_ms,
        validated_ms=validated_ms, category=None if category is None else _CATEGORIES.get(category),
        occurred_ms=occurred_ms)


def entry_from_row(row: sqlite3.Row) -> Entry:
    """An `Entry` from a row of `ENTRY_COLUMNS`, read by column name; verifies the body's hash."""
    pp = row["pad_pleasure"]
    body = EntryBody(
        author=row["author"], kind=Kind(row["kind"]), content=row["content"],
        created=Timestamp.unpack(row["created_hlc"]),
        category=None if row["category"] is None else Category(row["category"]),
        tokens=tuple(json.loads(row["tokens"])), chains=tuple(json.loads(row["chains"])),
        protocols=tuple(json.loads(row["protocols"])), tags=tuple(json.loads(row["tags"])),
        strategy_id=row["strategy_id"], importance=row["importance"], quality=row["quality"],
        sensitivity=Sensitivity(row["sensitivity"]),
        pad=None if pp is None else Pad(pleasure=pp, arousal=row["pad_arousal"], dominance=row["pad_dominance"]),
        origin=Origin(row["origin"]), generation=row["generation"], bloodstain=bool(row["bloodstain"]),
        occurred_ms=row["occurred_ms"],
    )
    if body.id != row["id"]:
        raise StoreError(f"entry {row['id']}: stored body does not hash to its id (corrupt row)")
    return Entry(
        body=body, confidence=row["confidence"], status=row["status"], superseded_by=row["superseded_by"],
        provenance=row["provenance"], local_confidence=row["local_confidence"], access_count=row["access_count"],
        last_accessed_ms=row["last_accessed_ms"], archived=bool(row["archived"]), stored_ms=row["stored_ms"],
        confirms=row["confirms"], contradicts=row["contradicts"], cite_weight=row["cite_weight"],
        outcomes_positive=row["outcomes_positive"], outcomes_negative=row["outcomes_negative"],
        outcomes_neutral=row["outcomes_neutral"], promoted_reason=row["promoted_reason"],
        crossing_hold=row["crossing_hold"],
    )
