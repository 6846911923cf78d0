"""Section 1 of bench_recall_options: recall quality of each option on the evaluation corpus.

Raw cosine rankings and the real `Retriever.recall` on a real `Grimoire` per option, plus the
bench-only fusions (RRF, weighted score sums) and the keyword-only floor; see the docstring of
bench/bench_recall_options.py for what each figure means.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from bench.common import (
    progress,
)
from bench.common.seed import seed_entries
from bench.common.vectors import IDENTITY, Matrix
from bench.recall_options.options import FUSION_WEIGHTS, LABEL, MRR_DEPTH, OLD_QUERIES, REAL, RRF_K, SLUG
from daemon.embedding.catalogue import FUSED, MINILM, MPNET
from daemon.embedding.embedder import (
    Embedder,
    EmbeddingInfo,
    expected_info,
)
from daemon.errors import UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.retrieval import CANDIDATES, RecallQuery, Retriever
from daemon.grimoire.vectors import stored_vectors, write_vectors
from tests.helpers.semantic_corpus import ENTRIES, QUERIES

if TYPE_CHECKING:
    from numpy.typing import NDArray


def fuse(a: Matrix, b: Matrix, weight_a: float) -> Matrix:
    """The fused space's construction with another weight: unit rows scaled by sqrt(weight), side by side."""
    fused = np.concatenate([a * np.float32(math.sqrt(weight_a)), b * np.float32(math.sqrt(1 - weight_a))], axis=1)
    return fused.astype(np.float32, copy=False)


def bench_info(weight: float) -> EmbeddingInfo:
    base = expected_info(FUSED)
    assert base is not None
    return EmbeddingInfo(model=f"bench:{weight:g}*MiniLM+{1 - weight:g}*MPNet", model_version="bench",
                         preprocess_hash=base.preprocess_hash, dim=base.dim)


class WrittenSpace:
    """Looks like an `Embedder` to `Retriever` for a space whose vectors this bench writes itself
    (queries come with `query_vector`, entries already have vectors: `embed` is never called)."""

    def __init__(self, info: EmbeddingInfo) -> None:
        self.info = info

    def embed(self, texts: Sequence[str]) -> Matrix:
        raise RuntimeError(f"{self.info.model}: the bench supplies every vector")


# -- 1. quality -------------------------------------------------------------------------------------------


def quality_metrics(ranked: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """recall@1, recall@5, MRR@10 of per-query key lists (best first, QUERIES order): all, first 36."""
    out: dict[str, dict[str, float]] = {}
    for label, n in (("all", len(QUERIES)), ("first36", OLD_QUERIES)):
        r1 = r5 = rr = 0.0
        for q, top in zip(QUERIES[:n], ranked[:n], strict=True):
            r1 += bool(q.relevant & set(top[:1]))
            r5 += bool(q.relevant & set(top[:5]))
            rank = next((i for i, key in enumerate(top[:MRR_DEPTH], 1) if key in q.relevant), None)
            rr += 0.0 if rank is None else 1 / rank
        out[label] = {"r@1": round(r1 / n, 3), "r@5": round(r5 / n, 3), "mrr@10": round(rr / n, 3), "queries": n}
    return out


def raw_ranking(order: NDArray[np.int64]) -> list[list[str]]:
    keys = [e.key for e in ENTRIES]
    return [[keys[j] for j in row[:MRR_DEPTH]] for row in order]


def cosine_order(queries: Matrix, entries: Matrix) -> NDArray[np.int64]:
    """Per query, entry indices by descending cosine (unit vectors)."""
    return np.argsort(-(queries @ entries.T), axis=1, kind="stable")


def rrf_order(*orders: NDArray[np.int64]) -> NDArray[np.int64]:
    n_q, n_e = orders[0].shape
    score = np.zeros((n_q, n_e))
    for order in orders:
        pos = np.empty_like(order)
        pos[np.arange(n_q)[:, None], order] = np.arange(n_e)[None, :]
        score += 1.0 / (RRF_K + pos + 1)
    return np.argsort(-score, axis=1, kind="stable")


@dataclass
class CorpusStore:
    store: Grimoire
    retriever: Retriever
    ids: list[str]  # ENTRIES order
    key_of: dict[str, str]


def _constant(embedder: Embedder) -> Callable[[], Embedder]:
    """The embedder factory `Retriever` takes, for an embedder already loaded."""
    return lambda: embedder


def corpus_store(path: Path, embedder: Callable[[], Embedder]) -> CorpusStore:
    store = Grimoire.open(path, create=True)
    written = seed_entries(store, [e.new_entry() for e in ENTRIES], IDENTITY)
    ids = [w.id for w in written]
    return CorpusStore(store, Retriever(store, embedder), ids, {w.id: e.key for w, e in zip(written, ENTRIES,
                                                                                            strict=True)})


def hybrid_ranking(cs: CorpusStore, qvecs: Matrix | None, *, keyword_only: bool = False) -> list[list[str]]:
    """Per query, the keys of `Retriever.recall(k=10)`'s hits (top 5 = its first five: same candidates)."""
    assert max(CANDIDATES, 5 * 5) == max(CANDIDATES, 5 * MRR_DEPTH), "k=5 would draw other candidates"
    out: list[list[str]] = []
    for i, q in enumerate(QUERIES):
        try:
            hits = cs.retriever.recall(RecallQuery(text=q.text, k=MRR_DEPTH, keyword_only=keyword_only),
                                       embed_limit=0, query_vector=None if qvecs is None else qvecs[i])
        except UsageError:  # keyword-only with no searchable word: a miss
            hits = []
        out.append([cs.key_of[h.entry.id] for h in hits])
    return out


def bench_quality(embedders: dict[str, Embedder], root: Path) -> tuple[dict[str, Any], dict[str, Matrix]]:
    """Returns the results and each real model's entry vectors (ENTRIES order) for the perturbation pool."""
    progress(f"[1/5] quality: {len(ENTRIES)} entries, {len(QUERIES)} queries, real stores in {root}")
    res: dict[str, Any] = {"entries": len(ENTRIES), "queries": len(QUERIES), "first_queries_subset": OLD_QUERIES,
                           "options": {}}
    ent: dict[str, Matrix] = {}
    qry: dict[str, Matrix] = {}
    orders: dict[str, NDArray[np.int64]] = {}
    stores: list[CorpusStore] = []
    try:
        for model in REAL:
            emb = embedders[model]
            cs = corpus_store(root / f"{SLUG[model]}.db", _constant(emb))
            stores.append(cs)
            t0 = time.perf_counter()
            done = cs.retriever.index_missing()
            embed_s = time.perf_counter() - t0
            vecs = stored_vectors(cs.store, emb.info, cs.ids)
            assert done == len(ENTRIES) and len(vecs) == len(ENTRIES), (done, len(vecs))
            ent[model] = np.stack([vecs[i] for i in cs.ids])
            qry[model] = np.stack([emb.embed([q.text])[0] for q in QUERIES])
            orders[model] = cosine_order(qry[model], ent[model])
            res["options"][model] = {"label": LABEL[model], "kind": "real (get_embedder)",
                                     "raw": quality_metrics(raw_ranking(orders[model])),
                                     "hybrid": quality_metrics(hybrid_ranking(cs, qry[model])),
                                     "index_missing_s": round(embed_s, 2)}
            progress(f"  {model}: {json.dumps(res['options'][model]['raw']['all'])} raw, "
                     f"{json.dumps(res['options'][model]['hybrid']['all'])} hybrid")
        # The fused space is the two models' vectors side by side: check the bench rebuilds it exactly.
        res["fused_rebuild_check"] = {
            "entries_max_abs_diff": float(np.abs(fuse(ent[MINILM], ent[MPNET], 0.5) - ent[FUSED]).max()),
            "queries_max_abs_diff": float(np.abs(fuse(qry[MINILM], qry[MPNET], 0.5) - qry[FUSED]).max()),
            "same_raw_ranking_top10": bool((cosine_order(fuse(qry[MINILM], qry[MPNET], 0.5),
                                                         fuse(ent[MINILM], ent[MPNET], 0.5))[:, :MRR_DEPTH]
                                            == orders[FUSED][:, :MRR_DEPTH]).all()),
        }
        name = f"rrf(k={RRF_K})"
        res["options"][name] = {"label": f"RRF k={RRF_K} of MiniLM, MPNet rankings [bench]", "kind": "bench fusion",
                                "raw": quality_metrics(raw_ranking(rrf_order(orders[MINILM], orders[MPNET]))),
                                "hybrid": None}
        for w in FUSION_WEIGHTS:
            info = bench_info(w)
            space = WrittenSpace(info)
            cs = corpus_store(root / f"sum{w:g}.db", _constant(cast(Embedder, space)))
            stores.append(cs)
            write_vectors(cs.store, info, cs.ids, fuse(ent[MINILM], ent[MPNET], w))
            qv = fuse(qry[MINILM], qry[MPNET], w)
            res["options"][f"sum{w:g}"] = {
                "label": f"score sum {w:g}*MiniLM + {1 - w:g}*MPNet [bench]", "kind": "bench fusion",
                "raw": quality_metrics(raw_ranking(cosine_order(qv, fuse(ent[MINILM], ent[MPNET], w)))),
                "hybrid": quality_metrics(hybrid_ranking(cs, qv))}
        res["options"]["keyword-only"] = {"label": "keyword only (FTS5 via Retriever) [floor]", "kind": "reference",
                                          "raw": None,
                                          "hybrid": quality_metrics(hybrid_ranking(stores[0], None,
                                                                                   keyword_only=True))}
    finally:
        for cs in stores:
            cs.store.close()
    return res, ent

