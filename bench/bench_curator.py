"""Benchmark the curator: one cycle at scale, the testament export, and decay's effect on recall.

    .venv/bin/python -m bench.bench_curator [--entries 5000,50000] [--episodes 100000] [--out DIR]
    .venv/bin/python -m bench.bench_curator --entries 2000 --episodes 10000 --topics 40   # quick

Measures, on real SQLite stores in a work directory:

1. **One cycle** (`curator.cycle.run_cycle`) over N entries (bench.common `Generator`, written by
   `remember_many` in transactions of 500; 2 % of them planted near-duplicates of another
   entry) with their vectors (random unit 384-d, the near-duplicates within cosine ~0.97)
   and E episodes handed to replay (in memory: reading them from LanceDB is the episode
   log's cost, measured by bench_store). Two cycles: the first, where every entry is fresh
   (the O(live²) vector comparison), and a steady one 1 h later after 1 % new entries.
   Each size runs in its own child process so its peak RSS (VmHWM) is its own.
2. **Testament export** of the largest store: wall time, entries, file size.
3. **Ablation**: a synthetic 30 days with the real MiniLM model. T topics each hold one fact
   with a number; every day the golem asks 20 topic questions, recalls 5, and cites the fact
   that is still true. On day 10, 30 % of the facts stop being true: for half of them a
   corrected fact (another number) is written, the other half simply stop being used. On
   day 30: recall@5 of still-true facts over every topic's question, and the share of stale
   facts among the entries of each topic's 10-entry digest — with the curator's decay on
   (a cycle each day) and off (the same cycles with an infinite decay window).

Prints a table, then the JSON result line (bench.common). Seeded: two runs write the same data.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Generator, machine_info, machine_rows, print_table, progress
from bench.common.machine import proc_status_kib
from bench.common.report import ROOT, add_common_args, bench_command, main_in_workdir
from bench.common.seed import seed_entries, seed_entry
from crdt import Kind
from crypto import Identity
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator.bequest import export_testament
from daemon.grimoire.curator.consolidate import ReplayItem
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.grimoire.curator.decay import DECAY_WINDOW_DAYS, windows_with
from daemon.grimoire.digest import build_digest
from daemon.grimoire.retrieval import RecallQuery, Retriever, apply_feedback

ME = Identity(bytes(range(32)))
DAY = 86_400_000
T0 = 1_800_000_000_000
DIM = 384
PROTOCOLS = ("uniswap-v3", "aave-v3", "curve", "balancer", "gmx", "compound", "morpho", "pendle")
METRICS = ("fee tier", "utilisation ceiling", "slippage at 100k", "liquidation threshold", "funding rate",
           "borrow rate", "depth at 2%", "oracle delay")
CHAINS = ("mainnet", "arbitrum", "base", "optimism")


# -- 1. one cycle at scale (child process per size) ------------------------------------------


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def cycle_child(path: Path, entries: int, episodes: int, seed: int) -> dict[str, Any]:
    gen = Generator(seed)
    rng = np.random.default_rng(seed)
    clock = {"now": T0}
    with Grimoire.open(path, create=True, wall_ms=lambda: clock["now"]) as store:
        t = time.perf_counter()
        news = [gen.entry() for _ in range(entries)]
        dups = rng.choice(entries, size=entries // 50, replace=False)
        for d in dups:  # a reworded copy of its neighbour (what a golem learns twice)
            src = news[(d + 1) % entries]
            news[d] = NewEntry(kind=src.kind, content=src.content.rstrip(".") + ", seen again.",
                               protocols=src.protocols, chains=src.chains)
        ids: list[str] = []
        for i in range(0, entries, 500):
            ids.extend(e.id for e in seed_entries(store, news[i:i + 500], ME))
        write_s = time.perf_counter() - t
        vectors = _unit(rng, entries)
        for d in dups:  # a near-duplicate of its neighbour: cosine ~0.97
            src = vectors[(d + 1) % entries]
            noisy = src + 0.012 * rng.standard_normal(DIM).astype(np.float32)
            vectors[d] = noisy / np.linalg.norm(noisy)
        vec = {entry_id: vectors[i] for i, entry_id in enumerate(ids)}
        eps = [ReplayItem(f"ep{i}", T0 - int(rng.integers(0, 30 * DAY)), PROTOCOLS[i % len(PROTOCOLS)],
                          float(rng.random()), float(rng.random()), bool(rng.random() < 0.5),
                          json.dumps({"slippage_bps": float(rng.normal(12, 4)), "gas_gwei": float(rng.normal(20, 5))}))
               for i in range(episodes)]
        clock["now"] = T0 + DAY
        rss0 = proc_status_kib(_pid(), "VmRSS")
        first = run_cycle(store, identity=ME, now_ms=clock["now"], vectors=vec, episodes=eps)
        clock["now"] += 3_600_000
        more = [gen.entry() for _ in range(max(1, entries // 100))]
        for e, v in zip(seed_entries(store, more, ME), _unit(rng, len(more)), strict=True):
            vec[e.id] = v
        steady = run_cycle(store, identity=ME, now_ms=clock["now"], vectors=vec, episodes=eps)
        total = store.counts().entries
    return {"entries": entries, "episodes": episodes, "write_s": round(write_s, 2), "first": first.to_json(),
            "steady": steady.to_json(), "entries_after": total, "rss_before_cycle_mib": round(rss0 / 1024, 1),
            "peak_rss_mib": round(proc_status_kib(_pid(), "VmHWM") / 1024, 1)}


def _pid() -> int:
    import os

    return os.getpid()


def run_size(work: Path, entries: int, episodes: int, seed: int) -> dict[str, Any]:
    progress(f"[1] cycle over {entries:,} entries and {episodes:,} episodes (child process)")
    db = work / f"cycle-{entries}.db"
    proc = subprocess.run(bench_command("bench_curator", "--child", str(db), str(entries), str(episodes), str(seed)),
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"entries": entries, "error": proc.stderr[-2000:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_testament(db: Path, work: Path) -> dict[str, Any]:
    progress(f"[2] testament export of {db.name}")
    with Grimoire.open(db) as store:
        t = time.perf_counter()
        report = export_testament(store, ME, clade_id="bench", clade_keys=[b"\x07" * 32], x25519_recipients=[],
                                  out=work / "bench.testament", now_ms=T0 + 2 * DAY)
        seconds = time.perf_counter() - t
    return {"store_entries": db.name, "seconds": round(seconds, 2), "entries": report.entries,
            "warnings": report.warnings, "bytes": report.bytes}


# -- 3. the ablation -------------------------------------------------------------------------


def _fact(protocol: str, metric: str, chain: str, value: int) -> str:
    return f"The {metric} of {protocol} on {chain} is {value}."


def run_ablation(work: Path, topics: int, seed: int, model_dir: Path, window_days: float) -> dict[str, Any]:
    from daemon.embedding.embedder import get_embedder

    embedder = get_embedder(model_dir)
    out: dict[str, Any] = {"topics": topics, "window_days": window_days}
    for arm, window in (("decay_on", window_days), ("decay_off", math.inf)):
        progress(f"[3] ablation, {arm}: {topics} topics over 30 days")
        rng = random.Random(seed)
        combos = [(p, m, c) for p in PROTOCOLS for m in METRICS for c in CHAINS]
        rng.shuffle(combos)
        chosen = combos[:topics]
        clock = {"now": T0}
        settings = CuratorSettings(windows=windows_with(every=window))
        with Grimoire.open(work / f"ablation-{arm}.db", create=True,
                           wall_ms=lambda clock=clock: clock["now"]) as store:  # type: ignore[misc]
            retriever = Retriever(store, lambda: embedder)
            truth: dict[int, str] = {}
            stale: set[str] = set()
            for t, (p, m, c) in enumerate(chosen):
                truth[t] = seed_entry(store, NewEntry(kind=Kind.FACT, content=_fact(p, m, c, rng.randint(2, 90)),
                                                       protocols=(p,)), ME).id
            going = rng.sample(range(topics), k=int(0.3 * topics))
            for day in range(1, 31):
                clock["now"] = T0 + day * DAY
                if day == 10:
                    for n, t in enumerate(going):
                        stale.add(truth[t])
                        if n % 2 == 0:  # a correction is written; the other half just stop being true
                            p, m, c = chosen[t]
                            truth[t] = seed_entry(store, NewEntry(kind=Kind.FACT, content=_fact(p, m, c, 95 + n),
                                                                   protocols=(p,)), ME).id
                        else:
                            truth.pop(t)
                for _ in range(20):
                    t = rng.randrange(topics)
                    p, m, c = chosen[t]
                    hits = retriever.recall(RecallQuery(text=f"what is the {m} of {p} on {c}", k=5),
                                            now_ms=clock["now"])
                    ids = [h.entry.id for h in hits]
                    cited = [truth[t]] if t in truth and truth[t] in ids else []
                    apply_feedback(store, cited=cited, injected=ids, now_ms=clock["now"])
                index = retriever.vectors()  # the facts still true (as before: the figures quoted were taken so)
                run_cycle(store, identity=ME, now_ms=clock["now"], settings=settings,
                          vectors={i: index[i] for i in truth.values() if i in index})
            found = total = stale_in = digest_n = 0
            for t, (p, m, c) in enumerate(chosen):
                question = f"what is the {m} of {p} on {c}"
                if t in truth:
                    total += 1
                    ids = [h.entry.id for h in retriever.recall(RecallQuery(text=question, k=5), now_ms=clock["now"])]
                    found += truth[t] in ids
                doc = build_digest(retriever, text=question, now_ms=clock["now"], budget_tokens=3000, k=10,
                                   fmt="json", include_sensitive=False, namespace="bench")
                got = list(doc["entries"])
                digest_n += len(got)
                stale_in += sum(1 for i in got if i in stale)
            out[arm] = {"recall_at_5_true": round(found / max(1, total), 3), "true_facts": total,
                        "stale_share_in_digests": round(stale_in / max(1, digest_n), 3), "digest_entries": digest_n,
                        "archived": store.counts().archived}
    return out


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {"machine": machine_info(work), "params": {
        "entries": args.entries, "episodes": args.episodes, "topics": args.topics, "seed": args.seed}}
    res["cycles"] = [run_size(work, n, args.episodes, args.seed) for n in args.entries]
    largest = work / f"cycle-{max(args.entries)}.db"
    res["testament"] = run_testament(largest, work) if largest.exists() else {"error": "no store"}
    res["ablation"] = run_ablation(work, args.topics, args.seed, work / "embedder", args.window_days)
    res["failed"] = [f"cycle {c['entries']}: {c['error'][-300:]}" for c in res["cycles"] if "error" in c]
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    for c in res["cycles"]:
        if "error" in c:
            rows.append((f"cycle {c['entries']:,}", "FAILED"))
            continue
        f, s = c["first"], c["steady"]
        rows += [(f"## cycle, {c['entries']:,} entries + {c['episodes']:,} episodes", ""),
                 ("first cycle (all fresh)", f"{f['duration_ms']:,} ms: decayed {f['entries_decayed']}, merged "
                                             f"{f['entries_merged']}, superseded {f['entries_superseded']}, "
                                             f"consolidated {f['episodes_consolidated']} episodes"),
                 ("steady cycle (1 % new)", f"{s['duration_ms']:,} ms: merged {s['entries_merged']}"),
                 ("peak RSS", f"{c['peak_rss_mib']} MiB (before the cycle {c['rss_before_cycle_mib']} MiB)")]
    t = res["testament"]
    if "error" not in t:
        rows += [("## testament export", ""),
                 ("entries, size, time", f"{t['entries']:,} entries, {t['bytes'] / 1e6:.2f} MB, {t['seconds']} s")]
    a = res["ablation"]
    rows.append((f"## ablation ({a['topics']} topics, 30 days, 30 % stale from day 10)", ""))
    for arm in ("decay_on", "decay_off"):
        x = a[arm]
        rows.append((arm, f"recall@5 of true facts {x['recall_at_5_true']}, stale share in digests "
                          f"{x['stale_share_in_digests']}, archived {x['archived']}"))
    print_table(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=lambda s: [int(x) for x in s.split(",")], default=[5_000, 50_000])
    p.add_argument("--episodes", type=int, default=100_000)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--window-days", type=float, default=DECAY_WINDOW_DAYS,
                   help="the decay window of the ablation's decay_on arm, every kind (default 10 days, "
                        "the figure docs/design/forgetting.md quotes; the curator's fact default is 60)")
    p.add_argument("--child", nargs=4, metavar=("DB", "ENTRIES", "EPISODES", "SEED"), help=argparse.SUPPRESS)
    add_common_args(p, out_help="keep the stores and the testament in DIR")
    args = p.parse_args()
    if args.child:
        db, n, e, seed = args.child
        print(json.dumps(cycle_child(Path(db), int(n), int(e), int(seed))))
        return 0
    return main_in_workdir("curator", args, run, report, "clade-bench-curator-")


if __name__ == "__main__":
    raise SystemExit(main())
