"""Every corpus's candidates and their evidence, taken once through the real retrieval path.

For each question: the candidate set `Retriever.recall` builds (the max(64, 5k) nearest vectors
of the query plus the best FTS5 matches, k = 10, through `Retriever.nearest` and
`Retriever.keywords` on a real `Grimoire` holding the corpus with the bundled model's vectors),
and per candidate what fusion and scoring read: cosine, lexical coverage of the query's IDF
mass (`lexical.coverage` with the store's own IDF), BM25 (0 when not a keyword match), and the
side factors `recall.factors_of` gives it (recency, importance, PAD, source). Ranking any
fusion over these is then pure arithmetic (`arms`), so cross-validation can try many without
re-running recall. Also the two baselines' rankings over the whole corpus: raw cosine and FTS5
BM25 (bench_locomo's). Embeddings and features are cached under /tmp (never the repository).
"""

from __future__ import annotations

import hashlib
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.bench_locomo import Corpus, bm25_rankings, build_store
from daemon.embedding.embedder import DEFAULT_MODEL, Embedder, get_embedder
from daemon.grimoire import lexical
from daemon.grimoire.recall import factors_of, passes
from daemon.grimoire.retrieval import RecallQuery, Retriever
from daemon.grimoire.store import Grimoire, wall_clock_ms

__all__ = ["CACHE", "QueryFeatures", "corpus_features", "embed_cached"]

CACHE = Path(tempfile.gettempdir()) / "clade-fusion-cv"
VERSION = 5  # bump when what is extracted changes


@dataclass(frozen=True)
class QueryFeatures:
    """One question's candidates (corpus keys) and their evidence, aligned arrays."""

    evidence: frozenset[str]
    category: int
    keys: tuple[str, ...]
    cosine: np.ndarray
    coverage: np.ndarray
    bm25: np.ndarray
    temporal: np.ndarray
    importance: np.ndarray
    pad: np.ndarray
    source: np.ndarray
    idf_mass: float  # the query's total stem IDF
    stems: int  # how many informative stems it has
    reach: float  # lexical.reach: the share of its IDF mass some candidate holds
    cosine_top: tuple[str, ...]  # raw cosine over the whole corpus, best 100
    bm25_top: tuple[str, ...]  # FTS5 BM25 over the whole corpus, best 100
    weights: dict[str, float]  # the query's informative stems and their IDF (what coverage weighs)
    tf: tuple[dict[str, int], ...]  # per candidate: how often each query stem occurs in it
    lengths: np.ndarray  # per candidate: how many informative words (stop words dropped)
    event: np.ndarray  # per candidate: its event time (Unix ms; its session's date on chat benchmarks)


def embed_cached(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """`embedder.embed(texts)`, each text's vector cached in CACHE by its hash and the model."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"emb-{hashlib.sha1(embedder.info.model.encode()).hexdigest()[:10]}.pkl"
    cache: dict[str, np.ndarray] = pickle.loads(path.read_bytes()) if path.exists() else {}
    keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
    todo = [i for i, k in enumerate(keys) if k not in cache]
    if todo:
        for start in range(0, len(todo), 256):
            part = todo[start:start + 256]
            for i, v in zip(part, embedder.embed([texts[i] for i in part]), strict=True):
                cache[keys[i]] = np.asarray(v, dtype=np.float32)
        path.write_bytes(pickle.dumps(cache))
    return np.stack([cache[k] for k in keys])


def _digest(corpus: Corpus) -> str:
    h = hashlib.sha1(f"v{VERSION}".encode())
    for d in corpus.docs:
        h.update(f"{d.key}\x00{d.content}\x00{sorted(d.fields.items())!r}\x01".encode())
    for q in corpus.questions:
        h.update(f"{q.text}\x00{sorted(q.evidence)}\x00{q.category}\x01".encode())
    return h.hexdigest()[:16]


def corpus_features(corpus: Corpus, model: str = DEFAULT_MODEL) -> list[QueryFeatures]:
    """Every question's `QueryFeatures` (cached in CACHE by the corpus's content)."""
    path = CACHE / f"feat-{corpus.name}-{_digest(corpus)}.pkl"
    if path.exists():
        cached: list[QueryFeatures] = pickle.loads(path.read_bytes())
        return cached
    embedder = get_embedder(CACHE / "embedder", model)
    docs = embed_cached(embedder, [d.content for d in corpus.docs])
    qvecs = embed_cached(embedder, [q.text for q in corpus.questions])
    bm = bm25_rankings(corpus, 100)
    out: list[QueryFeatures] = []
    with tempfile.TemporaryDirectory(prefix="fusion-cv-") as tmp:
        db = Path(tmp) / "grimoire.db"
        key_of = build_store(corpus, db, CACHE / "embedder", model, docs)
        store = Grimoire.open(db)
        try:
            retriever = Retriever(store, lambda: embedder)
            now = wall_clock_ms()
            vectors = retriever.vectors()  # id -> the entry's vector, what recall's index holds
            for q, v, b in zip(corpus.questions, qvecs, bm, strict=True):
                rq = RecallQuery(text=q.text, k=10)
                nearest = retriever.nearest(rq, v)
                found = retriever.keywords(rq)
                ids = list(dict.fromkeys([i for i, _ in nearest] + [i for i, _ in found.candidates]))
                bm25 = dict(found.candidates)
                rows = [(c, t) for c, t in store.rank_rows(ids) if passes(c, rq, now)]
                rows.sort(key=lambda ct: ct[0].id)
                held = lexical.stem_sets({c.id: t for c, t in rows})
                fs = [factors_of(c, 0.0, None, now) for c, _ in rows]
                cos = [float(vectors[c.id] @ v) if c.id in vectors else 0.0 for c, _ in rows]
                order = np.argsort(-(docs @ v), kind="stable")[:100]
                counted = [lexical.stem_counts(t) for _, t in rows]
                out.append(QueryFeatures(
                    evidence=q.evidence, category=q.category, keys=tuple(key_of[c.id] for c, _ in rows),
                    cosine=np.array(cos), coverage=np.array([lexical.coverage(found.weights, held[c.id])
                                                             for c, _ in rows]),
                    bm25=np.array([bm25.get(c.id, 0.0) for c, _ in rows]),
                    temporal=np.array([f.temporal for f in fs]), importance=np.array([f.importance for f in fs]),
                    pad=np.array([f.pad for f in fs]), source=np.array([f.source for f in fs]),
                    idf_mass=float(sum(found.weights.values())), stems=len(found.weights),
                    reach=lexical.reach(found.weights, held.values()),
                    cosine_top=tuple(corpus.docs[i].key for i in order), bm25_top=tuple(b),
                    weights=dict(found.weights),
                    tf=tuple({s: n for s, n in c.items() if s in found.weights} for c in counted),
                    lengths=np.array([sum(c.values()) for c in counted], dtype=float),
                    event=np.array([c.event_ms for c, _ in rows], dtype=float)))
        finally:
            store.close()
    path.write_bytes(pickle.dumps(out))
    return out
