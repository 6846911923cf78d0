"""Request bodies of the control API (pydantic: validated on construction, strict types).

Every body that more than its route validates lives here (the agent-memory bodies and their
limits included: `clade agent` and the MCP server check with them too); `DeathIn` and
`ToolCallIn` live beside their one route.

Every constraint the handlers enforce is in these models, so `/openapi.json` states it: strict
types (no `0` for a bool, no `false` for a number), patterns for non-blank text. `MemoryIn`
is the one entry field model (`daemon.grimoire.fields.EntryFields`) widened to take
`memory_type: episode`; `MemoryIn` and `SearchIn` follow the gateway memory spec's shapes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from crdt import Kind
from crdt.body import MAX_LABELS, Category, Pad
from daemon.grimoire.fields import (
    NON_BLANK,
    STRICT,
    CategoryField,
    Content,
    Count,
    EntryFields,
    EventTime,
    Int,
    KindField,
    Label,
    MetadataFields,
    Signed,
    Unit,
    event_ms,
)
from daemon.grimoire.mortality import PHASES
from daemon.grimoire.posterior import MAX_METRIC_CHARS, MAX_NOTE_BYTES
from daemon.grimoire.recall import RecallQuery
from daemon.grimoire.short_ids import ID_OR_PREFIX_PATTERN

__all__ = [
    "MAX_FLUSH_ITEMS", "MAX_LESSONS", "MAX_WORKING_MEMORY_BYTES", "SESSION_PATTERN", "BackupIn", "ConnectIn",
    "DigestIn", "DisconnectIn", "DistrustIn", "EndorseIn", "EpisodeIn", "EpisodeSearchIn", "FeedbackIn", "FlushFact",
    "FlushIn", "FlushMetadata", "InheritIn", "LessonsIn", "MemoryIn", "MetadataIn", "OutcomeIn", "PadIn", "Phase",
    "ProbeIn",
    "RetractIn", "SearchIn", "StyxRetryIn", "SyncIn", "VitalityIn", "WorkingMemoryIn",
]

GATEWAY_TYPES = ("fact", "preference", "episode", "strategy_outcome", "constraint")
MetadataIn = MetadataFields
PEER_ID_PATTERN = r"^[A-Za-z0-9]{1,128}$"
ENTRY_ID_PATTERN = r"^[0-9a-f]{32}$"
# An id as the API takes it (daemon/grimoire/short_ids.py): the full id or a unique prefix.
ENTRY_ID_OR_PREFIX_PATTERN = ID_OR_PREFIX_PATTERN
# The schema states it for feedback's ids; the store checks them (400 too short, 404 unknown).
_IdOrPrefix = Annotated[str, Field(json_schema_extra={"pattern": ID_OR_PREFIX_PATTERN})]
# A sibling's address: /ip4|ip6|dns…/HOST/tcp/PORT/p2p/PEERID (parsed in full by the handler).
PEER_ADDR_PATTERN = r"^/(ip4|ip6|dns|dns4|dns6)/[^/\x00-\x20\x7f]+/tcp/[0-9]{1,5}/p2p/[1-9A-HJ-NP-Za-km-z]{1,128}$"


class _Strict(BaseModel):
    # The Rust regex engine: its `$` is the schema's (end of text); Python's would also accept
    # a trailing newline, a value the OpenAPI document refuses.
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="rust-regex")


class MemoryIn(EntryFields):
    """POST /v1/memory: an entry's fields; `memory_type: episode` appends a raw episode instead."""

    model_config = STRICT
    # One enum in the schema (the kinds, then episode), not an anyOf: tool-use consumers read it.
    memory_type: Annotated[KindField | Literal["episode"], WithJsonSchema(
        {"type": "string", "enum": [*(k.value for k in Kind), "episode"]})] = Kind.INSIGHT  # type: ignore[assignment]

    def entry_fields(self) -> EntryFields:
        """As the one entry model (raises `UsageError` for an episode: not a knowledge entry)."""
        from daemon.errors import UsageError

        if self.memory_type == "episode":
            raise UsageError("memory_type episode is not a knowledge entry")
        return EntryFields.model_validate({**self.model_dump(), "memory_type": self.memory_type})


class PadIn(_Strict):
    """Pleasure, arousal, dominance, each -1..1. On a query: the golem's current affect (entries
    written in a similar mood rank higher: the PAD factor of the rank; absent, that factor is
    neutral). On an episode: the affect when it was observed."""

    pleasure: Signed
    arousal: Signed
    dominance: Signed

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.pleasure, self.arousal, self.dominance)

    def pad(self) -> Pad:
        return Pad(pleasure=self.pleasure, arousal=self.arousal, dominance=self.dominance)


class _TimeBounds(_Strict):
    """`since` / `until` (inclusive) on each entry's time: its event time (`occurred_at`) where
    one is given, else when it was written. ISO 8601; no offset means UTC. `since` after `until`
    is an empty window: nothing matches (a JSON schema cannot compare two fields, so it is not
    refused: what the schema admits, the route accepts)."""

    since: EventTime | None = Field(None, description="only entries whose time (event time, else written time) "
                                                      "is at or after this (ISO 8601; no offset means UTC)")
    until: EventTime | None = Field(None, description="only entries whose time (event time, else written time) "
                                                      "is at or before this (ISO 8601; no offset means UTC)")

    def bounds_ms(self) -> tuple[int | None, int | None]:
        """(since, until) as Unix ms (None: unbounded)."""
        return event_ms(self.since), event_ms(self.until)


class SearchIn(_TimeBounds):
    query: str = Field(min_length=1, max_length=4096, pattern=NON_BLANK,
                       description="non-blank; a query without letters or digits is matched by meaning alone")
    top_k: Int = Field(10, ge=1, le=100)
    type_filter: list[KindField] | KindField | None = None
    category_filter: list[CategoryField] | CategoryField | None = Field(
        None, description="only entries of this knowledge category, or of these categories (applied before the "
                          "candidates are cut, like type_filter)")
    min_importance: Unit | None = None
    min_confidence: Unit | None = Field(None, description="only entries whose local confidence is at least this")
    include_sensitive: bool = Field(False, description="also sensitive entries (never sent to Styx)")
    keyword_only: bool = Field(False, description="rank by keywords alone (FTS5 BM25), without the model; a query "
                                                   "without a searchable word is then refused")
    pad: PadIn | None = None
    include_unverified: bool = Field(False, description="also siblings' unverified entries that digests withhold "
                                                        "(quarantined: readable, marked unverified)")

    def to_query(self) -> RecallQuery:
        """The one recall query this search is (grimoire/recall.py)."""
        kinds = self.type_filter if isinstance(self.type_filter, list) else (
            [self.type_filter] if self.type_filter else [])
        categories = self.category_filter if isinstance(self.category_filter, list) else (
            [self.category_filter] if self.category_filter else [])
        since_ms, until_ms = self.bounds_ms()
        return RecallQuery(text=self.query, k=self.top_k, kinds=tuple(Kind(k) for k in kinds),
                           categories=tuple(Category(c) for c in categories), min_importance=self.min_importance,
                           min_confidence=self.min_confidence, include_sensitive=self.include_sensitive,
                           keyword_only=self.keyword_only, pad=None if self.pad is None else self.pad.as_tuple(),
                           include_unverified=self.include_unverified, since_ms=since_ms, until_ms=until_ms)


class EpisodeSearchIn(_TimeBounds):
    """POST /v1/episodes/search: memory search's query shape for this golem's own episodes
    (soma: never a sibling's, never Styx). `since`/`until` bound when each was observed."""

    query: str = Field(min_length=1, max_length=4096, pattern=NON_BLANK, description="non-blank; matched by meaning")
    top_k: Int = Field(10, ge=1, le=100)
    min_importance: Unit | None = None
    pad: PadIn | None = None


class DigestIn(_TimeBounds):
    query: str = Field(min_length=1, max_length=4096, pattern=NON_BLANK)
    budget_tokens: Int = Field(3000, ge=1, le=200_000)
    k: Int = Field(10, ge=1, le=100)
    format: Literal["xml", "search-results", "json"] = "xml"
    include_sensitive: bool = False
    pad: PadIn | None = None

    def to_query(self) -> RecallQuery:
        """The digest's query (its recall is `digest.digest_query`'s, wider than `k`)."""
        since_ms, until_ms = self.bounds_ms()
        return RecallQuery(text=self.query, k=self.k, include_sensitive=self.include_sensitive,
                           pad=None if self.pad is None else self.pad.as_tuple(), since_ms=since_ms, until_ms=until_ms)


class FeedbackIn(_Strict):
    """At least one of `cited`, `injected` (non-empty)."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="rust-regex", json_schema_extra={
        "anyOf": [{"required": ["cited"], "properties": {"cited": {"minItems": 1}}},
                  {"required": ["injected"], "properties": {"injected": {"minItems": 1}}}]})

    cited: list[_IdOrPrefix] = Field(default_factory=list, max_length=256,
                             description="entries the response cited: ids or unique prefixes (4+ hex characters)")
    injected: list[_IdOrPrefix] = Field(default_factory=list, max_length=256,
                                description="entries the prompt carried: ids or unique prefixes (4+ hex characters)")
    # The model's response text: used only when `cited` is empty (backends without citations).
    response: str | None = Field(None, max_length=65_536, pattern=NON_BLANK)

    @model_validator(mode="after")
    def _some_ids(self) -> FeedbackIn:
        if not self.cited and not self.injected:
            raise ValueError("give cited and/or injected entry ids")
        return self


class EpisodeIn(_Strict):
    summary: Content
    protocol: Label | None = None
    block_number: Count | None = None
    category: Annotated[Category, Field(strict=False)] | None = None
    payload: dict[str, Any] | list[Any] | None = None
    curiosity: Unit = 0.0
    importance: Unit = 0.5
    verified: bool = Field(False, description="quality-verified: consolidation replays verified episodes only")
    pad: PadIn | None = None
    occurred_at: EventTime | None = Field(None, description="when it was observed (ISO 8601; no offset means UTC); "
                                                            "default: now")


class BackupIn(_Strict):
    include_identity: bool = False


class ConnectIn(_Strict):
    addr: str = Field(max_length=512, pattern=PEER_ADDR_PATTERN, description="/ip4/…/tcp/…/p2p/PEERID")


class DisconnectIn(_Strict):
    peer_id: str = Field(pattern=PEER_ID_PATTERN)
    hold_s: float = Field(600.0, ge=0, le=30 * 86_400, allow_inf_nan=False,
                          description="refuse the peer for this long")


class SyncIn(_Strict):
    peer_id: str | None = Field(None, pattern=PEER_ID_PATTERN, description="one sibling (default: every connected one)")


class ProbeIn(_Strict):
    id: str = Field(min_length=1, max_length=64)


class StyxRetryIn(_Strict):
    idempotency_key: str | None = Field(None, min_length=3, max_length=200, pattern=r"^[^:]+:[0-9A-Za-z-]+$")
    all: bool = False


class InheritIn(_Strict):
    from_styx: str = Field(pattern=PEER_ID_PATTERN,
                           description="the predecessor whose latest testament archive Styx's vault holds")


class RetractIn(_Strict):
    superseded_by: str | None = Field(None, pattern=ENTRY_ID_OR_PREFIX_PATTERN, description=(
        "the entry that replaces it: its id or a unique prefix of at least 4 hex characters"))


class EndorseIn(_Strict):
    confirm: bool = Field(True, description="true confirms, false contradicts")


Phase = Literal["thriving", "stable", "conservation", "declining", "terminal"]
assert PHASES == ("thriving", "stable", "conservation", "declining", "terminal")


class OutcomeIn(BaseModel):
    """POST /v1/entries/{id}/outcome."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="rust-regex")

    effect: Literal["positive", "negative", "neutral"] = Field(
        description="what acting on the entry led to, by the metric")
    metric: Annotated[Label, Field(description=f"what was measured, e.g. pnl_usd or slippage_bps "
                                               f"(1..{MAX_METRIC_CHARS} characters)")] = "outcome"
    value: Annotated[float | None, Field(allow_inf_nan=False, description="the measured value (finite)")] = None
    episode_id: Annotated[str | None, Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$",
                                            description="the episode it was observed in")] = None
    note: Annotated[str | None, Field(max_length=MAX_NOTE_BYTES, pattern=r"^[^\x00]*$",
                                      description=f"free text, at most {MAX_NOTE_BYTES} bytes of UTF-8")] = None

    @field_validator("note", "episode_id")
    @classmethod
    def _utf8_text(cls, text: str | None) -> str | None:
        if text is None:
            return None
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("is not valid UTF-8 (a lone surrogate)") from None
        if size > MAX_NOTE_BYTES:
            raise ValueError(f"must be at most {MAX_NOTE_BYTES} bytes of UTF-8, got {size}")
        return text


class VitalityIn(BaseModel):
    """PUT /v1/vitality: the vitality state (the phase is derived from it), a reported phase (an
    override), or both; a phase or the two clocks must be given (else 422). The schema's `anyOf`
    states the same rule as `_phase_or_clocks`."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"anyOf": [
        {"required": ["phase"], "properties": {"phase": {"not": {"type": "null"}}, "economic": {"type": "null"},
                                               "epistemic": {"type": "null"}, "age_factor": {"type": "null"}}},
        {"required": ["economic", "epistemic"], "properties": {"economic": {"type": "number"},
                                                               "epistemic": {"type": "number"}}}]})

    phase: Phase | None = Field(None, description="a reported phase, overriding the one derived from the clocks")
    hayflick_ratio: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False)] = None
    economic: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False,
                                            description="balance left over initial funding, 0..1")] = None
    epistemic: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False,
                                             description="predictive fitness, 0..1")] = None
    age_factor: Annotated[float | None, Field(
        ge=0, le=100, allow_inf_nan=False, description="ticks lived over the reference lifespan (0 at birth)")] = None

    @model_validator(mode="after")
    def _phase_or_clocks(self) -> VitalityIn:
        if self.phase is None and self.economic is None and self.epistemic is None:
            raise ValueError("give a phase, or the vitality state (economic and epistemic), or both")
        if (self.economic is None) != (self.epistemic is None) or (self.age_factor is not None
                                                                   and self.economic is None):
            raise ValueError("economic and epistemic go together (age_factor optional, with them)")
        return self


# -- agent memory (daemon/agent/memory.py: the routes of daemon/api/agent.py and `clade agent`) --

MAX_WORKING_MEMORY_BYTES = 64 * 1024
MAX_FLUSH_ITEMS = 256
MAX_LESSONS = 4096
SESSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"


class WorkingMemoryIn(_Strict):
    # The size (64 KiB of UTF-8: 413 beyond), NUL and control characters (400) are checked by
    # `check_working_text`, so the API and the CLI's direct path refuse with the same message;
    # the schema states the same rules (in characters: it cannot count bytes).
    # (No constraint pydantic checks itself: a lone surrogate must reach check_working_text,
    # which names it with a 400; over 64 KiB is a 413.)
    content: str = Field(strict=False, json_schema_extra={
        "maxLength": MAX_WORKING_MEMORY_BYTES, "pattern": r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"},
        description="text (tab, newline, carriage return allowed), at most 64 KiB of UTF-8 (413 beyond)")


class FlushMetadata(MetadataFields):
    """A flushed fact's metadata: one tag fewer, for the `session:<name>` tag the flush adds."""

    tags: Annotated[list[Label], Field(max_length=MAX_LABELS - 1)] = []  # noqa: RUF012 - pydantic copies


class FlushFact(EntryFields):
    """A fact to flush: an entry's fields (see `EntryFields`), with room for the session tag."""

    metadata: FlushMetadata = Field(default_factory=FlushMetadata)


class FlushIn(_Strict):
    session: str = Field(max_length=256, description="1..40 of A-Z a-z 0-9 . _ -, checked by check_session (400)",
                         json_schema_extra={"pattern": SESSION_PATTERN})
    facts: list[FlushFact] = Field(min_length=1, max_length=MAX_FLUSH_ITEMS)


class LessonsIn(_Strict):
    lessons: list[EntryFields] = Field(min_length=1, max_length=MAX_LESSONS)


class DistrustIn(_Strict):
    peer_id: str = Field(pattern=PEER_ID_PATTERN, description="the sibling (author) to distrust or trust again")
