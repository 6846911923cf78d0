"""The warning repeat check's lookup on a large store: the whole vector index against this golem's
own warnings of the window (`repeat_hold.own_recent_near`, step 27).

    .venv/bin/python -m bench.bench_repeat_lookup STORE.db [--own N] [--queries Q] [--seed S]

Copies STORE.db (e.g. `bench.make_store`'s 50,000 entries), writes N (200) own warnings of today
through the write door with random unit vectors, loads the vector index, then times, query by
query (interleaved), what the writer thread spends finding a warning's close entries:
`IndexSnapshot.within` (one product over every vector: the lookup before step 27) and
`own_recent_near` (an index seek for the own warnings of the window, their cosines from the
snapshot). Prints a table, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import emit, machine_info, summary, workdir
from crdt import Kind
from crypto import Identity
from daemon.embedding.catalogue import MINILM
from daemon.embedding.embedder import expected_info
from daemon.grimoire import Grimoire, NewEntry, wall_clock_ms
from daemon.grimoire.promotion import WARNING_REPEAT
from daemon.grimoire.repeat_hold import own_recent_near
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.vectors import write_vectors
from daemon.grimoire.write_door import Prepared, write_entries


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("store", type=Path)
    ap.add_argument("--own", type=int, default=200)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    machine = machine_info(None, ("numpy",))
    info = expected_info(MINILM)
    assert info is not None
    rng = np.random.default_rng(args.seed)
    me = Identity(rng.bytes(32))
    with workdir(None, "clade-repeat-lookup-") as root:
        db = root / "grimoire.db"
        shutil.copyfile(args.store, db)
        with Grimoire.open(db) as store:  # migrates a copy
            news = [NewEntry(kind=Kind.WARNING, content=f"pool {i} drained at {i} gwei") for i in range(args.own)]
            made = write_entries(store, me, Prepared.unembedded(news), now_ms=wall_clock_ms()).created
            own = rng.standard_normal((args.own, info.dim)).astype(np.float32)
            write_vectors(store, info, [e.id for e in made], own / np.linalg.norm(own, axis=1, keepdims=True))
            snapshot = VectorIndex(info).refresh(store)
            near = own_recent_near(lambda: snapshot, me.peer_id, wall_clock_ms)
            queries = rng.standard_normal((args.queries, info.dim)).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            times: dict[str, list[float]] = {"whole_index": [], "own_of_the_window": []}
            for q in queries:
                t0 = time.perf_counter()
                snapshot.within(q, WARNING_REPEAT.similarity)
                times["whole_index"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                near(store, q)
                times["own_of_the_window"].append(time.perf_counter() - t0)
    res: dict[str, Any] = {"machine": machine, "vectors": len(snapshot), "own_warnings": args.own,
                           "queries": args.queries, "arms": {arm: summary(t) for arm, t in times.items()}}
    print(f"repeat lookup over {len(snapshot):,} vectors, {args.own} own warnings of the window, "
          f"{args.queries} queries (interleaved)")
    for arm, r in res["arms"].items():
        print(f"  {arm:18s} p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
    emit("repeat_lookup", res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
