"""bench_recall's section 4: episode search on the LanceDB episode log at two sizes — append
rate, recall@10 and latency of the search as implemented against LanceDB's defaults and the old
prefilter, before and after `ensure_index`, against numpy's brute force — and the check that a
search without the where clause is right on a half-null table."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import progress, summary, timed
from bench.common.machine import dir_size
from bench.common.vectors import NOISE_SIGMA, K, Matrix, perturbed
from daemon.grimoire import Episode, EpisodeLog
from daemon.grimoire.episodes import _SCAN_COLUMNS, _episode_from_row

from .params import Params

__all__ = ["EPISODE_BATCH", "bench_episodes", "exact_top"]

EPISODE_BATCH = 20_000
EMBEDDING_BYTES = 384 * 4


def exact_top(vectors: Matrix, queries: Matrix, k: int) -> list[list[int]]:
    """Exact top-k rows by cosine (unit vectors), in row chunks to bound memory."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(vectors), 100_000):
        sims = queries @ vectors[start:start + 100_000].T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if sims.shape[1] > k else np.tile(
            np.arange(sims.shape[1]), (len(queries), 1))
        best_s = np.concatenate([best_s, np.take_along_axis(sims, top, 1)], axis=1)
        best_i = np.concatenate([best_i, top + start], axis=1)
        keep = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return [list(map(int, row)) for row in best_i]


def np_top(vectors: Matrix, query: Matrix) -> list[int]:
    """Top-K rows by brute force over an in-memory matrix (what VectorIndex.nearest does)."""
    scores = vectors @ query
    top = np.argpartition(-scores, K)[:K]
    return [int(i) for i in top[np.argsort(-scores[top])]]


def ep_id(i: int) -> str:
    return f"{i:032x}"


def search_variant(log: EpisodeLog, vec: Matrix, *, api: bool = True, prefilter: bool = False,
                   refine: int | None = None) -> list[tuple[str, float]]:
    """(id, similarity as returned) from `EpisodeLog.search` itself (`api`), or from the same query
    built here with LanceDB's defaults (nprobes 20, no refine) plus the options given."""
    if api:
        return [(e.id, sim) for e, sim in log.search(vec.tolist(), k=K)]
    table: Any = log._table
    builder: Any = table.search(vec.tolist(), vector_column_name="embedding").distance_type("cosine")
    if prefilter:
        builder = builder.where("embedding IS NOT NULL", prefilter=True)
    if refine is not None:
        builder = builder.refine_factor(refine)
    rows = builder.select([*_SCAN_COLUMNS, "_distance"]).limit(K).to_arrow().to_pylist()
    return [(_episode_from_row(r).id, 1.0 - float(r["_distance"])) for r in rows]


def measure_search(label: str, log: EpisodeLog, vectors: Matrix, queries: Matrix, truth: list[list[int]],
                   samples: int, **kw: Any) -> dict[str, Any]:
    """Latency; recall@10 against exact search; the exact cosine of what came back relative to the
    exact top-10's (1.0: as good as exact); the error of the similarity the search reports."""
    n = min(samples, len(queries))
    progress(f"  search [{label}]: {n} queries")
    search_variant(log, queries[0], **kw)  # warm-up (opens index / caches)
    lat: list[float] = []
    found = 0
    got_cos = best_cos = err = 0.0
    returned = 0
    for i in range(n):
        t0 = time.perf_counter()
        hits = search_variant(log, queries[i], **kw)
        lat.append(time.perf_counter() - t0)
        rows = [int(h, 16) for h, _ in hits]
        found += len(set(rows) & set(truth[i]))
        exact = vectors[rows] @ queries[i] if rows else np.zeros(0, np.float32)
        got_cos += float(exact.sum()) / K
        best_cos += float((vectors[truth[i]] @ queries[i]).sum()) / K
        err += float(np.abs(exact - np.array([sim for _, sim in hits], np.float32)).sum())
        returned += len(rows)
    return {"variant": label, "latency": summary(lat), "recall_at_10": round(found / (n * K), 4),
            "cosine_vs_exact_top10": round(got_cos / best_cos, 4),
            "reported_similarity_abs_error": round(err / max(1, returned), 4)}


def null_embedding_check(root: Path, pool: Matrix, rng: np.random.Generator) -> dict[str, Any]:
    """Does a vector search without `where embedding IS NOT NULL` ever return rows without one?"""
    log = EpisodeLog(root / "episodes-nulls", create=True)
    n = 4_000
    vecs = perturbed(pool, n, rng)
    log.append([Episode(id=ep_id(i), summary=f"null check {i}", observed_ms=i,
                        embedding=None if i % 2 else tuple(vecs[i].tolist())) for i in range(n)])
    out: dict[str, Any] = {"rows": n, "rows_without_embedding": n // 2}
    for stage in ("flat", "ivf_pq"):
        if stage == "ivf_pq":
            log.ensure_index(threshold=n)
        nulls = returned = 0
        for q in pool[:50]:
            hits = search_variant(log, q, api=False)
            returned += len(hits)
            nulls += sum(int(h, 16) % 2 for h, _ in hits)
        out[stage] = {"returned": returned, "without_embedding": nulls}
    return out


def index_state(log: EpisodeLog) -> dict[str, Any]:
    table: Any = log._table
    for idx in table.list_indices():
        if "embedding" in getattr(idx, "columns", []):
            stats: Any = table.index_stats(idx.name)
            return {"name": idx.name, "indexed_rows": getattr(stats, "num_indexed_rows", None),
                    "unindexed_rows": getattr(stats, "num_unindexed_rows", None),
                    "segments": getattr(stats, "num_indices", None)}
    return {}


def ensure_index(log: EpisodeLog, rows: int, threshold: int) -> dict[str, Any]:
    """`log.ensure_index(threshold)` on a table of `rows` rows: built or not, seconds, index state."""
    progress(f"  ensure_index() at {rows:,} rows")
    t0 = time.perf_counter()
    built = log.ensure_index(threshold=threshold)
    return {"rows": rows, "built": built, "seconds": round(time.perf_counter() - t0, 2), "state": index_state(log)}


def append_episodes(log: EpisodeLog, vectors: Matrix, start: int, stop: int,
                    summaries: Sequence[str]) -> dict[str, Any]:
    build = append = 0.0
    for s in range(start, stop, EPISODE_BATCH):
        e = min(stop, s + EPISODE_BATCH)
        t0 = time.perf_counter()
        batch = [Episode(id=ep_id(i), summary=summaries[i % len(summaries)], observed_ms=1_735_689_600_000 + 2_000 * i,
                         protocol="uniswap", importance=0.5, embedding=tuple(row))
                 for i, row in zip(range(s, e), vectors[s:e].tolist(), strict=True)]
        t1 = time.perf_counter()
        log.append(batch)
        t2 = time.perf_counter()
        build, append = build + t1 - t0, append + t2 - t1
        if (e - start) % (EPISODE_BATCH * 10) == 0 or e == stop:
            progress(f"  append: {e:,} rows ({append:.1f}s in append, {build:.1f}s building Episode objects)")
    rows = stop - start
    return {"rows": rows, "rows_per_call": EPISODE_BATCH, "seconds_in_append": round(append, 2),
            "rows_per_s": round(rows / append, 1), "seconds_building_episodes": round(build, 2)}


def bench_episodes(root: Path, pool: Matrix, queries: Matrix, p: Params, rng: np.random.Generator,
                   summaries: Sequence[str]) -> dict[str, Any]:
    small, large = p.episodes_small, p.episodes_large
    free = shutil.disk_usage(root).free
    need = large * (EMBEDDING_BYTES + 400) * 3  # table + index + compaction copy, generous
    out: dict[str, Any] = {"vectors": f"real embeddings of {len(pool):,} DeFi texts/entries + N(0, {NOISE_SIGMA}^2) "
                                      "per dimension, renormalised", "noise_sigma": NOISE_SIGMA}
    if need > free:
        large = max(small, int(free / 3 / (EMBEDDING_BYTES + 400)) // EPISODE_BATCH * EPISODE_BATCH)
        out["large_reduced_for_disk"] = {"wanted": p.episodes_large, "free_bytes": free}
    out["episodes_small"], out["episodes_large"] = small, large
    progress(f"[4/5] episodes: generating {large:,} vectors")
    vectors = perturbed(pool, large, rng)
    qs = queries[:p.search_samples]
    log = EpisodeLog(root / "episodes", create=True)
    out["append_small"] = append_episodes(log, vectors, 0, small, summaries)
    truth_small = exact_top(vectors[:small], qs, K)
    variants: list[dict[str, Any]] = []
    api = "EpisodeLog.search (as implemented)"
    raw = "LanceDB defaults (nprobes 20), no refine"
    old = "old: + where embedding IS NOT NULL (prefilter)"

    def measure(rows: int, index: str, label: str, truth: list[list[int]], samples: int, **kw: Any) -> None:
        variants.append({"rows": rows, "index": index,
                         **measure_search(label, log, vectors, qs, truth, samples, **kw)})

    measure(small, "none (flat)", api, truth_small, p.slow_search_samples)
    out["ensure_index_small"] = ensure_index(log, small, threshold=small)
    at_small = f"IVF-PQ built at {small:,}"
    measure(small, at_small, api, truth_small, p.search_samples)
    measure(small, at_small, raw, truth_small, p.search_samples, api=False)
    measure(small, at_small, old, truth_small, p.slow_search_samples, api=False, prefilter=True)
    out["has_vector_index_call"] = summary([timed(log.has_vector_index) for _ in range(50)])

    out["append_large"] = append_episodes(log, vectors, small, large, summaries)
    truth_large = exact_top(vectors, qs, K)
    measure(large, f"IVF-PQ built at {small:,}, {large - small:,} rows not yet merged (searched flat)", api,
            truth_large, p.slow_search_samples)
    out["ensure_index_large"] = ensure_index(log, large, threshold=small)
    after = f"after ensure_index() at {large:,}"
    measure(large, after, api, truth_large, p.search_samples)
    measure(large, after, raw, truth_large, p.search_samples, api=False)

    if p.rebuild:
        table: Any = log._table
        table.drop_index(index_state(log)["name"])
        progress(f"  fresh index: drop_index + ensure_index() at {large:,} rows")
        t0 = time.perf_counter()
        log.ensure_index(threshold=small)
        out["rebuild_large"] = {"rows": large, "partitions": max(16, int(large**0.5) // 4),
                                "seconds": round(time.perf_counter() - t0, 2), "state": index_state(log)}
        fresh = f"IVF-PQ built fresh at {large:,}"
        measure(large, fresh, api, truth_large, p.search_samples)
        measure(large, fresh, raw, truth_large, p.search_samples, api=False)
    out["search"] = variants
    np_lat = [timed(partial(np_top, vectors, qs[i])) for i in range(min(20, len(qs)))]
    out["numpy_brute_force_large"] = summary(np_lat)
    out["bytes"] = dir_size(root / "episodes")
    progress("  null-embedding check (search without the where clause on a half-null table)")
    out["null_embedding_check"] = null_embedding_check(root, pool, rng)
    return out
