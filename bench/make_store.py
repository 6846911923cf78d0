"""A store of generated entries with perturbed real MiniLM vectors, for the search benches.

    .venv/bin/python -m bench.make_store OUT.db [--entries N] [--seed S]

N (50,000) `bench.common.Generator` entries (seed S, 12) written through the write door in
transactions of 500, then a vector for each: a real MiniLM embedding of one of 600 Generator
texts (seed 600) plus Gaussian noise (σ 0.03, rng seed 111), renormalised. The store
`bench_recall_daemon` and `bench_vector_filters` read (step 20's and step 26's figures).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common.vectors import add_entries, write_synthetic
from bench.common.workload import Generator, defi_texts
from daemon.embedding.embedder import get_embedder
from daemon.grimoire import Grimoire


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("out", type=Path)
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args(argv)
    if args.out.exists():
        ap.error(f"{args.out} exists: give a new path")
    with tempfile.TemporaryDirectory(prefix="clade-make-store-") as models:
        embedder = get_embedder(Path(models))
        pool = embedder.embed(defi_texts(Generator(600), 600)).astype(np.float32)
        with Grimoire.open(args.out, create=True) as store:
            print(add_entries(store, Generator(args.seed), args.entries))
            print(write_synthetic(store, embedder.info, pool, np.random.default_rng(111)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
