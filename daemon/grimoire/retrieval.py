"""Hybrid retrieval: vector and FTS5 candidates merged by id, ranked as DESIGN.md says.

`Retriever.recall` embeds the query (off the event loop in the daemon: this is blocking),
takes the nearest entries by cosine and the best keyword matches, drops what the filters
exclude (kind, importance, confidence, sensitivity; archived and retracted entries), ranks
the rest with `scoring`, and bumps the returned entries' local access counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from crdt import Kind

from ..errors import UsageError
from . import scoring
from .embedder import Embedder
from .records import Entry
from .store import Grimoire, wall_clock_ms
from .vectors import VectorIndex, missing_vectors, write_vectors

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Hit", "RecallQuery", "Retriever"]

CANDIDATES = 64


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


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    score: float
    factors: scoring.Factors
    via: str  # "vector", "keyword" or "both"


class Retriever:
    """Recall over one store; keeps the vector index in memory between queries."""

    def __init__(self, store: Grimoire, embedder: Callable[[], Embedder]) -> None:
        self.store = store
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._index: VectorIndex | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def index_missing(self, *, batch: int = 256, limit: int | None = None) -> int:
        """Embed entries that have no vector of the current model (at most `limit`); returns how many."""
        done = 0
        while limit is None or done < limit:
            size = batch if limit is None else min(batch, limit - done)
            todo = missing_vectors(self.store, self.embedder.info, limit=size)
            if not todo:
                break
            vectors = self.embedder.embed([content for _, content in todo])
            write_vectors(self.store, self.embedder.info, [i for i, _ in todo], vectors)
            done += len(todo)
        return done

    def _vector_index(self) -> VectorIndex:
        if self._index is None or self._index.info != self.embedder.info:
            self._index = VectorIndex(self.embedder.info)
        self._index.refresh(self.store)
        return self._index

    def recall(self, query: RecallQuery, *, now_ms: int | None = None, touch: bool = True,
               embed_limit: int | None = None) -> list[Hit]:
        """The top `query.k` entries by rank. Raises `UsageError` for an empty query.

        First embeds entries that lack a vector — all of them, or at most `embed_limit` (the
        daemon passes a small one: its background embedder works through any backlog, and a
        query must never hold the store for minutes). Entries still without a vector take
        part through keyword search.
        """
        if not query.text.strip():
            raise UsageError("query must not be empty")
        now = wall_clock_ms() if now_ms is None else now_ms
        via: dict[str, str] = {}
        vec: NDArray[np.float32] | None = None
        index: VectorIndex | None = None
        if not query.keyword_only:
            self.index_missing(limit=embed_limit)
            index = self._vector_index()
            vec = self.embedder.embed([query.text])[0]
            for entry_id, _ in index.nearest(vec, max(CANDIDATES, 5 * query.k)):
                via[entry_id] = "vector"
        bm25: dict[str, float] = {}
        try:
            for hit in self.store.recall(query.text, k=max(CANDIDATES, 5 * query.k), kinds=query.kinds):
                via[hit.entry.id] = "both" if hit.entry.id in via else "keyword"
                bm25[hit.entry.id] = hit.score
        except UsageError:
            if query.keyword_only:
                raise
        best = max(bm25.values(), default=0.0)
        entries = self.store.get_many(list(via))
        hits = []
        for entry in entries:
            if not _passes(entry, query, now):
                continue
            # Relevance: the cosine with the query; keyword-only, BM25 relative to the best match.
            semantic = 0.0
            if vec is not None and index is not None:
                v = index.vector(entry.id)
                semantic = max(0.0, float(v @ vec)) if v is not None else 0.0
            elif best > 0:
                semantic = bm25.get(entry.id, 0.0) / best
            factors = _factors(entry, semantic, query.pad, now)
            hits.append(Hit(entry, factors.score, factors, via[entry.id]))
        hits.sort(key=lambda h: (-h.score, h.entry.id))
        top = hits[: query.k]
        if touch and top:
            self.store.touch([h.entry.id for h in top], now)
        return top


def _days(entry: Entry, now: int) -> float:
    return scoring.age_days(entry.body.created.ms, now)


def composite_importance(entry: Entry, now: int) -> float:
    return scoring.importance(explicit=entry.body.importance, access_count=entry.access_count,
                              days=_days(entry, now))


def _passes(entry: Entry, q: RecallQuery, now: int) -> bool:
    b = entry.body
    if entry.archived or entry.status != "active":
        return False
    if q.kinds and b.kind not in q.kinds:
        return False
    if b.sensitivity.value == "sensitive" and not q.include_sensitive:
        return False
    if q.min_confidence is not None and entry.local_confidence < q.min_confidence:
        return False
    return q.min_importance is None or composite_importance(entry, now) >= q.min_importance


def _factors(entry: Entry, semantic: float, pad: tuple[float, float, float] | None, now: int) -> scoring.Factors:
    b = entry.body
    return scoring.Factors(
        semantic=semantic,
        temporal=scoring.temporal(_days(entry, now)),
        importance=composite_importance(entry, now),
        pad=scoring.pad_similarity(pad, None if b.pad is None else b.pad.as_tuple()),
        source=scoring.source_factor(provenance=entry.provenance, origin=b.origin.value,
                                     generation=b.generation, bloodstain=b.bloodstain),
        citation=entry.cite_weight,
    )


def apply_feedback(store: Grimoire, *, cited: Sequence[str], injected: Sequence[str]) -> dict[str, float]:
    """Citation feedback: cited entries gain weight; injected-but-not-cited lose some."""
    cited_set = set(cited)
    changes: dict[str, float] = {}
    with store.transaction() as conn:
        for entry_id in dict.fromkeys([*cited, *injected]):
            row = conn.execute("SELECT cite_weight FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if row is None:
                raise UsageError(f"no entry with id {entry_id!r}")
            weight = scoring.cited(row[0]) if entry_id in cited_set else scoring.injected_not_cited(row[0])
            conn.execute("UPDATE entries SET cite_weight = ? WHERE id = ?", (weight, entry_id))
            changes[entry_id] = weight
    return changes
