"""Warning writes as the day's warnings grow: the repeat check's cost per write (step 22).

    .venv/bin/python -m bench.bench_warnings [--count 5000] [--window 100] [--rounds 3] [--seed 1]

`--count` own warnings written in one simulated day through `crossing.remember_warning` into a
fresh real store (SQLite in a temp dir), each with its vector, as `POST /v1/memory` writes
them after embedding (the model is left out: its ~10–20 ms per warning is the same on every
write, and what is measured is what grows). Vectors are seeded random unit vectors (384-d);
one write in ten repeats an earlier warning closely (cosine ~0.99), so holds happen, and one
in three states figures. Reported per round: writes/s (CPU seconds of this process and wall)
of the first `--window` writes and of the last `--window` (up to `--count`), and last/first;
`--rounds` fresh stores, the median and range of the ratio.

Runs against whichever code is on PYTHONPATH: with `remember_warning(..., index=)` (the vector
index: step 22) or without (the scan of the day's warnings before it), so "before" and
"after" are two invocations of this same file one after the other.

Result schema (last stdout line, bench.common): results.rounds[] {first_per_s, last_per_s,
first_cpu_per_s, last_cpu_per_s, ratio, ratio_cpu, held}, results.ratio_median,
results.ratio_cpu_median, results.code ("index" | "scan"), host load.
"""

# ruff: noqa: E402  (numpy and what imports it come after native_threads.pin)
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon import native_threads

native_threads.pin()  # one OpenBLAS thread, as in `clade run` (before numpy loads)

import numpy as np

from bench.common import HostLoad, emit, machine_info, out, progress
from bench.common.seed import seed_warning, warning_index_supported
from crdt import Kind
from crypto import Identity
from daemon.embedding.embedder import EmbeddingInfo
from daemon.grimoire import Grimoire, NewEntry

INFO = EmbeddingInfo(model="bench", model_version="1", preprocess_hash="b", dim=384)
DAY_MS = 86_400_000
T0 = 1_800_000_000_000


def _unit(v: np.ndarray) -> np.ndarray:
    unit: np.ndarray = (v / np.linalg.norm(v)).astype(np.float32)
    return unit


def one_round(root: Path, count: int, window: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    clock = {"now": T0}
    me = Identity(rng.bytes(32))
    store = Grimoire.open(root / f"w{seed}.db", create=True, wall_ms=lambda: clock["now"])
    index = None
    if warning_index_supported():
        from daemon.grimoire.vector_index import VectorIndex

        vindex = VectorIndex(INFO)

        def refreshed(s: Grimoire) -> VectorIndex:
            vindex.refresh(s)
            return vindex

        index = refreshed
    written: list[tuple[str, np.ndarray]] = []
    stamps: list[tuple[float, float]] = []  # (process CPU, wall) after each write
    held = 0
    step = DAY_MS // (count + 1)  # the whole run within one day: every earlier warning is in the window
    try:
        for _ in range(count):
            clock["now"] += step
            if written and rng.random() < 0.1:
                text, vector = written[int(rng.integers(0, len(written)))]
                vector = _unit(vector + rng.normal(scale=0.01, size=INFO.dim))
            else:
                text = f"warning {rng.integers(0, 1 << 30):x}: pool drained"
                if rng.random() < 1 / 3:
                    text += f" at {rng.integers(1, 500)} gwei"
                vector = _unit(rng.normal(size=INFO.dim))
            _, similarity = seed_warning(store, NewEntry(kind=Kind.WARNING, content=text), me, vector=vector,
                                         info=INFO, now_ms=clock["now"], index=index)
            held += similarity is not None
            written.append((text, vector))
            stamps.append((time.process_time(), time.perf_counter()))
    finally:
        store.close()

    def rate(first: int, last: int, which: int) -> float:
        return (last - first) / (stamps[last][which] - stamps[first][which])

    first = (rate(0, window, 1), rate(0, window, 0))
    last = (rate(count - 1 - window, count - 1, 1), rate(count - 1 - window, count - 1, 0))
    return {"first_per_s": round(first[0], 1), "last_per_s": round(last[0], 1),
            "first_cpu_per_s": round(first[1], 1), "last_cpu_per_s": round(last[1], 1),
            "ratio": round(last[0] / first[0], 3), "ratio_cpu": round(last[1] / first[1], 3), "held": held}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    code = "index" if warning_index_supported() else "scan"
    host = HostLoad()
    rounds = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-warnings-") as tmp:
        for r in range(args.rounds):
            progress(f"round {r + 1}/{args.rounds}: {args.count:,} warnings ({code})")
            res = one_round(Path(tmp), args.count, args.window, args.seed + r)
            rounds.append(res)
            out(f"  [{code}] round {r + 1}: first {args.window}: {res['first_per_s']:,.0f} writes/s "
                f"({res['first_cpu_per_s']:,.0f} per CPU-s); last {args.window} (to {args.count:,}): "
                f"{res['last_per_s']:,.0f} writes/s ({res['last_cpu_per_s']:,.0f} per CPU-s); "
                f"last/first {res['ratio']:.2f} (CPU {res['ratio_cpu']:.2f}); held {res['held']}")
    ratio: Callable[[str], float] = lambda key: statistics.median(r[key] for r in rounds)  # noqa: E731
    out(f"  [{code}] last/first median {ratio('ratio'):.2f} (range {min(r['ratio'] for r in rounds):.2f}–"
        f"{max(r['ratio'] for r in rounds):.2f}); CPU {ratio('ratio_cpu'):.2f}")
    load = host.report("warnings")
    emit("warnings", {"machine": machine_info(), "params": vars(args), "total_seconds": round(time.monotonic() - t0, 1),
                      "code": code, "rounds": rounds, "ratio_median": ratio("ratio"),
                      "ratio_cpu_median": ratio("ratio_cpu"), "host": load})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
