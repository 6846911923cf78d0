"""Request bodies of the control API (pydantic: validated on construction, strict sizes).

`MemoryIn` and `SearchIn` follow the gateway memory spec's shapes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from crdt import Kind
from crdt.body import Category

__all__ = [
    "BackupIn", "ConnectIn", "DigestIn", "DisconnectIn", "EpisodeIn", "FeedbackIn", "MemoryIn", "MetadataIn", "ProbeIn",
    "SearchIn", "SyncIn",
]

GATEWAY_TYPES = ("fact", "preference", "episode", "strategy_outcome", "constraint")
MemoryType = Literal[
    "fact", "preference", "episode", "strategy_outcome", "constraint", "insight", "heuristic", "warning",
    "regime_shift", "anti_knowledge", "causal_link", "episode_summary", "death_reflection",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetadataIn(_Strict):
    tokens: list[str] = Field(default_factory=list, max_length=16)
    chains: list[int] = Field(default_factory=list, max_length=16)
    protocols: list[str] = Field(default_factory=list, max_length=16)
    strategy_id: str | None = Field(None, max_length=128)
    tags: list[str] = Field(default_factory=list, max_length=16)


class MemoryIn(_Strict):
    # Emptiness and the 4 KiB (UTF-8 bytes) limit are checked by the entry model itself,
    # so the API and the CLI refuse bad content with the same message.
    content: str = Field(max_length=8192)
    memory_type: MemoryType = "insight"
    importance: float = Field(0.5, ge=0, le=1, allow_inf_nan=False)
    confidence: float = Field(0.7, ge=0, le=1, allow_inf_nan=False)
    metadata: MetadataIn = Field(default_factory=MetadataIn)
    sensitivity: Literal["public", "private", "sensitive"] = "public"
    # Grimoire fields beyond the gateway shape (optional):
    category: Category | None = None
    quality: float = Field(0.5, ge=0, le=1, allow_inf_nan=False)
    pad: tuple[float, float, float] | None = None


class SearchIn(_Strict):
    query: str = Field(min_length=1, max_length=4096)
    top_k: int = Field(10, ge=1, le=100)
    type_filter: list[Kind] | Kind | None = None
    min_importance: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)


class DigestIn(_Strict):
    query: str = Field(min_length=1, max_length=4096)
    budget_tokens: int = Field(3000, ge=1, le=200_000)
    k: int = Field(10, ge=1, le=100)
    format: Literal["xml", "search-results", "json"] = "xml"
    include_sensitive: bool = False


class FeedbackIn(_Strict):
    cited: list[str] = Field(default_factory=list, max_length=256)
    injected: list[str] = Field(default_factory=list, max_length=256)
    # The model's response text: used only when `cited` is empty (backends without citations).
    response: str | None = Field(None, max_length=65_536)


class EpisodeIn(_Strict):
    summary: str = Field(min_length=1, max_length=4096)
    protocol: str | None = Field(None, max_length=48)
    block_number: int | None = Field(None, ge=0, lt=2**63)
    category: str | None = None
    payload: dict[str, object] | list[object] | None = None
    curiosity: float = Field(0.0, ge=0, le=1, allow_inf_nan=False)
    importance: float = Field(0.5, ge=0, le=1, allow_inf_nan=False)


class BackupIn(_Strict):
    include_identity: bool = False


class ConnectIn(_Strict):
    addr: str = Field(max_length=512, description="/ip4/…/tcp/…/p2p/PEERID")


class DisconnectIn(_Strict):
    peer_id: str = Field(max_length=128)
    hold_s: float = Field(600.0, ge=0, le=30 * 86_400, description="refuse the peer for this long")


class SyncIn(_Strict):
    peer_id: str | None = Field(None, max_length=128, description="one sibling (default: every connected one)")


class ProbeIn(_Strict):
    id: str = Field(min_length=1, max_length=64)
