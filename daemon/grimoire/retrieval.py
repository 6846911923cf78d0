"""Recall for a caller that owns its store, and citation feedback (docs/design/retrieval.md).

Every ranked read takes one path, `recall.Recall.hits` (recall.py: gather a query's evidence
on one read snapshot, rank it purely). The daemon calls it from its search service
(service/search.py), with the index its writer keeps current and the query's vector computed
off the event loop. `Retriever` is that same path for a caller that owns its store and no
daemon does — the CLI without a daemon, tests, benches: it holds the model and a vector index,
refreshes the index before each recall, and embeds entries that lack a vector only when asked
(`index_missing`, or `recall(embed_limit=...)`: the CLI without a daemon embeds its tail first;
the CLI never writes a vector while a daemon owns the data dir, because it asks the daemon).

Feedback (`apply_feedback`) is the write side: an entry's access count grows when it is *used*
(cited, or fed back), never because it appeared in a result list — a golem that recalls all day
would otherwise make the same few entries top every list.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from daemon.embedding.embedder import Embedder, EmbeddingInfo
from daemon.errors import NotFound

from . import scoring
from .belief import BeliefPolicy
from .recall import (
    CANDIDATES,
    Hit,
    Keywords,
    Recall,
    RecallPolicy,
    RecallQuery,
    eligible,
    keywords,
    wanted,
)
from .store import Grimoire, wall_clock_ms
from .trust import TrustPolicy
from .vector_index import VectorIndex
from .vectors import missing_vectors, write_vectors

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["CANDIDATES", "Hit", "Keywords", "RecallQuery", "Retriever", "apply_feedback", "cited_by_response",
           "response_sentences"]

# The gateway memory spec's fallback when the LLM backend returns no citations: an injected
# entry within this cosine of a sentence of the model's response counts as cited.
RESPONSE_CITE_COSINE = 0.8
MAX_RESPONSE_SENTENCES = 256
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


class Retriever:
    """`Recall` over a store its caller owns: the model (loaded on first use), a vector index
    refreshed before each read, and the policy (`trust`, `belief`, `lexical_weight`: plain
    attributes, the defaults unless set)."""

    def __init__(self, store: Grimoire, embedder: Callable[[], Embedder], *, info: EmbeddingInfo | None = None,
                 policy: RecallPolicy | None = None) -> None:
        """`embedder` loads the model (called on first use); `info`, the model's vector space when
        it is known without loading it (`embedder.expected_info`), lets the vector index and its
        nearest-neighbour search run without the model in memory."""
        self.store = store
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._info = info
        self._index: VectorIndex | None = None
        policy = policy or RecallPolicy()
        self.trust: TrustPolicy = policy.trust
        self.belief: BeliefPolicy = policy.belief
        self.lexical_weight = policy.lexical_weight  # fusion's first weight (benches sweep it); 0: cosine alone
        self._recall = Recall(self.policy, lambda: self._index.current if self._index is not None else None)

    def policy(self) -> RecallPolicy:
        return RecallPolicy(trust=self.trust, belief=self.belief, lexical_weight=self.lexical_weight)

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
        `other_models=False` only those with no vector at all); returns how many. Writes: only
        for a caller that owns the store (no daemon does)."""
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

    def vector_index(self, store: Grimoire | None = None) -> VectorIndex:
        """The vector index, brought up to date from `store` (default: the owner's)."""
        if self._index is None or self._index.info != self._space():
            self._index = VectorIndex(self._space())
        self._index.refresh(store or self.store)
        return self._index

    def vectors(self) -> dict[str, NDArray[np.float32]]:
        """Every current-model entry vector, by id (read-only views of an index snapshot)."""
        return self.vector_index().current.as_mapping()

    def within(self, vector: NDArray[np.float32], threshold: float, *,
               store: Grimoire | None = None) -> list[tuple[str, float]]:
        """Every (id, cosine) at cosine ≥ `threshold` from `vector`, best first (the warning repeat check)."""
        return self.vector_index(store).current.within(vector, threshold)

    def keywords(self, query: RecallQuery, *, store: Grimoire | None = None) -> Keywords:
        """The keyword half of a recall on its own (`recall.keywords`)."""
        return keywords(query, store or self.store)

    def nearest(self, query: RecallQuery, query_vector: NDArray[np.float32], *,
                store: Grimoire | None = None, offset: int = 0, k: int | None = None) -> list[tuple[str, float]]:
        """The vector half of a recall on its own: (id, cosine) of the live eligible entries
        nearest `query_vector`, ranked `offset` to `offset + k` (default max(64, 5k))."""
        return self.vector_index(store).current.nearest(query_vector, wanted(query) if k is None else k,
                                                        eligible=eligible(query), offset=offset)

    def recall(self, query: RecallQuery, *, now_ms: int | None = None, embed_limit: int | None = None,
               query_vector: NDArray[np.float32] | None = None, store: Grimoire | None = None) -> list[Hit]:
        """The top `query.k` entries: `Recall.hits` on `store` (default the owner's). First embeds
        up to `embed_limit` entries lacking a vector, newest first (None: all; 0: none, so the
        recall writes nothing); `query_vector`: the query's embedding when the caller has it.
        Raises `UsageError` for an empty query."""
        reader = store or self.store
        if embed_limit != 0 and not query.keyword_only:
            self.index_missing(limit=embed_limit, newest_first=True)
        vec = None
        if not query.keyword_only and query.text.strip():
            vec = self.embedder.embed([query.text])[0] if query_vector is None else query_vector
            self.vector_index(reader)
        return self._recall.hits(query, reader, vec, now_ms=wall_clock_ms() if now_ms is None else now_ms)


def apply_feedback(store: Grimoire, *, cited: Sequence[str], injected: Sequence[str],
                   now_ms: int | None = None) -> dict[str, float]:
    """Citation feedback, all or nothing: cited entries gain weight and count one access (a
    use); injected-but-not-cited ones lose a little weight. Raises `NotFound` for an unknown id."""
    cited_set = set(cited)
    now = wall_clock_ms() if now_ms is None else now_ms
    changes: dict[str, float] = {}
    with store._transaction() as conn:
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
