"""Benchmark membership hygiene: what strangers cost a daemon, and whether its clade sync notices.

    .venv/bin/python -m bench.bench_strangers [--seconds 12] [--baseline-seconds 15] [--rate 5]
                                              [--workers 2] [--kinds garbage,silent,held] [--quick] [--out DIR]

Two real `clade run` daemons, A and its sibling B, on 127.0.0.1 (`daemon.testing.harness`).
Strangers are driven from separate worker processes (this module with `--worker KIND`), each
running many concurrent dial loops; every stranger is a fresh Ed25519 identity
(`crypto.Identity.generate()`) speaking Noise + Yamux exactly as `daemon.p2p.host.build_host`
configures them. Measures:

1. Baseline: warnings written on A at `--rate`/s for `--baseline-seconds`, and raw GossipSub
   probes (`POST /v1/p2p/probe`) at the same rate at the same time (the transport floor).
   Latency A -> B as in bench_clade: warning = B's `entries_received.committed_ms` minus the
   time A's HTTP response arrived; probe = `received_ms - sent_ms`. A's CPU rate over the
   phase is the idle-plus-load floor the storms are measured against.
2. Stranger storms, at most `--seconds` and `--budget` dials each, with the same propagation load running throughout:
   (a) garbage: fresh identity, dial A, send a framed `b"\\x93garbage"` on `/clade/hello/1.0.0`:
       refused (`hello_refused_malformed`) and held off 300 s;
   (b) silent: fresh identity, dial A, say nothing: dropped after 2 s (`hello_not_sent`) and
       held off 60 s; many dial loops per worker, so it also shows how many A holds at once;
   (c) held: one identity per dial loop is refused once (garbage), then redials in a loop during
       its hold: dropped at once (`connections_refused_held`), the cheap path.
   For each: strangers offered (client dials started) and shed (A's counters) per second;
   A's CPU (utime+stime, /proc/<pid>/stat) over the storm divided by the connections A shed,
   gross and net of the baseline CPU rate -> CPU us per refused connection; A -> B propagation
   p50/p99 and its ratio to the baseline; A's RSS and open fds before/after/peak; the size of
   `GET /v1/peers` (the peer book keeps at most 256 strangers).
3. Client cost: CPU ms per stranger connection on the client side for the lean dialer used
   by the storms (raw TCP + `TransportUpgrader`: Noise + Yamux, no host) vs a full py-libp2p
   host per identity (`build_host` + `host.run` + `connect` + `new_stream`).

py-libp2p 0.8.1 alone accepts at most 300 inbound connections per process *lifetime* (the
swarm's inbound handler holds its `_inbound_limiter` slot until the swarm stops); the daemon
gives each slot back when its connection closes (`daemon.p2p.host.release_inbound_slots`).
A is still restarted before each storm (each phase starts from the same state), each storm
stops after `--budget` dials (280), and a last section pushes A past 300 and restarts B to
check that it reconnects. After each restart of A the bench
probes until gossip A -> B works again (`gossip_resumed_s`; None = not within `--drain`).
CPU per connection: gross = A's CPU over the phase window / connections shed; net subtracts
the baseline's CPU rate over the same window (it undercounts when the storm ran shorter than
the window or A's gossip was down).

Checks (the run fails, exit 1): a stranger is never admitted (no hello answer, no
`peers_admitted`, no member but B in A's peer book); no stranger ever sees a pubsub stream
from A (every stream A opens to a stranger is recorded by protocol); A and B stay up; no
traceback or internal error in their logs; no warning or probe lost; the peer book stays bounded.

Figures are printed as they are measured (progress on stderr); a table at the end, then the
JSON result line (bench.common). Other processes' CPU is recorded per phase.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import HostLoad, dist, machine_info, out, progress
from bench.common.clade import Api, Watch, content, paced
from bench.common.machine import CLK_TCK, open_fds, proc_cpu_ticks, proc_status_kib
from bench.common.report import main_in_workdir
from bench.strangers.report import print_phase, report
from bench.strangers.sampler import Sampler
from bench.strangers_worker import (
    KINDS,
    PUBSUB_MARKERS,
    collect_workers,
    launch_workers,
    merge_tallies,
    run_worker,
)
from daemon.testing.harness import EventLog, Golem, LoopbackClade

TAIL_S = 3.0  # after the storm: A drops the last silent strangers 2 s after they connected
STRANGER_COUNTERS = ("hello_not_sent", "connections_refused_held")


# -- the daemon side ----------------------------------------------------------------------------------


def stranger_counters(counters: dict[str, int]) -> dict[str, int]:
    """A's counters for strangers it shed: refusals (not by a peer), silent ones, held redials."""
    return {k: int(v) for k, v in counters.items()
            if k in STRANGER_COUNTERS or (k.startswith("hello_refused_") and "by_peer" not in k)
            or k in ("hello_failed", "hello_incomplete", "gossip_streams_refused", "peers_admitted",
                     "internal_errors")}


def shed_total(delta: dict[str, int]) -> int:
    return sum(v for k, v in delta.items() if k in STRANGER_COUNTERS or k.startswith("hello_refused_"))


def propagate(api: Api, b: Golem, watch: Watch, *, rate: float, seconds: float, tag: str, rng: random.Random,
              timeout: float) -> dict[str, Any]:
    """Warnings and probes from A at `rate`/s each, concurrently, for `seconds`; latency to B."""
    count = max(1, round(rate * seconds))
    acks: dict[str, float] = {}
    sent: dict[str, float] = {}
    lost: list[str] = []

    def write(i: int) -> None:
        try:
            made = api.call("POST", "/v1/memory", json={"content": content(rng, tag, i), "memory_type": "warning"})
            acks[made["id"]] = time.time() * 1000
        except (RuntimeError, OSError) as exc:
            lost.append(f"write {i}: {exc}")

    def probe(i: int) -> None:
        pid = f"{tag}-{i}"
        try:
            sent[pid] = float(api.call("POST", "/v1/p2p/probe", json={"id": pid})["sent_ms"])
        except (RuntimeError, OSError) as exc:
            lost.append(f"probe {i}: {exc}")

    paces: dict[str, Any] = {}
    threads = [threading.Thread(target=lambda: paces.__setitem__("warnings", paced(count, rate, write, workers=4))),
               threading.Thread(target=lambda: paces.__setitem__("probes", paced(count, rate, probe, workers=4)))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    keys = {(b.name, i) for i in acks}
    pkeys = {(b.name, p) for p in sent}
    missing_w = watch.wait(keys, "entries", timeout)
    missing_p = watch.wait(pkeys, "probes", timeout)
    warn = [watch.entries[k][0] - acks[k[1]] for k in keys if k in watch.entries]
    prob = [watch.probes[k][1] - watch.probes[k][0] for k in pkeys if k in watch.probes]
    return {"count": count, "rate": rate, "pace": paces, "warning_ms": dist(warn), "probe_ms": dist(prob),
            "missing_warnings": missing_w, "missing_probes": missing_p, "api_errors": lost[:5],
            "api_error_count": len(lost)}


def settle_embedders(golems: Sequence[Golem], timeout: float) -> tuple[float, bool]:
    """Until no daemon's `entries_embedded` moved for 1 s (A restarts, so its counter cannot be
    compared with its entries as bench_clade does); (seconds, settled)."""
    t0 = time.monotonic()
    last: list[int] = []
    stable = 0
    while time.monotonic() - t0 < timeout:
        now = [int(g.call("GET", "/v1/status")["counters"].get("entries_embedded", 0)) for g in golems]
        stable = stable + 1 if now == last else 0
        if stable >= 2:
            return time.monotonic() - t0, True
        last = now
        time.sleep(0.5)
    return time.monotonic() - t0, False


def wait_no_strangers(a: Golem, members: set[str], timeout: float) -> float:
    """Until A has no stranger connected (the last silent ones are dropped 2 s after connecting)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        peers = a.call("GET", "/v1/peers")["peers"]
        if not any(p["connected"] and p["peer_id"] not in members for p in peers):
            break
        time.sleep(0.25)
    return time.monotonic() - t0


def log_problems(golems: Sequence[Golem]) -> list[str]:
    bad = ("Traceback", "internal error", "ERROR", "CRITICAL", "Exception")
    found = []
    for g in golems:
        for line in g.stderr_lines:
            if any(b in line for b in bad):
                found.append(f"{g.name}: {line[:300]}")
    return found


def run_phase(name: str, kind: str | None, ctx: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    a: Golem = ctx["a"]
    b: Golem = ctx["b"]
    api: Api = ctx["api"]
    members = {a.peer_id, b.peer_id}
    seconds = args.baseline_seconds if kind is None else args.seconds
    drained_s, drained = settle_embedders([a, b], args.drain)
    settled_s = wait_no_strangers(a, members, 15)
    assert a.proc is not None and b.proc is not None
    pid_a, pid_b = a.proc.pid, b.proc.pid
    rss0 = proc_status_kib(pid_a, "VmRSS")
    fds0 = open_fds(pid_a)
    peers0 = len(api.call("GET", "/v1/peers")["peers"])
    c0 = stranger_counters(api.call("GET", "/v1/status")["counters"])
    procs: list[subprocess.Popen[str]] = []
    lead = 3.0 if kind is not None else 0.2  # worker start-up (imports) happens before the window
    start_at = time.time() + lead
    if kind is not None:
        concurrency = {"garbage": args.concurrency, "silent": args.silent_concurrency, "held": args.concurrency}[kind]
        progress(f"[{name}] {args.workers} worker(s) x {concurrency} dial loops, {seconds:g} s")
        procs = launch_workers(kind, a.p2p_addrs[0], n=args.workers, concurrency=concurrency, seconds=seconds,
                               start_at=start_at, budget=args.budget)
    else:
        progress(f"[{name}] propagation only, {seconds:g} s")
    time.sleep(max(0.0, start_at - time.time()))
    host = HostLoad()
    t0 = time.monotonic()
    ticks_a0, ticks_b0 = proc_cpu_ticks(pid_a), proc_cpu_ticks(pid_b)
    sampler = Sampler(a, Api(a)).start(members)
    prop = propagate(api, b, ctx["watch"], rate=args.rate, seconds=seconds, tag=name, rng=ctx["rng"],
                     timeout=args.timeout)
    tallies, problems = collect_workers(procs, timeout=seconds + 60)
    time.sleep(max(0.0, t0 + seconds + TAIL_S - time.monotonic()))
    window = time.monotonic() - t0
    cpu_a = (proc_cpu_ticks(pid_a) - ticks_a0) / CLK_TCK
    cpu_b = (proc_cpu_ticks(pid_b) - ticks_b0) / CLK_TCK
    samples = sampler.stop()
    load = host.report(name, quiet=True)
    c1 = stranger_counters(api.call("GET", "/v1/status")["counters"])
    peers = api.call("GET", "/v1/peers")["peers"]
    sampler.note_peers(peers)
    delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in sorted(set(c0) | set(c1)) if c1.get(k, 0) != c0.get(k, 0)}
    shed = shed_total(delta)
    res: dict[str, Any] = {
        "kind": kind, "seconds": seconds, "window_s": round(window, 2), "embed_drain_s": round(drained_s, 1),
        "embed_drained": drained, "settle_s": round(settled_s, 1), "propagation": prop,
        "a_cpu_s": round(cpu_a, 2), "a_cpu_pct": round(cpu_a / window * 100, 1),
        "b_cpu_pct": round(cpu_b / window * 100, 1), "a_counters_delta": delta, "shed": shed,
        "shed_per_s": round(shed / seconds, 1),
        "rss_mib_before": round(rss0 / 1024, 1), "rss_mib_after": round(proc_status_kib(pid_a, "VmRSS") / 1024, 1),
        "fds_before": fds0, "fds_after": open_fds(pid_a), "peers_before": peers0,
        "peers_after": len(peers), "sampled": samples, "stranger_members": sorted(sampler.stranger_members),
        "host": load, "worker_problems": problems,
    }
    if kind is not None:
        res["clients"] = merge_tallies(tallies)
        active = max(0.1, min(seconds, res["clients"]["wall_s"]))
        res["storm_active_s"] = round(active, 2)
        res["offered_per_s"] = round(res["clients"]["attempted"] / active, 1)
        res["shed_per_s"] = round(shed / active, 1)
    return res


def finish_phase(res: dict[str, Any], base: dict[str, Any] | None) -> None:
    """CPU per shed connection (gross, and net of the baseline CPU rate) and latency ratios."""
    if base is None or res["kind"] is None:
        return
    floor = base["a_cpu_s"] / base["window_s"] * res["window_s"]
    shed = max(1, res["shed"])
    res["a_cpu_us_per_conn_gross"] = round(res["a_cpu_s"] / shed * 1e6)
    res["a_cpu_us_per_conn_net"] = round(max(0.0, res["a_cpu_s"] - floor) / shed * 1e6)
    for what in ("warning_ms", "probe_ms"):
        for p in ("p50", "p99"):
            b0 = base["propagation"][what][p]
            res.setdefault("latency_ratio", {})[f"{what[:-3]}_{p}"] = round(res["propagation"][what][p] / b0, 2) \
                if b0 else None


def phase_failures(name: str, res: dict[str, Any], a: Golem, b: Golem) -> list[str]:
    failed = []
    c = res.get("clients", {})
    if c.get("admitted"):
        failed.append(f"{name}: {c['admitted']} stranger(s) got a hello answer (admitted)")
    if res["a_counters_delta"].get("peers_admitted"):
        failed.append(f"{name}: A admitted {res['a_counters_delta']['peers_admitted']} peer(s)")
    if res["stranger_members"]:
        failed.append(f"{name}: A's peer book lists strangers as members: {res['stranger_members'][:3]}")
    leaked = {p: n for p, n in c.get("inbound_streams", {}).items() if any(m in p for m in PUBSUB_MARKERS)}
    if leaked:
        failed.append(f"{name}: A opened pubsub streams to strangers: {leaked}")
    if res["propagation"]["missing_warnings"] or res["propagation"]["missing_probes"]:
        failed.append(f"{name}: {res['propagation']['missing_warnings']} warning(s) and "
                      f"{res['propagation']['missing_probes']} probe(s) never reached B")
    if res["propagation"]["api_error_count"]:
        failed.append(f"{name}: {res['propagation']['api_error_count']} API call(s) on A failed")
    if res["sampled"]["strangers_in_book_max"] > 256:
        failed.append(f"{name}: {res['sampled']['strangers_in_book_max']} strangers in A's peer book (cap 256)")
    failed += [f"{name}: {p}" for p in res["worker_problems"]]
    for g in (a, b):
        if not g.running:
            failed.append(f"{name}: {g.name} died")
    return failed


def client_costs(ctx: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Client CPU per garbage-hello connection: the lean dialer vs a full host per identity (one
    worker each, the daemon's CPU not measured here)."""
    a: Golem = ctx["a"]
    res: dict[str, Any] = {}
    for client in ("lean", "host"):
        wait_no_strangers(a, {a.peer_id, ctx["b"].peer_id}, 15)
        procs = launch_workers("garbage", a.p2p_addrs[0], n=1, concurrency=4, seconds=args.client_seconds,
                               start_at=time.time() + 3, client=client)
        tallies, problems = collect_workers(procs, timeout=args.client_seconds + 60)
        merged = merge_tallies(tallies)
        merged["per_s"] = round(merged["connected"] / args.client_seconds, 1)
        merged["problems"] = problems
        res[client] = merged
        progress(f"[client] {client}: {merged['connected']:g} connections, {merged['client_cpu_ms_per_conn']} ms "
                 f"CPU each, {merged['per_s']}/s from one process")
    return res


# -- main ---------------------------------------------------------------------------------------


ENV = {"CLADE_P2P__SYNC_INTERVAL_S": "30"}
WARM_UPS = ("warm-up: gas spike, delay swaps", "warm-up: the Curve pool's oracle lags the market by a block",
            "warm-up: a bridge paused withdrawals on Arbitrum", "warm-up: USDC depegged to 0.97 on one DEX",
            "warm-up: an RPC provider returns stale blocks", "warm-up: a lending market froze new borrows")


def warm_up(ctx: dict[str, Any], args: argparse.Namespace) -> None:
    """One warning A -> B, then the embedders settle: each daemon loads its model on first use."""
    n = len(ctx.setdefault("gossip_resumed_s", []))  # each warm-up's own text: a repeat is held, not gossiped
    made = ctx["api"].call("POST", "/v1/memory", json={"content": WARM_UPS[n % len(WARM_UPS)],
                                                       "memory_type": "warning"})
    ctx["watch"].wait({(ctx["b"].name, made["id"])}, "entries", args.drain)
    time.sleep(0.5)
    settle_embedders([ctx["a"], ctx["b"]], args.drain)
    ctx.setdefault("gossip_resumed_s", []).append(wait_gossip(ctx, args.drain))


def wait_gossip(ctx: dict[str, Any], timeout: float) -> float | None:
    """Seconds until a probe from A reaches B over GossipSub (after a restart the mesh re-forms);
    None if none did within `timeout`."""
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < timeout:
        n += 1
        pid = f"gossip-check-{time.time_ns()}-{n}"
        ctx["api"].call("POST", "/v1/p2p/probe", json={"id": pid})
        if not ctx["watch"].wait({(ctx["b"].name, pid)}, "probes", 1.0):
            return round(time.monotonic() - t0, 1)
    return None


def restart_a(ctx: dict[str, Any], args: argparse.Namespace) -> float:
    """A fresh A process (dialing B), warmed up: every storm starts with py-libp2p's inbound budget whole."""
    a, b = ctx["a"], ctx["b"]
    t0 = time.monotonic()
    ctx["api"].close()
    a.stop()
    a.p2p_addrs = []  # Golem.start keeps the old (dead) address otherwise: A listens on a new port
    ctx["clade"].start(a, bootstrap=[b], env=ENV)
    ctx["clade"].wait_connected([a, b], timeout=60)
    ctx["api"] = Api(a)
    warm_up(ctx, args)
    progress(f"  A restarted and warmed up in {time.monotonic() - t0:.1f} s; gossip A -> B resumed after "
             f"{ctx['gossip_resumed_s'][-1]} s of probing")
    return time.monotonic() - t0


def inbound_cap(ctx: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Push A past 300 inbound connections in its lifetime (garbage hellos), then restart B (a new
    port, so only B's dial can reconnect them): does B get back in?"""
    a, b = ctx["a"], ctx["b"]
    out(f"\n== inbound cap: {args.cap_dials} more garbage dials to A, then B restarts ==")
    c0 = stranger_counters(ctx["api"].call("GET", "/v1/status")["counters"])
    procs = launch_workers("garbage", a.p2p_addrs[0], n=1, concurrency=args.concurrency, seconds=30,
                           start_at=time.time() + 3, budget=args.cap_dials)
    tallies, problems = collect_workers(procs, timeout=90)
    clients = merge_tallies(tallies)
    c1 = stranger_counters(ctx["api"].call("GET", "/v1/status")["counters"])
    shed_in_run = shed_total(c1)
    b.stop()
    b.p2p_addrs = []
    t0 = time.monotonic()
    ctx["clade"].start(b, bootstrap=[a], env=ENV)
    reconnected = True
    try:
        ctx["clade"].wait_connected([a, b], timeout=args.reconnect_timeout)
    except TimeoutError:
        reconnected = False
    took = time.monotonic() - t0
    res = {"clients": clients, "worker_problems": problems, "a_counters_delta": {
        k: c1.get(k, 0) - c0.get(k, 0) for k in c1 if c1.get(k, 0) != c0.get(k, 0)},
        "a_inbound_before_restart": shed_in_run + 1, "b_reconnected": reconnected, "b_reconnect_s": round(took, 1)}
    out(f"  A shed {shed_in_run} strangers since it started; the last {clients['attempted']:g} dials: "
        f"{clients['connected']:g} handshakes, errors {clients['errors']}")
    out(f"  B restarted: {'reconnected to A' if reconnected else 'NOT reconnected'} after {took:.1f} s")
    return res


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    started = time.monotonic()
    info = machine_info(root)
    res: dict[str, Any] = {"machine": info, "params": {k: v for k, v in vars(args).items() if k != "out"},
                           "phases": {}, "failed": []}
    res["params"]["out"] = str(args.out) if args.out else None
    clade = LoopbackClade(root / "clade", 2)
    a, b = clade.golems
    log: EventLog | None = None
    ctx: dict[str, Any] = {}
    try:
        progress("starting daemons A and B")
        clade.start(a, bootstrap=[], env=ENV)
        clade.start(b, bootstrap=[a], env=ENV)
        clade.wait_connected([a, b], timeout=60)
        log = EventLog(b.socket).start()
        ctx = {"a": a, "b": b, "api": Api(a), "watch": Watch({b.name: log}), "clade": clade,
                               "rng": random.Random(args.seed)}
        out(f"A = {a.name} ({a.peer_id[:16]}…), B = {b.name}; strangers from {args.workers} worker process(es); "
            f"A is restarted before each storm (py-libp2p accepts at most 300 inbound connections per process)")
        warm_up(ctx, args)
        out("  phase     propagation A -> B (ms)                  daemon CPU (100% = one core), others' share of "
            "the machine")
        base = run_phase("baseline", None, ctx, args)
        res["phases"]["baseline"] = base
        print_phase("baseline", base)
        res["failed"] += phase_failures("baseline", base, a, b)
        for kind in args.kinds:
            if not (a.running and b.running):
                break
            restart_a(ctx, args)
            r = run_phase(kind, kind, ctx, args)
            finish_phase(r, base)
            res["phases"][kind] = r
            print_phase(kind, r)
            res["failed"] += phase_failures(kind, r, a, b)
        if args.client_seconds > 0 and a.running and b.running:
            restart_a(ctx, args)
            res["client_costs"] = client_costs(ctx, args)
        if args.cap_dials > 0 and a.running and b.running:
            res["inbound_cap"] = inbound_cap(ctx, args)
            if not res["inbound_cap"]["b_reconnected"]:
                res["failed"].append(
                    f"B restarted after {res['inbound_cap']['a_inbound_before_restart']} inbound connections to A "
                    f"and could not reconnect in {args.reconnect_timeout:g} s (A closes every new inbound "
                    f"connection at once: {res['inbound_cap']['clients']['errors']})")
        res["gossip_resumed_s"] = ctx.get("gossip_resumed_s", [])
        if None in res["gossip_resumed_s"]:
            res["failed"].append(f"gossip A -> B did not resume after a restart of A: {res['gossip_resumed_s']}")
        res["a_peers_end"] = len(ctx["api"].call("GET", "/v1/peers")["peers"]) if a.running else None
        res["log_problems"] = log_problems([a, b])
        if res["log_problems"]:
            res["failed"].append(f"{len(res['log_problems'])} problem line(s) in the daemons' logs: "
                                 f"{res['log_problems'][0]}")
    except (TimeoutError, RuntimeError) as exc:
        res["failed"].append(f"{type(exc).__name__}: {exc}")
        out(f"  !! {type(exc).__name__}: {exc}")
    finally:
        if log is not None:
            log.close()
        if "api" in ctx:
            ctx["api"].close()
        clade.close()
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["total_seconds"] = round(time.monotonic() - started, 1)
    return res


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_strangers", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=12.0, help="per storm at most (default 12; see --budget)")
    p.add_argument("--baseline-seconds", type=float, default=15.0, help="baseline propagation (default 15)")
    p.add_argument("--rate", type=float, default=5.0, help="warnings/s and probes/s from A (default 5)")
    p.add_argument("--workers", type=int, default=2, help="stranger worker processes per storm (default 2)")
    p.add_argument("--concurrency", type=int, default=8, help="dial loops per worker, garbage and held (default 8)")
    p.add_argument("--silent-concurrency", type=int, default=100, help="dial loops per worker, silent (default 100)")
    p.add_argument("--kinds", type=lambda s: [k for k in s.split(",") if k], default=list(KINDS),
                   help="storms to run (default garbage,silent,held)")
    p.add_argument("--client-seconds", type=float, default=5.0,
                   help="client-cost comparison per dialer (default 5; 0 skips)")
    p.add_argument("--timeout", type=float, default=30.0, help="wait this long for deliveries after the last write")
    p.add_argument("--drain", type=float, default=30.0, help="wait up to this long for the embedders between phases")
    p.add_argument("--cap-dials", type=int, default=350,
                   help="garbage dials that push A past py-libp2p's inbound cap before B restarts (0 skips)")
    p.add_argument("--reconnect-timeout", type=float, default=20.0, help="for B to reconnect after the cap")
    p.add_argument("--quick", action="store_true", help="8 s phases, 1 worker, no client comparison")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="keep the daemons' data directories here")
    # a worker process (started by the bench itself)
    p.add_argument("--worker", choices=KINDS, default=None, help=argparse.SUPPRESS)
    p.add_argument("--target", default="", help=argparse.SUPPRESS)
    p.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--client", choices=("lean", "host"), default="lean", help=argparse.SUPPRESS)
    p.add_argument("--budget", type=int, default=280,
                   help="dials per storm, all workers together (default 280: under py-libp2p's lifetime cap of "
                        "300 inbound connections, see the cap section; 0 = no limit)")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds = args.baseline_seconds = 8.0
        args.workers = 1
        args.client_seconds = 0.0
    bad = [k for k in args.kinds if k not in KINDS]
    if bad:
        p.error(f"unknown kinds {bad}; pick from {', '.join(KINDS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return run_worker(args)
    return main_in_workdir("strangers", args, run, report, "clade-bench-strangers-")


if __name__ == "__main__":
    sys.exit(main())
