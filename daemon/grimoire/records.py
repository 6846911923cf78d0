"""What the store hands out and takes in: `Entry` (a stored entry) and `NewEntry` (a local write)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from crdt import EntryBody, EntryTraits, Timestamp
from crdt.body import check_unit

from .belief import Belief

__all__ = ["Entry", "EntryDoc", "MetadataDoc", "NewEntry", "OutcomesDoc", "Provenance", "Status", "iso_ms"]

Status = str  # "active" | "retracted"
Provenance = str  # Origin values: where *this* golem got the entry


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEntry(EntryTraits):
    """A local write before it has an author and a timestamp; validated when it gets them.

    Its fields are `crdt.EntryTraits` (declared there once) and the writer's `confidence`.
    `bloodstain` marks a death reflection (only `clade testament` writes one); `origin` is
    INHERITED when an heir re-authors a validated inherited entry."""

    confidence: float = 0.7

    def body(self, author: str, created: Timestamp) -> EntryBody:
        """The immutable body; raises `crdt.InvalidValue` naming the first bad field."""
        check_unit("confidence", self.confidence)
        return EntryBody(author=author, created=created, **self.traits())


class MetadataDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[str]
    chains: list[int]
    protocols: list[str]
    strategy_id: str | None
    tags: list[str]


class OutcomesDoc(BaseModel):
    """This golem's outcome tallies for an entry (local: they never cross)."""

    model_config = ConfigDict(extra="forbid")

    positive: int
    negative: int
    neutral: int


class EvidenceTallyDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    positive: float
    negative: float


class CladeEvidenceDoc(EvidenceTallyDoc):
    siblings: int = Field(description="siblings whose evidence counted here (weight > 0)")


class BeliefDoc(BaseModel):
    """The pooled belief (daemon/grimoire/belief.py): the writer's stated confidence as prior,
    this golem's outcomes at full weight, siblings' evidence weighed by their trust here."""

    model_config = ConfigDict(extra="forbid")

    belief: float
    prior: float = Field(description="the writer's stated confidence, clipped to 0.05..0.90")
    refuted: bool = Field(description="belief < 0.5 on ≥ 2 weighted negative outcomes: withheld from digests")
    own: EvidenceTallyDoc
    clade: CladeEvidenceDoc


class EntryDoc(BaseModel):
    """A stored entry as JSON: the CLI's `--json` and the control API's shape (`Entry.to_json`)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    author: str
    kind: str
    category: str | None
    content: str
    metadata: MetadataDoc
    confidence: float
    importance: float
    quality: float
    sensitivity: str
    pad: list[float] | None
    origin: str
    generation: int
    bloodstain: bool
    created_hlc: str
    created_at: str
    occurred_at: str | None = Field(None, description="event time: when what it says happened (ISO 8601 UTC); "
                                                      "null: unknown (its time is created_at)")
    status: str
    superseded_by: str | None
    provenance: str
    local_confidence: float
    access_count: int
    last_accessed_at: str | None
    archived: bool
    confirms: int
    contradicts: int
    cite_weight: float
    # Defaults: a daemon from before outcomes (schema v13) answers without these fields, and the
    # TUI or an MCP client of a newer clade still reads its entries.
    outcomes: OutcomesDoc = Field(default_factory=lambda: OutcomesDoc(positive=0, negative=0, neutral=0))
    promoted_reason: str | None = None
    crossing_hold: str | None = None
    belief: BeliefDoc | None = Field(None, description="the pooled belief: in GET /v1/entries/{id}, an outcome's "
                                                         "answer, search hits; null in a write's answer")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """A stored entry: its immutable body, its author slot and this golem's local view."""

    body: EntryBody
    confidence: float
    status: Status
    superseded_by: str | None
    provenance: Provenance
    local_confidence: float
    access_count: int
    last_accessed_ms: int | None
    archived: bool
    stored_ms: int
    confirms: int = 0
    contradicts: int = 0
    cite_weight: float = 1.0
    outcomes_positive: int = 0
    outcomes_negative: int = 0
    outcomes_neutral: int = 0
    promoted_reason: str | None = None  # why the curator let it cross (own entries; None: not promoted)
    crossing_hold: str | None = None  # why the sync gate holds it back (None: not held)
    belief: Belief | None = None  # the pooled belief, where the reader computed it (Grimoire.beliefs)

    @property
    def id(self) -> str:
        return self.body.id

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (stable keys; the CLI's and the API's shape: `EntryDoc`)."""
        return self.doc().model_dump()

    def doc(self) -> EntryDoc:
        """This entry as its JSON document model."""
        b = self.body
        return EntryDoc.model_validate({
            "id": b.id,
            "author": b.author,
            "kind": b.kind.value,
            "category": None if b.category is None else b.category.value,
            "content": b.content,
            "metadata": {
                "tokens": list(b.tokens),
                "chains": list(b.chains),
                "protocols": list(b.protocols),
                "strategy_id": b.strategy_id,
                "tags": list(b.tags),
            },
            "confidence": self.confidence,
            "importance": b.importance,
            "quality": b.quality,
            "sensitivity": b.sensitivity.value,
            "pad": None if b.pad is None else list(b.pad.as_tuple()),
            "origin": b.origin.value,
            "generation": b.generation,
            "bloodstain": b.bloodstain,
            "created_hlc": str(b.created),
            "created_at": iso_ms(b.created.ms),
            "occurred_at": None if b.occurred_ms is None else iso_ms(b.occurred_ms),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "provenance": self.provenance,
            "local_confidence": self.local_confidence,
            "access_count": self.access_count,
            "last_accessed_at": None if self.last_accessed_ms is None else iso_ms(self.last_accessed_ms),
            "archived": self.archived,
            "confirms": self.confirms,
            "contradicts": self.contradicts,
            "cite_weight": self.cite_weight,
            "outcomes": {"positive": self.outcomes_positive, "negative": self.outcomes_negative,
                         "neutral": self.outcomes_neutral},
            "promoted_reason": self.promoted_reason,
            "crossing_hold": self.crossing_hold,
            "belief": None if self.belief is None else self.belief.to_json(),
        })


def iso_ms(ms: int) -> str:
    """Wall-clock milliseconds as ISO 8601 UTC with a Z (the API's timestamps)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps_list(values: tuple[object, ...]) -> str:
    """Compact JSON for the list columns (also what FTS5 tokenises)."""
    if not values:
        return "[]"  # most entries: json.dumps costs ~7 us a call, four calls per entry joined
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
