"""Request bodies of the control API (pydantic: validated on construction, strict types).

Every constraint the handlers enforce is in these models, so `/openapi.json` states it: strict
types (no `0` for a bool, no `false` for a number), patterns for non-blank text. `MemoryIn`
is the one entry field model (`daemon.grimoire.fields.EntryFields`) widened to take
`memory_type: episode`; `MemoryIn` and `SearchIn` follow the gateway memory spec's shapes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from crdt import Kind
from crdt.body import Category, Pad
from daemon.grimoire.fields import (
    NON_BLANK,
    STRICT,
    Content,
    Count,
    EntryFields,
    Int,
    KindField,
    Label,
    MetadataFields,
    Signed,
    Unit,
)

__all__ = [
    "BackupIn", "ConnectIn", "DigestIn", "DisconnectIn", "EndorseIn", "EpisodeIn", "FeedbackIn", "MemoryIn",
    "MetadataIn", "PadIn", "ProbeIn", "RetractIn", "SearchIn", "StyxRetryIn", "SyncIn",
]

GATEWAY_TYPES = ("fact", "preference", "episode", "strategy_outcome", "constraint")
MetadataIn = MetadataFields
PEER_ID_PATTERN = r"^[A-Za-z0-9]{1,128}$"
ENTRY_ID_PATTERN = r"^[0-9a-f]{32}$"
# A sibling's address: /ip4|ip6|dns…/HOST/tcp/PORT/p2p/PEERID (parsed in full by the handler).
PEER_ADDR_PATTERN = r"^/(ip4|ip6|dns|dns4|dns6)/[^/\x00-\x20\x7f]+/tcp/[0-9]{1,5}/p2p/[1-9A-HJ-NP-Za-km-z]{1,128}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


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


class SearchIn(_Strict):
    query: str = Field(min_length=1, max_length=4096, pattern=NON_BLANK,
                       description="non-blank; a query without letters or digits is matched by meaning alone")
    top_k: Int = Field(10, ge=1, le=100)
    type_filter: list[KindField] | KindField | None = None
    min_importance: Unit | None = None
    pad: PadIn | None = None
    include_unverified: bool = Field(False, description="also siblings' unverified entries that digests withhold "
                                                        "(quarantined: readable, marked unverified)")


class DigestIn(_Strict):
    query: str = Field(min_length=1, max_length=4096, pattern=NON_BLANK)
    budget_tokens: Int = Field(3000, ge=1, le=200_000)
    k: Int = Field(10, ge=1, le=100)
    format: Literal["xml", "search-results", "json"] = "xml"
    include_sensitive: bool = False
    pad: PadIn | None = None


class FeedbackIn(_Strict):
    """At least one of `cited`, `injected` (non-empty)."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re", json_schema_extra={
        "anyOf": [{"required": ["cited"], "properties": {"cited": {"minItems": 1}}},
                  {"required": ["injected"], "properties": {"injected": {"minItems": 1}}}]})

    cited: list[str] = Field(default_factory=list, max_length=256)
    injected: list[str] = Field(default_factory=list, max_length=256)
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
    idempotency_key: str | None = Field(None, min_length=3, max_length=200, pattern=r"^[^:]+:[0-9]+$")
    all: bool = False


class RetractIn(_Strict):
    superseded_by: str | None = Field(None, pattern=ENTRY_ID_PATTERN, description="the entry that replaces it")


class EndorseIn(_Strict):
    confirm: bool = Field(True, description="true confirms, false contradicts")
