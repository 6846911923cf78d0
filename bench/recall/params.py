"""bench_recall's sizes: the full run's and `--quick`'s."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

__all__ = ["Params", "make_params"]


@dataclass(frozen=True, slots=True)
class Params:
    quick: bool
    seed: int
    query_count: int
    batch_texts: int
    batch_rounds: int
    entries_small: int
    entries_large: int
    real_embed: int
    recall_queries: int
    breakdown_queries: int
    episodes_small: int
    episodes_large: int
    search_samples: int
    slow_search_samples: int
    rebuild: bool


def make_params(args: argparse.Namespace) -> Params:
    if args.quick:
        return Params(quick=True, seed=args.seed, query_count=60, batch_texts=96, batch_rounds=1,
                      entries_small=1_000, entries_large=3_000, real_embed=128, recall_queries=40,
                      breakdown_queries=20, episodes_small=5_000, episodes_large=20_000, search_samples=30,
                      slow_search_samples=10, rebuild=args.rebuild_1m)
    return Params(quick=False, seed=args.seed, query_count=500, batch_texts=1_000, batch_rounds=2,
                  entries_small=10_000, entries_large=50_000, real_embed=1_024, recall_queries=300,
                  breakdown_queries=100, episodes_small=100_000, episodes_large=1_000_000, search_samples=200,
                  slow_search_samples=30, rebuild=args.rebuild_1m)
