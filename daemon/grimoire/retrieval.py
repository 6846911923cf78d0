"""Hybrid retrieval: vector and FTS5 candidates merged by id, fused, ranked (docs/design/retrieval.md).

`Retriever.recall` first embeds the newest entries that have no vector yet (a bounded
tail: read-your-writes by meaning), embeds the query (off the event loop in the daemon:
this is blocking), takes the nearest entries by cosine and the best keyword matches, drops
what the filters exclude (kind, importance, confidence, sensitivity; archived and retracted
entries; siblings' entries in quarantine that digests withhold and entries the clade's
evidence refuted, unless `include_unverified`: trust.py, belief.py; every hit carries its
`release` and its pooled belief), gives each the relevance `fusion.relevance`
makes of its cosine, its lexical coverage of the query and the coverage any
candidate reaches (`lexical`, IDF from the keyword index's vocabulary), and ranks the rest
with `scoring`, its factors normalised over the candidates.

Recall has no side effect on ranking: an entry's access count grows when it is *used*
(cited, or fed back: `apply_feedback`), never because it appeared in a result list — a
golem that recalls all day would otherwise make the same few entries top every list.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from crdt import Category, Kind, Sensitivity
from daemon.embedding.embedder import Embedder, EmbeddingInfo
from daemon.errors import NotFound, UsageError

from . import fusion, lexical, scoring
from .belief import Belief, BeliefPolicy
from .curator.decay import RETRIEVAL_THRESHOLD
from .evidence_store import beliefs
from .keywords import query_terms
from .records import Entry
from .rows import RankFields
from .store import Grimoire, wall_clock_ms
from .trust import CAUTIONS, Release, TrustPolicy
from .trust_store import entry_states
from .vectors import Eligible, VectorIndex, missing_vectors, write_vectors

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Hit", "Keywords", "RecallQuery", "Retriever", "apply_feedback", "cited_by_response", "response_sentences"]

CANDIDATES = 64
# Widening stops here once k candidates passed (a filter that holds back nearly everything).
MAX_EXAMINED = 1_024
# The gateway memory spec's fallback when the LLM backend returns no citations: an injected
# entry within this cosine of a sentence of the model's response counts as cited.
RESPONSE_CITE_COSINE = 0.8
MAX_RESPONSE_SENTENCES = 256
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuery:
    text: str
    k: int = 10
    kinds: tuple[Kind, ...] = ()
    categories: tuple[Category, ...] = ()
    min_importance: float | None = None
    min_confidence: float | None = None
    include_sensitive: bool = False
    pad: tuple[float, float, float] | None = None
    keyword_only: bool = False
    include_unverified: bool = False  # also what digests withhold: a sibling's unverified entries (trust.py)
    # and entries the clade's evidence refuted (belief.py)
    # Time bounds (Unix ms, inclusive) on each entry's time: its event time where one is given,
    # else when it was written (`RankFields.event_ms`). None: unbounded.
    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Keywords:
    """A query's keyword evidence: its best FTS5 matches, (id, BM25) best first, and the IDF of
    each of its informative stems (what lexical coverage weighs an entry's words by)."""

    candidates: list[tuple[str, float]]
    weights: dict[str, float]


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    score: float
    factors: scoring.Factors
    via: str  # "vector", "keyword" or "both"
    release: str = "own"  # trust.Release: own, corroborated, aged, unverified


class Retriever:
    """Recall over one store; keeps the vector index in memory between queries."""

    def __init__(self, store: Grimoire, embedder: Callable[[], Embedder], *, info: EmbeddingInfo | None = None) -> None:
        """`embedder` loads the model (called on first use); `info`, the model's vector space when
        it is known without loading it (`embedder.expected_info`), lets the vector index and its
        nearest-neighbour search run without the model in memory."""
        self.store = store
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._info = info
        self._index: VectorIndex | None = None
        self._index_lock = threading.Lock()  # recalls on several read connections share the index
        self.lexical_weight = fusion.LEXICAL_WEIGHT  # fusion's first weight (benches sweep it); 0: cosine alone
        self.trust = TrustPolicy()  # the quarantine recall applies (the daemon sets it from config `[trust]`)
        self.belief = BeliefPolicy()  # how siblings' evidence pools and what refutes (belief.py)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def release_embedder(self) -> None:
        """Let go of the model (it is loaded again on next use); the vector index stays."""
        self._embedder = None

    def _space(self) -> EmbeddingInfo:
        return self._info if self._info is not None else self.embedder.info

    def index_missing(self, *, batch: int = 256, limit: int | None = None, newest_first: bool = False,
                      other_models: bool = True) -> int:
        """Embed entries that have no vector of the current model (at most `limit`; with
        `other_models=False` only those with no vector at all); returns how many."""
        done = 0
        while limit is None or done < limit:
            size = batch if limit is None else min(batch, limit - done)
            todo = missing_vectors(self.store, self.embedder.info, limit=size, newest_first=newest_first,
                                   other_models=other_models)
            if not todo:
                break
            vectors = self.embedder.embed([content for _, content in todo])
            write_vectors(self.store, self.embedder.info, [i for i, _ in todo], vectors)
            done += len(todo)
        return done

    def vectors(self) -> dict[str, NDArray[np.float32]]:
        """Every current-model entry vector, by id (the in-memory index, refreshed first)."""
        with self._index_lock:
            return self._vector_index().as_mapping()

    def vector_index(self, store: Grimoire | None = None) -> VectorIndex:
        """The in-memory index of current-model entry vectors, brought up to date from `store`
        (default: the writer's). Single-threaded callers only (tests, benches): the daemon reads
        it through `within` and `nearest`, under the index's lock."""
        with self._index_lock:
            return self._vector_index(store)

    def within(self, vector: NDArray[np.float32], threshold: float, *,
               store: Grimoire | None = None) -> list[tuple[str, float]]:
        """Every (id, cosine) of the index at cosine ≥ `threshold` from `vector`, best first, after
        bringing it up to date from `store`, under the index's lock (the warning repeat check)."""
        with self._index_lock:
            return self._vector_index(store).within(vector, threshold)

    def _vector_index(self, store: Grimoire | None = None) -> VectorIndex:
        """The in-memory index, brought up to date from `store` (default: the writer's). Call
        with `_index_lock` held."""
        if self._index is None or self._index.info != self._space():
            self._index = VectorIndex(self._space())
        self._index.refresh(store or self.store)
        return self._index

    def keyword_candidates(self, query: RecallQuery, *, store: Grimoire | None = None) -> list[tuple[str, float]]:
        """The keyword half of `recall` on its own: (id, BM25) of the best FTS5 matches; empty
        when the query has no searchable word (raises `UsageError` then only if keyword-only)."""
        return self.keywords(query, store=store).candidates

    def keywords(self, query: RecallQuery, *, store: Grimoire | None = None) -> Keywords:
        """`keyword_candidates` and the query's stem weights, from one lookup of its words in the
        index's vocabulary; empty when the query has no searchable word (raises `UsageError`
        then only if keyword-only). Kind, category and sensitivity are filtered inside the
        keyword search, before its cut."""
        reader = store or self.store
        try:
            terms = query_terms(reader.connection, query.text)
        except UsageError:
            if query.keyword_only:
                raise
            return Keywords([], {})
        found = reader.keyword_scores(query.text, k=_wanted(query), kinds=query.kinds, terms=terms,
                                      categories=query.categories, include_sensitive=query.include_sensitive)
        return Keywords(found, terms.weights)

    def nearest(self, query: RecallQuery, query_vector: NDArray[np.float32], *,
                store: Grimoire | None = None, offset: int = 0, k: int | None = None) -> list[tuple[str, float]]:
        """The vector half of `recall` on its own: (id, cosine) of the live entries of the
        query's kinds, categories and sensitivity nearest `query_vector`, ranked `offset` to
        `offset + k` (default the first max(64, 5k)), best first, after bringing the in-memory
        index up to date from `store`."""
        with self._index_lock:
            return self._vector_index(store).nearest(query_vector, _wanted(query) if k is None else k,
                                                     eligible=_eligible(query), offset=offset)

    def _cosines(self, entry_ids: Sequence[str], query_vector: NDArray[np.float32]) -> dict[str, float]:
        with self._index_lock:
            return self._index.cosines(entry_ids, query_vector) if self._index is not None else {}

    def _admit(self, reader: Grimoire, ids: Sequence[str], query: RecallQuery, now: int) -> _Admitted:
        """Of `ids`, the entries the query's filters let through: `_passes` (live, kind,
        sensitivity, faded, thresholds), then quarantine and refutation unless
        `include_unverified`; with each one's release and pooled belief."""
        rows = [(c, text) for c, text in reader.rank_rows(list(ids)) if _passes(c, query, now)]
        releases: dict[str, str] = {}
        pooled: dict[str, Belief] = {}
        trial: dict[str, str] = {}
        if rows:
            view = reader.trust_view(self.trust, now_ms=now)
            if view is not None:
                states = entry_states(reader.connection, [c.id for c, _ in rows], view, now_ms=now,
                                      policy=self.trust)
                releases = {i: release.value for i, (_, release, _) in states.items()}
                if not query.include_unverified:
                    rows = [(c, text) for c, text in rows if c.id not in states or states[c.id][2]]
                    trial = {i: facts.author for i, (facts, release, shown) in states.items()
                             if shown and release is Release.UNVERIFIED and facts.kind not in CAUTIONS}
            pooled = beliefs(reader.connection, [c.id for c, _ in rows], view, self.belief)
            if not query.include_unverified:  # refuted by the clade's evidence (belief.py): withheld
                rows = [(c, text) for c, text in rows if not (c.id in pooled and pooled[c.id].refuted)]
        return _Admitted(rows, releases, pooled, trial)

    def recall(self, query: RecallQuery, *, now_ms: int | None = None, embed_limit: int | None = None,
               query_vector: NDArray[np.float32] | None = None, nearest: list[tuple[str, float]] | None = None,
               keyword: Keywords | None = None, store: Grimoire | None = None) -> list[Hit]:
        """The top `query.k` entries by rank. Raises `UsageError` for an empty query.

        First embeds entries that lack a vector, newest first — all of them, or at most
        `embed_limit` (the daemon embeds its bounded tail itself, outside the store's thread,
        and passes 0). Entries still without a vector take part through keyword search.
        `query_vector`, `nearest` (with `query_vector` only) and `keyword`, when given, are the
        query's embedding, `self.nearest` of it and `self.keywords` (the daemon computes them
        side by side, off this thread). `store`: a read connection to read through (with
        `embed_limit=0`: a recall then writes nothing), default the writer's.

        Candidate selection filters before its cut: the vector search returns only live entries
        of the query's kinds, categories and sensitivity (`VectorIndex.nearest`), keyword search
        likewise; the filters that depend on the moment (quarantine, refutation, fading,
        thresholds) then run, and while fewer than max(64, 5k) vector candidates pass the vector
        search widens to the next ones (`_widen`), so a flood that fails them — a compromised
        sibling's near-duplicates — cannot push a released entry out.
        """
        if not query.text.strip():
            raise UsageError("query must not be empty")
        reader = store or self.store
        now = wall_clock_ms() if now_ms is None else now_ms
        via: dict[str, str] = {}
        vec: NDArray[np.float32] | None = None
        if not query.keyword_only:
            if embed_limit != 0:
                self.index_missing(limit=embed_limit, newest_first=True)
            vec = self.embedder.embed([query.text])[0] if query_vector is None else query_vector
            if nearest is None or query_vector is None:
                nearest = self.nearest(query, vec, store=reader)
            for entry_id, _ in nearest:
                via[entry_id] = "vector"
        found = self.keywords(query, store=reader) if keyword is None else keyword
        bm25: dict[str, float] = {}
        for entry_id, score in found.candidates:
            via[entry_id] = "both" if entry_id in via else "keyword"
            bm25[entry_id] = score
        best = max(bm25.values(), default=0.0)
        admitted = self._admit(reader, list(via), query, now)
        if vec is not None and nearest is not None:
            admitted = self._widen(query, vec, reader, now, via, admitted, examined=len(nearest))
        rows, releases, pooled = admitted.rows, admitted.releases, admitted.pooled
        weights = found.weights if vec is not None and self.lexical_weight else {}
        # candidate id -> its stems (coverage needs them only when the query has a weighted stem)
        held = lexical.stem_sets({c.id: text for c, text in rows}) if weights else {}
        reach = lexical.reach(weights, held.values()) if weights else 0.0  # what any candidate covers
        candidates = [c for c, _ in rows]
        cosines = self._cosines([c.id for c in candidates], vec) if vec is not None else {}
        raw = []
        for cand in candidates:
            if vec is not None:
                # Relevance: cosine and lexical coverage, fused (fusion.py says how and why).
                covered = lexical.coverage(weights, held[cand.id]) if cand.id in held else 0.0
                semantic = fusion.relevance(cosines.get(cand.id), covered, reach, weight=self.lexical_weight)
            else:  # keyword-only: BM25 relative to the best match
                semantic = bm25.get(cand.id, 0.0) / best if best > 0 else 0.0
            raw.append(_factors(cand, semantic, query.pad, now))
        ranked = _trial_capped(sorted(zip(candidates, scoring.normalise(raw), strict=True),
                                      key=lambda cf: (-cf[1].score, cf[0].id)), admitted.trial,
                               self.trust.unverified_per_author)[: query.k]
        full = {e.id: e for e in reader.get_many([c.id for c, _ in ranked])}
        return [Hit(replace(full[c.id], belief=pooled.get(c.id)), f.score, f, via[c.id], releases.get(c.id, "own"))
                for c, f in ranked if c.id in full]

    def _widen(self, query: RecallQuery, vec: NDArray[np.float32], reader: Grimoire, now: int,
               via: dict[str, str], admitted: _Admitted, *, examined: int) -> _Admitted:
        """Widen the vector search past its first `examined` while fewer than `_wanted(query)`
        of its candidates passed the filters: the next page (as large as all examined so far),
        until enough pass, the index runs out, or `MAX_EXAMINED` were looked at with at least
        k passed (a filter that holds back nearly everything costs at most that, unless fewer
        than k passed: then it goes on to the end). Adds to `via` what it finds."""
        want = _wanted(query)
        passed = sum(1 for c, _ in admitted.rows if via[c.id] != "keyword" and c.id not in admitted.trial)
        if examined < want:
            return admitted  # the first page was not full: every eligible entry was seen
        while passed < want and not (examined >= MAX_EXAMINED and passed >= query.k):
            page = self.nearest(query, vec, store=reader, offset=examined, k=examined)
            if not page:
                break
            examined += len(page)
            fresh = [i for i, _ in page if i not in via]
            for entry_id in fresh:
                via[entry_id] = "vector"
            for entry_id, _ in page:
                if via[entry_id] == "keyword":
                    via[entry_id] = "both"
            more = self._admit(reader, fresh, query, now)
            passed += sum(1 for c, _ in more.rows if c.id not in more.trial)
            admitted = _Admitted([*admitted.rows, *more.rows], {**admitted.releases, **more.releases},
                                 {**admitted.pooled, **more.pooled}, {**admitted.trial, **more.trial})
            if len(page) < examined // 2:
                break  # the last page came back short: the index ran out
        return admitted


@dataclass(frozen=True, slots=True)
class _Admitted:
    """Candidates that passed the filters (rank fields and searchable text), their releases and beliefs."""

    rows: list[tuple[RankFields, str]]
    releases: dict[str, str]
    pooled: dict[str, Belief]
    trial: dict[str, str] = field(default_factory=dict)  # of those, siblings' entries on trial: id -> author


def _trial_capped(ranked: list[tuple[RankFields, scoring.Factors]], trial: dict[str, str], per_author: int
                  ) -> list[tuple[RankFields, scoring.Factors]]:
    """`ranked` with at most `per_author` entries on trial per author (the best ranked): a
    member with no record takes one slot of an answer, not all of them (trust.py). Entries on
    trial do not count as passing the filters when the search widens (`_widen`), so a flood of
    them cannot stop the search before the released answer."""
    taken: dict[str, int] = {}
    out = []
    for cand, factors in ranked:
        author = trial.get(cand.id)
        if author is not None:
            if taken.get(author, 0) >= per_author:
                continue
            taken[author] = taken.get(author, 0) + 1
        out.append((cand, factors))
    return out


def _wanted(query: RecallQuery) -> int:
    """How many candidates each half of the search brings: max(64, 5k)."""
    return max(CANDIDATES, 5 * query.k)


def _eligible(query: RecallQuery) -> Eligible:
    return Eligible(kinds=query.kinds, categories=query.categories, include_sensitive=query.include_sensitive)


def composite_importance(c: RankFields, now: int) -> float:
    return scoring.importance(explicit=c.importance, access_count=c.access_count,
                              days=scoring.age_days(c.created_ms, now))


def _passes(c: RankFields, q: RecallQuery, now: int) -> bool:
    if c.archived or c.status != "active":
        return False
    if q.kinds and c.kind not in q.kinds:
        return False
    if q.categories and c.category not in q.categories:
        return False
    if c.sensitivity is Sensitivity.SENSITIVE and not q.include_sensitive:
        return False
    if c.local_confidence < min(RETRIEVAL_THRESHOLD, c.base_confidence):
        return False  # faded by decay (curator/decay.py): archived soon unless used; a low base alone never hides
    if q.min_confidence is not None and c.local_confidence < q.min_confidence:
        return False
    if (q.since_ms is not None and c.event_ms < q.since_ms) or (q.until_ms is not None and c.event_ms > q.until_ms):
        return False
    return q.min_importance is None or composite_importance(c, now) >= q.min_importance


def _factors(c: RankFields, semantic: float, pad: tuple[float, float, float] | None, now: int) -> scoring.Factors:
    return scoring.Factors(
        semantic=semantic,
        # Recency from the entry's time: its event time where one is given (an import of last
        # week's trades is a week old), else when it was written; a later use or validation renews it.
        temporal=scoring.temporal(scoring.age_days(scoring.entry_last_touched(
            event_ms=c.event_ms, created_ms=c.created_ms, used_ms=c.last_used_ms, validated_ms=c.validated_ms), now)),
        importance=composite_importance(c, now),
        pad=scoring.pad_similarity(pad, c.pad),
        source=scoring.source_factor(provenance=c.provenance, origin=c.origin, generation=c.generation,
                                     bloodstain=c.bloodstain),
    )


def apply_feedback(store: Grimoire, *, cited: Sequence[str], injected: Sequence[str],
                   now_ms: int | None = None) -> dict[str, float]:
    """Citation feedback, all or nothing: cited entries gain weight and count one access (a
    use); injected-but-not-cited ones lose a little weight. Raises `NotFound` for an unknown id."""
    cited_set = set(cited)
    now = wall_clock_ms() if now_ms is None else now_ms
    changes: dict[str, float] = {}
    with store.transaction() as conn:
        for entry_id in dict.fromkeys([*cited, *injected]):
            row = conn.execute("SELECT cite_weight FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if row is None:
                raise NotFound(f"no entry with id {entry_id!r}")
            if entry_id in cited_set:
                weight = scoring.cited(row[0])
                # A use is evidence: the forgetting curve restarts from its base and grows more stable.
                conn.execute("UPDATE entries SET cite_weight = ?, access_count = access_count + 1, "
                             "last_accessed_ms = ?, evidence = evidence + 1, "
                             "decay_base = coalesce(decay_base, local_confidence), decay_anchor_ms = ?, "
                             "local_confidence = coalesce(decay_base, local_confidence) WHERE id = ?",
                             (weight, now, now, entry_id))
            else:
                weight = scoring.injected_not_cited(row[0])
                conn.execute("UPDATE entries SET cite_weight = ? WHERE id = ?", (weight, entry_id))
            changes[entry_id] = weight
    return changes


def response_sentences(text: str) -> list[str]:
    """The sentences of a model's response (split at ., !, ? and line breaks; at most 256)."""
    parts = (" ".join(p.split()) for p in _SENTENCE_END.split(text))
    return [p for p in parts if p][:MAX_RESPONSE_SENTENCES]


def cited_by_response(entry_vectors: Mapping[str, NDArray[np.float32]],
                      sentence_vectors: NDArray[np.float32]) -> list[str]:
    """Ids whose vector is within `RESPONSE_CITE_COSINE` of some sentence (vectors unit length), sorted."""
    if not entry_vectors or sentence_vectors.shape[0] == 0:
        return []
    ids = sorted(entry_vectors)
    best = (np.stack([entry_vectors[i] for i in ids]) @ sentence_vectors.T).max(axis=1)
    return [i for i, cosine in zip(ids, best, strict=True) if cosine >= RESPONSE_CITE_COSINE]
