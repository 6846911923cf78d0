"""Hybrid retrieval: vector and FTS5 candidates merged by id, fused, ranked (docs/design/retrieval.md).

`Retriever.recall` first embeds the newest entries that have no vector yet (a bounded
tail: read-your-writes by meaning), embeds the query (off the event loop in the daemon:
this is blocking), takes the nearest entries by cosine and the best keyword matches, drops
what the filters exclude (kind, importance, confidence, sensitivity; archived and retracted
entries; siblings' entries in quarantine that digests withhold and entries the clade's
evidence refuted, unless `include_unverified`: trust.py, belief.py; every hit carries its
`release` and its pooled belief), gives each the relevance `fusion.relevance`
makes of its cosine and its lexical coverage of the query (`lexical`, IDF from the keyword
index's vocabulary), and ranks the rest with `scoring`, its factors normalised over the
candidates.

Recall has no side effect on ranking: an entry's access count grows when it is *used*
(cited, or fed back: `apply_feedback`), never because it appeared in a result list — a
golem that recalls all day would otherwise make the same few entries top every list.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from crdt import Kind, Sensitivity
from daemon.embedding.embedder import Embedder
from daemon.errors import NotFound, UsageError

from . import fusion, lexical, scoring
from .belief import Belief, BeliefPolicy
from .curator.decay import RETRIEVAL_THRESHOLD
from .evidence_store import beliefs
from .keywords import query_terms
from .records import Entry
from .rows import RankFields
from .store import Grimoire, wall_clock_ms
from .trust import TrustPolicy
from .trust_store import entry_states
from .vectors import VectorIndex, missing_vectors, write_vectors

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Hit", "Keywords", "RecallQuery", "Retriever", "apply_feedback", "cited_by_response", "response_sentences"]

CANDIDATES = 64
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
    min_importance: float | None = None
    min_confidence: float | None = None
    include_sensitive: bool = False
    pad: tuple[float, float, float] | None = None
    keyword_only: bool = False
    include_unverified: bool = False  # also what digests withhold: a sibling's unverified entries (trust.py)
    # and entries the clade's evidence refuted (belief.py)


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

    def __init__(self, store: Grimoire, embedder: Callable[[], Embedder]) -> None:
        self.store = store
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._index: VectorIndex | None = None
        self._index_lock = threading.Lock()  # recalls on several read connections share the index
        self.lexical_weight = fusion.LEXICAL_WEIGHT  # fusion's one parameter (benches sweep it)
        self.trust = TrustPolicy()  # the quarantine recall applies (the daemon sets it from config `[trust]`)
        self.belief = BeliefPolicy()  # how siblings' evidence pools and what refutes (belief.py)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

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
        return self._vector_index().as_mapping()

    def vector_index(self, store: Grimoire | None = None) -> VectorIndex:
        """The in-memory index of current-model entry vectors, brought up to date from `store`
        (default: the writer's); e.g. for the warning repeat check (crossing.remember_warning)."""
        return self._vector_index(store)

    def _vector_index(self, store: Grimoire | None = None) -> VectorIndex:
        """The in-memory index, brought up to date from `store` (default: the writer's)."""
        with self._index_lock:
            if self._index is None or self._index.info != self.embedder.info:
                self._index = VectorIndex(self.embedder.info)
            self._index.refresh(store or self.store)
            return self._index

    def keyword_candidates(self, query: RecallQuery, *, store: Grimoire | None = None) -> list[tuple[str, float]]:
        """The keyword half of `recall` on its own: (id, BM25) of the best FTS5 matches; empty
        when the query has no searchable word (raises `UsageError` then only if keyword-only)."""
        return self.keywords(query, store=store).candidates

    def keywords(self, query: RecallQuery, *, store: Grimoire | None = None) -> Keywords:
        """`keyword_candidates` and the query's stem weights, from one lookup of its words in the
        index's vocabulary; empty when the query has no searchable word (raises `UsageError`
        then only if keyword-only)."""
        reader = store or self.store
        try:
            terms = query_terms(reader.connection, query.text)
        except UsageError:
            if query.keyword_only:
                raise
            return Keywords([], {})
        found = reader.keyword_scores(query.text, k=max(CANDIDATES, 5 * query.k), kinds=query.kinds, terms=terms)
        return Keywords(found, terms.weights)

    def nearest(self, query: RecallQuery, query_vector: NDArray[np.float32], *,
                store: Grimoire | None = None) -> list[tuple[str, float]]:
        """The vector half of `recall` on its own: (id, cosine) of the entries nearest
        `query_vector`, best first, after bringing the in-memory index up to date from `store`."""
        return self._vector_index(store).nearest(query_vector, max(CANDIDATES, 5 * query.k))

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
        """
        if not query.text.strip():
            raise UsageError("query must not be empty")
        reader = store or self.store
        now = wall_clock_ms() if now_ms is None else now_ms
        via: dict[str, str] = {}
        vec: NDArray[np.float32] | None = None
        index: VectorIndex | None = None
        if not query.keyword_only:
            if embed_limit != 0:
                self.index_missing(limit=embed_limit, newest_first=True)
            index = self._vector_index(reader)
            vec = self.embedder.embed([query.text])[0] if query_vector is None else query_vector
            if nearest is None or query_vector is None:
                nearest = index.nearest(vec, max(CANDIDATES, 5 * query.k))
            for entry_id, _ in nearest:
                via[entry_id] = "vector"
        found = self.keywords(query, store=reader) if keyword is None else keyword
        bm25: dict[str, float] = {}
        for entry_id, score in found.candidates:
            via[entry_id] = "both" if entry_id in via else "keyword"
            bm25[entry_id] = score
        best = max(bm25.values(), default=0.0)
        rows = [(c, text) for c, text in reader.rank_rows(list(via)) if _passes(c, query, now)]
        releases: dict[str, str] = {}
        pooled: dict[str, Belief] = {}
        if rows:
            view = reader.trust_view(self.trust, now_ms=now)
            if view is not None:
                states = entry_states(reader.connection, [c.id for c, _ in rows], view, now_ms=now,
                                      policy=self.trust)
                releases = {i: release.value for i, (_, release, _) in states.items()}
                if not query.include_unverified:
                    rows = [(c, text) for c, text in rows if c.id not in states or states[c.id][2]]
            pooled = beliefs(reader.connection, [c.id for c, _ in rows], view, self.belief)
            if not query.include_unverified:  # refuted by the clade's evidence (belief.py): withheld
                rows = [(c, text) for c, text in rows if not (c.id in pooled and pooled[c.id].refuted)]
        weights = found.weights if vec is not None and self.lexical_weight else {}
        # candidate id -> its stems (coverage needs them only when the query has a weighted stem)
        held = lexical.stem_sets({c.id: text for c, text in rows}) if weights else {}
        candidates = [c for c, _ in rows]
        raw = []
        for cand in candidates:
            if vec is not None and index is not None:
                # Relevance: cosine and lexical coverage, fused (fusion.py says how and why).
                v = index.vector(cand.id)
                cosine = float(v @ vec) if v is not None else None
                covered = lexical.coverage(weights, held[cand.id]) if cand.id in held else 0.0
                semantic = fusion.relevance(cosine, covered, weight=self.lexical_weight)
            else:  # keyword-only: BM25 relative to the best match
                semantic = bm25.get(cand.id, 0.0) / best if best > 0 else 0.0
            raw.append(_factors(cand, semantic, query.pad, now))
        ranked = sorted(zip(candidates, scoring.normalise(raw), strict=True),
                        key=lambda cf: (-cf[1].score, cf[0].id))[: query.k]
        full = {e.id: e for e in reader.get_many([c.id for c, _ in ranked])}
        return [Hit(replace(full[c.id], belief=pooled.get(c.id)), f.score, f, via[c.id], releases.get(c.id, "own"))
                for c, f in ranked if c.id in full]


def composite_importance(c: RankFields, now: int) -> float:
    return scoring.importance(explicit=c.importance, access_count=c.access_count,
                              days=scoring.age_days(c.created_ms, now))


def _passes(c: RankFields, q: RecallQuery, now: int) -> bool:
    if c.archived or c.status != "active":
        return False
    if q.kinds and c.kind not in q.kinds:
        return False
    if c.sensitivity is Sensitivity.SENSITIVE and not q.include_sensitive:
        return False
    if c.local_confidence < min(RETRIEVAL_THRESHOLD, c.base_confidence):
        return False  # faded by decay (curator/decay.py): archived soon unless used; a low base alone never hides
    if q.min_confidence is not None and c.local_confidence < q.min_confidence:
        return False
    return q.min_importance is None or composite_importance(c, now) >= q.min_importance


def _factors(c: RankFields, semantic: float, pad: tuple[float, float, float] | None, now: int) -> scoring.Factors:
    return scoring.Factors(
        semantic=semantic,
        temporal=scoring.temporal(scoring.age_days(
            scoring.last_touched(c.created_ms, c.last_used_ms, c.validated_ms), now)),
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
