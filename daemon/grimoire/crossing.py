"""The crossing gates' I/O: what the curator promotes, warnings held as repeats, inherited entries.

`promote_ready` reads this golem's unpromoted entries and the references novelty is measured
against (entries it already promoted and entries siblings sent, by their current-model
vectors), asks the pure gates (promotion.crossing_reason, admission.admission) in creation
order — an entry admitted this cycle is a reference for the next, so two paraphrases written
together do not both cross — and promotes through `Grimoire.promote`, one call per reason.

The repeat hold itself (`add_checked`) is a rule of the write door (write_door.py): a warning or
anti_knowledge is written with its vector and held (`crossing_hold = 'near_duplicate'`) when it
repeats one this golem gossiped within 24 h (cosine ≥ 0.95 and the same figures,
promotion.figures), in the transaction that writes it. The repeats are looked for in the
in-memory vector index (the entries that close, then their rows), not by reading the day's
warnings.

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
locally (reason `reissued`, `local_superseded_by` the new id) and stays held. One transaction,
through the write door in the curator's mode (`Writer.CURATOR`): a re-authored warning passes
the repeat hold like any other (unchecked here: no vector is at hand, and `Written.unchecked`
counts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crdt import Origin, may_cross

from .admission import AdmissionInput, admission, max_similarity
from .belief import track_record
from .evidence_store import clade_record
from .promotion import EVIDENCE_KINDS, PROMOTABLE, Candidate, crossing_reason, refusal_reason
from .records import Entry, NewEntry
from .store import Grimoire, LocalIdentity
from .trust import TrustPolicy
from .vitality import read_vitality
from .write_door import Prepared, Writer, entry_batch

__all__ = ["promote_ready", "release_inherited"]

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
        again = NewEntry(
                kind=b.kind, content=b.content, confidence=float(local_confidence), importance=b.importance,
                quality=b.quality, category=b.category, tokens=b.tokens, chains=b.chains, protocols=b.protocols,
                tags=b.tags, strategy_id=b.strategy_id, sensitivity=b.sensitivity, pad=b.pad,
                bloodstain=b.bloodstain, origin=Origin.INHERITED, generation=max(1, int(generation)),
                occurred_ms=b.occurred_ms)
        with entry_batch(store, identity, Prepared.unembedded([again]), now_ms=now_ms,
                         writer=Writer.CURATOR) as (conn, door):
            new_id = door.add(0)
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


def status_doc(store: Grimoire) -> dict[str, Any]:
    """Counts for `/v1/status`: entries held, by reason, and promoted, by reason."""
    held = dict(store.connection.execute(
        "SELECT crossing_hold, count(*) FROM entries WHERE crossing_hold IS NOT NULL GROUP BY crossing_hold"
    ).fetchall())
    promoted = dict(store.connection.execute(
        "SELECT coalesce(promoted_reason, 'admitted'), count(*) FROM entries WHERE promoted_ms IS NOT NULL "
        "GROUP BY 1").fetchall())
    return {"held": held, "promoted": promoted}
