"""The crossing gates' I/O: what the curator promotes, warnings held as repeats, inherited entries.

`promote_ready` reads this golem's unpromoted entries and the references novelty is measured
against (entries it already promoted and entries siblings sent, by their current-model
vectors), asks the pure gates (promotion.crossing_reason, admission.admission) in creation
order — an entry admitted this cycle is a reference for the next, so two paraphrases written
together do not both cross — and promotes through `Grimoire.promote`, one call per reason.

`remember_warning` writes a warning or anti_knowledge with its vector in one transaction and
holds it (`crossing_hold = 'near_duplicate'`) when it repeats one this golem gossiped within
24 h (cosine ≥ 0.95 and the same figures, promotion.figures): the hold is committed with the
entry, before any publisher can see it. The repeats are looked for in the in-memory vector
index (the entries that close, then their rows), not by reading the day's warnings.

Inherited entries (`clade inherit`, `clade restore --as-successor`) arrive held
(`crossing_hold = 'inherited'`): they are this golem's private priors, never relayed. Once
validated here — a positive outcome, a use (a citation through feedback counts one), or a
sibling's confirmation — `release_inherited` makes them cross. Their ops cannot simply be
relayed: they are signed by the dead author, only the author may give them fresh dots
(`Mutator.republish`), and the author's own context row may already have told siblings those
dots were seen-and-withheld (crdt/replica.py, extract_deltas), in which case they would never
be sent again. So the heir re-authors the entry: a new own entry with the same content and
metadata, origin `inherited` and the inherited generation (the signed body carries both, so
siblings see where it came from), promoted with reason `inherited`; the original is archived
locally (reason `reissued`, `local_superseded_by` the new id) and stays held. One transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crdt import Kind, Origin, Timestamp, may_cross
from daemon.embedding.embedder import EmbeddingInfo

from .admission import AdmissionInput, admission, max_similarity
from .belief import track_record
from .evidence_store import clade_record
from .promotion import EVIDENCE_KINDS, PROMOTABLE, WARNING_REPEAT, Candidate, crossing_reason, figures, refusal_reason
from .records import Entry, NewEntry
from .store import Grimoire, LocalIdentity
from .trust import TrustPolicy
from .vector_index import VectorIndex
from .vectors import model_clause, put_vectors
from .vitality import read_vitality

__all__ = ["Near", "add_checked", "index_near", "promote_ready", "release_inherited", "remember_warning"]

Vectors = Mapping[str, NDArray[np.float32]]
_BLOCK = 4096
_CANDIDATE_BLOCK = 512


def _reference_similarity(store: Grimoire, me: str, vectors: Vectors, ids: list[str]) -> dict[str, float]:
    """For each of `ids` with a vector, its highest cosine against what siblings already have:
    own promoted entries and siblings' entries, archived ones too (the curator archives a
    sibling's entry merged into an own paraphrase of it). In blocks: no copy of every vector."""
    wanted = [i for i in ids if i in vectors]
    if not wanted:
        return {}
    rows = store.connection.execute(
        "SELECT id FROM entries WHERE (author = ? AND promoted_ms IS NOT NULL) OR provenance = 'clade'",
        (me,)).fetchall()
    refs = [r[0] for r in rows if r[0] in vectors]
    out: dict[str, float] = {}
    for first in range(0, len(wanted), _CANDIDATE_BLOCK):  # blocks of 4096 × 512 cosines (8 MiB)
        ids = wanted[first:first + _CANDIDATE_BLOCK]
        candidates = np.stack([vectors[i] for i in ids])
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        for start in range(0, len(refs), _BLOCK):
            block = np.stack([vectors[i] for i in refs[start:start + _BLOCK]])
            best = np.maximum(best, (block @ candidates.T).max(axis=0))
        out.update((i, float(v)) for i, v in zip(ids, best, strict=True) if np.isfinite(v))
    return out


def promote_ready(store: Grimoire, identity: LocalIdentity, *, now_ms: int, tick_seconds: float,
                  vectors: Vectors | None = None, legacy: bool | None = None,
                  trust: TrustPolicy | None = None, refused: dict[str, int] | None = None,
                  since_ms: int | None = None) -> list[str]:
    """Promote what passes its gate now (inherited entries validated here included); returns ids.
    `vectors`: current-model vectors by id (None: novelty is not measured); `legacy`: None reads
    the stored vitality; `trust`: the policy siblings' evidence is weighed under (the pooled
    belief and this golem's track record with the clade, belief.py; default `TrustPolicy()`).
    `refused`, when given, counts by reason (`promotion.refusal_reason`) the candidates that did
    not cross and were created after `since_ms` (None: every candidate) — their first look."""
    me = identity.peer_id
    vectors = vectors or {}
    vitality = read_vitality(store.connection)
    legacy = vitality.legacy if legacy is None else legacy
    promoted = release_inherited(store, identity, now_ms=now_ms)
    kinds = sorted(k.value for k in PROMOTABLE)
    rows = store.connection.execute(
        "SELECT id FROM entries WHERE author = ? AND promoted_ms IS NULL AND archived = 0 AND status = 'active' "
        f"AND crossing_hold IS NULL AND kind IN ({', '.join('?' * len(kinds))}) ORDER BY created_hlc, id",
        (me, *kinds)).fetchall()
    policy = trust or TrustPolicy()
    entries = {e.id: e for e in store.get_many([r[0] for r in rows])}
    pooled = store.beliefs(list(entries), policy, now_ms=now_ms)
    record = track_record(*clade_record(store.connection, me, store.trust_view(policy, now_ms=now_ms)))
    evidence_ids = [r[0] for r in rows if r[0] in entries and entries[r[0]].body.kind in EVIDENCE_KINDS]
    reference = _reference_similarity(store, me, vectors, evidence_ids)
    admitted: list[NDArray[np.float32]] = []
    by_reason: dict[str, list[str]] = {}
    for (entry_id,) in rows:
        entry = entries.get(entry_id)
        if entry is None or not may_cross(entry.body):
            continue
        verdict = None
        if entry.body.kind in EVIDENCE_KINDS:
            vector = vectors.get(entry_id)
            similarity = max((x for x in (reference.get(entry_id), max_similarity(vector, admitted))
                              if x is not None), default=None)
            verdict = admission(_admission_input(entry), similarity, record=record)
        candidate = Candidate(
            kind=entry.body.kind, confidence=entry.confidence, created_ms=entry.body.created.ms,
            positive=entry.outcomes_positive, negative=entry.outcomes_negative, confirms=entry.confirms,
            contradicts=entry.contradicts, admitted=verdict is not None and verdict.admitted,
            near_duplicate=verdict is not None and verdict.near_duplicate,
            refuted=entry_id in pooled and pooled[entry_id].refuted)
        reason = crossing_reason(candidate, now_ms=now_ms, tick_seconds=tick_seconds, legacy=legacy,
                                 legacy_confidence=vitality.legacy_confidence)
        if reason is None:
            if refused is not None and (since_ms is None or candidate.created_ms > since_ms):
                why = refusal_reason(candidate, now_ms=now_ms, tick_seconds=tick_seconds)
                refused[why] = refused.get(why, 0) + 1
            continue
        by_reason.setdefault(reason, []).append(entry_id)
        if entry_id in vectors:
            admitted.append(vectors[entry_id])  # a reference for the entries after it
    for reason, ids in by_reason.items():
        promoted += store.promote(ids, identity, now_ms=now_ms, reason=reason)
    return promoted


def _admission_input(entry: Entry) -> AdmissionInput:
    b = entry.body
    return AdmissionInput(confidence=entry.confidence, content=b.content,
                          named=bool(b.tokens or b.chains or b.protocols), categorised=b.category is not None,
                          uses=entry.access_count,
                          positive=entry.outcomes_positive, negative=entry.outcomes_negative)


def release_inherited(store: Grimoire, identity: LocalIdentity, *, now_ms: int) -> list[str]:
    """Re-author inherited entries validated here (see the module docstring); returns the new ids."""
    rows = store.connection.execute(
        "SELECT id, inherited_generation, local_confidence FROM entries WHERE crossing_hold = 'inherited' "
        "AND archived = 0 AND status = 'active' AND (outcomes_positive > 0 OR access_count > 0 OR confirms > 0) "
        "ORDER BY rid").fetchall()
    new_ids: list[str] = []
    for entry_id, generation, local_confidence in rows:
        old = store.get(entry_id)
        b = old.body
        if not may_cross(b):
            continue  # private or never-crossing kinds stay this golem's
        with store.local_batch(identity) as (conn, add):
            new_id = add(NewEntry(
                kind=b.kind, content=b.content, confidence=float(local_confidence), importance=b.importance,
                quality=b.quality, category=b.category, tokens=b.tokens, chains=b.chains, protocols=b.protocols,
                tags=b.tags, strategy_id=b.strategy_id, sensitivity=b.sensitivity, pad=b.pad,
                bloodstain=b.bloodstain, origin=Origin.INHERITED, generation=max(1, int(generation)),
                occurred_ms=b.occurred_ms))
            conn.execute(
                "UPDATE entries SET promoted_ms = ?, promoted_reason = 'inherited', inherited_generation = ?, "
                "outcomes_positive = ?, outcomes_negative = ?, outcomes_neutral = ?, access_count = ?, "
                "evidence = (SELECT evidence FROM entries WHERE id = ?) WHERE id = ?",
                (now_ms, int(generation), old.outcomes_positive, old.outcomes_negative, old.outcomes_neutral,
                 old.access_count, entry_id, new_id))
            conn.execute(
                "UPDATE entries SET archived = 1, archived_reason = 'reissued', archived_ms = ?, "
                "local_superseded_by = ?, crossing_hold = 'reissued' WHERE id = ?", (now_ms, new_id, entry_id))
        new_ids.append(new_id)
    return new_ids


Near = Callable[[Grimoire, NDArray[np.float32]], list[tuple[str, float]]]


def index_near(index: Callable[[Grimoire], VectorIndex]) -> Near:
    """A `Near` over an in-memory index brought up to date from the store it is given."""
    return lambda store, vector: index(store).within(vector, WARNING_REPEAT.similarity)


def remember_warning(store: Grimoire, new: NewEntry, identity: LocalIdentity, *, vector: NDArray[np.float32],
                     info: EmbeddingInfo, now_ms: int,
                     index: Callable[[Grimoire], VectorIndex] | None = None) -> tuple[Entry, float | None]:
    """Write a warning or anti_knowledge with its vector; hold it if it repeats one gossiped in the
    last 24 h. Returns the entry and, when held, the cosine to the one it repeats. With `index`
    (the daemon's: `Retriever.vector_index`) the close entries are found there (see `add_checked`)."""
    close = None if index is None else index_near(index)(store, vector)
    with store.local_batch(identity) as (conn, add):
        entry_id, similarity = add_checked(conn, add, new, identity, vector=vector, info=info, now_ms=now_ms,
                                           close=close)
    return store.get(entry_id), similarity


def add_checked(conn: sqlite3.Connection, add: Callable[[NewEntry], str], new: NewEntry, identity: LocalIdentity,
                *, vector: NDArray[np.float32], info: EmbeddingInfo, now_ms: int,
                close: Sequence[tuple[str, float]] | None = None) -> tuple[str, float | None]:
    """Inside an open local batch (`Grimoire.local_batch`): write a warning or anti_knowledge
    with its vector, held if it repeats one this golem gossiped within the window. Returns the
    entry's id and, when held, the cosine to the one it repeats.

    `close`: the (id, cosine) of entries at cosine ≥ the repeat threshold, best first, found in
    the in-memory vector index by one matrix-vector product (`VectorIndex.within`); only those
    few rows are read (own, a warning kind, not held, of the window, the same figures), so the
    cost does not grow with the day's warnings. Without it (the offline CLI, no index) the
    window's own warnings are scanned. The decision is the same either way: held iff some such
    warning is that close."""
    if new.kind not in (Kind.WARNING, Kind.ANTI_KNOWLEDGE):
        raise ValueError(f"remember_warning: {new.kind.value} is not a warning kind")
    since = Timestamp(max(0, now_ms - WARNING_REPEAT.window_ms)).pack()
    stated = figures(new.content)
    clause, params = model_clause(info)
    similarity: float | None = None
    if close is None:
        rows = conn.execute(
            "SELECT embedding, content FROM entries WHERE author = ? AND kind IN ('warning', 'anti_knowledge') "
            f"AND crossing_hold IS NULL AND created_hlc >= ? AND embedding IS NOT NULL AND {clause}",
            (identity.peer_id, since, *params)).fetchall()
        references = [v for v in (np.frombuffer(blob, dtype=np.float32) for blob, content in rows
                                  if figures(content) == stated) if v.shape[0] == info.dim]
        best = max_similarity(vector, references)
        similarity = best if best is not None and best >= WARNING_REPEAT.similarity else None
    elif close:
        cosine = dict(close)
        for first in range(0, len(close), 500):
            chunk = [entry_id for entry_id, _ in close[first:first + 500]]
            rows = conn.execute(
                f"SELECT id, content FROM entries WHERE id IN ({', '.join('?' * len(chunk))}) AND author = ? "
                "AND kind IN ('warning', 'anti_knowledge') AND crossing_hold IS NULL AND created_hlc >= ? "
                f"AND {clause}", (*chunk, identity.peer_id, since, *params)).fetchall()
            found = [cosine[i] for i, content in rows if figures(content) == stated]
            if found:
                similarity = max(found)  # `close` is best first: no later chunk is closer
                break
    entry_id = add(new)
    put_vectors(conn, info, [entry_id], np.asarray([vector], dtype=np.float32))
    if similarity is not None:
        conn.execute("UPDATE entries SET crossing_hold = 'near_duplicate' WHERE id = ?", (entry_id,))
    return entry_id, similarity


def status_doc(store: Grimoire) -> dict[str, Any]:
    """Counts for `/v1/status`: entries held, by reason, and promoted, by reason."""
    held = dict(store.connection.execute(
        "SELECT crossing_hold, count(*) FROM entries WHERE crossing_hold IS NOT NULL GROUP BY crossing_hold"
    ).fetchall())
    promoted = dict(store.connection.execute(
        "SELECT coalesce(promoted_reason, 'admitted'), count(*) FROM entries WHERE promoted_ms IS NOT NULL "
        "GROUP BY 1").fetchall())
    return {"held": held, "promoted": promoted}
