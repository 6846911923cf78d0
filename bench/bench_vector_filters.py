"""What filtering inside the vector search costs: `VectorIndex.nearest` with its masks against the
plain top-k it replaced (the floor), on the same matrix, interleaved query by query.

    .venv/bin/python -m bench.bench_vector_filters STORE.db [--queries N] [--seed S]

STORE.db: a grimoire.db with vectors of MiniLM (e.g. one `bench_recall_options --out DIR` built);
it is copied and migrated first (the live mask needs schema v16), never changed. One OpenBLAS
thread, as in the daemon (daemon/native_threads.py). Arms: the floor (matrix × query, then the
top 64 by argpartition, as `nearest` was before the masks), `nearest` with the live mask only,
with `kinds=[warning]`, and without sensitive entries. Result `results.vectors`, `results.live`,
`results.arms.<arm>`: the latency summary (bench.common.summary) and `ratio_p50` against the floor.
"""

from __future__ import annotations

from daemon.native_threads import pin

pin()

import argparse  # noqa: E402 - after pin(): OpenBLAS reads its thread count when numpy loads
import shutil  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.common import emit, machine_info, summary, workdir  # noqa: E402
from crdt import Kind  # noqa: E402
from daemon.embedding.catalogue import MINILM  # noqa: E402
from daemon.embedding.embedder import expected_info  # noqa: E402
from daemon.grimoire import Grimoire  # noqa: E402
from daemon.grimoire.vector_index import Eligible, VectorIndex  # noqa: E402

K = 64


def main(argv: Sequence[str] | None = None) -> int:
    """Run the arms; the exit code is 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("store")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    machine = machine_info(None, ("numpy",))
    info = expected_info(MINILM)
    assert info is not None
    with workdir(None, "clade-vector-filters-") as root:
        db = root / "grimoire.db"
        shutil.copyfile(args.store, db)
        with Grimoire.open(db) as store:  # migrates a copy
            index = VectorIndex(info)
            index.refresh(store)
    snapshot = index.current
    matrix = snapshot.matrix
    rng = np.random.default_rng(args.seed)
    queries = rng.standard_normal((args.queries, info.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    def floor(q: np.ndarray[Any, Any]) -> None:
        scores = matrix @ q
        top = np.argpartition(-scores, K - 1)[:K]
        top = top[np.argsort(-scores[top], kind="stable")]
        [(snapshot.ids[i], float(scores[i])) for i in top]

    arms: dict[str, Callable[[np.ndarray[Any, Any]], object]] = {
        "floor": floor,
        "live_mask": lambda q: index.nearest(q, K),
        "kind_warning": lambda q: index.nearest(q, K, eligible=Eligible(kinds=(Kind.WARNING,))),
        "no_sensitive": lambda q: index.nearest(q, K, eligible=Eligible(include_sensitive=False)),
    }
    times: dict[str, list[float]] = {a: [] for a in arms}
    for q in queries:
        for arm, run in arms.items():
            t0 = time.perf_counter()
            run(q)
            times[arm].append(time.perf_counter() - t0)
    base = float(np.median(times["floor"]))
    res = {arm: {**summary(t), "ratio_p50": round(float(np.median(t)) / base, 3)} for arm, t in times.items()}
    print(f"VectorIndex.nearest over {len(index):,} vectors, top {K}, {args.queries} queries (interleaved)")
    for arm, r in res.items():
        print(f"  {arm:14s} p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms  ×{r['ratio_p50']:.3f} the floor")
    emit("vector_filters", {"machine": machine, "params": {"store": args.store, "queries": args.queries,
                                                             "seed": args.seed, "k": K},
                            "vectors": len(index), "live": index.live_count(), "arms": res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
