"""The curator cycle: the thin I/O layer that reads a store snapshot, runs the pure steps, writes.

validate → decay → prune → compress (merge, contradict, consolidate) → promote. Each step
reads what it needs, asks its pure function (decay.py, prune.py, compress.py,
consolidate.py, ..promotion) and applies the answer in one transaction; every step is
idempotent, so a cycle cut short by a crash is finished by the next. Nothing is deleted:

- decay rewrites `local_confidence` from the entry's anchor (base, anchor time, evidence);
- prune sets `archived` (reason and time recorded; `clade unarchive ID` undoes it);
- an own entry merged or contradicted is retracted *with* `superseded_by` — an op, so siblings
  learn what replaced it; a sibling's entry merged into another is archived locally with
  `local_superseded_by` (only its author may write its slots);
- a new baseline fact supersedes the protocol's previous one the same way.

The curator's own entries (an LLM REWRITE, a baseline, a re-authored inherited entry) pass the
write door in its internal mode (write_door.py, `Writer.CURATOR`): every write rule holds, the
repeat hold included — a rewritten warning that repeats one gossiped within 24 h is held. Its
vector is computed before the writer's transaction (`RewriteVectors`, from `rewrite_texts`);
without one it is written unchecked and counted (`CycleReport.unchecked`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from crdt import Kind, Timestamp

from .. import scoring
from ..crossing import promote_ready
from ..records import NewEntry
from ..repeat_hold import Near
from ..store import Grimoire
from ..store import LocalIdentity as Identity
from ..trust import Release, TrustPolicy
from ..trust_store import quarantine
from ..write_door import Prepared, Writer, Written, needs_vector, write_entries
from .compress import Similar, find_contradictions, find_merges, related_clusters
from .consolidate import ReplayItem, baselines, select_replay
from .decay import DEFAULT_WINDOW_DAYS, EVICTION_THRESHOLD, RETRIEVAL_THRESHOLD, Retention, decayed
from .llm import Cluster, Member
from .llm_client import LlmOutcome
from .prune import DEFAULT_CAPACITY, Candidate, capacity_counts, select_prunes

if TYPE_CHECKING:
    from daemon.embedding.embedder import EmbeddingInfo

__all__ = ["Consultation", "CuratorSettings", "CycleReport", "LiveEntry", "RewriteVectors", "apply_llm", "live_entries",
           "llm_clusters", "rewrite_news", "run_cycle", "simulate"]

MS_PER_DAY = 86_400_000
_LAST_CYCLE_KEY = "curator_last_cycle_ms"



@dataclass(frozen=True, slots=True)
class CuratorSettings:
    # The forgetting curve's window per kind, in days (decay.windows_with builds one from config).
    windows: Mapping[Kind, float] = field(default_factory=lambda: dict(DEFAULT_WINDOW_DAYS))
    eviction_threshold: float = EVICTION_THRESHOLD
    retrieval_threshold: float = RETRIEVAL_THRESHOLD
    capacity: int = DEFAULT_CAPACITY  # live entries at most (prune.py)
    near_duplicate: float = 0.92
    related: float = 0.85
    replay_budget: int = 500
    recent_days: float = 1.0
    tick_seconds: float = 10.0
    trust: TrustPolicy = field(default_factory=TrustPolicy)  # what compression treats as quarantined

    def window(self, kind: Kind) -> float:
        """The kind's window (its default when `windows` leaves it out)."""
        return self.windows.get(kind, DEFAULT_WINDOW_DAYS[kind])

    def decayed(self, e: LiveEntry, now_ms: int) -> float:
        return decayed(e.retention(), now_ms, window_days=self.window(e.kind))


@dataclass(slots=True)
class CycleReport:
    """`CuratorCycleComplete` (docs/design/forgetting.md), plus what each step refused or skipped."""

    entries_decayed: int = 0
    entries_pruned: int = 0
    entries_merged: int = 0
    entries_superseded: int = 0
    episodes_consolidated: int = 0
    episodes_replayed: int = 0
    entries_promoted: int = 0
    # Candidates written since the previous cycle that the crossing gates refused, by reason
    # (promotion.refusal_reason): why fresh knowledge does not reach the siblings at once.
    promotion_refused: dict[str, int] = field(default_factory=dict)
    heuristics_proposed: int = 0
    entries_validated: int = 0
    entries_archived_capacity: int = 0  # of entries_pruned: archived because the Grimoire was over its budget
    archived_capacity_by_kind: dict[str, int] = field(default_factory=dict)
    since_ms: int | None = None  # the previous cycle (None: the first)
    llm_decisions: int = 0
    llm_refused: dict[str, int] = field(default_factory=dict)
    llm_cost_usd: float = 0.0
    llm_error: str | None = None
    duration_ms: int = 0
    promoted: list[str] = field(default_factory=list)
    archived_capacity_ids: list[str] = field(default_factory=list)  # in eviction order
    replayed: list[str] = field(default_factory=list)  # the verified episodes replayed (their replay_count rises)
    # The curator's own entries the write door held as repeats (id: cosine), and those of a
    # repeatable kind it wrote unchecked (no vector): for the daemon to announce and count.
    held: dict[str, float] = field(default_factory=dict)
    unchecked: int = 0

    def wrote(self, done: Written) -> None:
        """Count what one write through the door held or left unchecked."""
        self.held.update(done.held)
        self.unchecked += done.unchecked

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for internal in ("promoted", "archived_capacity_ids", "replayed", "held", "unchecked"):
            out.pop(internal)
        return out


@dataclass(frozen=True, slots=True)
class LiveEntry:
    """One live entry (active, not archived) as the curator reads it."""

    id: str
    author: str
    kind: Kind
    content: str
    local_confidence: float
    base: float
    anchor_ms: int
    evidence: int
    importance: float
    access_count: int
    created_ms: int
    confirms: int
    confirms_seen: int
    fresh_ms: int  # when it last changed in a way compression cares about (stored or re-embedded)
    bloodstain: bool = False

    def retention(self) -> Retention:
        return Retention(self.kind, self.base, self.anchor_ms, self.evidence, self.bloodstain)

    def keep_score(self, confidence: float, now_ms: int) -> float:
        days = scoring.age_days(self.created_ms, now_ms)
        return confidence * scoring.importance(explicit=self.importance, access_count=self.access_count, days=days)


def live_entries(store: Grimoire) -> list[LiveEntry]:
    rows = store.connection.execute(
        "SELECT id, author, kind, content, local_confidence, coalesce(decay_base, local_confidence), "
        "coalesce(decay_anchor_ms, stored_ms), evidence, importance, access_count, created_hlc, confirms, "
        "confirms_seen, max(stored_ms, coalesce(embedding_created_ms, 0)), bloodstain "
        "FROM entries WHERE archived = 0 AND status = 'active' ORDER BY id").fetchall()
    return [LiveEntry(r[0], r[1], Kind(r[2]), r[3], float(r[4]), float(r[5]), int(r[6]), int(r[7]), float(r[8]),
                      int(r[9]), Timestamp.unpack(r[10]).ms, int(r[11]), int(r[12]), int(r[13]), bool(r[14]))
            for r in rows]


def _meta_int(store: Grimoire, key: str) -> int | None:
    row = store.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else int(row[0])


def run_cycle(
    store: Grimoire,
    *,
    identity: Identity,
    now_ms: int,
    settings: CuratorSettings = CuratorSettings(),
    vectors: Mapping[str, NDArray[np.float32]] | None = None,
    episodes: Sequence[ReplayItem] = (),
    llm: Callable[[Sequence[Cluster]], LlmOutcome] | None = None,
) -> CycleReport:
    """One cycle over `store` at `now_ms`. `vectors`: current-model vectors of live entries
    (None: only exact duplicates merge); `episodes`: what replay may choose from."""
    started = time.perf_counter()
    report = CycleReport()
    _validate(store, now_ms, report)
    live = _decay(store, live_entries(store), now_ms, settings, report)
    live = _prune(store, live, now_ms, settings, report)
    last = _meta_int(store, _LAST_CYCLE_KEY)
    report.since_ms = last
    fresh = {e.id for e in live if last is None or e.fresh_ms > last}
    _compress(store, identity, live, vectors or {}, fresh, now_ms, settings, report)
    if llm is not None:  # in process (the CLI's direct path); the daemon calls the model off the store's thread
        asked = llm_clusters(store, identity, vectors or {}, since_ms=last, now_ms=now_ms, settings=settings)
        if asked.groups:
            apply_llm(store, identity, asked, llm(asked.clusters), now_ms=now_ms, report=report)
    _consolidate(store, identity, episodes, now_ms, settings, report)
    report.promoted = promote_ready(store, identity, now_ms=now_ms, tick_seconds=settings.tick_seconds,
                                    trust=settings.trust, vectors=vectors, refused=report.promotion_refused,
                                    since_ms=report.since_ms)
    report.entries_promoted = len(report.promoted)
    with store._transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_LAST_CYCLE_KEY, str(now_ms)))
    report.duration_ms = round((time.perf_counter() - started) * 1000)
    return report


def _validate(store: Grimoire, now_ms: int, report: CycleReport) -> None:
    """Siblings' confirmations since the last cycle are evidence: each resets the clock and adds one."""
    with store._transaction() as conn:
        cur = conn.execute(
            "UPDATE entries SET evidence = evidence + (confirms - confirms_seen), confirms_seen = confirms, "
            "decay_base = coalesce(decay_base, local_confidence), decay_anchor_ms = ?, "
            "local_confidence = coalesce(decay_base, local_confidence) "
            "WHERE confirms > confirms_seen AND archived = 0", (now_ms,))
        report.entries_validated = cur.rowcount


def _decay(store: Grimoire, live: Sequence[LiveEntry], now_ms: int, settings: CuratorSettings,
           report: CycleReport) -> list[LiveEntry]:
    """Rewrite local confidence from each anchor; returns the live entries as they now stand."""
    updates = []
    out = []
    for e in live:
        value = settings.decayed(e, now_ms)
        if abs(value - e.local_confidence) > 1e-9:
            updates.append((value, e.base, e.id))
            e = replace(e, local_confidence=value)
        out.append(e)
    # The anchor is left as it is: NULL means "since stored" (live_entries reads it so), and a
    # set anchor means evidence (a use, a confirmation, an outcome), which recency counts from.
    with store._transaction() as conn:
        conn.executemany("UPDATE entries SET local_confidence = ?, decay_base = ? WHERE id = ?", updates)
    report.entries_decayed = len(updates)
    return out


def _prune(store: Grimoire, live: Sequence[LiveEntry], now_ms: int, settings: CuratorSettings,
           report: CycleReport) -> list[LiveEntry]:
    """Archive what `select_prunes` picks; returns the entries still live."""
    candidates = [Candidate(e.id, e.kind, e.local_confidence, e.keep_score(e.local_confidence, now_ms), e.created_ms,
                            e.evidence) for e in live]
    prunes = select_prunes(candidates, eviction_threshold=settings.eviction_threshold, capacity=settings.capacity)
    with store._transaction() as conn:
        conn.executemany("UPDATE entries SET archived = 1, archived_reason = ?, archived_ms = ? WHERE id = ?",
                         [(p.reason, now_ms, p.id) for p in prunes])
    report.entries_pruned = len(prunes)
    report.archived_capacity_by_kind = capacity_counts(prunes)
    report.archived_capacity_ids = [p.id for p in prunes if p.reason == "over_capacity"]
    report.entries_archived_capacity = len(report.archived_capacity_ids)
    gone = {p.id for p in prunes}
    return [e for e in live if e.id not in gone]


def _supersede(store: Grimoire, identity: Identity, author: dict[str, str], loser: str, winner: str,
               now_ms: int) -> None:
    if author[loser] == identity.peer_id:
        store.retract(loser, identity=identity, superseded_by=winner)
    else:
        with store._transaction() as conn:
            conn.execute("UPDATE entries SET archived = 1, archived_reason = 'superseded', archived_ms = ?, "
                         "local_superseded_by = ? WHERE id = ?", (now_ms, winner, loser))


def unverified_ids(store: Grimoire, ids: Sequence[str], *, now_ms: int, policy: TrustPolicy) -> set[str]:
    """Of `ids`, the siblings' entries still in quarantine (trust.py), which never win a merge."""
    if not policy.enabled or not ids:
        return set()
    states = quarantine(store.connection, ids, now_ms=now_ms, policy=policy)
    return {i for i, (_, release, _) in states.items() if release is Release.UNVERIFIED}


def _compress(store: Grimoire, identity: Identity, live: Sequence[LiveEntry],
              vectors: Mapping[str, NDArray[np.float32]], fresh: set[str], now_ms: int, settings: CuratorSettings,
              report: CycleReport) -> None:
    author = {e.id: e.author for e in live}
    held = unverified_ids(store, [e.id for e in live if e.author != identity.peer_id], now_ms=now_ms,
                          policy=settings.trust)
    similar = [Similar(e.id, e.kind, e.content, e.author == identity.peer_id, e.base, e.evidence, e.created_ms,
                       e.id not in held) for e in live]
    merges = find_merges(similar, vectors, fresh=fresh, near=settings.near_duplicate)
    gone: set[str] = set()
    for m in merges:
        _supersede(store, identity, author, m.loser, m.winner, now_ms)
        gone.add(m.loser)
    with store._transaction() as conn:
        conn.executemany("UPDATE entries SET evidence = ? WHERE id = ?",
                         sorted({(m.evidence, m.winner) for m in merges}))
    report.entries_merged = len(merges)
    survivors = [s for s in similar if s.id not in gone]
    contradictions = find_contradictions(survivors, vectors, fresh=fresh, related=settings.related)
    for c in contradictions:
        _supersede(store, identity, author, c.older, c.newer, now_ms)
    report.entries_superseded = len(contradictions)


@dataclass(frozen=True, slots=True)
class Consultation:
    """What the LLM pass asks about: the related groups (ids) and the clusters the model sees."""

    groups: list[tuple[str, ...]]
    clusters: list[Cluster]


def llm_clusters(store: Grimoire, identity: Identity, vectors: Mapping[str, NDArray[np.float32]], *,
                 since_ms: int | None, now_ms: int, settings: CuratorSettings = CuratorSettings()) -> Consultation:
    """Related clusters (cosine ≥ `settings.related`) among live entries with one changed since
    `since_ms` (None: all) — what the guard left alone, for the optional LLM pass. Siblings'
    entries still in quarantine (trust.py) are not shown to the model: its MERGE, SUPERSEDE and
    REWRITE would otherwise let an unverified entry win, or launder its text into an entry this
    golem authors and shares; they take part once released."""
    me = identity.peer_id
    live = live_entries(store)
    held = unverified_ids(store, [e.id for e in live if e.author != me], now_ms=now_ms, policy=settings.trust)
    live = [e for e in live if e.id not in held]
    by_id = {e.id: e for e in live}
    fresh = {e.id for e in live if since_ms is None or e.fresh_ms > since_ms}
    similar = [Similar(e.id, e.kind, e.content, e.author == me, e.base, e.evidence, e.created_ms) for e in live]
    groups = related_clusters(similar, vectors, fresh=fresh, related=settings.related)
    clusters = [Cluster(tuple(Member(i, by_id[i].author == me, by_id[i].kind.value, by_id[i].local_confidence,
                                     by_id[i].created_ms, by_id[i].content) for i in ids)) for ids in groups]
    return Consultation(groups, clusters)


@dataclass(frozen=True, slots=True)
class RewriteVectors:
    """The vectors of the REWRITE texts (`rewrite_news`), computed off the store's thread before
    `apply_llm`, by the model `info` names; `near` finds the close entries (the daemon's index)."""

    info: EmbeddingInfo
    by_text: Mapping[str, NDArray[np.float32]]
    near: Near | None = None


    @classmethod
    def of(cls, prepared: Prepared) -> RewriteVectors | None:
        """The vectors a door preparation (write_door.prepare) computed for `rewrite_news`; None without a model."""
        if prepared.info is None:
            return None
        by_text = {new.content: v for new, v in zip(prepared.news, prepared.vectors, strict=True) if v is not None}
        return cls(prepared.info, by_text, prepared.near)


def rewrite_news(asked: Consultation, outcome: LlmOutcome) -> list[NewEntry]:
    """The entries the model's REWRITE decisions would write, as far as preparing their vectors
    needs them (kind and content: write_door.prepare), before `apply_llm` writes them."""
    kinds = {m.id: Kind(m.kind) for c in asked.clusters for m in c.members}
    return [NewEntry(kind=kinds[d.evidence[0]], content=d.text) for d in outcome.decisions
            if d.action == "REWRITE" and d.text is not None and d.evidence and d.evidence[0] in kinds]


def _curator_write(store: Grimoire, identity: Identity, new: NewEntry, *, now_ms: int, report: CycleReport,
                   vectors: RewriteVectors | None = None) -> str:
    """Write one of the curator's own entries through the write door (`Writer.CURATOR`): the
    repeat hold applies, with `vectors` when one is at hand for its text."""
    vector = None if vectors is None or not needs_vector(new) else vectors.by_text.get(new.content)
    if vectors is None or vector is None:
        prepared = Prepared.unembedded([new])
    else:
        prepared = Prepared((new,), (vector,), vectors.info, vectors.near)
    done = write_entries(store, identity, prepared, now_ms=now_ms, writer=Writer.CURATOR)
    report.wrote(done)
    return done.ids[0]


def apply_llm(store: Grimoire, identity: Identity, asked: Consultation, outcome: LlmOutcome, *, now_ms: int,
              report: CycleReport, vectors: RewriteVectors | None = None) -> None:
    """Apply the decisions `llm.accept` passed (supersede, never delete); record cost and refusals.
    A REWRITE is written through the write door (`vectors`: its text's, for the repeat hold)."""
    report.llm_refused = dict(outcome.refused)
    report.llm_cost_usd = round(outcome.cost_usd, 6)
    report.llm_error = outcome.error
    by_id = {e.id: e for e in live_entries(store)}
    author = {i: e.author for i, e in by_id.items()}
    done: set[str] = set()
    for d in outcome.decisions:
        ids = asked.groups[d.cluster]
        if any(i not in by_id for i in ids):
            continue  # something changed it since the question was asked: ask again next cycle
        if d.action == "MERGE" and d.into is not None:
            pairs = [(i, d.into) for i in ids if i != d.into]
        elif d.action == "SUPERSEDE" and d.older is not None and d.newer is not None:
            pairs = [(d.older, d.newer)]
        elif d.action == "REWRITE" and d.text is not None:
            first = by_id[d.evidence[0]]
            new_id = _curator_write(store, identity, NewEntry(
                kind=first.kind, content=d.text, confidence=max(by_id[i].base for i in d.evidence),
                importance=first.importance, tags=("rewritten",)), now_ms=now_ms, report=report, vectors=vectors)
            report.heuristics_proposed += first.kind is Kind.HEURISTIC
            author[new_id] = identity.peer_id
            pairs = [(i, new_id) for i in d.evidence]
        else:
            continue
        for loser, winner in pairs:
            if loser not in done and loser != winner:
                _supersede(store, identity, author, loser, winner, now_ms)
                done.add(loser)
        report.llm_decisions += 1


def _consolidate(store: Grimoire, identity: Identity, episodes: Sequence[ReplayItem], now_ms: int,
                 settings: CuratorSettings, report: CycleReport) -> None:
    """Replay verified episodes only (unverified ones never consolidate); the ids replayed go
    to `report.replayed` for the caller to count in the episode log once the store is written."""
    verified = [e for e in episodes if e.verified]
    if not verified:
        return
    replayed = select_replay(verified, now_ms=now_ms, budget=settings.replay_budget,
                             recent_ms=int(settings.recent_days * MS_PER_DAY))
    report.replayed = [e.id for e in replayed]
    report.episodes_replayed = len(replayed)
    for b in baselines(replayed):
        previous = store.connection.execute(
            "SELECT id, content FROM entries WHERE author = ? AND kind = 'fact' AND status = 'active' "
            "AND archived = 0 AND tags LIKE '%\"baseline\"%' AND protocols = ?",
            (identity.peer_id, f'["{b.protocol}"]')).fetchall()
        if any(content == b.content for _, content in previous):
            continue
        new_id = _curator_write(store, identity, NewEntry(
            kind=Kind.FACT, content=b.content, protocols=(b.protocol,), tags=("baseline",), confidence=0.7,
            importance=0.5), now_ms=now_ms, report=report)
        for old_id, _ in previous:
            store.retract(old_id, identity=identity, superseded_by=new_id)
        report.episodes_consolidated += len(b.episodes)


def simulate(store: Grimoire, *, now_ms: int, days: float, settings: CuratorSettings = CuratorSettings()
             ) -> dict[str, Any]:
    """Project decay and pruning `days` ahead with no further use; reads only."""
    later = now_ms + int(days * MS_PER_DAY)
    live = live_entries(store)
    after = {e.id: settings.decayed(e, later) for e in live}
    chosen = select_prunes(
        [Candidate(e.id, e.kind, after[e.id], e.keep_score(after[e.id], later), e.created_ms, e.evidence)
         for e in live], eviction_threshold=settings.eviction_threshold, capacity=settings.capacity)
    prunes = {p.id for p in chosen}
    entries = [{"id": e.id, "kind": e.kind.value, "window_days": settings.window(e.kind),
                "confidence_now": round(settings.decayed(e, now_ms), 4),
                "confidence_after": round(after[e.id], 4), "fades": after[e.id] < settings.retrieval_threshold,
                "pruned": e.id in prunes} for e in live]
    return {"days": days, "entries": entries, "summary": {
        "entries": len(entries), "fade": sum(1 for x in entries if x["fades"]),
        "pruned": len(prunes), "kept": len(entries) - len(prunes), "capacity": settings.capacity,
        "over_capacity": sum(1 for p in chosen if p.reason == "over_capacity")}}
