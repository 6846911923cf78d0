"""Benchmark a clade of real `clade run` daemons on loopback (`daemon.testing.harness`, driven
with bench/common/clade.py).

    .venv/bin/python -m bench.bench_clade [--sizes 5,10] [--count 200] [--rates 10,50] [--repeats 1] [--catchup 10000]
                                           [--catchup-golems 2] [--cpu-seconds 30] [--cpu-load 1] [--out DIR]

Every daemon is a separate process (`clade run --listen /ip4/127.0.0.1/tcp/0 --no-mdns`),
all connected to each other before anything is measured. Measures:

1. Warning propagation, per clade size and write rate: `--count` warnings written on one
   golem on a fixed, open-loop schedule (a request is sent at t0 + i/rate whether or not the
   earlier ones have returned; `POST /v1/memory` returns once the entry is committed);
   latency = `committed_ms` of the sibling's `entries_received` event minus the wall time
   at which the writer's HTTP response was received (so the writer's own SQLite commit is
   not included). Per warning: the max over all siblings; per delivery: every (warning,
   sibling) pair. Then `--count` raw GossipSub probes (`POST /v1/p2p/probe`, no envelope,
   no store) at the same rate: latency = `received_ms - sent_ms` per sibling, the transport
   floor. Reports p50/p99/max, missing deliveries and the warning/probe p50 ratio. With
   `--repeats N` each rate's warnings and probes run N times in the same clade, and each
   ratio (sibling CPU, p50, p99) is also given as its mean over the repeats with a 95 %
   t-interval: one phase's sibling CPU ratio moves by ~0.1× with the machine.
2. Catch-up: a fresh clade of `--catchup-golems`; one golem stops, another writes
   `--catchup` ops' worth of warnings (2 ops each: body + author slot), the stopped one
   restarts (bootstrap: the writer) and pulls them by anti-entropy. Time from
   "restart ready" (socket up, p2p listening) to the commit of the synced ops, ops/s; then
   the ceiling: decode + verify + `Grimoire.apply_delta` of as many locally built signed
   warning ops into a fresh store, in the same process, and the ratio. Nothing is asked of
   the laggard while its pulls run: ops gossip replayed to it (outside the pulls) are settled
   by comparing state digests only once the pulls have gone quiet (a digest reads every op and
   holds the GIL: asked every half second, it took ~15 % of the laggard's CPU from the catch-up).
3. Bytes on the wire per synced op during that catch-up (sync `bytes_in` / ops applied).
4. Steady state with the largest clade: CPU % (utime+stime from /proc/<pid>/stat) and RSS
   (VmRSS, sampled each second) per daemon over `--cpu-seconds` idle, then with a light
   load of `--cpu-load` warnings/s.

Every CPU and RSS figure of a daemon includes its child processes' (the embedding model runs
in one: daemon/embedding/remote.py; bench.common.machine.proc_cpu_ticks, tree_status_kib);
the JSON also holds the daemon process's own (`own`, `own_cpu_pct`, `own_rss_mib_mean`).

Every daemon embeds every entry it writes (ONNX model, in its embedding process) and takes its
siblings' vectors as shipped, re-embedding a share of them to check them: on a small machine
that CPU work competes with sync, so each measured phase first waits until every embedder has
caught up and checked what it drew (`--drain`); the checks' CPU is in the figures. Each
phase's CPU window (warnings, probes) starts after the bench's own status reads and ends with
the same round of them (the drain's), so the bench's requests weigh on both alike. The warm-up
loads every model and then writes warnings at the fastest rate until every sibling has
*cleared* the writer (checks its shipped vectors at `[embedding] check_shipped_cleared`, as for
an author with a clean record: daemon/embedding/check_plan.py); `--screening` skips that and
measures siblings of a new author (`check_shipped`). Each section also reports how much CPU *other* processes
took meanwhile (from /proc/stat): on a shared machine that skews every figure.

Figures are printed as they are measured (progress goes to stderr); the last line is the
JSON result document (bench.common). Daemons and their data directories are removed at the end
(kept with `--out DIR`).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.clade.catchup import bench_catchup
from bench.common import HostLoad, dist, emit, machine_info, out, percentile, progress, workdir
from bench.common.clade import (
    Api,
    DaemonCpu,
    Watch,
    clear_for_checks,
    content,
    paced,
    report_odd,
    sample_steady,
    start_clade,
    wait_embedded,
)
from bench.common.profile import start_profiles, stop_profiles
from bench.common.report import floats, ints
from bench.common.stats import mean_interval
from daemon.testing.harness import EventLog, Golem, LoopbackClade

# -- 1. propagation latency --------------------------------------------------------------------


def run_rate(writer: Api, siblings: list[Golem], watch: Watch, *, rate: float, count: int, timeout: float,
             rng: random.Random, tag: str, drain: float, profile_dir: Path | None = None) -> dict[str, Any]:
    names = [g.name for g in siblings]
    everyone = [writer.golem, *siblings]
    drained_w = wait_embedded(everyone, drain)
    # warnings
    acks: dict[str, float] = {}
    rtts: list[float] = []

    def write(i: int) -> None:
        t0 = time.time() * 1000
        made = writer.call("POST", "/v1/memory", json={"content": content(rng, tag, i), "memory_type": "warning"})
        ack = time.time() * 1000
        acks[made["id"]] = ack
        rtts.append(ack - t0)

    progress(f"  {tag}: {count} warnings at {rate:g}/s from {writer.golem.name}")
    profiles = start_profiles(profile_dir, {f"{tag}-writer": writer.golem.proc, f"{tag}-sibling": siblings[0].proc})
    host_w = HostLoad()
    published0 = writer.call("GET", "/v1/status")["counters"].get("gossip_published", 0)
    checks0 = [s.call("GET", "/v1/status")["counters"].get("shipped_vectors_checked", 0) for s in siblings]
    cpu_w = DaemonCpu(everyone)  # after the bench's own status reads: they cost the daemons CPU too
    pace_w = paced(count, rate, write)
    keys = {(n, i) for n in names for i in acks}
    missing_w = watch.wait(keys, "entries", timeout)
    daemons_w = cpu_w.report(count)
    published = writer.call("GET", "/v1/status")["counters"].get("gossip_published", 0) - published0
    load_w = host_w.report("warnings", quiet=True)
    per_delivery = [watch.entries[k][0] - acks[k[1]] for k in keys if k in watch.entries]
    vias = Counter(watch.entries[k][1] for k in keys if k in watch.entries)
    per_warning = [max(watch.entries[(n, i)][0] for n in names) - ack for i, ack in acks.items()
                   if all((n, i) in watch.entries for n in names)]
    # probes
    sent: dict[str, float] = {}
    probe_rtts: list[float] = []

    def probe(i: int) -> None:
        pid = f"{tag}-{i}"
        t0 = time.time() * 1000
        sent[pid] = float(writer.call("POST", "/v1/p2p/probe", json={"id": pid})["sent_ms"])
        probe_rtts.append(time.time() * 1000 - t0)

    drained_p = wait_embedded(everyone, drain)
    # CPU per warning counts the embedding too, which may finish after the last delivery
    after_drain = cpu_w.report(count)
    daemons_w["sibling_cpu_ms_per_msg"] = after_drain["sibling_cpu_ms_per_msg"]
    daemons_w["writer_cpu_ms_per_msg"] = after_drain["writer_cpu_ms_per_msg"]
    for key in ("sibling_cpu_ms_per_msg", "writer_cpu_ms_per_msg"):
        daemons_w["own"][key] = after_drain["own"][key]
    checks = [s.call("GET", "/v1/status")["counters"].get("shipped_vectors_checked", 0) - c
              for s, c in zip(siblings, checks0, strict=True)]
    profiled = stop_profiles(profiles)
    progress(f"  {tag}: {count} probes at {rate:g}/s from {writer.golem.name}")
    host_p = HostLoad()
    cpu_p = DaemonCpu(everyone)
    pace_p = paced(count, rate, probe)
    pkeys = {(n, p) for n in names for p in sent}
    missing_p = watch.wait(pkeys, "probes", timeout)
    wait_embedded(everyone, drain)  # the status round that ends the warnings' window: both carry it alike
    daemons_p = cpu_p.report(count)
    load_p = host_p.report("probes", quiet=True)
    in_order = sorted(acks, key=acks.__getitem__)
    quarters = [in_order[q * len(in_order) // 4:(q + 1) * len(in_order) // 4] for q in range(4)]
    by_quarter = [round(percentile([max(watch.entries[(n, i)][0] for n in names) - acks[i] for i in part
                                    if all((n, i) in watch.entries for n in names)], 50), 1) for part in quarters]
    probe_delivery = [watch.probes[k][1] - watch.probes[k][0] for k in pkeys if k in watch.probes]
    per_probe = [max(watch.probes[(n, p)][1] for n in names) - s for p, s in sent.items()
                 if all((n, p) in watch.probes for n in names)]
    return {
        "rate": rate, "count": count, "siblings": len(siblings),
        "embed_drain_s": {"before_warnings": round(drained_w[0], 1), "before_probes": round(drained_p[0], 1),
                          "drained": drained_w[1] and drained_p[1]},
        "warnings": {"pace": pace_w, "write_http_ms": dist(rtts), "per_warning_ms": dist(per_warning),
                     "per_delivery_ms": dist(per_delivery), "deliveries": len(per_delivery),
                     "missing": missing_w, "via": dict(vias),
                     "negative_deliveries": sum(1 for x in per_delivery if x < 0),
                     "p50_ms_by_quarter": by_quarter, "host": load_w, "daemon_cpu": daemons_w,
                     "gossip_messages_published": published,
                     "shipped_checks_by_sibling": checks,
                     "missing_by_sibling": dict(Counter(k[0] for k in keys if k not in watch.entries))},
        "profiles": profiled,
        "probes": {"pace": pace_p, "probe_http_ms": dist(probe_rtts), "per_probe_ms": dist(per_probe),
                   "per_delivery_ms": dist(probe_delivery), "deliveries": len(probe_delivery),
                   "missing": missing_p, "host": load_p, "daemon_cpu": daemons_p,
                   "missing_by_sibling": dict(Counter(k[0] for k in pkeys if k not in watch.probes))},
    }


def warm_up(writer: Api, siblings: list[Golem], watch: Watch, drain: float) -> dict[str, Any]:
    """One warning, then wait until every daemon has embedded it, and one search on every sibling:
    each daemon loads its embedding model on first use, which takes seconds of CPU per daemon;
    measured phases should not pay it (a sibling that uses shipped vectors would otherwise load
    it on its first drawn check, inside the measured run)."""
    t0 = time.time() * 1000
    entry_id = writer.call("POST", "/v1/memory", json={"content": "warm-up: gas spike expected, delay swaps",
                                                       "memory_type": "warning"})["id"]
    for sibling in siblings:  # loads its model (a search waits for it up to 5 s, then the load goes on)
        sibling.call("POST", "/v1/memory/search", json={"query": "warm-up: gas spike", "top_k": 1})
    ack = time.time() * 1000
    keys = {(g.name, entry_id) for g in siblings}
    missing = watch.wait(keys, "entries", drain)
    delivered = max((watch.entries[k][0] for k in keys if k in watch.entries), default=float("nan")) - ack
    _, drained = wait_embedded([writer.golem, *siblings], drain)
    return {"delivered_ms": round(delivered, 1), "missing": missing,
            "embedded_s": round((time.time() * 1000 - t0) / 1000, 1), "drained": drained}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def repeats_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rate, over its repeats (one clade, back to back): the mean of each ratio to the
    probe with its 95 % t-interval (`mean_interval`): a single phase's sibling CPU ratio moves
    by ~0.1× with the machine, so the figure of record is the mean over repeats."""
    by_rate: dict[float, list[dict[str, Any]]] = {}
    for r in rows:
        by_rate.setdefault(r["rate"], []).append(r)
    out_rows = []
    for rate, runs in by_rate.items():
        def ratios(get: Callable[[dict[str, Any]], float | None], runs: list[dict[str, Any]] = runs) -> dict[str, Any]:
            return {k: v if k == "n" or v is None else round(v, 3)
                    for k, v in mean_interval(get(x) for x in runs).items()}
        out_rows.append({
            "rate": rate, "repeats": len(runs),
            "sibling_cpu": ratios(lambda x: _ratio(x["warnings"]["daemon_cpu"]["sibling_cpu_ms_per_msg"],
                                                   x["probes"]["daemon_cpu"]["sibling_cpu_ms_per_msg"])),
            "sibling_cpu_own": ratios(lambda x: _ratio(x["warnings"]["daemon_cpu"]["own"]["sibling_cpu_ms_per_msg"],
                                                       x["probes"]["daemon_cpu"]["own"]["sibling_cpu_ms_per_msg"])),
            "p50_msg": ratios(lambda x: x.get("ratio_p50_msg")),
            "p50_delivery": ratios(lambda x: x.get("ratio_p50_delivery")),
            "p99_msg": ratios(lambda x: _ratio(x["warnings"]["per_warning_ms"]["p99"],
                                               x["probes"]["per_probe_ms"]["p99"]))})
    return out_rows


def print_repeats(n: int, summary: Sequence[dict[str, Any]]) -> None:
    for s in summary:
        def show(k: str, s: dict[str, Any] = s) -> str:
            m = s[k]
            return "n/a" if m["mean"] is None else (
                f"{m['mean']:.2f}x" + ("" if m["lo"] is None else f" ({m['lo']:.2f}-{m['hi']:.2f})"))
        out(f"  {n:>7} {s['rate']:>6g} -> over {s['repeats']} repeats, mean (95 % interval) of warning/probe: "
            f"sibling CPU {show('sibling_cpu')} (daemon alone {show('sibling_cpu_own')}); p50 per message "
            f"{show('p50_msg')}, per delivery {show('p50_delivery')}; p99 {show('p99_msg')}")


def print_rate_header() -> None:
    out(f"  {'daemons':>7} {'rate/s':>6} {'what':<8} {'sent':>5} {'achvd/s':>7} {'deliv':>6} {'miss':>5} "
        f"{'msg p50':>8} {'msg p99':>8} {'msg max':>8} {'dlv p50':>8} {'dlv p99':>8} {'dlv max':>8}")


def print_rate(n: int, r: dict[str, Any]) -> None:
    for what, key, per in (("warning", "warnings", "per_warning_ms"), ("probe", "probes", "per_probe_ms")):
        x = r[key]
        m, d = x[per], x["per_delivery_ms"]
        out(f"  {n:>7} {r['rate']:>6g} {what:<8} {r['count']:>5} {x['pace']['achieved_per_s']:>7.1f} "
            f"{x['deliveries']:>6} {x['missing']:>5} {m['p50']:>8.1f} {m['p99']:>8.1f} {m['max']:>8.1f} "
            f"{d['p50']:>8.1f} {d['p99']:>8.1f} {d['max']:>8.1f}")
    w, p = r["warnings"], r["probes"]
    ratio_msg = w["per_warning_ms"]["p50"] / p["per_probe_ms"]["p50"] if p["per_probe_ms"]["p50"] else float("nan")
    ratio_dlv = (w["per_delivery_ms"]["p50"] / p["per_delivery_ms"]["p50"]
                 if p["per_delivery_ms"]["p50"] else float("nan"))
    r["ratio_p50_msg"] = round(ratio_msg, 2)
    r["ratio_p50_delivery"] = round(ratio_dlv, 2)
    lines = [
        [f"p50 warning/probe = {ratio_msg:.1f}x (per msg), {ratio_dlv:.1f}x (per delivery)",
         f"writer POST /v1/memory p50 {w['write_http_ms']['p50']:.1f} ms p99 {w['write_http_ms']['p99']:.1f}",
         f"deliveries via {w['via']}"],
        [f"warning p50 by quarter of the run {w['p50_ms_by_quarter']}",
         f"waited for embedders {r['embed_drain_s']['before_warnings']:.1f} s before the warnings, "
         f"{r['embed_drain_s']['before_probes']:.1f} s before the probes",
         f"other processes took {w['host']['other_share_of_machine']:.0%} / {p['host']['other_share_of_machine']:.0%}"
         " of the machine during warnings / probes"],
        [f"daemon CPU % during warnings: writer {w['daemon_cpu']['writer']:.0f}, siblings median "
         f"{w['daemon_cpu']['median']:.0f} max {w['daemon_cpu']['max']:.0f}, all {w['daemon_cpu']['sum']:.0f}; "
         f"during probes: writer {p['daemon_cpu']['writer']:.0f}, siblings median {p['daemon_cpu']['median']:.0f}, "
         f"all {p['daemon_cpu']['sum']:.0f} (100 = one core; {len(os.sched_getaffinity(0))} cores)"],
        [f"CPU per message: warning {w['daemon_cpu']['sibling_cpu_ms_per_msg']:.1f} ms per sibling (median), "
         f"{w['daemon_cpu']['writer_cpu_ms_per_msg']:.1f} ms on the writer; probe "
         f"{p['daemon_cpu']['sibling_cpu_ms_per_msg']:.1f} ms per sibling; the writer published "
         f"{w['gossip_messages_published']} gossip messages for {r['count']} warnings",
         f"siblings re-embedded {w['shipped_checks_by_sibling']} shipped vectors to check them"],
    ]
    if w["pace"]["achieved_per_s"] < 0.9 * r["rate"]:
        lines[0].append(f"writes completed at only {w['pace']['achieved_per_s']:.1f}/s")
    if not r["embed_drain_s"]["drained"]:
        lines[1].append("!! embedding backlog not drained in time")
    if w["negative_deliveries"]:
        lines[1].append(f"{w['negative_deliveries']} deliveries committed before the writer's response arrived")
    if w["missing"] or p["missing"]:
        lines.append([f"!! missing warnings by sibling {w['missing_by_sibling']}",
                      f"missing probes by sibling {p['missing_by_sibling']}"])
    for notes in lines:
        out(f"  {'':>7} {'':>6} -> " + "; ".join(notes))


def bench_propagation(root: Path, n: int, args: argparse.Namespace, rng: random.Random,
                      results: dict[str, Any], then: Callable[[LoopbackClade], None] | None = None) -> None:
    clade = LoopbackClade(root / f"clade-{n}", n)
    logs: list[EventLog] = []
    api: Api | None = None
    try:
        progress(f"[1] starting {n} daemons")
        connected_s = start_clade(clade, args.connect_timeout)
        writer, siblings = clade.golems[0], clade.golems[1:]
        logs = [EventLog(g.socket).start() for g in siblings]
        api = Api(writer)
        watch = Watch({g.name: log for g, log in zip(siblings, logs, strict=True)})
        time.sleep(args.settle)  # let the connect-time syncs and GossipSub mesh settle
        out(f"\n{n} daemons: all connected members of each other after {connected_s:.1f} s; writer {writer.name}, "
            f"{len(siblings)} siblings")
        warm: dict[str, Any] | None = None
        if args.warmup:
            warm = warm_up(api, siblings, watch, args.drain)
            out(f"  warm-up (not in the figures): one warning reached all siblings in {warm['delivered_ms']:.0f} ms; "
                f"every daemon had loaded its embedding model and embedded it {warm['embedded_s']:.1f} s after the "
                "write (cold start: the model loads on first use)")
            if args.clearance:
                warm["clearance"] = clear_for_checks(api, siblings, rng, rate=max(args.rates), timeout=args.drain)
                c = warm["clearance"]
                out(f"  clearance (not in the figures): {c['warnings']} warnings in {c['seconds']:.0f} s until "
                    f"{'every' if c['cleared'] else 'NOT every'} sibling checked the writer's shipped vectors at the "
                    "cleared share (an established author; --screening measures a new one's)")
        print_rate_header()
        rows = []
        for phase, rate in enumerate(args.rates):
            for repeat in range(args.repeats):
                tag = f"n{n}p{phase}r{rate:g}" + (f"x{repeat + 1}" if args.repeats > 1 else "")
                r = run_rate(api, siblings, watch, rate=rate, count=args.count, timeout=args.timeout, rng=rng,
                             tag=tag, drain=args.drain, profile_dir=args.profile)
                r["repeat"] = repeat + 1
                print_rate(n, r)
                rows.append(r)
        if args.repeats > 1:
            summary = repeats_summary(rows)
            print_repeats(n, summary)
            results.setdefault("repeats", []).append({"daemons": n, "by_rate": summary})
        if watch.truncated:
            out(f"  !! {watch.truncated} entries_received events listed fewer ids than entries (ids capped at 100)")
        odd = report_odd(clade.golems, f"{n} daemons after the latency runs")
        results["propagation"].append({"daemons": n, "connect_s": round(connected_s, 1), "warmup": warm, "rates": rows,
                                       "odd_counters": odd})
        if then is not None:
            then(clade)
    finally:
        for log in logs:
            log.close()
        if api is not None:
            api.close()
        clade.close()


# -- 2 + 3. catch-up ---------------------------------------------------------------------------


# -- 4. steady state ---------------------------------------------------------------------------


def bench_steady(clade: LoopbackClade, args: argparse.Namespace, rng: random.Random,
                 results: dict[str, Any]) -> None:
    golems = clade.golems
    phases = [("idle", 0.0)] + ([(f"{args.cpu_load:g} warning/s", args.cpu_load)] if args.cpu_load > 0 else [])
    out(f"\n== 4. steady state, {len(golems)} daemons (the largest clade, after its latency runs), "
        f"{args.cpu_seconds:g} s per phase (CPU % of one core; RSS = VmRSS; both with the daemon's embedding "
        "process; `own_*` in the JSON: the daemon alone) ==")
    drain_s, drained = wait_embedded(golems, args.drain)
    out(f"  waited {drain_s:.1f} s for every embedder to catch up first ({'done' if drained else 'NOT done'})")
    out(f"  {'phase':<16} {'cpu% med':>8} {'cpu% max':>8} {'cpu% sum':>8} {'RSS MiB med':>11} {'RSS MiB max':>11}"
        f" {'writes':>6}")
    rows = []
    for label, load in phases:
        progress(f"[4] sampling {len(golems)} daemons for {args.cpu_seconds:g} s ({label})")
        host = HostLoad()
        s = sample_steady(golems, args.cpu_seconds, load, rng)
        s["phase"] = label
        s["host"] = host.report(f"steady, {label}")
        out(f"  {label:<16} {s['cpu_pct_median']:>8.2f} {s['cpu_pct_max']:>8.2f} {s['cpu_pct_total']:>8.1f} "
            f"{s['rss_mib_median']:>11.1f} {s['rss_mib_max']:>11.1f} {s['writes']:>6}")
        rows.append(s)
    out("  per daemon (cpu% / RSS MiB mean, per phase): " + "  ".join(
        f"{n}: " + "/".join(f"{r['per_daemon'][n]['cpu_pct']:.1f}%,{r['per_daemon'][n]['rss_mib_mean']:.0f}"
                            for r in rows) for n in rows[0]["per_daemon"]))
    results["steady"] = rows


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=ints, default=[5, 10], help="clade sizes for the latency runs (default 5,10)")
    p.add_argument("--rates", type=floats, default=[10.0, 50.0], help="writes per second (default 10,50)")
    p.add_argument("--count", type=int, default=200, help="warnings (and probes) per size and rate (default 200)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run each rate's warnings and probes this many times in the same clade and report each "
                        "ratio's mean over them with its 95 %% interval (a single phase moves by ~0.1x)")
    p.add_argument("--timeout", type=float, default=30.0, help="wait this long for deliveries after the last write")
    p.add_argument("--connect-timeout", type=float, default=180.0, help="for all daemons to connect")
    p.add_argument("--settle", type=float, default=2.0, help="seconds between connecting and measuring")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="measure from cold: no warm-up warning (the embedding model then loads mid-run)")
    p.add_argument("--screening", dest="clearance", action="store_false",
                   help="no clearance in the warm-up: siblings check a share of the writer's shipped vectors as "
                        "for a new author ([embedding] check_shipped) instead of an established one's")
    p.add_argument("--drain", type=float, default=120.0,
                   help="before each measured phase, wait up to this long for every embedder to catch up")
    p.add_argument("--catchup", type=int, default=10_000, help="ops to catch up (2 per warning; 0 skips)")
    p.add_argument("--catchup-golems", type=int, default=2, help="clade size for the catch-up run (default 2)")
    p.add_argument("--catchup-timeout", type=float, default=300.0)
    p.add_argument("--ceiling-repeats", type=int, default=3)
    p.add_argument("--cpu-seconds", type=float, default=30.0, help="per steady-state phase (0 skips)")
    p.add_argument("--cpu-load", type=float, default=1.0, help="warnings/s in the loaded phase (0: idle only)")
    p.add_argument("--profile", type=Path, default=None, metavar="DIR",
                   help="py-spy the writer and one sibling through each warnings phase, and both ends of the "
                        "catch-up; raw stacks and a summary "
                        "(sampling costs CPU: take the table's figures from a run without it)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="keep data directories here (default: a temp dir)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; the exit code is 1 if a section failed (its figures are then missing), else 0."""
    args = parse_args(argv)
    rng = random.Random(args.seed)
    with workdir(args.out, "clade-bench-") as root:
        info = machine_info(root)
        results: dict[str, Any] = {"machine": info, "params": {k: str(v) for k, v in vars(args).items()},
                                   "propagation": [], "host": {}}
        failed: list[str] = []
        out(f"machine: {info['cpu_model']}, {info['cpu_count']} cores ({info['cpus_usable']} usable), "
            f"Linux {info['kernel']}, Python {info['python']}, SQLite {info['sqlite']}")
        out(f"data under {root}; every daemon is a separate `clade run` process on 127.0.0.1")
        started = time.monotonic()
        out("\n== 1. warning propagation (one writer, fixed schedule) vs raw GossipSub probes ==")
        out("latency in ms: warning = sibling committed_ms - writer's HTTP response received; probe = received_ms "
            "- sent_ms.\n'msg' = max over all siblings per message; 'dlv' = every (message, sibling) delivery.")
        biggest = max(args.sizes) if args.sizes else 0
        for n in args.sizes:
            steady = (lambda c: bench_steady(c, args, rng, results)) if n == biggest and args.cpu_seconds > 0 else None
            load = HostLoad()
            try:
                bench_propagation(root, n, args, rng, results, then=steady)
            except (TimeoutError, RuntimeError) as exc:
                failed.append(f"{n} daemons: {exc}")
                out(f"  !! {n} daemons: {type(exc).__name__}: {exc}")
            results["host"][f"clade-{n}"] = load.report(f"{n} daemons")
        if args.catchup > 0:
            out("\n== 2. catch-up throughput and 3. bytes on the wire per synced op ==")
            load = HostLoad()
            try:
                bench_catchup(root, args, rng, results)
            except (TimeoutError, RuntimeError) as exc:
                failed.append(f"catch-up: {exc}")
                out(f"  !! catch-up: {type(exc).__name__}: {exc}")
            results["host"]["catchup"] = load.report("catch-up")
    results["total_seconds"] = round(time.monotonic() - started, 1)
    out(f"\ntotal {results['total_seconds']:.0f} s")
    results["failed"] = failed
    emit("clade", results)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
