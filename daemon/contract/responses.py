"""Response bodies of the control API, and the statuses each route documents.

Handlers return plain dicts (the agent tools call them directly); FastAPI checks each against
the route's `response_model`, so `/openapi.json` states every shape. Every error is `ErrorOut`
(`{error, detail}`) with a documented status:

- 400 `bad_request`: a well-formed value the daemon refuses (e.g. a tool input it cannot use);
- 401 `unauthorized`: the TCP listener without the bearer token (never on the unix socket);
- 404 `not_found`: no such entry, peer, tool or path;
- 409 `conflict`: the daemon's state does not allow it now (not in a clade, sync off, not yours);
- 413 `too_large`: a request body over 1 MiB (or working memory over 64 KiB);
- 422 `invalid_request`: the body or a parameter breaks the schema (`detail` is `[{loc, msg}]`);
- 503 `unavailable`: the embedding model cannot be loaded (feedback that matches a response's
  sentences, an episode's vector). Search and the digest never answer 503 for the model: they
  answer from keywords, marked `"degraded": "keyword_only"`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from daemon.grimoire.records import EntryDoc

__all__ = [
    "AuthorDoc",
    "BackupFileOut",
    "BackupOut",
    "BackupsOut",
    "CloseOut",
    "ConnectOut",
    "CuratorOut",
    "DeathStatusOut",
    "DigestOut",
    "DisconnectOut",
    "DistrustOut",
    "EntriesOut",
    "EntryDoc",
    "EpisodeOut",
    "EpisodeVerifyOut",
    "ErrorDetail",
    "ErrorOut",
    "FeedbackOut",
    "FlushOut",
    "ForgetOut",
    "HitDoc",
    "InheritOut",
    "KeysOut",
    "KnowledgeStatsOut",
    "LessonsOut",
    "MemoryOut",
    "ParkedItem",
    "PeersOut",
    "ProbeOut",
    "RevocationsOut",
    "SearchOut",
    "StateDigestOut",
    "StatusOut",
    "StyxRetryOut",
    "StyxStatusOut",
    "SyncOut",
    "ToolResultOut",
    "ToolsOut",
    "TrustAlertsOut",
    "TrustOut",
    "UnarchiveOut",
    "VitalityOut",
    "WorkingMemoryOut",
    "WorkingMemoryWritten",
    "errors",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(_Out):
    loc: list[str | int]
    msg: str


class ErrorOut(_Out):
    error: Literal["bad_request", "unauthorized", "not_found", "conflict", "too_large", "invalid_request",
                   "unavailable", "http_error", "internal"]
    detail: str | list[ErrorDetail] | None
    tool_result: dict[str, Any] | None = Field(None, description="POST /v1/tools/{name} only: a ready tool_result "
                                                                 "block with is_error true")


_WHY = {
    400: "a body that is not JSON, or a well-formed value the daemon cannot use",
    401: "the TCP listener needs `Authorization: Bearer TOKEN` (the unix socket does not)",
    404: "no such entry, peer, tool or path",
    409: "the daemon's state does not allow it now (not in a clade, sync off, not the author)",
    413: "request body over 1 MiB",
    422: "the body or a parameter breaks the schema",
    502: "Styx failed, holds nothing for the request, or its budget is reached",
    503: "the embedding model cannot be loaded",
}


class DistrustOut(_Out):
    author: str
    distrusted: bool
    entries: int = Field(description="how many of its entries this golem holds (none is deleted)")


class AuthorDoc(_Out):
    author: str
    trust: float = Field(description="Beta posterior mean of local evidence; 0 when distrusted")
    reasons: list[str] = Field(description="why it is suspect: distrusted, low_trust, burst, catchup_flood, "
                                             "evidence_flood, forged_vector (a vector it shipped did not match its "
                                             "entry's text here)")
    suspect: bool
    good: int
    bad: int
    fresh_arrivals: int = Field(description="fresh entries that arrived in the budget window")
    arrivals: int = Field(description="all entries that arrived in the budget window")
    distrusted: bool


class TrustOut(_Out):
    enabled: bool
    budget_entries: int
    budget_window_s: int
    authors: list[AuthorDoc]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: 400 (a body that is not JSON), 401, 413 and 422 for every
    route, plus `statuses`."""
    return {s: {"model": ErrorOut, "description": _WHY[s]} for s in sorted({400, 401, 413, 422, *statuses})}


class MemoryOut(_Out):
    id: str
    memory_type: str
    entry: EntryDoc | None = Field(description="the stored entry (null for an episode)")


class HitDoc(EntryDoc):
    score: float
    via: Literal["vector", "keyword", "both"]
    release: Literal["own", "corroborated", "vouched", "aged", "unverified"] = Field(
        "own", description="why a sibling's entry may be shown (trust.py); own and inherited entries: own")
    unverified: bool = Field(False, description="a sibling's entry not yet corroborated here: treat it as a claim")


class StyxHitDoc(_Out):
    id: str
    kind: str
    content: str
    confidence: float = Field(description="its author's confidence")
    local_confidence: float = Field(description="what this golem holds it at: 0.2, where knowledge from Styx starts")
    layer: str
    relevance: float = Field(description="Styx's score times the layer's discount (vault 1.0, clade 0.8, lethe 0.5, …)")
    score: float = Field(description="its four-factor rank: 0.40 × relevance (recency, importance, PAD unknown: 0)")
    provenance: str = Field(description="styx:<layer>")


class MergedHitDoc(_Out):
    id: str
    kind: str
    content: str
    confidence: float
    score: float = Field(description="the four-factor rank, local and Styx alike (ties: the local entry first)")
    provenance: str = Field(description="local, or styx:<layer>")
    local_confidence: float | None = Field(None, description="a Styx row: 0.2, where knowledge from Styx starts")
    relevance: float | None = Field(None, description="a Styx row: the server's score × the layer's discount")


class SearchOut(_Out):
    query: str
    results: list[HitDoc] = Field(description="the local hits")
    styx: list[StyxHitDoc] | None = Field(None, description="Styx's answer, ranked by its rank (null: off)")
    styx_error: str | None = Field(None, description="why Styx gave nothing this time (the local results stand)")
    merged: list[MergedHitDoc] | None = Field(
        None, description="local hits and Styx's results in one ranking, top_k, with provenance (null: Styx off)")
    degraded: Literal["keyword_only"] | None = Field(
        None, description="keyword_only: the embedding model is still loading or cannot load, so the results are "
                          "ranked by keywords alone (null: meaning and keywords, as usual)")


class CladeRef(_Out):
    name: str
    id: str


class CuratorOut(_Out):
    """`CuratorCycleComplete` (docs/design/forgetting.md)."""

    entries_decayed: int
    entries_pruned: int
    entries_merged: int
    entries_superseded: int
    episodes_consolidated: int
    episodes_replayed: int = Field(0, description="verified episodes replayed (their replay_count rose)")
    entries_promoted: int
    promotion_refused: dict[str, int] = Field(
        default_factory=dict, description="entries written since the previous cycle that the crossing gates held "
                                          "back, by reason: low_score, low_confidence, near_duplicate, refuted, "
                                          "too_young, unproven")
    heuristics_proposed: int
    entries_validated: int
    entries_archived_capacity: int = Field(0, description="of entries_pruned: the Grimoire over its budget")
    archived_capacity_by_kind: dict[str, int] = Field(default_factory=dict)
    since_ms: int | None = Field(description="the previous cycle (null: this was the first)")
    llm_decisions: int
    llm_refused: dict[str, int]
    llm_cost_usd: float
    llm_error: str | None
    duration_ms: int
    entries_embedded: int
    at_ms: int
    seconds: float


class TrustAlertsOut(_Out):
    suspect: list[str] = Field(default_factory=list, description="siblings whose entries tripped the trust checks "
                               "and that the operator has not decided on (`clade peers distrust|trust`)")
    distrusted: list[str] = Field(default_factory=list, description="siblings the operator distrusted: every entry "
                                  "of theirs quarantined here until `clade peers trust`")


class MemoryStatusOut(_Out):
    rss_mib: float = Field(description="the daemon's resident memory now (VmRSS), MiB")
    peak_rss_mib: float = Field(description="its highest resident memory since it started (VmHWM), MiB")
    heap_in_use_mib: float = Field(0.0, description="bytes malloc has handed out and not had back (glibc "
                                   "`mallinfo2`; 0 where the C library does not say), MiB")
    heap_free_mib: float = Field(0.0, description="freed bytes malloc keeps inside its heap (fragmentation, "
                                 "returned by the trims after curator cycles and backups), MiB")
    heap_mmapped_mib: float = Field(0.0, description="large blocks malloc maps on their own (numpy arrays, "
                                    "SQLite's bigger buffers), MiB")
    sqlite_mib: float = Field(0.0, description="what SQLite has allocated (`sqlite3_memory_used`: page caches, "
                              "statements), MiB; part of heap_in_use_mib")
    sqlite_page_cache_mib: float = Field(0.0, description="the page caches' part of sqlite_mib (each connection "
                                         "keeps up to ~2 MB of the database's pages), MiB")
    python_blocks: int = Field(0, description="memory blocks Python's own allocator holds (objects, mostly): "
                               "steady once warm unless something keeps objects")
    model_pid: int | None = Field(None, description="the embedding process's id while it runs (the model and its "
                                  "runtime live there; null: not running)")
    model_rss_mib: float | None = Field(None, description="the embedding process's resident memory now, MiB (null: "
                                        "not running); the golem's is rss_mib plus this")
    model_loaded: bool = Field(description="whether the embedding model is in memory (it loads on first need and "
                                           "leaves after `[embedding] unload_after_s` unused)")
    model_error: str | None = Field(None, description="why the model cannot load (searches answer from keywords)")
    drift: DriftOut | None = Field(None, description="the last embedding drift check (none yet: null)")


class DriftOut(_Out):
    """The last embedding drift check (daemon/embedding/drift.py)."""

    space: str
    verdict: Literal["baseline", "healthy", "warning", "critical"]
    checked_ms: int
    vector_writes_paused: bool = Field(description="critical: no vector is written until the model is restored "
                                                   "or accepted (`clade embeddings rebuild`)")
    mean_distance: float | None = None
    max_distance: float | None = None
    neighbour_stability: float | None = None


class StatusOut(_Out):
    peer_id: str
    data_dir: str
    uptime_s: float
    entries: int
    archived: int
    archived_for_capacity: int = Field(0, description="of `archived`: by the curator, the Grimoire over its budget")
    by_kind: dict[str, int]
    vector_checks_pending: int = Field(0, description="siblings' shipped vectors drawn for a check that this "
                                       "golem's model has not re-embedded yet ([embedding] check_shipped)")
    vector_check_authors_cleared: int = Field(0, description="siblings whose shipped vectors are checked at the "
                                              "cleared share: their last `[embedding] check_shipped_clearance` "
                                              "checks here all matched")
    embedding_backlog: int = Field(0, description="entries (archived too) still without a vector: found by "
                                                  "keywords only until the embedder reaches them")
    clade: CladeRef | None
    peers: int
    p2p: dict[str, Any] | None = Field(description="the p2p service's own status (null while sync is off)")
    last_curator_cycle: CuratorOut | None
    counters: dict[str, int]
    styx: StyxStatusOut | None = Field(None, description="the Styx outbox and pusher (null: Styx is off)")
    vitality: VitalityOut | None = Field(None, description="the golem's phase and Hayflick ratio (PUT /v1/vitality)")
    death: DeathStatusOut | None = Field(None, description="null while the golem lives; after `POST /v1/death` "
                                                           "(`clade die`): its outcome")
    trust: TrustAlertsOut = Field(default_factory=TrustAlertsOut, description="suspect and distrusted siblings "
                                  "(details: GET /v1/trust)")
    memory: MemoryStatusOut | None = Field(None, description="the daemon's resident memory and its embedding model")


class EntriesOut(_Out):
    entries: list[EntryDoc]


class ForgetOut(_Out):
    id: str
    archived: bool
    changed: bool


class ParkedItem(_Out):
    idempotency_key: str
    kind: str
    reason: str | None
    parked_at_ms: int


class StyxSpendDoc(_Out):
    month: str = Field(description="YYYY-MM (UTC)")
    usd: float
    calls: int
    items: int
    queries: int


class StyxStatusOut(_Out):
    queue_depth: int
    oldest_age_s: float | None
    parked: int
    parked_items: list[ParkedItem]
    last_success_ms: int | None
    last_success_at: str | None = Field(description="the last delivered batch, ISO 8601 UTC (null: none yet)")
    failures: int
    delivered: int
    last_error: str | None
    url: str
    spend_month_usd: float = Field(description="this month's Styx spend (USD), kept across restarts")
    budget_month_usd: float | None = Field(None, description="[styx.budget] monthly: the month's cap (null: none)")
    spend: StyxSpendDoc
    paused_by_budget: bool
    outbox_warning: bool = Field(description="more items wait than [styx] outbox_warn (nothing is dropped)")


class StyxRetryOut(_Out):
    unparked: int


class InheritOut(_Out):
    golem: str = Field(description="the predecessor")
    entries: int = Field(description="entries inherited (held at the archive's weight, 0.3 × 0.85^(N−1))")
    applied_ops: int
    generations: dict[str, int]
    siblings: int
    from_styx: str = Field(description="the vault object inherited")
    bytes: int
    via_archive: bool


class UnarchiveOut(_Out):
    id: str
    archived: bool
    changed: bool


class DigestOut(_Out):
    format: Literal["xml", "search-results", "json"]
    tokens: int
    budget_tokens: int
    entries: list[str]
    pinned: list[str]
    external: list[str] = Field(default_factory=list, description="ids of Styx results in the document")
    episodes: list[str] = Field(default_factory=list, description="ids of this golem's episodes in the document (its "
                                                                  "episodic section: config digest.episode_tokens)")
    styx_error: str | None = Field(None, description="why Styx added nothing this time")
    degraded: Literal["keyword_only"] | None = Field(
        None, description="keyword_only: the embedding model is still loading or cannot load, so the entries are "
                          "ranked by keywords alone (null: meaning and keywords, as usual)")
    document: Any = Field(description="xml: a string; json and search-results: the documents")


class FeedbackOut(_Out):
    weights: dict[str, float]
    cited: list[str]
    matched_by_response: list[str]


class EpisodeDoc(_Out):
    id: str
    observed_ms: int
    observed_at: str | None = Field(None, description="observed_ms as ISO 8601 UTC (its occurred_at when given)")
    block_number: int | None
    category: str | None
    protocol: str | None
    summary: str
    payload: Any
    curiosity: float
    importance: float
    pad: list[float] | None
    quality_verified: bool
    replay_count: int


class EpisodeOut(_Out):
    id: str
    episode: EpisodeDoc


class EpisodeHitDoc(EpisodeDoc):
    similarity: float = Field(description="cosine of the query and the summary (the episodes' model, MiniLM)")
    score: float = Field(description="the four-factor rank: similarity, recency of the observation, importance, PAD")


class EpisodeSearchOut(_Out):
    query: str
    results: list[EpisodeHitDoc] = Field(description="this golem's own episodes, best first (episodes are soma: "
                                                     "never a sibling's, never Styx)")


class PeersOut(_Out):
    peers: list[dict[str, Any]] = Field(description="one record per known peer (see docs/design/sync.md: Observing)")


class ConnectOut(_Out):
    peer_id: str
    dialing: str


class DisconnectOut(_Out):
    peer_id: str
    held_s: float


class StateDigestOut(_Out):
    shared: str = Field(description="the ops that may cross (this golem's sync gate), without the context")
    context: str = Field(description="the causal context alone (withheld dots included)")
    all: str = Field(description="every op and the causal context")


class SyncOut(_Out):
    synced: list[dict[str, Any]]


class ProbeOut(_Out):
    id: str
    sent_ms: int


class RevocationsOut(_Out):
    version: int
    revoked: list[str]
    adopted: bool


class KeysOut(_Out):
    epoch: int = Field(description="the clade key epoch own gossip and new backups use")
    epochs: list[int] = Field(description="every epoch this golem holds a key for (old backups open with them)")
    previous_epoch: int | None = Field(description="the epoch in use before this reload (null: none was loaded)")
    changed: bool


class BackupOut(_Out):
    path: str
    bytes: int
    files: int
    episodes_version: int | None
    recipients: list[str]
    seconds: float
    pruned: list[str]
    styx: dict[str, Any] | None = Field(None, description="the vault upload (when Styx and its vault are on)")
    styx_error: str | None = Field(None, description="why the upload failed (the backup is kept)")
    styx_pending: bool = Field(False, description="the upload was still going after `[styx] backup_wait_s`: "
                                                  "the event `backup_pushed` or `backup_push_failed` follows")


class ToolsOut(_Out):
    tools: list[dict[str, Any]]


class ToolResultOut(_Out):
    type: Literal["tool_result"]
    tool_use_id: str | None = None
    content: list[dict[str, Any]]
    is_error: bool


class WorkingMemoryOut(_Out):
    session: str
    content: str
    bytes: int
    updated_ms: int | None


class WorkingMemoryWritten(_Out):
    session: str
    bytes: int
    updated_ms: int | None


class CloseOut(_Out):
    session: str
    migrated: list[str]
    existing: list[str]


class FlushOut(_Out):
    session: str
    ids: list[str]
    created: int


class LessonsOut(_Out):
    ids: list[str]
    created: int
    skipped: int


class KnowledgeStatsOut(_Out):
    """`GET /v1/knowledge/stats`: what the operator's knowledge panel and sync completion need."""

    live: int = Field(description="entries not archived")
    by_kind: dict[str, int] = Field(description="live entries per kind")
    confidence_histogram: list[int] = Field(description="live entries by local confidence, 10 buckets "
                                                        "[0, 0.1), [0.1, 0.2) … [0.9, 1.0]")
    ops: int = Field(description="ops in this golem's causal context (the base of a sibling's completion %)")


class BackupFileOut(_Out):
    name: str
    bytes: int
    at_ms: int = Field(description="when it was written (file modification time, wall ms)")


class BackupsOut(_Out):
    """`GET /v1/backups`: the backups kept in `$DATA/backups` and the scheduler's next run."""

    count: int
    total_bytes: int
    last: BackupFileOut | None = Field(description="the newest backup (null: none yet)")
    interval_hours: float
    keep: int
    next_due_ms: int | None = Field(description="the scheduler's next backup (null: not in a clade, none scheduled)")


class VitalityOut(_Out):
    """GET/PUT /v1/vitality, and `vitality` in GET /v1/status."""

    phase: Literal["thriving", "stable", "conservation", "declining", "terminal"] = Field(
        description="the phase in force: the reported one, else the one derived from the clocks, else stable")
    source: Literal["reported", "derived", "default"]
    reported: Literal["thriving", "stable", "conservation", "declining", "terminal"] | None = Field(
        description="the phase reported (an override), if one is")
    derived: Literal["thriving", "stable", "conservation", "declining", "terminal"] | None = Field(
        description="the phase the clocks give (composite thresholds, hysteresis upward), if clocks are reported")
    composite: float | None = Field(description="the composite vitality score, 0..1 (null without clocks)")
    economic: float | None
    epistemic: float | None
    age_factor: float | None
    hayflick_ratio: float | None
    legacy: bool = Field(description="whether the curator pushes legacy (declining, terminal, or ratio > 0.85)")
    legacy_confidence: float = Field(description="the confidence from which legacy crosses (0.4; terminal 0.1)")
    reserve_share: float = Field(description="share of the month's Styx cap kept for the death protocol")
    curator_period_factor: float = Field(description="the curator's cycle period over the configured one")
    updated_ms: int | None


class DeathStatusOut(_Out):
    """The `death` field of `/v1/status` (daemon/service/death_plan.py `DeathRecord.status`)."""

    dead: bool
    started_ms: int
    complete: bool = Field(description="every step ran and none failed (else `clade die` again resumes)")
    failed: list[str] = Field(description="the steps that failed")
    reflection_id: str | None
    testament_path: str | None
    error: str | None = Field(None, description="the death record could not be read")
class EpisodeVerifyOut(_Out):
    id: str
    changed: bool = Field(description="false: it was verified already (the call is idempotent)")
    episode: EpisodeDoc
