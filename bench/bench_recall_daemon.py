"""Recall latency as a user meets it: `POST /v1/memory/search` on a running daemon.

    .venv/bin/python -m bench.bench_recall_daemon STORE.db [--model M] [--queries N] [--seed S] [--profile OUT]

Copies STORE.db (a grimoire.db with entries and vectors of model M, e.g. one that
`python -m bench.bench_recall_options --out DIR` built under DIR/stores/) into a fresh data
directory, starts `clade run` on it (p2p off, one process, the real service: the query's vectors and its
FTS5 candidates computed side by side, then ranking on the store's thread), warms it up, then
sends N short queries one after another over the unix socket and reports client-side latency
p50/p99/max, the daemon's CPU per query, and its RSS (VmRSS, VmHWM). Prints a table, then the
JSON result line (bench.common). The machine's other CPU use during the run is reported
(`other_cpu`, cores). `--profile OUT`: py-spy (a dev dependency) samples the daemon during the
timed queries and writes OUT (a flame graph if it ends in .svg, else speedscope JSON); the
latencies of such a run are not the figures to quote (sampling costs the daemon a little).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import Generator, emit, machine_info, short_queries, summary, workdir
from bench.common.daemon import CLADE, Daemon
from bench.common.machine import CLK_TCK, cpu_busy_seconds, proc_cpu_ticks, proc_status_kib


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench against a copy of the given store; the exit code is 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("store", type=Path)
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the daemon during the timed queries (file)")
    args = ap.parse_args(argv)
    started_at = time.perf_counter()
    machine = machine_info(None, ("onnxruntime", "fastembed"))
    env = {"CLADE_EMBEDDING__MODEL": args.model, "CLADE_P2P__ENABLED": "false"}
    daemon: Daemon | None = None
    with workdir(None, "clade-recall-daemon-") as root:
        data = root / "data"
        subprocess.run([CLADE, "--data-dir", str(data), "init"], check=True, capture_output=True,
                       env={**os.environ, **env})
        shutil.copyfile(args.store, data / "grimoire.db")
        try:
            daemon = Daemon(data, root / "notify.sock", env)
            daemon.wait_ready()
            assert daemon.ready_line_at is not None
            ready_s = daemon.ready_line_at - daemon.started  # Popen -> the ready line on stderr
            res = measure(daemon, args, ready_s)
        finally:
            if daemon is not None:
                daemon.stop(timeout=60)
    print_summary(res)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("recall_daemon", {"machine": machine, "params": {"store": str(args.store), "model": args.model,
                                                          "queries": args.queries, "seed": args.seed},
                           "total_seconds": round(time.perf_counter() - started_at, 1), **res})
    return 0


def measure(daemon: Daemon, args: argparse.Namespace, ready_s: float) -> dict[str, Any]:
    """Warm the daemon up, then time `args.queries` searches one after another."""
    pid = daemon.pid
    with daemon.open_client() as client:
        queries = short_queries(Generator(args.seed), args.queries + 10)
        t0 = time.perf_counter()
        client.post("/v1/memory/search", json={"query": "warm up the model and the vector index"}).raise_for_status()
        first_s = time.perf_counter() - t0
        for q in queries[:10]:
            client.post("/v1/memory/search", json={"query": q}).raise_for_status()
        spy = None
        if args.profile is not None:
            fmt = "flamegraph" if args.profile.suffix == ".svg" else "speedscope"
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
                                    "--rate", "200", "--threads", "--format", fmt, "--output", str(args.profile)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # py-spy attaches (not a synchronisation of the measurement: it only starts sampling)
        busy0, cpu0 = cpu_busy_seconds(), proc_cpu_ticks(pid) / CLK_TCK
        wall0 = time.perf_counter()
        lat: list[float] = []
        for q in queries[10:]:
            t = time.perf_counter()
            client.post("/v1/memory/search", json={"query": q, "top_k": 10}).raise_for_status()
            lat.append(time.perf_counter() - t)
        wall = time.perf_counter() - wall0
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        daemon_cpu = proc_cpu_ticks(pid) / CLK_TCK - cpu0
        other = max(0.0, (cpu_busy_seconds() - busy0 - daemon_cpu) / wall)
        entries = client.get("/v1/status").json()["entries"]
        res: dict[str, Any] = {
            "model": args.model, "entries": entries, "queries": len(lat), "ready_s": round(ready_s, 2),
            "first_search_s": round(first_s, 2), "latency": summary(lat),
            "daemon_cpu_ms_per_query": round(1000 * daemon_cpu / len(lat), 2),
            "rss_mib": round(proc_status_kib(pid, "VmRSS") / 1024, 1),
            "peak_rss_mib": round(proc_status_kib(pid, "VmHWM") / 1024, 1), "other_cpu": round(other, 2),
            # Of the RSS: private memory (heap, arenas, the vector matrix) and mapped files (libraries).
            "rss_anon_mib": round(proc_status_kib(pid, "RssAnon") / 1024, 1),
            "rss_file_mib": round(proc_status_kib(pid, "RssFile") / 1024, 1),
        }
    return res


def print_summary(res: dict[str, Any]) -> None:
    """The figures, one paragraph."""
    lat_s = res["latency"]
    assert isinstance(lat_s, dict)
    print(f"POST /v1/memory/search on a daemon, {res['entries']:,} entries, model {res['model']}")
    print(f"  ready {res['ready_s']} s; first search (loads the model and the index) {res['first_search_s']} s")
    print(f"  latency over {res['queries']} queries: p50 {lat_s['p50_ms']} ms, p99 {lat_s['p99_ms']} ms, "
          f"max {lat_s['max_ms']} ms")
    print(f"  daemon CPU {res['daemon_cpu_ms_per_query']} ms/query; RSS {res['rss_mib']} MiB "
          f"(peak {res['peak_rss_mib']}; anonymous {res['rss_anon_mib']}, files {res['rss_file_mib']}); "
          f"other processes {res['other_cpu']} cores")


if __name__ == "__main__":
    raise SystemExit(main())
