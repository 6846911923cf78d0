"""Benchmark the daemon's control API end to end: a real `clade run`, over its unix socket.

    .venv/bin/python -m bench.bench_api [--quick] [--starts N] [--writes N] [--concurrent-writes N]
                                         [--searches N] [--concurrent-searches N] [--concurrency C] [--idle S]
                                         [--long-entries N]

On a fresh data directory (`clade --data-dir D init` in a temporary directory) it measures:

1. Startup: from `Popen(clade --data-dir D run)` to the READY=1 datagram on a fake
   `$NOTIFY_SOCKET` (a unix datagram socket bound here), median of N starts (each a new
   process; the page cache is warm after the first), and from SIGTERM to process exit.
2. `POST /v1/memory`: latency p50/p99 and requests/s, sequential (one keep-alive client) and
   concurrent (C coroutines sharing an `httpx.AsyncClient` over `AsyncHTTPTransport(uds=…)`),
   with DeFi content and metadata; plus a few `memory_type="episode"` writes (LanceDB path).
3. `POST /v1/memory/search` over that store: the first call, with a `GET /v1/status` probe
   beside it to measure how long other requests wait (a daemon that embeds inline does the
   whole backlog here; one with a background embedder does a few and the rest meanwhile);
   then the wait until every entry has a vector (read from grimoire.db read-only), again with
   the probe; then steady state, sequential and concurrent; then a search right after 256
   fresh writes and the background catch-up.
4. Idle RSS / CPU of the daemon process from /proc/<pid>/{status,stat,task}: RSS at READY, a
   window right after startup (the embedding model may load in it) and one after the workload.
5. Optional (`--long-entries N`): N entries of ~4,000 characters (the API allows 4,096), one
   search, then until all are embedded: the daemon's memory peak while embedding long texts.

The workload daemon runs with `WATCHDOG_USEC=30000000` (the unit's `WatchdogSec=30`), so the
gaps between its WATCHDOG=1 pings are measured too, and with `CLADE_CURATOR__CYCLE_TICKS`
raised so that no curator cycle falls inside the measurements.

Prints progress to stderr, a table to stdout, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from bench.common import Generator, emit, latency_summary, machine_info, machine_rows, print_table, progress, workdir
from bench.common.daemon import CLADE, Daemon, cpu_seconds, idle_window, mib, proc_sample
from bench.common.drive import StatusProbe, run_concurrent, run_sequential
from bench.common.machine import CLK_TCK

WATCHDOG_SEC = 30  # systemd/clade.service: WatchdogSec=30
MEMORY_MAX_MIB = 1024  # systemd/clade.service: MemoryMax=1G
SEARCH_K = 10
INCREMENTAL_WRITES = 256  # one embedding batch of Retriever.index_missing
EPISODE_WRITES = 200

QUESTIONS = (
    "how do I avoid sandwich attacks when swapping {tok} on {proto}",
    "slippage on {proto} {tok}/{tok2} pools",
    "gas price spikes on {chain}, when to rebalance",
    "{proto} borrow rate spike and health factor of {tok} collateral",
    "when should I rebalance a concentrated liquidity range",
    "cheapest way to bridge {tok} from {chain} to {chain2}",
    "funding rate flipped on {tok} perps",
    "oracle lag and liquidation cascade risk on {proto}",
    "is {tok} at risk of a depeg",
    "best aggregator route for a large {tok} to {tok2} swap",
    "transaction reverted with {err}",
    "restaking yield dropped after the points program",
    "impermanent loss on a {tok}/{tok2} range position",
    "MEV protection through a private relay",
)


# -- requests -----------------------------------------------------------------------------------


def memory_body(gen: Generator) -> dict[str, Any]:
    """A `POST /v1/memory` body from the store benchmark's entry generator."""
    new = gen.entry()
    return {
        "content": new.content, "memory_type": new.kind.value, "importance": new.importance,
        "confidence": new.confidence, "sensitivity": new.sensitivity.value,
        "metadata": {"tokens": list(new.tokens), "chains": list(new.chains), "protocols": list(new.protocols),
                     "strategy_id": new.strategy_id, "tags": list(new.tags)},
    }


def episode_body(gen: Generator) -> dict[str, Any]:
    body = memory_body(gen)
    body["memory_type"] = "episode"
    return body


def search_body(gen: Generator) -> dict[str, Any]:
    """Two in three are natural-language questions, one in three 1-3 keywords; some filtered."""
    r = gen.rng
    query = r.choice(QUESTIONS).format(**gen.fields()) if r.random() < 2 / 3 else gen.query()
    body: dict[str, Any] = {"query": query, "top_k": SEARCH_K}
    roll = r.random()
    if roll < 0.15:
        body["type_filter"] = r.choice(["warning", "heuristic", "insight"])
    elif roll < 0.25:
        body["min_importance"] = 0.5
    return body




# -- phases --------------------------------------------------------------------------------------------


def bench_startup(data_dir: Path, work: Path, starts: int) -> dict[str, Any]:
    progress(f"[1/4] startup: {starts} starts of `clade run`, each stopped with SIGTERM")
    runs: list[dict[str, Any]] = []
    for i in range(starts):
        daemon = Daemon(data_dir, work / f"notify-start{i}.sock")
        run: dict[str, Any] = {}
        try:
            run["ready_s"] = round(daemon.wait_ready(), 4)
            assert daemon.ready_line_at is not None
            run["ready_line_s"] = round(daemon.ready_line_at - daemon.started, 4)
            with daemon.open_client() as client:
                response = client.get("/v1/status")
            run["first_response_s"] = round(time.perf_counter() - daemon.started, 4)
            run["first_status"] = response.status_code
            sample = proc_sample(daemon.pid)
            run["rss_mib"], run["threads"] = mib(sample.rss_kib), sample.threads
            run["cpu_s_to_ready"] = round(sample.cpu_ticks / CLK_TCK, 2)
        finally:
            run.update(daemon.stop())
        runs.append(run)
        progress(f"  start {i + 1}/{starts}: READY after {run['ready_s']:.3f} s, "
                 f"exit {run.get('sigterm_to_exit_s', float('nan')):.3f} s after SIGTERM")

    def med(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.median(values), 4) if values else None

    return {
        "starts": starts, "runs": runs,
        "ready_s_median": med("ready_s"), "ready_s_min": min(r["ready_s"] for r in runs),
        "ready_s_max": max(r["ready_s"] for r in runs), "first_response_s_median": med("first_response_s"),
        "sigterm_to_exit_s_median": med("sigterm_to_exit_s"),
        "sigterm_to_exit_s_max": max(r.get("sigterm_to_exit_s") or 0.0 for r in runs),
        "rss_mib_median": med("rss_mib"), "exit_codes": sorted({r.get("exit_code") for r in runs}, key=str),
    }


def missing_vectors(data_dir: Path) -> int | None:
    """Entries without a vector, read from grimoire.db through a read-only connection (WAL: no blocking)."""
    try:
        with closing(sqlite3.connect(f"file:{data_dir / 'grimoire.db'}?mode=ro", uri=True, timeout=30)) as conn:
            return int(conn.execute("SELECT count(*) FROM entries WHERE embedding IS NULL").fetchone()[0])
    except sqlite3.Error:
        return None


def bench_first_search(daemon: Daemon, data_dir: Path, body: dict[str, Any]) -> dict[str, Any]:
    """The first search over the filled store, with a /v1/status probe beside it.

    Inline-embedding daemons load the model and embed every entry lacking a vector in this call;
    daemons with a background embedder embed at most a few here and the rest meanwhile.
    """
    with daemon.open_client() as client:
        entries = client.get("/v1/status").json()["entries"]
    missing = missing_vectors(data_dir)
    progress(f"  first search: {entries:,} entries, {missing} without a vector (a /v1/status probe runs beside)")
    before = proc_sample(daemon.pid)
    with StatusProbe(daemon) as probe, daemon.open_client() as client:
        t0 = time.perf_counter()
        response = client.post("/v1/memory/search", json=body)
        seconds = time.perf_counter() - t0
    after = proc_sample(daemon.pid)
    missing_after = missing_vectors(data_dir)
    probe_ms = sorted(v / 1e6 for v in probe.latencies_ns)
    return {
        "entries": entries, "missing_before": missing, "missing_after": missing_after,
        "seconds": round(seconds, 3), "status": response.status_code,
        "results": len(response.json().get("results", [])) if response.status_code == 200 else None,
        "daemon_cpu_s": cpu_seconds(before, after),
        "rss_mib_before": mib(before.rss_kib), "rss_mib_after": mib(after.rss_kib),
        "hwm_mib_after": mib(after.hwm_kib), "threads_after": after.threads,
        "status_probe": {"requests": len(probe_ms), "max_ms": round(probe_ms[-1], 1) if probe_ms else None,
                         "statuses": {str(k): v for k, v in probe.statuses.items()}},
    }


def wait_embedded(daemon: Daemon, data_dir: Path, label: str, timeout: float = 900) -> dict[str, Any]:
    """Wait until every entry has a vector (the background embedder's backlog is drained), with a
    /v1/status probe running to see whether requests wait meanwhile."""
    start_missing = missing_vectors(data_dir)
    progress(f"  {label}: waiting for {start_missing} entries without a vector to be embedded")
    before = proc_sample(daemon.pid)
    t0 = time.perf_counter()
    missing = start_missing
    with StatusProbe(daemon) as probe:
        while missing and time.perf_counter() - t0 < timeout and daemon.alive():
            time.sleep(0.5)
            missing = missing_vectors(data_dir)
    seconds = time.perf_counter() - t0
    after = proc_sample(daemon.pid)
    probe_lat = latency_summary(probe.latencies_ns) if probe.latencies_ns else None
    done = (start_missing or 0) - (missing or 0)
    return {
        "missing_start": start_missing, "missing_end": missing, "seconds": round(seconds, 2),
        "entries_per_s": round(done / seconds, 1) if done and seconds > 0.5 else None,
        "daemon_cpu_s": cpu_seconds(before, after), "rss_mib_before": mib(before.rss_kib),
        "rss_mib_after": mib(after.rss_kib), "hwm_mib_after": mib(after.hwm_kib),
        "status_probe": probe_lat, "status_probe_statuses": {str(k): v for k, v in probe.statuses.items()},
    }


def bench_incremental(daemon: Daemon, data_dir: Path, gen: Generator) -> dict[str, Any]:
    """Write a batch of entries, search at once (what does the fresh backlog cost it?), then wait for
    the backlog to be embedded."""
    progress(f"  search right after {INCREMENTAL_WRITES} fresh writes")
    bodies = [memory_body(gen) for _ in range(INCREMENTAL_WRITES)]
    writes = run_sequential(daemon, "/v1/memory", bodies, 201, "fresh writes")
    with daemon.open_client() as client:
        t0 = time.perf_counter()
        response = client.post("/v1/memory/search", json=search_body(gen))
        seconds = time.perf_counter() - t0
        missing_after = missing_vectors(data_dir)
        t1 = time.perf_counter()
        again = client.post("/v1/memory/search", json=search_body(gen))
        next_seconds = time.perf_counter() - t1
    return {
        "writes": INCREMENTAL_WRITES, "writes_unexpected": len(bodies) - writes.statuses.get(201, 0),
        "search_ms": round(seconds * 1000, 2), "status": response.status_code,
        "missing_after_search": missing_after,
        "next_search_ms": round(next_seconds * 1000, 2), "next_status": again.status_code,
        "catch_up": wait_embedded(daemon, data_dir, "fresh backlog"),
    }


def long_body(gen: Generator, chars: int = 4000) -> dict[str, Any]:
    """An entry near the API's 4,096-character content limit (several generated sentences)."""
    body = memory_body(gen)
    text = body["content"]
    while len(text) < chars:
        text += " " + gen.sentence(3)
    body["content"] = text[:chars]
    return body


def bench_long_entries(daemon: Daemon, data_dir: Path, gen: Generator, count: int) -> dict[str, Any]:
    """Write `count` entries of ~4,000 characters, search once, wait until all are embedded: memory peak."""
    progress(f"  long entries: {count} x ~4,000 characters, one search, then until they are embedded")
    bodies = [long_body(gen) for _ in range(count)]
    writes = run_sequential(daemon, "/v1/memory", bodies, 201, "long writes")
    before = proc_sample(daemon.pid)
    with daemon.open_client() as client:
        t0 = time.perf_counter()
        response = client.post("/v1/memory/search", json=search_body(gen))
        seconds = time.perf_counter() - t0
    embedded = wait_embedded(daemon, data_dir, "long entries")
    after = proc_sample(daemon.pid)
    return {
        "embedded_s": embedded["seconds"], "missing_end": embedded["missing_end"],
        "entries": count, "chars": len(bodies[0]["content"]), "writes_unexpected": count - writes.statuses.get(201, 0),
        "search_s": round(seconds, 2), "status": response.status_code, "daemon_cpu_s": cpu_seconds(before, after),
        "rss_mib_before": mib(before.rss_kib), "rss_mib_after": mib(after.rss_kib),
        "hwm_mib_before": mib(before.hwm_kib), "hwm_mib_after": mib(after.hwm_kib),
    }


def watchdog_gaps(daemon: Daemon) -> dict[str, Any]:
    """Gaps between WATCHDOG=1 pings since the daemon started, the open one up to now included."""
    pings = daemon.notify.times("WATCHDOG", "1")
    gaps = [b - a for a, b in itertools.pairwise([*pings, time.perf_counter()])]
    return {"pings": len(pings), "max_gap_s": round(max(gaps), 2) if gaps else None,
            "interval_s": WATCHDOG_SEC / 2, "watchdog_sec": WATCHDOG_SEC,
            "gaps_over_watchdog_sec": sum(g > WATCHDOG_SEC for g in gaps)}


def bench_workload(data_dir: Path, work: Path, args: argparse.Namespace, gen: Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    env = {"WATCHDOG_USEC": str(WATCHDOG_SEC * 1_000_000), "CLADE_CURATOR__CYCLE_TICKS": "100000"}
    progress("[2/4] workload daemon: started with WATCHDOG_USEC and no curator cycle during the run")
    daemon = Daemon(data_dir, work / "notify-workload.sock", env)
    try:
        out["ready_s"] = round(daemon.wait_ready(), 4)
        at_ready = proc_sample(daemon.pid)
        out["rss_mib_at_ready"], out["threads_at_ready"] = mib(at_ready.rss_kib), at_ready.threads
        out["idle_after_start"] = idle_window(daemon.pid, args.idle, "right after startup")

        writes = [memory_body(gen) for _ in range(args.writes)]
        out["write_seq"] = run_sequential(daemon, "/v1/memory", writes, 201, "POST /v1/memory sequential").summary(201)
        cwrites = [memory_body(gen) for _ in range(args.concurrent_writes)]
        out["write_conc"] = run_concurrent(daemon, "/v1/memory", cwrites, 201, args.concurrency,
                                           "POST /v1/memory concurrent").summary(201)
        episodes = [episode_body(gen) for _ in range(args.episode_writes)]
        out["episode_seq"] = run_sequential(daemon, "/v1/memory", episodes, 201,
                                            "POST /v1/memory memory_type=episode sequential").summary(201)

        progress("[3/4] search")
        out["search_first"] = bench_first_search(daemon, data_dir, search_body(gen))
        out["backlog"] = wait_embedded(daemon, data_dir, "backlog after the writes")
        out["watchdog_first_search"] = watchdog_gaps(daemon)
        searches = [search_body(gen) for _ in range(args.searches)]
        out["search_seq"] = run_sequential(daemon, "/v1/memory/search", searches, 200,
                                           "POST /v1/memory/search sequential").summary(200)
        csearches = [search_body(gen) for _ in range(args.concurrent_searches)]
        out["search_conc"] = run_concurrent(daemon, "/v1/memory/search", csearches, 200, args.concurrency,
                                            "POST /v1/memory/search concurrent").summary(200)
        out["search_incremental"] = bench_incremental(daemon, data_dir, gen)

        progress("[4/4] idle after the workload")
        out["idle_after_workload"] = idle_window(daemon.pid, args.idle, "after the workload, model loaded")
        if args.long_entries:
            out["long_entries"] = bench_long_entries(daemon, data_dir, gen, args.long_entries)
        with daemon.open_client() as client:
            status = client.get("/v1/status").json()
        out["final_status"] = {"entries": status["entries"], "counters": status["counters"]}
        out["watchdog"] = watchdog_gaps(daemon)
        out["grimoire_db_mib"] = round(sum(
            p.stat().st_size for p in data_dir.glob("grimoire.db*") if p.is_file()) / 2**20, 1)
    finally:
        out["stop"] = daemon.stop()
        out["log_problems"] = daemon.log_problems()[:10]
        out["watchdog_warnings"] = sum('"clade.daemon"' in line and "watchdog:" in line
                                       for line in daemon.stderr_lines)
    return out


# -- output -----------------------------------------------------------------------------------------------


def fmt_run(r: dict[str, Any]) -> str:
    lat = r["latency"]
    bad = f"  NON-2xx {r['unexpected']}" if r["unexpected"] else ""
    return (f"p50 {lat['p50_ms']:.2f}  p99 {lat['p99_ms']:.2f}  max {lat['max_ms']:.1f} ms  "
            f"{r['req_per_s']:,.0f} req/s{bad}")


def fmt_cpu(r: dict[str, Any]) -> str:
    return (f"daemon {r['daemon_cpu_ms_per_req']:.2f} ms CPU/req ({r['daemon_cpu_s']:.1f} s), "
            f"client {r['client_cpu_s']:.1f} s; RSS {r['rss_mib_before']:.0f} -> {r['rss_mib_after']:.0f} MiB")


def fmt_idle(i: dict[str, Any]) -> str:
    return (f"CPU {i['cpu_pct']:.3f}% of a core ({i['cpu_seconds']:.2f} s in {i['seconds']:.0f} s; "
            f"{i['cpu_pct_second_half']:.3f}% in its second half), "
            f"{i['ctx_switches_per_s']:.1f} ctx switches/s, RSS {i['rss_mib_start']:.1f}->{i['rss_mib_end']:.1f} MiB "
            f"(peak {i['hwm_mib']:.1f}), {i['threads']} threads")


def print_report(res: dict[str, Any]) -> None:
    m, p, s, w = res["machine"], res["params"], res["startup"], res["workload"]
    rows: list[tuple[str, str]] = [
        *machine_rows(m),
        ("disk", f"{m['disk'].get('device', '?')} ({m['disk'].get('fstype', '?')}) on "
                 f"{m['disk'].get('mount_point', '?')}"),
        ("load average (1/5/15 min) at start / end",
         f"{'/'.join(f'{x:.2f}' for x in m['loadavg_start'])} / {'/'.join(f'{x:.2f}' for x in m['loadavg_end'])}"
         " (other processes share these CPUs)"),
        ("## startup (Popen -> READY=1 on $NOTIFY_SOCKET)", ""),
        (f"READY=1, median of {s['starts']}", f"{s['ready_s_median']:.3f} s  (min {s['ready_s_min']:.3f}, "
                                              f"max {s['ready_s_max']:.3f})"),
        ("  runs", ", ".join(f"{r['ready_s']:.3f}" for r in s["runs"])),
        ("first GET /v1/status answered, median", f"{s['first_response_s_median']:.3f} s after Popen"),
        ("SIGTERM -> exit (empty store), median / max",
         f"{s['sigterm_to_exit_s_median']:.3f} / {s['sigterm_to_exit_s_max']:.3f} s, exit codes {s['exit_codes']}"),
        ("RSS at READY, median", f"{s['rss_mib_median']:.1f} MiB"),
    ]
    if w:
        ws, wc, ep = w["write_seq"], w["write_conc"], w["episode_seq"]
        rows += [
            ("## POST /v1/memory (unix socket)", ""),
            (f"sequential x {ws['requests']:,}", fmt_run(ws)),
            ("", fmt_cpu(ws)),
            (f"{p['concurrency']} concurrent x {wc['requests']:,}", fmt_run(wc)),
            ("", fmt_cpu(wc)),
            (f"memory_type=episode sequential x {ep['requests']:,}", fmt_run(ep)),
        ]
        f, bl = w["search_first"], w["backlog"]
        ss, sc, inc = w["search_seq"], w["search_conc"], w["search_incremental"]
        cu = inc["catch_up"]
        wd = w["watchdog_first_search"]
        le = w.get("long_entries")
        rows += [
            ("## POST /v1/memory/search (top_k 10)", ""),
            (f"first call ({f['entries']:,} entries, {f['missing_before']} without a vector)",
             f"{f['seconds']:.2f} s, daemon CPU {f['daemon_cpu_s']:.1f} s, status {f['status']}, "
             f"{f['missing_after']} still without a vector after it"),
            ("  RSS before -> after first call",
             f"{f['rss_mib_before']:.1f} -> {f['rss_mib_after']:.1f} MiB (peak {f['hwm_mib_after']:.1f})"),
            ("  GET /v1/status meanwhile: worst wait", f"{f['status_probe']['max_ms']:.0f} ms "
                                                       f"({f['status_probe']['requests']} probes)"),
            ("backlog embedded after it (background)",
             f"{bl['missing_start']} -> {bl['missing_end']} in {bl['seconds']:.1f} s "
             f"({bl['entries_per_s'] or 0:,.1f} entries/s), daemon CPU {bl['daemon_cpu_s']:.1f} s, "
             f"RSS {bl['rss_mib_before']:.0f} -> {bl['rss_mib_after']:.0f} MiB (peak {bl['hwm_mib_after']:.0f})"),
            ("  GET /v1/status meanwhile", "no probes" if not bl["status_probe"] else
             f"p50 {bl['status_probe']['p50_ms']:.1f}  p99 {bl['status_probe']['p99_ms']:.1f}  "
             f"max {bl['status_probe']['max_ms']:.0f} ms ({bl['status_probe']['samples']} probes)"),
            ("  WATCHDOG=1 max gap so far", f"{wd['max_gap_s']} s (WatchdogSec={wd['watchdog_sec']}, "
                                            f"{wd['gaps_over_watchdog_sec']} gaps over it)"),
            (f"steady sequential x {ss['requests']:,}", fmt_run(ss)),
            ("", fmt_cpu(ss) + f"; {ss.get('mean_results', 0)} results/query"),
            (f"steady {p['concurrency']} concurrent x {sc['requests']:,}", fmt_run(sc)),
            ("", fmt_cpu(sc)),
            (f"search right after {inc['writes']} new writes",
             f"{inc['search_ms']:.0f} ms (next {inc['next_search_ms']:.0f} ms), "
             f"{inc['missing_after_search']} left without a vector"),
            ("  background catch-up", f"{cu['missing_start']} -> {cu['missing_end']} in {cu['seconds']:.1f} s "
                                      f"({cu['entries_per_s'] or 0:,.1f} entries/s)"),
            ("## idle daemon (/proc/<pid>)", ""),
            ("RSS at READY", f"{w['rss_mib_at_ready']:.1f} MiB, {w['threads_at_ready']} threads"),
            ("right after startup", fmt_idle(w["idle_after_start"])),
            ("after the workload (model loaded)", fmt_idle(w["idle_after_workload"])),
            *([] if le is None else [(
                f"{le['entries']} entries of {le['chars']:,} chars",
                f"search {le['search_s']:.1f} s (status {le['status']}), all embedded after {le['embedded_s']:.1f} s; "
                f"RSS {le['rss_mib_before']:.0f} -> {le['rss_mib_after']:.0f} MiB, peak {le['hwm_mib_after']:.0f} MiB "
                f"(unit MemoryMax={MEMORY_MAX_MIB} MiB)")]),
            ("## end of workload", ""),
            ("entries / grimoire.db*", f"{w['final_status']['entries']:,} / {w['grimoire_db_mib']:.1f} MiB"),
            ("WATCHDOG=1 over the whole run",
             f"{w['watchdog']['pings']} pings, max gap {w['watchdog']['max_gap_s']} s "
             f"({w['watchdog']['gaps_over_watchdog_sec']} gaps over WatchdogSec={WATCHDOG_SEC}: systemd would "
             f"kill the daemon), {w['watchdog_warnings']} 'store did not answer' warnings"),
            ("SIGTERM -> exit", f"{w['stop'].get('sigterm_to_exit_s')} s, exit code {w['stop'].get('exit_code')}"),
            ("daemon error log lines", str(len(w["log_problems"]))),
        ]
    rows += [("## total", ""), ("wall clock", f"{res['total_seconds']:.1f} s")]
    print_table(rows)


# -- main -------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="a smoke run: few requests, 5 s idle windows")
    p.add_argument("--starts", type=int, default=None, help="cold starts for the startup figure (default 5)")
    p.add_argument("--writes", type=int, default=None, help="sequential POST /v1/memory (default 2,000)")
    p.add_argument("--concurrent-writes", type=int, default=None, help="concurrent POST /v1/memory (default 4,000)")
    p.add_argument("--searches", type=int, default=None, help="sequential searches (default 300)")
    p.add_argument("--concurrent-searches", type=int, default=None, help="concurrent searches (default 600)")
    p.add_argument("--concurrency", type=int, default=8, help="concurrent clients (default 8)")
    p.add_argument("--idle", type=float, default=None, help="seconds per idle window (default 30)")
    p.add_argument("--long-entries", type=int, default=0,
                   help="after the idle window, also write N entries of ~4,000 characters and search once "
                        "(shows the embedding's memory peak; default 0: skipped)")
    p.add_argument("--seed", type=int, default=20_240_601, help="RNG seed (default 20240601)")
    args = p.parse_args(argv)
    full = {"starts": 5, "writes": 2_000, "concurrent_writes": 4_000, "searches": 300,
            "concurrent_searches": 600, "idle": 30.0, "episode_writes": EPISODE_WRITES}
    quick = {"starts": 2, "writes": 200, "concurrent_writes": 400, "searches": 50,
             "concurrent_searches": 100, "idle": 5.0, "episode_writes": 20}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if min(args.starts, args.writes, args.concurrent_writes, args.searches, args.concurrent_searches,
           args.concurrency) < 1 or args.idle <= 0:
        p.error("counts must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; the exit code is 1 if any request got an unexpected status or the daemon
    logged an error, else 0."""
    args = parse_args(argv)
    started = time.perf_counter()
    with workdir(None, "clade-bench-api-") as work:
        res: dict[str, Any] = {
            "machine": machine_info(work),
            "params": dict(vars(args)),
            "workload": {},
        }
        res["params"].update(search_k=SEARCH_K, incremental_writes=INCREMENTAL_WRITES)
        data_dir = work / "data"
        progress(f"clade --data-dir {data_dir} init")
        subprocess.run([CLADE, "--data-dir", str(data_dir), "init"], check=True, stdout=subprocess.DEVNULL)
        gen = Generator(args.seed)
        res["startup"] = bench_startup(data_dir, work, args.starts)
        res["workload"] = bench_workload(data_dir, work, args, gen)
    res["machine"]["loadavg_end"] = list(os.getloadavg())
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    w = res["workload"]
    unexpected = sum(w[k]["unexpected"] for k in ("write_seq", "write_conc", "episode_seq", "search_seq",
                                                    "search_conc"))
    if unexpected:
        res["failed"] = [f"{unexpected} requests got an unexpected status"]
    if w["log_problems"]:
        res["failed"] = [*res.get("failed", []), f"{len(w['log_problems'])} error lines in the daemon's log"]
    print_report(res)
    emit("api", res)
    return 1 if res.get("failed") else 0


if __name__ == "__main__":
    raise SystemExit(main())
