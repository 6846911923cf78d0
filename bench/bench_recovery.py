"""Benchmark recovery: how fast a clade of real daemons converges after kills and a partition.

    .venv/bin/python -m bench.bench_recovery [--seconds 60] [--rate 5] [--kill-every 10] [--partition-s 15]
                                             [--no-timer] [--timeout 120] [--out DIR]

Three `clade run` daemons A, B, C on 127.0.0.1 (`daemon.testing.harness`), all connected
before the chaos starts (and one warm-up warning embedded everywhere). Then, for `--seconds`:

- warnings are written at `--rate`/s (open loop: each request is sent on schedule whether
  or not earlier ones have returned), round-robin on whichever golems are up; each id a
  daemon acknowledges (`POST /v1/memory` returns once the entry is committed) is recorded;
- B is SIGKILLed and restarted at once every `--kill-every` s (on a new port: its siblings'
  address for it is stale; it dials them from its peers.json and the bootstrap A);
- C is partitioned from A and B for `--partition-s` s, starting in the middle of the run:
  `POST /v1/peers/disconnect {peer_id, hold_s}` on both ends of each link (C holds A and B,
  A and B hold C; a hold drops the peer and refuses it both ways, so neither side redials),
  all holds ending at the same moment; a B restarted during the partition gets its hold on
  C again (a hold lives in the daemon's memory). The holds expiring is the heal.

The last fault ends at the later of the last restart's READY (the daemon's socket up and
p2p listening) and the heal. From then on the bench polls (every `--poll` s, no fixed
waits) every daemon's entries, shared state digest and peers, and reports:

- backlog: time from the last fault until every id acknowledged before it is on every golem
  (what the faults held back; later writes travel by gossip);
- converged: time from the last fault (and from the end of the chaos, when the writes stop)
  until every acknowledged id is on every golem and `GET /v1/state-digest` `shared` is equal
  on all three; the goal is 10 s after the last fault;
- connected: time until every golem counts both others as connected members again;
- lost: acknowledged ids on no golem at all when the wait ends (must be 0); undelivered:
  acknowledged ids still missing on some golem then (not converged);
- per fault end (each restart's READY, the heal), from the daemons' `entries_received`
  events: how many deliveries of what was acknowledged before it were outstanding then,
  and how long until the last of them landed;
- who sees whom at the last fault and when the chaos is over (`GET /v1/peers`: connected
  member, down, down with only a stale address for the peer, or no record of it at all);
- the counters of interest from `GET /v1/status` (`sync_*`, `gossip_rejected_*`,
  `hello_failed`, holds and dials): A's and C's for the whole run, B's summed over its runs
  (each read just before its SIGKILL, then the last run's at the end);
- a timeline of the events after the last fault (`peer_up`/`peer_down`, `sync_complete`,
  `entries_received` by sync or carrying a held-back id), which says what convergence
  waited for.

The daemons run with their default anti-entropy period (`p2p.sync_interval_s` = 30 s,
jittered × U(0.8, 1.2)), as the issue measured; `--no-timer` also runs the same chaos on a
fresh clade with `CLADE_P2P__SYNC_INTERVAL_S=3600` (convergence from reconnection alone).
Every daemon embeds what it writes or receives, and B reloads its model after each restart:
on a small shared machine that CPU competes with sync, so the bench records other
processes' share of the machine and the load average.

Progress on stderr; a table, then the JSON result line (bench.common). The data directories
are removed at the end (kept with `--out DIR`). Exit 1 if an acknowledged write was lost, the
clade did not converge within `--timeout`, or a daemon logged a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import HostLoad, dist, machine_info, machine_rows, print_table, progress
from bench.common.report import checks_rows, main_in_workdir
from bench.recovery.figures import GOAL_S, Chaos, late_deliveries, per_fault, scenario_rows, secs, timeline
from bench.recovery.instruments import Events, Writer, ids_on, now_ms
from daemon.testing.harness import Golem, LoopbackClade

TIMER_ON = {"CLADE_P2P__SYNC_INTERVAL_S": "30"}  # the daemon's default, spelled out (the harness sets it too)
TIMER_OFF = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}
NAMES = ("A", "B", "C")
COUNTER_PREFIXES = ("sync_", "gossip_rejected_")
COUNTER_NAMES = ("hello_failed", "hello_incomplete", "hello_not_sent", "connections_refused_held", "dials_ok",
                 "dials_failed", "peers_admitted", "gossip_accepted", "gossip_duplicates",
                 "gossip_validation_timeouts", "internal_errors")


def interesting(counters: dict[str, int]) -> dict[str, int]:
    """The counters this bench reports (see the module docstring)."""
    return {k: int(v) for k, v in sorted(counters.items())
            if k.startswith(COUNTER_PREFIXES) or k in COUNTER_NAMES}


# -- the writer ----------------------------------------------------------------------------------


# -- events ----------------------------------------------------------------------------------------


# -- one scenario ------------------------------------------------------------------------------------


def plan(args: argparse.Namespace) -> list[tuple[float, int, str]]:
    """(t s, order, action): kills of B every `kill_every` s, the partition from the middle
    (placed before a kill due at the same moment, so that B then restarts inside it)."""
    steps: list[tuple[float, int, str]] = []
    k = 1
    while args.kill_every > 0 and k * args.kill_every < args.seconds:
        steps.append((k * args.kill_every, 1, "kill"))
        k += 1
    if args.partition_s > 0:
        steps.append((args.seconds / 2, 0, "partition"))
    return sorted(steps)


def hold(chaos: Chaos, golem: Golem, other: Golem, until: float) -> None:
    """`golem` drops `other` and refuses it until the monotonic time `until` (a 404 means it
    does not know `other` at all: nothing to hold, it cannot dial it either)."""
    try:
        golem.call("POST", "/v1/peers/disconnect",
                   json={"peer_id": other.peer_id, "hold_s": round(max(0.05, until - time.monotonic()), 3)})
    except RuntimeError as exc:
        chaos.notes.append(f"{golem.name} holding {other.name}: {exc}"[:300])


def run_chaos(clade: LoopbackClade, golems: dict[str, Golem], writer: Writer, events: Events, env: dict[str, str],
              args: argparse.Namespace) -> Chaos:
    """Write, kill, partition: the record of what was done when."""
    a, b, c = golems["A"], golems["B"], golems["C"]
    chaos = Chaos(start_ms=now_ms())
    t0 = time.monotonic()
    writer.start(t0)
    for at, _, action in plan(args):
        wait = t0 + at - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the chaos schedule's own pacing
        if action == "partition":
            until, held_ms = time.monotonic() + args.partition_s, now_ms()
            chaos.partition_until = until
            for x, y in ((c, a), (c, b), (a, c), (b, c)):
                hold(chaos, x, y, until)
            chaos.partition_ms = (held_ms, held_ms + args.partition_s * 1000)
            chaos.ends.append((held_ms + args.partition_s * 1000, "partition healed (holds expired)"))
            chaos.note(t0, f"partition: C held from A and B for {args.partition_s:g} s (both ends)")
        else:
            try:
                chaos.b_counters.append(interesting(b.call("GET", "/v1/status")["counters"]))
            except RuntimeError as exc:
                chaos.notes.append(f"B status before the kill: {exc}"[:300])
            writer.set_up("B", False)
            killed = now_ms()
            b.stop(signal.SIGKILL)
            chaos.note(t0, "B SIGKILLed")
            launched = time.monotonic()
            clade.start(b, bootstrap=[a], env=env)
            ready, up_s = now_ms(), time.monotonic() - launched
            chaos.b_runs += 1
            writer.set_up("B", True)
            held = chaos.partition_until is not None and time.monotonic() < chaos.partition_until
            if held:
                assert chaos.partition_until is not None
                hold(chaos, b, c, chaos.partition_until)  # the new process forgot the hold
            events.follow(b, chaos.b_runs)
            what = "B restart READY" + (" (inside the partition)" if held else "")
            chaos.ends.append((ready, what))
            chaos.b_down.append((killed, ready))
            chaos.note(t0, what, launch_to_ready_s=round(up_s, 2))
    return chaos


def peers_view(golems: dict[str, Golem]) -> dict[str, dict[str, str]]:
    """Who sees whom: 'member' (a connected member), 'connected' (not admitted on this
    connection), 'down' (known, not connected; 'stale address' if none of the addresses it
    holds is the peer's current one) or 'unknown' (no record of it at all)."""
    names = {g.peer_id: n for n, g in golems.items()}
    listening = {n: {a.split("/p2p/")[0] for a in g.p2p_addrs} for n, g in golems.items()}

    def state(p: dict[str, Any]) -> str:
        if p["connected"]:
            return "member" if p["member"] else "connected"
        held = {str(a).split("/p2p/")[0] for a in p["addrs"]}
        return "down" if held & listening[names[p["peer_id"]]] else "down, stale address"

    view: dict[str, dict[str, str]] = {}
    for name, golem in golems.items():
        seen = {names[p["peer_id"]]: state(p) for p in golem.peers() if p["peer_id"] in names}
        view[name] = {other: seen.get(other, "unknown") for other in golems if other != name}
    return view


def watch_recovery(golems: dict[str, Golem], writer: Writer, fault_ms: float, args: argparse.Namespace,
                   ) -> dict[str, Any]:
    """Poll from the last fault's end until converged (once the writes are done) or the timeout."""
    backlog = {a.entry_id for a in writer.acked if a.acked_ms <= fault_ms}
    at_fault = {n: backlog - ids_on(g) for n, g in golems.items()}
    view_at_fault = peers_view(golems)
    t_backlog: dict[str, float] = {}
    t_connected: float | None = None
    t_converged: float | None = None
    end_ms: float | None = None
    at_end: dict[str, set[str]] = {}
    view_at_end: dict[str, dict[str, str]] = {}
    deadline = float("inf")
    polls = 0
    ids: dict[str, set[str]] = {}
    digests: dict[str, str] = {}
    while True:
        done = writer.done.is_set()
        ids = {n: ids_on(g) for n, g in golems.items()}
        view = peers_view(golems)
        digests = {n: str(g.call("GET", "/v1/state-digest")["shared"]) for n, g in golems.items()} if done else {}
        seen = now_ms()
        polls += 1
        for n in golems:
            if n not in t_backlog and backlog <= ids[n]:
                t_backlog[n] = seen
        if t_connected is None and all(s == "member" for v in view.values() for s in v.values()):
            t_connected = seen
        if done:
            acked = {a.entry_id for a in writer.acked}
            if end_ms is None:  # the chaos is over: faults (polling started after the last) and writes
                end_ms = max([fault_ms, *(a.acked_ms for a in writer.acked)])
                at_end = {n: acked - ids[n] for n in golems}
                view_at_end = view
                deadline = time.monotonic() + args.timeout
                progress(f"  chaos over; waiting up to {args.timeout:g} s for convergence "
                         f"(missing now: {', '.join(f'{n} {len(m)}' for n, m in at_end.items())})")
            if all(acked <= s for s in ids.values()) and len(set(digests.values())) == 1:
                t_converged = seen
                break
            if time.monotonic() > deadline:
                break
        time.sleep(args.poll)
    assert end_ms is not None
    acked = {a.entry_id for a in writer.acked}
    undelivered = {n: sorted(acked - ids[n]) for n in golems}
    lost = sorted(acked - set().union(*ids.values()))

    by_writer = {a.entry_id: a.golem for a in writer.acked}  # every write has returned by now

    def per_writer(missing: dict[str, set[str]]) -> dict[str, dict[str, int]]:
        return {n: dict(Counter(by_writer[i] for i in m)) for n, m in missing.items()}

    return {
        "backlog_ids": len(backlog),
        "missing_at_last_fault": per_writer(at_fault), "missing_at_chaos_end": per_writer(at_end),
        "peers_at_last_fault": view_at_fault, "peers_at_chaos_end": view_at_end,
        "chaos_end_after_last_fault_s": secs(end_ms, fault_ms),
        "backlog_everywhere_s": secs(max(t_backlog.values()) if len(t_backlog) == len(golems) else None, fault_ms),
        "backlog_by_golem_s": {n: secs(t_backlog.get(n), fault_ms) for n in golems},
        "all_connected_s": secs(t_connected, fault_ms),
        "converged_after_last_fault_s": secs(t_converged, fault_ms),
        "converged_after_chaos_end_s": secs(t_converged, end_ms),
        "converged": t_converged is not None,
        "within_goal": t_converged is not None and (t_converged - fault_ms) / 1000 <= GOAL_S,
        "digests_equal": len(set(digests.values())) == 1,
        "polls": polls, "poll_s": args.poll,
        "lost": len(lost), "lost_ids": lost[:10],
        "undelivered": sum(len(m) for m in undelivered.values()),
        "undelivered_by_golem": {n: len(m) for n, m in undelivered.items()},
        "undelivered_by_writer": per_writer({n: set(m) for n, m in undelivered.items()}),
        "_backlog": backlog, "_converged_ms": t_converged, "_final_ids": ids,
    }


def run_scenario(root: Path, label: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    clade = LoopbackClade(root / label, 3)
    golems = dict(zip(NAMES, clade.golems, strict=True))
    for name, golem in golems.items():
        golem.name = name
    a = golems["A"]
    events = Events()
    writer = Writer(golems, args.rate, args.seconds, args.seed)
    res: dict[str, Any] = {"env": env, "failed": []}
    try:
        progress(f"[{label}] starting A, B, C ({env})")
        t = time.monotonic()
        for golem in golems.values():
            clade.start(golem, bootstrap=[a] if golem is not a else [], env=env)
        clade.wait_connected(clade.golems, timeout=args.connect_timeout)
        res["connect_s"] = round(time.monotonic() - t, 1)
        res["warmup_s"] = warm_up(golems, args.connect_timeout)
        for golem in golems.values():
            events.follow(golem, 1)
        host = HostLoad()
        progress(f"[{label}] chaos for {args.seconds:g} s: {args.rate:g} writes/s, B killed every "
                 f"{args.kill_every:g} s, C partitioned {args.partition_s:g} s from t={args.seconds / 2:g} s")
        chaos = run_chaos(clade, golems, writer, events, env, args)
        fault_ms, fault_what = max(chaos.ends, default=(now_ms(), "none"))
        wait = (fault_ms - now_ms()) / 1000
        if wait > 0:
            time.sleep(wait)  # the heal is a scheduled moment: the holds expire in the daemons
        progress(f"[{label}] last fault ended ({fault_what}) at t={(fault_ms - chaos.start_ms) / 1000:.1f} s; "
                 "polling")
        rec = watch_recovery(golems, writer, fault_ms, args)
        res["host"] = host.report(label, quiet=True)
        backlog, conv_ms, final = rec.pop("_backlog"), rec.pop("_converged_ms"), rec.pop("_final_ids")
        arrivals, truncated = events.arrivals(writer.acked)
        res["per_fault"] = per_fault(chaos, writer, arrivals, final)
        res["late"] = late_deliveries(chaos, writer, arrivals, final, args.slack)
        res["events_truncated"] = truncated
        res["timeline"] = timeline(events, golems, backlog, fault_ms,
                                   (conv_ms if conv_ms is not None else now_ms()) + 500, args.timeline)
        res["counters"] = {n: interesting(g.call("GET", "/v1/status")["counters"]) for n, g in golems.items()}
        b_all: Counter[str] = Counter()
        for c in [*chaos.b_counters, res["counters"]["B"]]:
            b_all.update(c)
        res["counters_b_all_runs"] = dict(sorted(b_all.items()))
        acks_by = Counter(x.golem for x in writer.acked)
        res["chaos"] = {
            "seconds": args.seconds, "rate": args.rate, "offered": writer.offered, "acked": len(writer.acked),
            "acked_by": {n: acks_by.get(n, 0) for n in golems}, "failed_writes": len(writer.failed),
            "failed_examples": writer.failed[:5], "worst_pacing_lag_ms": round(writer.worst_lag_ms, 1),
            "write_http_ms": dist([x.acked_ms - x.sent_ms for x in writer.acked]),
            "faults": chaos.faults, "notes": chaos.notes, "b_runs": chaos.b_runs,
            "last_fault": fault_what, "last_fault_t_s": round((fault_ms - chaos.start_ms) / 1000, 2),
            "chaos_end_t_s": round((fault_ms - chaos.start_ms) / 1000 + (rec["chaos_end_after_last_fault_s"] or 0), 2),
        }
        res["recovery"] = rec
        res["log_problems"] = events.problems()
        if rec["lost"]:
            res["failed"].append(f"{label}: {rec['lost']} acknowledged write(s) on no golem: {rec['lost_ids']}")
        if not rec["converged"]:
            res["failed"].append(f"{label}: not converged {args.timeout:g} s after the chaos "
                                 f"(undelivered by golem {rec['undelivered_by_golem']}, "
                                 f"digests equal {rec['digests_equal']})")
        if res["log_problems"]:
            res["failed"].append(f"{label}: {len(res['log_problems'])} problem line(s) in the daemons' logs: "
                                 f"{res['log_problems'][0]}")
    except (TimeoutError, RuntimeError) as exc:
        res["failed"].append(f"{label}: {type(exc).__name__}: {exc}"[:500])
        progress(f"  !! {label}: {type(exc).__name__}: {exc}")
    finally:
        if writer.t0:
            writer.done.wait(60)  # no request still in flight when the daemons stop
        writer.close()
        events.close()
        clade.close()
    return res


def warm_up(golems: dict[str, Golem], timeout: float) -> float:
    """One warning on A, until it is everywhere and every embedder is idle (each daemon loads
    its model on first use: seconds of CPU that should not land in the chaos)."""
    t = time.monotonic()
    entry = str(golems["A"].call("POST", "/v1/memory", json={"content": "warm-up: gas spike", "memory_type":
                                                            "warning"})["id"])
    deadline = t + timeout
    while not all(entry in ids_on(g) for g in golems.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the warm-up warning did not reach every golem in {timeout:g} s")
        time.sleep(0.1)
    while True:
        embedded = [int(g.call("GET", "/v1/status")["counters"].get("entries_embedded", 0)) for g in golems.values()]
        if all(e >= 1 for e in embedded) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return round(time.monotonic() - t, 1)


# -- the run and its report --------------------------------------------------------------------------


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    started = time.monotonic()
    res: dict[str, Any] = {"machine": machine_info(root),
                           "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                           "failed": []}
    scenarios = [("timer_30s", TIMER_ON)] + ([("timer_off", TIMER_OFF)] if args.no_timer else [])
    for label, env in scenarios:
        r = run_scenario(root, label, env, args)
        res["failed"] += r.pop("failed")
        res[label] = r
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["total_seconds"] = round(time.monotonic() - started, 1)
    return res


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    rows.append(("load average start / end", f"{res['machine']['loadavg_start']} / {res['loadavg_end']}"))
    for label in ("timer_30s", "timer_off"):
        if label in res:
            rows += scenario_rows(label, res[label])
    rows += checks_rows(res)
    print_table(rows, cap=44)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_recovery", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="length of the chaos (default 60)")
    p.add_argument("--rate", type=float, default=5.0, help="warnings written per second (default 5)")
    p.add_argument("--kill-every", type=float, default=10.0, help="SIGKILL and restart B this often (default 10 s)")
    p.add_argument("--partition-s", type=float, default=15.0,
                   help="C held from A and B this long, from the middle of the run (default 15; 0: none)")
    p.add_argument("--no-timer", action="store_true",
                   help="also run the chaos on a fresh clade with anti-entropy's timer off (3600 s)")
    p.add_argument("--timeout", type=float, default=120.0, help="wait this long for convergence after the writes")
    p.add_argument("--poll", type=float, default=0.2, help="poll interval while waiting (default 0.2 s)")
    p.add_argument("--connect-timeout", type=float, default=90.0, help="for the clade to connect and warm up")
    p.add_argument("--slack", type=float, default=2.0,
                   help="a delivery later than this after it could have landed is listed as late (default 2 s)")
    p.add_argument("--timeline", type=int, default=40, help="events listed after the last fault (default 40)")
    p.add_argument("--seed", type=int, default=1, help="seeds the warnings' words (default 1)")
    p.add_argument("--out", type=Path, default=None, help="keep the daemons' data directories here")
    args = p.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0:
        p.error("--rate and --seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return main_in_workdir("recovery", args, run, report, "clade-bench-recovery-")


if __name__ == "__main__":
    raise SystemExit(main())
