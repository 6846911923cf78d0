"""The options bench_recall_options compares, its constants, parameters and figure formats."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from daemon.embedding.catalogue import FUSED, MINILM, MPNET

MRR_DEPTH = 10
OLD_QUERIES = 36  # the first 36 queries: the corpus before it grew (earlier reports measured these)
WARMUP = 20
RRF_K = 60
FUSION_WEIGHTS = (0.3, 0.7)  # MiniLM's weight in the bench-only score sums; MPNet gets the rest
BASE_DIM = 384  # bench.common.vectors' noise sigma is per dimension of a 384-d space
REAL = (MINILM, MPNET, FUSED)
LATENCY_OPTIONS = (MINILM, FUSED)
LABEL = {
    MINILM: "all-MiniLM-L6-v2 (int8, bundled, the default)",
    MPNET: "all-mpnet-base-v2 (8-bit)",
    FUSED: "MiniLM+MPNet fused, mean cosine",
}
SLUG = {MINILM: "minilm", MPNET: "mpnet", FUSED: "fused"}
PACKAGES = ("onnxruntime", "fastembed", "tokenizers", "lancedb", "pylance", "pyarrow", "numpy")


@dataclass(frozen=True, slots=True)
class Params:
    quick: bool
    seed: int
    queries: int
    cost_texts: int
    pool_texts: int
    entries: int
    recall_queries: int
    breakdown_queries: int


def make_params(args: argparse.Namespace) -> Params:
    """The full run's sizes, or --quick's."""
    if args.quick:
        return Params(quick=True, seed=args.seed, queries=60, cost_texts=48, pool_texts=64, entries=10_000,
                      recall_queries=40, breakdown_queries=20)
    return Params(quick=False, seed=args.seed, queries=300, cost_texts=240, pool_texts=400, entries=50_000,
                  recall_queries=300, breakdown_queries=100)


def fl(lat: dict[str, float]) -> str:
    """A latency summary on one line."""
    return f"p50 {lat['p50_ms']:7.2f}  p99 {lat['p99_ms']:7.2f}  mean {lat['mean_ms']:7.2f} ms (n={lat['samples']})"


def mib(kib: int) -> str:
    """KiB as whole MiB."""
    return f"{kib / 1024:,.0f}"

