"""Recall latency as a user meets it: `POST /v1/memory/search` on a running daemon.

    .venv/bin/python bench/recall_daemon.py STORE.db [--model M] [--queries N] [--seed S]

Copies STORE.db (a grimoire.db with entries and vectors of model M, e.g. one that
`bench/recall_options.py --out DIR` built under DIR/stores/) into a fresh data directory,
starts `clade run` on it (p2p off, one process, the real service: the query's vectors and its
FTS5 candidates computed side by side, then ranking on the store's thread), warms it up, then
sends N short queries one after another over the unix socket and reports client-side latency
p50/p99/max, the daemon's CPU per query, and its RSS (VmRSS, VmHWM). Prints a table, then one
JSON line. The machine's other CPU use during the run is reported (`other_cpu`, cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p).resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench.recall import short_queries, summary  # noqa: E402
from bench.store import Generator  # noqa: E402

CLADE = str(Path(sys.executable).with_name("clade"))


def _cpu_busy() -> float:
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> float:
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (float(parts[11]) + float(parts[12])) / os.sysconf("SC_CLK_TCK")


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="clade-recall-daemon-"))
    data = root / "data"
    env = {**os.environ, "CLADE_EMBEDDING__MODEL": args.model, "CLADE_P2P__ENABLED": "false"}
    proc = None
    try:
        subprocess.run([CLADE, "--data-dir", str(data), "init"], check=True, capture_output=True, env=env)
        shutil.copyfile(args.store, data / "grimoire.db")
        proc = subprocess.Popen([CLADE, "--data-dir", str(data), "run"], stderr=subprocess.PIPE, env=env)
        assert proc.stderr is not None
        started = time.perf_counter()
        ready: dict[str, object] = {}
        for raw in proc.stderr:
            if b'"event": "ready"' in raw:
                ready = json.loads(raw)
                break
        ready_s = time.perf_counter() - started
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(ready["socket"])), base_url="http://clade",
                              timeout=120)
        queries = short_queries(Generator(args.seed), args.queries + 10)
        t0 = time.perf_counter()
        client.post("/v1/memory/search", json={"query": "warm up the model and the vector index"}).raise_for_status()
        first_s = time.perf_counter() - t0
        for q in queries[:10]:
            client.post("/v1/memory/search", json={"query": q}).raise_for_status()
        busy0, cpu0 = _cpu_busy(), _proc_cpu(proc.pid)
        wall0 = time.perf_counter()
        lat: list[float] = []
        for q in queries[10:]:
            t = time.perf_counter()
            client.post("/v1/memory/search", json={"query": q, "top_k": 10}).raise_for_status()
            lat.append(time.perf_counter() - t)
        wall = time.perf_counter() - wall0
        daemon_cpu = _proc_cpu(proc.pid) - cpu0
        other = max(0.0, (_cpu_busy() - busy0 - daemon_cpu) / wall)
        entries = client.get("/v1/status").json()["entries"]
        res = {"model": args.model, "entries": entries, "queries": len(lat), "ready_s": round(ready_s, 2),
               "first_search_s": round(first_s, 2), "latency": summary(lat),
               "daemon_cpu_ms_per_query": round(1000 * daemon_cpu / len(lat), 2),
               "rss_mib": round(_status(proc.pid, "VmRSS") / 1024, 1),
               "peak_rss_mib": round(_status(proc.pid, "VmHWM") / 1024, 1), "other_cpu": round(other, 2)}
        client.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    lat_s = res["latency"]
    assert isinstance(lat_s, dict)
    print(f"POST /v1/memory/search on a daemon, {res['entries']:,} entries, model {res['model']}")
    print(f"  ready {res['ready_s']} s; first search (loads the model and the index) {res['first_search_s']} s")
    print(f"  latency over {res['queries']} queries: p50 {lat_s['p50_ms']} ms, p99 {lat_s['p99_ms']} ms, "
          f"max {lat_s['max_ms']} ms")
    print(f"  daemon CPU {res['daemon_cpu_ms_per_query']} ms/query; RSS {res['rss_mib']} MiB "
          f"(peak {res['peak_rss_mib']}); other processes {res['other_cpu']} cores")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
