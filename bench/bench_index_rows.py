"""The vector index's rows as float32, float16 or int8: the top-k's latency and recall.

    .venv/bin/python -m bench.bench_index_rows [--entries N] [--queries Q] [--seed S]

A matrix of N (50,000) perturbed unit vectors (600 random parents, noise σ 0.03) and Q (300)
queries near them; per query, each arm computes every row's score and the top 64, timed, and
its top 10 is compared with float32's (recall@10 against float32). Arms: float32 (the index's
rows: numpy's BLAS product), float16 (numpy's own product: no BLAS kernel), float16 widened to
float32 in chunks of 8,192 rows, int8 with a per-row scale (an int32 product). One BLAS thread
(`OPENBLAS_NUM_THREADS=1` is set before numpy loads), the arms interleaved query by query.
Prints a table, then the JSON result line (bench.common).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.common import emit, machine_info, summary

TOP = 64
CHUNK = 8_192
Vec = np.ndarray[Any, np.dtype[np.float32]]


def _unit(m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def arms_over(m: np.ndarray[Any, Any]) -> dict[str, Callable[[Vec], np.ndarray[Any, Any]]]:
    """Each arm: a query -> every row's score (float32)."""
    m16 = m.astype(np.float16)
    scale = 127 / np.abs(m).max(axis=1, keepdims=True)
    m8 = np.round(m * scale).astype(np.int8)
    inv = (1 / scale[:, 0]).astype(np.float32)
    return {
        "float32": lambda v: m @ v,
        "float16": lambda v: (m16 @ v.astype(np.float16)).astype(np.float32),
        "float16_chunked": lambda v: np.concatenate([m16[i:i + CHUNK].astype(np.float32) @ v
                                                     for i in range(0, m.shape[0], CHUNK)]),
        "int8": lambda v: (m8.astype(np.int32) @ np.round(v * 127).astype(np.int32)).astype(np.float32) * inv,
    }


def top(scores: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    t = np.argpartition(-scores, TOP)[:TOP]
    out: np.ndarray[Any, Any] = t[np.argsort(-scores[t])]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    machine = machine_info(None, ("numpy",))
    rng = np.random.default_rng(args.seed)
    parents = _unit(rng.standard_normal((600, 384)).astype(np.float32))
    m = _unit(parents[rng.integers(0, 600, args.entries)]
              + rng.standard_normal((args.entries, 384)).astype(np.float32) * 0.03).astype(np.float32)
    queries = _unit(parents[rng.integers(0, 600, args.queries)]
                    + rng.standard_normal((args.queries, 384)).astype(np.float32) * 0.05).astype(np.float32)
    arms = arms_over(m)
    times: dict[str, list[float]] = {a: [] for a in arms}
    recall: dict[str, list[float]] = {a: [] for a in arms}
    for v in queries:
        truth = set(top(m @ v)[:10].tolist())
        for arm, score in arms.items():
            t0 = time.perf_counter()
            found = top(score(v))
            times[arm].append(time.perf_counter() - t0)
            recall[arm].append(len(truth & set(found[:10].tolist())) / 10)
    res: dict[str, Any] = {"entries": args.entries, "queries": args.queries, "machine": machine, "arms": {}}
    print(f"top-{TOP} over {args.entries:,} × 384 rows, {args.queries} queries (interleaved), one BLAS thread")
    for arm in arms:
        row = {**summary(times[arm]), "recall_at_10_vs_float32": round(float(np.mean(recall[arm])), 4)}
        res["arms"][arm] = row
        print(f"  {arm:16s} p50 {row['p50_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms  "
              f"recall@10 vs float32 {row['recall_at_10_vs_float32']:.4f}")
    emit("index_rows", res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
