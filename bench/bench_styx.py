"""Benchmark the Styx client: outbox write overhead, drain throughput, search latency with fan-in.

    .venv/bin/python -m bench.bench_styx [--items N] [--batch B] [--searches N] [--writes N] [--out DIR]
    .venv/bin/python -m bench.bench_styx --items 500 --searches 30 --writes 300    # a quick run

1. Outbox write overhead: `Grimoire.remember` of W warnings, one transaction each (as the API
   writes them), into a store with the outbox hook (`OutboxWriter`: the item is built and
   inserted in the same transaction) and into one without; per-entry latency of each and the
   difference. The floor is the store without the hook, in the same run.
2. Drain throughput: a real daemon (`clade run`) with `[styx]` and its clade layer on (prices 0
   unless `--default-prices`: the caps would pace the drain), pointed at the reference
   server (`daemon.testing.styx_server`, in this process) that answers 503 while N warnings
   are written (`POST /v1/memory/flush`, 250 per call); then the fault is lifted and the
   items are timed as they arrive (server-side arrival times): items/s from the first
   accepted batch to the last, and seconds from "Styx is back" to an empty outbox (backoff
   capped at 0.5 s so the wait measures the drain, not the backoff). The ceiling: the same
   batches (B items, the wire body) POSTed straight to the same server with httpx,
   sequentially, in the same run.
3. `POST /v1/memory/search` latency over that store, sequential, S queries each: Styx fan-in
   on (the reference server answers), Styx hanging (it never answers: the 300 ms deadline
   holds the search), and fan-in off (`query_enabled = false`, the daemon restarted); plus
   the reference server's own query time (a direct GET) for scale.

Prints progress to stderr, a table to stdout, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common import Generator, Sections, machine_info, machine_rows, print_table, progress, short_queries
from bench.common.daemon import CLADE, Daemon
from bench.common.machine import finish
from bench.common.report import add_common_args, at_least, main_in_workdir, not_empty, section_rows
from bench.common.seed import seed_entry
from bench.common.stats import summary
from crdt import Kind
from crypto import Identity
from daemon.grimoire import Grimoire, NewEntry
from daemon.styx.outbox import OutboxWriter
from daemon.styx.wire import batch_body, item_json
from daemon.testing.styx_server import StyxServer

TOKEN = "b" * 40
ENTRIES = "/v1/styx/entries"


def outbox_overhead(work: Path, writes: int, gen: Generator) -> dict[str, Any]:
    """Per-entry `remember` latency with and without the outbox hook (one transaction each)."""
    me = Identity(b"\x07" * 32)
    texts = [f"Warning {i}: {gen.sentence(0)}"[:300] for i in range(writes)]
    out: dict[str, Any] = {}
    for label, hook in (("without_outbox", None), ("with_outbox", OutboxWriter(layers=("clade",)))):
        store = Grimoire.open(work / f"{label}.db", create=True)
        store.outbox = hook
        samples = []
        try:
            for text in texts:
                t0 = time.perf_counter()
                seed_entry(store, NewEntry(kind=Kind.WARNING, content=text), me)
                samples.append(time.perf_counter() - t0)
            queued = store.outbox_depth()  # a fresh outbox: nothing parked
        finally:
            store.close()
        out[label] = {**summary(samples), "queued": int(queued)}
    base, hooked = out["without_outbox"]["mean_ms"], out["with_outbox"]["mean_ms"]
    out["overhead_ms_per_entry"] = round(hooked - base, 4)
    out["ratio"] = round(hooked / base, 3)
    return out


def _daemon(work: Path, data: Path, name: str, env: dict[str, str]) -> Daemon:
    daemon = Daemon(data, work / f"notify-{name}.sock", env)
    daemon.wait_ready()
    return daemon


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def drain(daemon: Daemon, server: StyxServer, items: int) -> dict[str, Any]:
    """Write `items` warnings while Styx answers 503, then time the drain once it is back."""
    server.set_faults(status=503, retry_after=0)
    with daemon.open_client() as client:
        for start in range(0, items, 250):
            facts = [{"content": f"Warning {i}: never LP in pool {i} under $100K TVL", "memory_type": "warning"}
                     for i in range(start, min(items, start + 250))]
            answer = client.post("/v1/memory/flush", json={"session": f"s{start}", "facts": facts})
            answer.raise_for_status()
        depth = client.get("/v1/styx/status").json()["queue_depth"]
        if depth != items:
            raise RuntimeError(f"{depth} items queued, expected {items}")
        back = time.monotonic()
        server.clear_faults()
        _wait(lambda: server.stats()["entries"] >= items, 600, f"{items} items at Styx")
        drained = time.monotonic()
        _wait(lambda: client.get("/v1/styx/status").json()["queue_depth"] == 0, 60, "an empty outbox")
        status = client.get("/v1/styx/status").json()
    accepted = [t for t in server.arrivals(ENTRIES) if t >= back]
    first, last = accepted[0], accepted[-1]
    batches = max(1, len(accepted))
    span = max(last - first, 1e-9)
    ids = [item["id"] for item in server.items()]
    return {"items": items, "lost": items - len(set(ids)), "doubled": len(ids) - len(set(ids)),
            "accepted_batches": batches, "back_to_all_stored_s": round(drained - back, 3),
            "first_to_last_batch_s": round(span, 3),
            "items_per_s": round(items * (batches - 1) / batches / span) if batches > 1 else None,
            "stored": server.stats()["entries"], "delivered": status["delivered"]}


def raw_ceiling(server: StyxServer, items: int, batch: int) -> dict[str, Any]:
    """The same wire bodies POSTed straight to the server, sequentially (fresh keys)."""
    entry = {"id": "", "kind": "warning", "content": "", "confidence": 0.5, "importance": 0.5, "category": None,
             "metadata": {}, "provenance": "self", "created_at": "2026-11-23T00:00:00.000Z"}
    bodies = []
    for start in range(0, items, batch):
        rows = [item_json(writer="raw", seq=i, layers=["clade"], entry={
            **entry, "id": f"{i:032x}", "content": f"Warning {i}: never LP in pool {i} under $100K TVL"})
            for i in range(start, min(items, start + batch))]
        bodies.append(batch_body("raw", rows))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with httpx.Client(timeout=30) as client:
        t0 = time.perf_counter()
        for n, body in enumerate(bodies):
            client.post(f"{server.url}{ENTRIES}", content=body,
                        headers={**headers, "Idempotency-Key": f"raw-{n}"}).raise_for_status()
        took = time.perf_counter() - t0
    return {"items": items, "batch": batch, "seconds": round(took, 3), "items_per_s": round(items / took)}


def searches(daemon: Daemon, queries: Sequence[str]) -> dict[str, Any]:
    samples: list[float] = []
    styx_rows = errors = 0
    with daemon.open_client() as client:
        client.post("/v1/memory/search", json={"query": "warm up"}).raise_for_status()
        for q in queries:
            t0 = time.perf_counter()
            doc = client.post("/v1/memory/search", json={"query": q, "top_k": 10}).json()
            samples.append(time.perf_counter() - t0)
            styx_rows += len(doc.get("styx") or [])
            errors += doc.get("styx_error") is not None
    return {**summary(samples), "styx_results": styx_rows, "styx_errors": errors}


def server_query(server: StyxServer, queries: Sequence[str]) -> dict[str, Any]:
    samples = []
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for q in queries:
            t0 = time.perf_counter()
            client.get(f"{server.url}/v1/styx/query", params={"q": q, "k": "10"}).raise_for_status()
            samples.append(time.perf_counter() - t0)
    return summary(samples)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    sections = Sections()
    gen = Generator(args.seed)
    res: dict[str, Any] = {"params": {"items": args.items, "batch": args.batch, "searches": args.searches,
                                      "writes": args.writes, "seed": args.seed},
                           "machine": machine_info(work), "failed": []}
    with sections.section("outbox_write"):
        progress(f"outbox write overhead: {args.writes} warnings with and without the hook")
        res["outbox_write"] = outbox_overhead(work, args.writes, gen)
    data = work / "golem"
    subprocess.run([CLADE, "--data-dir", str(data), "init"], check=True, stdout=subprocess.DEVNULL)
    server = StyxServer(work / "styx.db", token=TOKEN).start()
    env = {"CLADE_STYX__ENABLED": "true", "CLADE_STYX__URL": server.url, "CLADE_STYX__TOKEN": TOKEN,
           "CLADE_STYX__BATCH": str(args.batch), "CLADE_STYX__BACKOFF_CAP_S": "0.5", "CLADE_P2P__ENABLED": "false",
           "CLADE_CURATOR__CYCLE_TICKS": "100000", "CLADE_STYX__CLADE_ENABLED": "true",
           "CLADE_STYX__QUERY_ENABLED": "true",  # the fan-in is measured on (it ships off)
           **({} if args.default_prices else {f"CLADE_STYX__PRICES__{p}": "0" for p in (
               "PER_CALL", "PER_ITEM", "PER_QUERY", "PER_UPLOAD", "PER_MIB")})}
    queries = short_queries(gen, args.searches)
    try:
        daemon = _daemon(work, data, "on", env)
        try:
            with sections.section("drain"):
                progress(f"drain: {args.items} warnings queued while Styx answers 503, then lifted")
                res["drain"] = drain(daemon, server, args.items)
            with sections.section("ceiling"):
                progress("ceiling: the same batches straight to the server")
                res["raw_ceiling"] = raw_ceiling(server, args.items, args.batch)
            rate = res["drain"]["items_per_s"]
            res["drain"]["ratio_to_ceiling"] = None if not rate else round(rate / res["raw_ceiling"]["items_per_s"], 3)
            with daemon.open_client() as client:  # the background embedder done, so searches compete with nothing
                _wait(lambda: client.get("/v1/status").json()["counters"].get("entries_embedded", 0) >= args.items,
                      600, "every entry embedded")
            with sections.section("search"):
                progress(f"search: {args.searches} queries with fan-in on, then with a hanging Styx")
                res["search_styx_on"] = searches(daemon, queries)
                res["styx_server_query"] = server_query(server, queries)
                server.set_faults(hang=True)
                res["search_styx_hanging"] = searches(daemon, queries)
                server.clear_faults()
            res["daemon_problems"] = daemon.log_problems()
        finally:
            daemon.stop()
        daemon = _daemon(work, data, "off", {**env, "CLADE_STYX__QUERY_ENABLED": "false"})
        try:
            with sections.section("search_off"):
                progress(f"search: {args.searches} queries with fan-in off")
                res["search_styx_off"] = searches(daemon, queries)
        finally:
            daemon.stop()
    finally:
        server.stop()
    off = res["search_styx_off"]["p50_ms"]
    res["search_ratio_p50"] = {"on_vs_off": round(res["search_styx_on"]["p50_ms"] / off, 2),
                               "hanging_vs_off": round(res["search_styx_hanging"]["p50_ms"] / off, 2)}
    if res["drain"]["lost"] or res["drain"]["doubled"]:
        res["failed"].append(f"{res['drain']['lost']} items lost, {res['drain']['doubled']} doubled")
    if res["drain"]["stored"] != args.items:
        res["failed"].append(f"{res['drain']['stored']} of {args.items} items stored")
    if res["search_styx_hanging"]["styx_errors"] != args.searches:
        res["failed"].append("a hanging Styx did not time out on every search")
    return finish(res, started, sections)


def report(res: dict[str, Any]) -> None:
    ow, dr, ceil = res["outbox_write"], res["drain"], res["raw_ceiling"]
    rows = machine_rows(res["machine"])
    rows += [("## outbox write (remember, one transaction each)", ""),
             ("without the hook", f"p50 {ow['without_outbox']['p50_ms']:.3f} ms, "
                                  f"mean {ow['without_outbox']['mean_ms']:.3f} ms"),
             ("with the hook", f"p50 {ow['with_outbox']['p50_ms']:.3f} ms, mean {ow['with_outbox']['mean_ms']:.3f} ms "
                               f"({ow['with_outbox']['queued']} queued)"),
             ("overhead per crossing entry", f"{ow['overhead_ms_per_entry']:.3f} ms ({ow['ratio']:.2f}x the floor)"),
             ("## drain (daemon -> reference server)", ""),
             ("items", f"{dr['items']} in {dr['accepted_batches']} batches"),
             ("lost, doubled", f"{dr['lost']}, {dr['doubled']}"),
             ("Styx back -> all stored", f"{dr['back_to_all_stored_s']:.2f} s"),
             ("drain rate", f"{dr['items_per_s']} items/s ({dr['ratio_to_ceiling']}x the raw ceiling)"),
             ("raw ceiling (httpx, same bodies)", f"{ceil['items_per_s']} items/s"),
             ("## POST /v1/memory/search, sequential", "")]
    for key, label in (("search_styx_off", "fan-in off"), ("search_styx_on", "fan-in on"),
                       ("search_styx_hanging", "Styx hanging (300 ms deadline)")):
        s = res[key]
        rows.append((label, f"p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms, max {s['max_ms']:.1f} ms"))
    sq = res["styx_server_query"]
    rows.append(("reference server query alone", f"p50 {sq['p50_ms']:.1f} ms, p99 {sq['p99_ms']:.1f} ms"))
    rows.append(("p50 ratios", json.dumps(res["search_ratio_p50"])))
    rows += section_rows(res["sections"], res["total_seconds"])
    print_table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_styx", description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=at_least(10), default=5_000, help="warnings to drain (default 5,000)")
    p.add_argument("--batch", type=at_least(1), default=100, help="[styx] batch (default 100)")
    p.add_argument("--default-prices", action="store_true",
                   help="keep [styx.prices] at their defaults (the drain is then paced by the spend caps); "
                        "by default Styx is free here, so the drain measures the client")
    p.add_argument("--searches", type=at_least(5), default=100, help="searches per configuration (default 100)")
    p.add_argument("--writes", type=at_least(10), default=2_000, help="writes for the outbox overhead (default 2,000)")
    add_common_args(p, out_help="keep the work directory here (default: a temp dir, removed)")
    args = p.parse_args(argv)
    return main_in_workdir("styx", args, run, report, "clade-bench-styx-", clash=not_empty)


if __name__ == "__main__":
    raise SystemExit(main())
