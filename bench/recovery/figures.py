"""bench_recovery's figures: the chaos record (`Chaos`), what it says about each fault and
delivery (`per_fault`, `late_deliveries`, `timeline`), and a scenario's report rows."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common import progress
from daemon.testing.harness import Golem

from .instruments import Events, Writer

__all__ = ["GOAL_S", "TIMELINE_EVENTS", "Chaos", "late_deliveries", "per_fault", "scenario_rows", "secs", "timeline"]

GOAL_S = 10.0
TIMELINE_EVENTS = ("peer_up", "peer_down", "peer_refused", "sync_complete", "entries_received")


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


def secs(ms: float | None, base: float) -> float | None:
    return None if ms is None else round(max(0.0, ms - base) / 1000, 2)


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
