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
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.bench_clade import content
from bench.common import HostLoad, dist, emit, machine_info, machine_rows, print_table, progress, workdir
from bench.common.report import checks_rows
from daemon.testing.harness import EventLog, Golem, LoopbackClade

GOAL_S = 10.0
TIMER_ON = {"CLADE_P2P__SYNC_INTERVAL_S": "30"}  # the daemon's default, spelled out (the harness sets it too)
TIMER_OFF = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}
NAMES = ("A", "B", "C")
COUNTER_PREFIXES = ("sync_", "gossip_rejected_")
COUNTER_NAMES = ("hello_failed", "hello_incomplete", "hello_not_sent", "connections_refused_held", "dials_ok",
                 "dials_failed", "peers_admitted", "gossip_accepted", "gossip_duplicates",
                 "gossip_validation_timeouts", "internal_errors")
TIMELINE_EVENTS = ("peer_up", "peer_down", "peer_refused", "sync_complete", "entries_received")
LOG_PROBLEMS = ("Traceback", "internal error")


def now_ms() -> float:
    return time.time() * 1000


def interesting(counters: dict[str, int]) -> dict[str, int]:
    """The counters this bench reports (see the module docstring)."""
    return {k: int(v) for k, v in sorted(counters.items())
            if k.startswith(COUNTER_PREFIXES) or k in COUNTER_NAMES}


def ids_on(golem: Golem) -> set[str]:
    entries = golem.call("GET", "/v1/entries", params={"limit": 10_000, "archived": "true"})["entries"]
    return {str(e["id"]) for e in entries}


# -- the writer ----------------------------------------------------------------------------------


@dataclass
class Ack:
    entry_id: str
    golem: str
    sent_ms: float
    acked_ms: float


@dataclass
class Writer:
    """Open-loop warnings at `rate`/s for `seconds`, round-robin on the golems marked up."""

    golems: dict[str, Golem]
    rate: float
    seconds: float
    seed: int
    acked: list[Ack] = field(default_factory=list)
    failed: list[tuple[float, str, str]] = field(default_factory=list)  # (t s, golem, error)
    offered: int = 0
    worst_lag_ms: float = 0.0
    up: set[str] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)
    t0: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _local: threading.local = field(default_factory=threading.local)
    _clients: list[httpx.Client] = field(default_factory=list)

    def set_up(self, name: str, up: bool) -> None:
        with self._lock:
            (self.up.add if up else self.up.discard)(name)

    def start(self, t0: float) -> threading.Thread:
        self.t0 = t0
        self.up = set(self.golems)
        thread = threading.Thread(target=self._run, daemon=True, name="writer")
        thread.start()
        return thread

    def _client(self, golem: Golem) -> httpx.Client:
        """This thread's client for this run of `golem` (a restart makes a new one)."""
        clients: dict[str, tuple[str, int, httpx.Client]] = self._local.__dict__.setdefault("clients", {})
        pid = golem.proc.pid if golem.proc is not None else -1
        have = clients.get(golem.name)
        if have is not None and have[:2] == (golem.socket, pid):
            return have[2]
        if have is not None:
            have[2].close()
        client = httpx.Client(transport=httpx.HTTPTransport(uds=golem.socket), base_url="http://clade", timeout=30)
        clients[golem.name] = (golem.socket, pid, client)
        with self._lock:
            self._clients.append(client)
        return client

    def _write(self, i: int, name: str) -> None:
        golem = self.golems[name]
        sent = now_ms()
        try:
            text = content(random.Random(f"{self.seed}-{i}"), "recovery", i)
            res = self._client(golem).post("/v1/memory", json={"content": text, "memory_type": "warning"})
            if res.status_code >= 400:
                raise RuntimeError(f"{res.status_code} {res.text[:200]}")
            entry_id = str(res.json()["id"])
        except (httpx.HTTPError, RuntimeError, OSError, ValueError, KeyError) as exc:
            with self._lock:
                self.failed.append((round(time.monotonic() - self.t0, 2), name, f"{type(exc).__name__}: {exc}"[:200]))
            return
        ack = Ack(entry_id, name, sent, now_ms())
        with self._lock:
            self.acked.append(ack)

    def _run(self) -> None:
        with ThreadPoolExecutor(8) as pool:
            i = 0
            while True:
                due = self.t0 + i / self.rate
                if due - self.t0 >= self.seconds:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    self.worst_lag_ms = max(self.worst_lag_ms, -wait * 1000)
                with self._lock:
                    up = [n for n in self.golems if n in self.up]
                if up:
                    pool.submit(self._write, i, up[i % len(up)])
                    self.offered += 1
                i += 1
        self.done.set()  # every request has returned (the pool's shutdown waited for them)

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()


# -- events ----------------------------------------------------------------------------------------


@dataclass
class Events:
    """Each daemon run's event stream (B gets a new one per restart), its stderr lines, and when
    each id first showed on each golem: the `committed_ms` of its `entries_received`, the writer's
    acknowledgement, or (upper bound) the moment a new stream connected and the id was already
    there (a restarted B may pull before its stream is up)."""

    streams: list[tuple[str, int, EventLog]] = field(default_factory=list)  # (golem, run, log)
    stderr: list[tuple[str, int, list[str]]] = field(default_factory=list)
    seen_at_connect: dict[tuple[str, str], float] = field(default_factory=dict)  # (golem, id) -> wall ms

    def follow(self, golem: Golem, run: int) -> None:
        self.streams.append((golem.name, run, EventLog(golem.socket).start()))
        self.stderr.append((golem.name, run, golem.stderr_lines))  # the list the harness appends to
        at = now_ms()
        for entry_id in ids_on(golem):
            self.seen_at_connect.setdefault((golem.name, entry_id), at)

    def all(self) -> list[tuple[float, str, int, str, dict[str, Any]]]:
        """(wall ms, golem, run, event, data), in time order."""
        rows = [(at, name, run, event, data) for name, run, log in self.streams for at, event, data in list(log.events)]
        return sorted(rows, key=lambda r: r[0])

    def arrivals(self, acked: list[Ack]) -> tuple[dict[tuple[str, str], tuple[float, str]], int]:
        """(golem, id) -> (wall ms it was first there, how: "gossip", "sync", "own" or "before the
        stream"); and how many events listed fewer ids than entries (the daemon caps `ids` at 100)."""
        first = {key: (at, "before the stream") for key, at in self.seen_at_connect.items()}
        truncated = 0

        def note(key: tuple[str, str], at: float, via: str) -> None:
            if key not in first or at < first[key][0]:
                first[key] = (at, via)

        for a in acked:
            note((a.golem, a.entry_id), a.acked_ms, "own")
        for _, name, _, event, data in self.all():
            if event != "entries_received":
                continue
            truncated += int(data.get("entries", 0)) > len(data.get("ids", ()))
            for entry_id in data.get("ids", ()):
                note((name, str(entry_id)), float(data["committed_ms"]), str(data.get("via")))
        return first, truncated

    def problems(self) -> list[str]:
        return [f"{name} (run {run}): {line[:300]}" for name, run, lines in self.stderr for line in list(lines)
                if any(p in line for p in LOG_PROBLEMS)]

    def close(self) -> None:
        for _, _, log in self.streams:
            log.close()


# -- one scenario ------------------------------------------------------------------------------------


@dataclass
class Chaos:
    """The fault schedule's record (times in s from the chaos start; fault ends in wall ms)."""

    start_ms: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    ends: list[tuple[float, str]] = field(default_factory=list)  # (wall ms, what ended)
    partition_until: float | None = None  # monotonic
    b_runs: int = 1
    b_down: list[tuple[float, float]] = field(default_factory=list)  # (killed, READY again), wall ms
    partition_ms: tuple[float, float] | None = None  # (held, healed), wall ms
    b_counters: list[dict[str, int]] = field(default_factory=list)  # B's, read before each kill
    notes: list[str] = field(default_factory=list)

    def note(self, t0: float, what: str, **extra: Any) -> None:
        self.faults.append({"t_s": round(time.monotonic() - t0, 2), "what": what, **extra})
        progress(f"  t={time.monotonic() - t0:5.1f} s  {what}" + (f" {extra}" if extra else ""))


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


def secs(ms: float | None, base: float) -> float | None:
    return None if ms is None else round(max(0.0, ms - base) / 1000, 2)


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


def per_fault(chaos: Chaos, writer: Writer, arrivals: dict[tuple[str, str], tuple[float, str]],
              final: dict[str, set[str]],
              ) -> list[dict[str, Any]]:
    """For each fault's end: how many (id, golem) deliveries of what was acknowledged before it
    were still outstanding then, and when the last of them landed (from the events)."""
    rows = []
    for end, what in sorted(chaos.ends):
        outstanding = 0
        worst: tuple[float, str, str] | None = None  # (ms, golem, writer)
        undelivered = unknown = 0
        backlog = [a for a in writer.acked if a.acked_ms <= end]
        for a in backlog:
            for name, ids in final.items():
                got = arrivals.get((name, a.entry_id))
                if got is None:
                    if a.entry_id in ids:
                        unknown += 1
                    else:
                        undelivered += 1
                    continue
                at = got[0]
                if at > end:
                    outstanding += 1
                    if worst is None or at > worst[0]:
                        worst = (at, name, a.golem)
        rows.append({
            "t_s": round((end - chaos.start_ms) / 1000, 2), "what": what, "acked_before": len(backlog),
            "outstanding": outstanding + undelivered + unknown,
            "all_landed_after_s": (None if undelivered or unknown else secs(worst[0] if worst else end, end)),
            "last": None if worst is None else f"{worst[2]}'s write on {worst[1]}",
            "undelivered": undelivered, "arrival_unknown": unknown})
    return rows


def late_deliveries(chaos: Chaos, writer: Writer, arrivals: dict[tuple[str, str], tuple[float, str]],
                    final: dict[str, set[str]], slack_s: float) -> dict[str, Any]:
    """Deliveries that landed more than `slack_s` after they could have: after the ack, or
    for a write B missed while down after its READY, or for a write across the partition
    after the heal. A restart or a partition explains nothing else: these are what the
    clade was waiting for."""
    rows: list[dict[str, Any]] = []
    for a in writer.acked:
        for name, ids in final.items():
            if name == a.golem:
                continue
            could, why = a.acked_ms, "the ack"
            if name == "B":
                for killed, ready in chaos.b_down:
                    if killed <= a.acked_ms <= ready:
                        could, why = ready, "B's READY"
            if chaos.partition_ms is not None and "C" in (name, a.golem):
                held, healed = chaos.partition_ms
                if held <= a.acked_ms <= healed and healed > could:
                    could, why = healed, "the heal"
            got = arrivals.get((name, a.entry_id))
            late = None if got is None else (got[0] - could) / 1000
            if got is not None and late is not None and late <= slack_s:
                continue
            ready_before = max((r for _, r in chaos.b_down if r <= a.acked_ms), default=None)
            rows.append({
                "writer": a.golem, "to": name, "acked_t_s": round((a.acked_ms - chaos.start_ms) / 1000, 2),
                "could_from": why, "late_s": None if late is None else round(late, 2),
                "via": "never" if got is None else got[1], "present_at_end": a.entry_id in ids,
                "acked_after_b_ready_s": (round((a.acked_ms - ready_before) / 1000, 2)
                                          if a.golem == "B" and ready_before is not None else None)})
    rows.sort(key=lambda r: r["acked_t_s"])
    return {"count": len(rows), "slack_s": slack_s, "by_route": dict(Counter(f"{r['writer']}->{r['to']}"
                                                                              for r in rows)),
            "rows": rows[:20]}


def timeline(events: Events, golems: dict[str, Golem], backlog: set[str], fault_ms: float, end_ms: float,
             cap: int) -> list[dict[str, Any]]:
    """The events from 1 s before the last fault's end to `end_ms` that say how the clade got
    back together: links, pulls, and arrivals by sync or of a held-back id (not the tail's
    gossip); times in s from the fault's end, as the bench received them."""
    start_ms = fault_ms - 1000
    names = {g.peer_id: n for n, g in golems.items()}
    rows: list[dict[str, Any]] = []
    for at, name, run, event, data in events.all():
        if not start_ms <= at <= end_ms or event not in TIMELINE_EVENTS:
            continue
        peer = names.get(str(data.get("peer_id") or data.get("from")), "?")
        if event == "entries_received":
            held = [i for i in data.get("ids", ()) if i in backlog]
            if data.get("via") != "sync" and not held:
                continue
            what = f"{data.get('entries')} entries from {peer} via {data.get('via')} ({len(held)} held back)"
        elif event == "sync_complete":
            what = f"pull from {peer}: {data.get('applied')} ops, {data.get('rounds')} rounds, {data.get('seconds')} s"
        else:
            what = f"{peer}" + (f" ({data['reason']})" if "reason" in data else "")
        rows.append({"t_s": round((at - fault_ms) / 1000, 2), "golem": name, "run": run, "event": event,
                     "what": what})
    return rows[:cap]


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


def _s(x: float | None) -> str:
    return "never" if x is None else f"{x:.2f} s"


def scenario_rows(label: str, r: dict[str, Any]) -> list[tuple[str, str]]:
    title = {"timer_30s": "anti-entropy timer 30 s (default)", "timer_off": "timer off (3600 s)"}[label]
    if "recovery" not in r:
        return [(f"## {title}", ""), ("did not run to the end", "see failed")]
    ch, rec = r["chaos"], r["recovery"]
    acked = ", ".join(f"{n} {k}" for n, k in ch["acked_by"].items())
    rows = [
        (f"## {title}", ""),
        ("clade connected / warm-up", f"{r['connect_s']:.1f} s / {r['warmup_s']:.1f} s"),
        ("writes offered / acknowledged / failed",
         f"{ch['offered']} / {ch['acked']} ({acked}) / {ch['failed_writes']} (B down or killed mid-request)"),
        ("write HTTP p50 / p99 / max", f"{ch['write_http_ms']['p50']:.0f} / {ch['write_http_ms']['p99']:.0f} / "
                                       f"{ch['write_http_ms']['max']:.0f} ms"),
        ("faults", "; ".join(f"{f['t_s']:.1f} s {f['what']}" + (f" ({f['launch_to_ready_s']:.1f} s)"
                                                                 if "launch_to_ready_s" in f else "")
                             for f in ch["faults"])),
        ("last fault / chaos over", f"{ch['last_fault']} at t={ch['last_fault_t_s']:.1f} s / faults and writes "
                                    f"over at t={ch['chaos_end_t_s']:.1f} s"),
        ("missing at the last fault, by writer", json.dumps(rec["missing_at_last_fault"])),
        ("links at the last fault", json.dumps(rec["peers_at_last_fault"])),
        ("missing at the chaos' end, by writer", json.dumps(rec["missing_at_chaos_end"])),
        ("links at the chaos' end", json.dumps(rec["peers_at_chaos_end"])),
        ("after the last fault: all links up", _s(rec["all_connected_s"])),
        ("after the last fault: held-back ids everywhere",
         f"{_s(rec['backlog_everywhere_s'])} ({rec['backlog_ids']} ids; by golem "
         + ", ".join(f"{n} {_s(v)}" for n, v in rec["backlog_by_golem_s"].items()) + ")"),
        ("after the last fault: CONVERGED", f"{_s(rec['converged_after_last_fault_s'])} "
                                            f"(goal {GOAL_S:g} s: {'met' if rec['within_goal'] else 'MISSED'})"),
        ("after the chaos' end: converged", _s(rec["converged_after_chaos_end_s"])),
        ("lost acknowledged writes (on no golem)", str(rec["lost"])),
        ("undelivered when the wait ended", f"{rec['undelivered']}" + (
            f" (by golem, by writer: {json.dumps(rec['undelivered_by_writer'])})" if rec["undelivered"] else "")),
        ("shared digests equal", str(rec["digests_equal"])),
        ("others' share of the machine / load", f"{r['host']['other_share_of_machine']:.0%} / "
                                                f"{r['host']['loadavg_1m']}"),
    ]
    rows.append(("per fault end (from the events)", "outstanding deliveries then; all landed after"))
    for f in r["per_fault"]:
        landed = _s(f["all_landed_after_s"]) if f["all_landed_after_s"] is not None else (
            f"not all: {f['undelivered']} undelivered, {f['arrival_unknown']} arrival unknown")
        rows.append((f"  t={f['t_s']:.1f} s {f['what']}",
                     f"{f['outstanding']} of {f['acked_before']} ids x 3; {landed}"
                     + (f" (last: {f['last']})" if f["last"] else "")))
    late = r["late"]
    rows.append((f"late deliveries (> {late['slack_s']:g} s after they could land)",
                 f"{late['count']}" + (f", writer->golem {json.dumps(late['by_route'])}" if late["count"] else "")))
    for x in late["rows"]:
        after_ready = (f", {x['acked_after_b_ready_s']:.2f} s after B's READY"
                       if x["acked_after_b_ready_s"] is not None else "")
        rows.append((f"  {x['writer']}'s write at t={x['acked_t_s']:.1f} s -> {x['to']}",
                     (f"{x['late_s']:.2f} s after {x['could_from']}" if x["late_s"] is not None else "never")
                     + f" via {x['via']}{after_ready}"))
    for name, counters in (("A", r["counters"]["A"]), ("B (all runs)", r["counters_b_all_runs"]),
                           ("C", r["counters"]["C"])):
        rows.append((f"counters {name}", ", ".join(f"{k}={v}" for k, v in counters.items() if v) or "none"))
    if ch["notes"]:
        rows.append(("notes", "; ".join(ch["notes"])))
    rows.append(("timeline after the last fault", "" if r["timeline"] else "nothing"))
    for e in r["timeline"]:
        rows.append((f"  {e['t_s']:+.2f} s {e['golem']}", f"{e['event']}: {e['what']}"))
    return rows


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
    with workdir(args.out, "clade-bench-recovery-") as root:
        res = run(args, root)
    report(res)
    emit("recovery", res)
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
