"""Benchmark the Grimoire's stores through their real APIs, on real files.

    .venv/bin/python -m bench.bench_store [--entries N] [--episodes M] [--out DIR] [--seed S]
    .venv/bin/python -m bench.bench_store --entries 2000 --episodes 5000     # a quick run

Measures, on a fresh data directory (a temporary one unless `--out` is given):

1. `Grimoire.remember`: N entries, one transaction (one fsync'd commit) each: entries/s and
   per-write latency percentiles.
2. `Grimoire.remember_many`: N entries in transactions of 500 and of 100 (fresh files each).
3. `Grimoire.keyword_search(query, k=10)`: 1,000 keyword queries of 1-3 words over the N-entry store.
4. `EpisodeLog.append`: M rows in calls of 1,000 rows, then 1,000 single-row calls (into a
   separate table, so the M-row table keeps its fragment layout); then `count()` and
   `scan(limit=50)` on the M-row table.

Prints a table to stdout (progress goes to stderr), then the JSON result line (bench.common).
All generated data comes from a seeded RNG, so two runs write the same contents.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import (
    Generator,
    latency_summary,
    machine_info,
    machine_rows,
    print_table,
    progress,
    timed_calls,
)
from bench.common.machine import db_size, dir_size
from bench.common.report import add_common_args, at_least, disk_row, main_in_workdir
from bench.common.seed import seed_entries, seed_entry
from crypto import Identity
from daemon.grimoire import Episode, EpisodeLog, Grimoire, NewEntry
from daemon.grimoire.episodes import EMBEDDING_DIM

IDENTITY = Identity(bytes(range(32)))  # a fixed key: every write is a signed op pair
RECALL_QUERIES = 1_000
RECALL_K = 10
EPISODE_BATCH = 1_000
EPISODE_SINGLES = 1_000
COUNT_REPEATS = 50
SCAN_REPEATS = 10
BATCH_SIZES = (500, 100)


# -- the benchmarks ---------------------------------------------------------------------------


def bench_remember_single(path: Path, news: Sequence[NewEntry]) -> dict[str, Any]:
    progress(f"[1/4] remember(): {len(news):,} entries, one transaction each -> {path.name}")
    with Grimoire.open(path, create=True) as store:
        t0 = time.perf_counter()
        calls = (partial(seed_entry, store, n, IDENTITY) for n in news)
        lat = timed_calls(calls, 5_000, "remember", len(news))
        seconds = time.perf_counter() - t0
        store.checkpoint()
    return {
        "entries": len(news), "seconds": round(seconds, 3), "entries_per_s": round(len(news) / seconds, 1),
        "latency": latency_summary(lat), "db_bytes": db_size(path),
    }


def bench_remember_many(path: Path, news: Sequence[NewEntry], batch: int) -> dict[str, Any]:
    progress(f"[2/4] remember_many(): {len(news):,} entries in transactions of {batch} -> {path.name}")
    batches = [news[i : i + batch] for i in range(0, len(news), batch)]
    with Grimoire.open(path, create=True) as store:
        t0 = time.perf_counter()
        calls = (partial(seed_entries, store, b, IDENTITY) for b in batches)
        lat = timed_calls(calls, max(1, len(batches) // 5), f"remember_many({batch})", len(batches))
        seconds = time.perf_counter() - t0
        store.checkpoint()
    return {
        "entries": len(news), "batch": batch, "transactions": len(batches), "seconds": round(seconds, 3),
        "entries_per_s": round(len(news) / seconds, 1), "per_transaction": latency_summary(lat),
        "db_bytes": db_size(path),
    }


def bench_recall(path: Path, queries: Sequence[str]) -> dict[str, Any]:
    progress(f"[3/4] recall(k={RECALL_K}): {len(queries):,} queries over {path.name}")
    hits: list[int] = []
    with Grimoire.open(path) as store:
        entries = store.counts().entries

        def one(query: str) -> None:
            hits.append(len(store.keyword_search(query, k=RECALL_K)))

        lat = timed_calls((partial(one, q) for q in queries), 250, "recall", len(queries))
    return {
        "entries": entries, "queries": len(queries), "k": RECALL_K, "latency": latency_summary(lat),
        "mean_hits": round(sum(hits) / len(hits), 2), "zero_hit_queries": hits.count(0),
    }


def bench_episodes(root: Path, gen: Generator, total: int, embed: bool) -> dict[str, Any]:
    start_ms = 1_735_689_600_000  # 2025-01-01T00:00Z; one observation every ~2 s
    observed = start_ms

    def batch_of(n: int) -> list[Episode]:
        nonlocal observed
        out = []
        for _ in range(n):
            observed += gen.rng.randint(500, 3_500)
            out.append(gen.episode(observed, embed))
        return out

    # Batched appends (generation happens outside the timed call).
    path = root / "episodes"
    progress(f"[4/4] EpisodeLog.append(): {total:,} rows in calls of {EPISODE_BATCH:,} -> {path.name}")
    log = EpisodeLog(path, create=True)
    lat: list[int] = []
    done = 0
    clock = time.perf_counter_ns
    while done < total:
        rows = batch_of(min(EPISODE_BATCH, total - done))
        t0 = clock()
        log.append(rows)
        lat.append(clock() - t0)
        done += len(rows)
        if done % (EPISODE_BATCH * 20) == 0 or done == total:
            progress(f"  append({EPISODE_BATCH}): {done:,}/{total:,} rows ({sum(lat) / 1e9:.1f}s in append)")
    batched_s = sum(lat) / 1e9
    batched = {
        "rows": total, "rows_per_call": EPISODE_BATCH, "calls": len(lat), "seconds_in_append": round(batched_s, 3),
        "rows_per_s": round(total / batched_s, 1), "per_call": latency_summary(lat), "table_version": log.version,
        "bytes": dir_size(path),
    }

    # Single-row appends, into their own table: each is one LanceDB version and one fragment.
    single_path = root / "episodes-single"
    progress(f"  append(1 row) x {EPISODE_SINGLES:,} -> {single_path.name}")
    single_log = EpisodeLog(single_path, create=True)
    singles = batch_of(EPISODE_SINGLES)
    slat = timed_calls((partial(single_log.append, [e]) for e in singles), 250, "append(1)", len(singles))
    single_s = sum(slat) / 1e9
    edge = max(1, len(slat) // 10)
    single = {
        "rows": len(singles), "seconds_in_append": round(single_s, 3), "rows_per_s": round(len(singles) / single_s, 1),
        "per_call": latency_summary(slat),
        "first_10pct_mean_ms": round(sum(slat[:edge]) / edge / 1e6, 4),
        "last_10pct_mean_ms": round(sum(slat[-edge:]) / edge / 1e6, 4),
        "extrapolated_seconds_for_episodes": round(single_s / len(singles) * total, 1),
        "table_version": single_log.version, "bytes": dir_size(single_path),
    }
    single_scan = timed_calls((partial(single_log.scan, limit=50) for _ in range(SCAN_REPEATS)), 0, "scan", 0)
    single["scan_limit_50"] = latency_summary(single_scan)

    # Reads on the batched table, through a freshly opened log (as `clade episode list` does).
    progress(f"  count() x {COUNT_REPEATS}, scan(limit=50) x {SCAN_REPEATS} on {total:,} rows")
    reopened = EpisodeLog(path)
    counted: list[int] = []
    clat = timed_calls((lambda: counted.append(reopened.count()) for _ in range(COUNT_REPEATS)), 0, "count", 0)
    scanned: list[int] = []
    scan_lat = timed_calls(
        (lambda: scanned.append(len(reopened.scan(limit=50))) for _ in range(SCAN_REPEATS)), 0, "scan", 0
    )
    return {
        "embeddings": embed, "batched": batched, "single": single,
        "count": {"rows": counted[0], **latency_summary(clat)},
        "scan_limit_50": {"returned": scanned[0], **latency_summary(scan_lat)},
    }


# -- output -----------------------------------------------------------------------------------


def fmt_lat(lat: dict[str, float]) -> str:
    return f"p50 {lat['p50_ms']:.3f}  p99 {lat['p99_ms']:.3f}  max {lat['max_ms']:.3f} ms"


def print_report(res: dict[str, Any]) -> None:
    m = res["machine"]
    rows: list[tuple[str, str]] = [
        *machine_rows(m, "lancedb", "pyarrow"),
        ("work dir", m["disk"]["path"]),
        disk_row(m["disk"]),
    ]
    s = res["remember_single"]
    rows += [
        ("## Grimoire writes (SQLite WAL, synchronous=FULL)", ""),
        (f"remember() x {s['entries']:,} (1 txn each)",
         f"{s['entries_per_s']:,.0f} entries/s  ({s['seconds']:.1f} s)"),
        ("  per-write latency", fmt_lat(s["latency"])),
    ]
    for b in res["remember_many"]:
        rows += [
            (f"remember_many() x {b['entries']:,} (txn of {b['batch']})",
             f"{b['entries_per_s']:,.0f} entries/s  ({b['seconds']:.2f} s, {b['transactions']} txns)"),
            ("  per-transaction latency", fmt_lat(b["per_transaction"])),
        ]
    rows.append((f"grimoire.db size with {s['entries']:,} entries", f"{s['db_bytes'] / 2**20:.1f} MiB"))
    r = res["recall"]
    rows += [
        (f"## recall(k={r['k']}) over {r['entries']:,} entries (FTS5 BM25)", ""),
        (f"{r['queries']:,} queries of 1-3 words", fmt_lat(r["latency"]) + f"  (mean {r['latency']['mean_ms']:.3f})"),
        ("  mean hits / zero-hit queries", f"{r['mean_hits']} / {r['zero_hit_queries']}"),
    ]
    e = res["episodes"]
    bt, sg = e["batched"], e["single"]
    rows += [
        (f"## episodes (LanceDB, embeddings={'yes' if e['embeddings'] else 'none'})", ""),
        (f"append() {bt['rows']:,} rows, {bt['rows_per_call']:,}/call",
         f"{bt['rows_per_s']:,.0f} rows/s  ({bt['seconds_in_append']:.2f} s in {bt['calls']} calls)"),
        ("  per-call latency", fmt_lat(bt["per_call"])),
        (f"append() {sg['rows']:,} x 1 row (measured)",
         f"{sg['rows_per_s']:,.0f} rows/s  ({sg['seconds_in_append']:.2f} s)"),
        ("  per-call latency", fmt_lat(sg["per_call"])),
        ("  mean latency, first / last 10% of calls",
         f"{sg['first_10pct_mean_ms']:.3f} / {sg['last_10pct_mean_ms']:.3f} ms"),
        (f"  EXTRAPOLATED (linear): {bt['rows']:,} single-row calls",
         f"~{sg['extrapolated_seconds_for_episodes']:,.0f} s (measured mean x {bt['rows']:,}; not run)"),
        (f"count() on {e['count']['rows']:,} rows", fmt_lat(e["count"])),
        (f"scan(limit=50) on {e['count']['rows']:,} rows", fmt_lat(e["scan_limit_50"])),
        (f"scan(limit=50) on the {sg['rows']:,}-row single-append table", fmt_lat(sg["scan_limit_50"])),
        (f"table size: {bt['rows']:,} rows batched", f"{bt['bytes'] / 2**20:.1f} MiB (version {bt['table_version']})"),
        (f"table size: {sg['rows']:,} rows single-appended",
         f"{sg['bytes'] / 2**20:.1f} MiB (version {sg['table_version']})"),
        ("## total", ""),
        ("wall clock (incl. data generation)", f"{res['total_seconds']:.1f} s"),
    ]
    print_table(rows)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--entries", type=at_least(1), default=50_000, help="entries per store (default 50,000)")
    p.add_argument("--episodes", type=at_least(1), default=100_000, help="episode rows (default 100,000)")
    add_common_args(p, "directory for the files (kept afterwards); default: a temporary one, removed")
    p.add_argument("--episode-embeddings", action="store_true",
                   help=f"give every episode a random {EMBEDDING_DIM}-d embedding (default: none)")
    return p.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {
        "machine": machine_info(workdir, ("lancedb", "pyarrow")),
        "params": {"entries": args.entries, "episodes": args.episodes, "seed": args.seed,
                   "batch_sizes": list(BATCH_SIZES), "recall_queries": RECALL_QUERIES, "recall_k": RECALL_K,
                   "episode_batch": EPISODE_BATCH, "episode_singles": EPISODE_SINGLES},
    }
    gen = Generator(args.seed)
    progress(f"generating {args.entries:,} entries (seed {args.seed}) in {workdir}")
    news = [gen.entry() for _ in range(args.entries)]
    queries = [gen.query() for _ in range(RECALL_QUERIES)]

    res["remember_single"] = bench_remember_single(workdir / "grimoire-single.db", news)
    res["remember_many"] = [
        bench_remember_many(workdir / f"grimoire-batch{b}.db", news, b) for b in BATCH_SIZES
    ]
    res["recall"] = bench_recall(workdir / "grimoire-single.db", queries)
    res["recall"]["sample_queries"] = queries[:5]
    res["episodes"] = bench_episodes(workdir, gen, args.episodes, args.episode_embeddings)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def _clash(path: Path) -> str | None:
    return ", ".join(n for n in ("grimoire-single.db", "episodes") if (path / n).exists()) or None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; the exit code is 0, or 2 when `--out` names a used directory."""
    return main_in_workdir("store", parse_args(argv), run, print_report, "clade-bench-", clash=_clash)


if __name__ == "__main__":
    raise SystemExit(main())
