"""Section 3 of bench_recall_options: the large stores (cached under --out) and recall latency.

One base store of generated entries, copied per option with perturbed real vectors of that
option's space; `Retriever.recall` latency with and without the query embedding, in both BLAS
thread modes, and the per-phase breakdown of what `recall` does.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import (
    Generator,
    progress,
    summary,
    timed,
)
from bench.common.vectors import K, Matrix, add_entries, write_synthetic
from bench.recall_options.options import BASE_DIM, SLUG, Params
from daemon.embedding.embedder import (
    Embedder,
    EmbeddingInfo,
)
from daemon.errors import UsageError
from daemon.grimoire import Grimoire, scoring
from daemon.grimoire.recall import factors_of, passes
from daemon.grimoire.retrieval import CANDIDATES, RecallQuery, Retriever
from daemon.grimoire.schema import SCHEMA_VERSION
from daemon.grimoire.store import wall_clock_ms


def _marker(db: Path) -> Path:
    return db.with_suffix(".json")


def _cached(db: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    try:
        saved: dict[str, Any] = json.loads(_marker(db).read_text())
    except (OSError, ValueError):
        return None
    return saved if db.is_file() and saved.get("meta") == meta else None


def _cached_build(db: Path, meta: dict[str, Any], label: str,
                  build: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """The store at `db` if its marker says it was built from `meta`; else `build(tmp)`, then moved into place."""
    saved = _cached(db, meta)
    if saved is not None:
        progress(f"  {label}: cached {db}")
        return db, {**saved["built"], "cached": True}
    tmp = db.with_suffix(".tmp")
    for f in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        f.unlink(missing_ok=True)
    built = build(tmp)
    tmp.replace(db)
    built["db_mib"] = round(db.stat().st_size / 2**20, 1)
    _marker(db).write_text(json.dumps({"meta": meta, "built": built}))
    return db, {**built, "cached": False}


def base_store(stores: Path, p: Params) -> tuple[Path, dict[str, Any]]:
    """N Generator entries, no vectors (cached under `stores`)."""

    def build(tmp: Path) -> dict[str, Any]:
        progress(f"  base store: {p.entries:,} entries")
        with Grimoire.open(tmp, create=True) as store:
            built = add_entries(store, Generator(p.seed + 1), p.entries)
            store.checkpoint()
        return built

    return _cached_build(stores / f"base-{p.entries}-{p.seed}.db",
                         {"entries": p.entries, "seed": p.seed, "schema": SCHEMA_VERSION}, "base store", build)


def option_store(stores: Path, base: Path, p: Params, model: str, info: EmbeddingInfo, pool: Matrix,
                 rng_seed: int) -> tuple[Path, dict[str, Any]]:
    """A copy of the base store with perturbed real vectors of `model` for every entry (cached)."""
    scale = math.sqrt(info.dim / BASE_DIM)
    meta = {"entries": p.entries, "seed": p.seed, "schema": SCHEMA_VERSION, "info": asdict(info),
            "pool": len(pool), "pool_checksum": round(float(pool.astype(np.float64).sum()), 3)}

    def build(tmp: Path) -> dict[str, Any]:
        progress(f"  {model} store: copy of the base, {p.entries:,} perturbed vectors ({info.dim}-d)")
        shutil.copyfile(base, tmp)
        with Grimoire.open(tmp) as store:
            # bench.common.vectors' noise is sigma 0.03 per dimension of a 384-d space: scaling the parents up by
            # sqrt(dim/384) before it is added (then renormalising) gives every space the same noise norm.
            built = write_synthetic(store, info, pool * np.float32(scale), np.random.default_rng(rng_seed))
            store.checkpoint()
        built["noise_sigma_per_dim"] = round(0.03 / scale, 5)
        return built

    return _cached_build(stores / f"{SLUG[model]}-{p.entries}-{p.seed}.db", meta, f"{model} store", build)


PHASES = ("vector_refresh", "nearest", "keyword_scores", "rank_fields", "ranking", "get_many")
GROUPS = {"vector refresh + nearest": ("vector_refresh", "nearest"), "keyword_scores": ("keyword_scores",),
          "rank_fields + ranking": ("rank_fields", "ranking"), "get_many (top k)": ("get_many",)}


def breakdown(retriever: Retriever, queries: Sequence[str], qvecs: Matrix, n: int) -> dict[str, Any]:
    """Each call `Retriever.recall` makes, timed alone, in its order (the ranking loop as written there)."""
    store = retriever.store
    kc = max(CANDIDATES, 5 * K)
    times: dict[str, list[float]] = {p: [] for p in PHASES}
    cand = {"vector": 0, "keyword": 0, "both": 0, "ranked": 0}
    for q, vec in zip(queries[:n], qvecs[:n], strict=True):
        rq, now = RecallQuery(text=q, k=K), wall_clock_ms()
        t0 = time.perf_counter()
        index = retriever.vector_index()
        t1 = time.perf_counter()
        via = dict.fromkeys((i for i, _ in index.nearest(vec, kc)), "vector")
        t2 = time.perf_counter()
        try:
            kw = store.keyword_scores(q, k=kc)
        except UsageError:
            kw = []
        t3 = time.perf_counter()
        for entry_id, _ in kw:
            via[entry_id] = "both" if entry_id in via else "keyword"
        t4 = time.perf_counter()
        candidates = [c for c in store.rank_fields(list(via)) if passes(c, rq, now)]
        t5 = time.perf_counter()
        raw = []
        for c in candidates:
            v = index.vector(c.id)
            raw.append(factors_of(c, max(0.0, float(v @ vec)) if v is not None else 0.0, rq.pad, now))
        ranked = sorted(zip(candidates, scoring.normalise(raw), strict=True),
                        key=lambda cf: (-cf[1].score, cf[0].id))[:K]
        t6 = time.perf_counter()
        store.get_many([c.id for c, _ in ranked])
        t7 = time.perf_counter()
        for phase, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t5 - t4, t6 - t5, t7 - t6), strict=True):
            times[phase].append(dt)
        for source in via.values():
            cand[source] += 1
        cand["ranked"] += len(candidates)
    phases = {p: summary(ts) for p, ts in times.items()}
    groups = {g: summary([sum(times[p][i] for p in ps) for i in range(n)]) for g, ps in GROUPS.items()}
    return {"queries": n, "phases": phases, "groups": groups,
            "phases_mean_sum_ms": round(sum(s["mean_ms"] for s in phases.values()), 3),
            "candidates_mean": {k: round(v / n, 1) for k, v in cand.items()}}


def blas_modes() -> tuple[dict[str, Callable[[], AbstractContextManager[object]]], dict[str, Any]]:
    """numpy's BLAS thread pool as it comes (OpenBLAS: one thread per core) and limited to one thread
    (threadpoolctl, when installed): on 2 shared cores the pool's threads compete with everything else."""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return {"default": nullcontext}, {"threadpoolctl": None}
    controller = ThreadpoolController()
    info = [{k: lib.get(k) for k in ("internal_api", "num_threads", "version")} for lib in controller.info()
            if lib.get("user_api") == "blas"]
    return ({"default": nullcontext, "1 thread": lambda: controller.limit(limits=1, user_api="blas")},
            {"threadpoolctl": "yes", "blas": info})


def bench_recall(db: Path, embedder: Embedder, queries: Sequence[str], qvecs: Matrix, p: Params) -> dict[str, Any]:
    n = min(p.recall_queries, len(queries))
    qs = list(queries[:n])
    modes, blas = blas_modes()
    with Grimoire.open(db) as store:
        entries = store.counts().entries
        progress(f"  recall over {entries:,} entries ({embedder.info.model}): {n} queries x (excluding, including "
                 f"the query embedding) x BLAS threads ({', '.join(modes)}), interleaved")
        retriever = Retriever(store, lambda: embedder)
        cold = timed(lambda: retriever.recall(RecallQuery(text=qs[0], k=K), embed_limit=0, query_vector=qvecs[0]))
        for i, q in enumerate(qs[1:6], 1):
            retriever.recall(RecallQuery(text=q, k=K), embed_limit=0, query_vector=qvecs[i])
            retriever.recall(RecallQuery(text=q, k=K), embed_limit=0)
        lat: dict[tuple[str, str], list[float]] = {(m, w): [] for m in modes for w in ("excl", "incl")}
        hits = 0
        names = list(modes)
        for i, q in enumerate(qs):
            for mode in names if i % 2 == 0 else names[::-1]:
                with modes[mode]():
                    calls = [("excl", qvecs[i]), ("incl", None)]
                    for which, vec in calls if (i // 2) % 2 == 0 else calls[::-1]:
                        t0 = time.perf_counter()
                        got = retriever.recall(RecallQuery(text=q, k=K), embed_limit=0, query_vector=vec)
                        lat[(mode, which)].append(time.perf_counter() - t0)
                        hits += len(got)
        out: dict[str, Any] = {}
        for mode in names:
            with modes[mode]():
                br = breakdown(retriever, qs, qvecs, min(n, p.breakdown_queries))
            out[mode] = {"excluding_embedding": summary(lat[(mode, "excl")]),
                         "including_embedding": summary(lat[(mode, "incl")]), "breakdown": br}
        index_rows = len(retriever.vector_index())
    return {"entries": entries, "vector_index_rows": index_rows, "dim": embedder.info.dim, "queries": n, "k": K,
            "first_recall_ms": round(cold * 1e3, 1), "mean_hits": round(hits / (len(lat) * n), 2),
            "blas": blas, "modes": out}

