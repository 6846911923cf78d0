"""bench_strangers' tables: a phase's line as it is measured (`print_phase`) and the report."""

from __future__ import annotations

import json
from typing import Any

from bench.common import machine_rows, out, print_table
from bench.common.report import checks_rows
from bench.strangers_worker import KINDS

__all__ = ["print_phase", "report"]


def print_phase(name: str, r: dict[str, Any]) -> None:
    p = r["propagation"]
    line = (f"  {name:<9} warn p50 {p['warning_ms']['p50']:>6.1f} p99 {p['warning_ms']['p99']:>6.1f}  "
            f"probe p50 {p['probe_ms']['p50']:>5.1f} p99 {p['probe_ms']['p99']:>6.1f}  A cpu {r['a_cpu_pct']:>5.1f}%  "
            f"B cpu {r['b_cpu_pct']:>5.1f}%  others {r['host']['other_share_of_machine']:.0%}")
    if r["kind"] is not None:
        c = r["clients"]
        line += (f"\n  {'':<9} offered {r['offered_per_s']:>6.1f}/s  shed {r['shed_per_s']:>6.1f}/s  "
                 f"A {r['a_cpu_us_per_conn_gross']:>6} us/conn gross, {r['a_cpu_us_per_conn_net']:>6} net  "
                 f"client {c['client_cpu_ms_per_conn']} ms/conn  open max {c['open_max']:g} (A fds max "
                 f"{r['sampled']['fds_max']})  latency x{r['latency_ratio']}")
        line += f"\n  {'':<9} A counters {r['a_counters_delta']}; replies {c['replies']}; errors {c['errors']}; " \
                f"streams from A {c['inbound_streams']}"
    out(line)


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    rows.append(("load average start / end", f"{res['machine']['loadavg_start']} / {res['loadavg_end']}"))
    phases = res["phases"]
    base = phases.get("baseline")
    if base is not None:
        p = base["propagation"]
        rows += [("## baseline (A -> B, no strangers)", ""),
                 ("warnings / probes", f"{p['count']} each at {p['rate']:g}/s over {base['seconds']:g} s"),
                 ("warning p50 / p99", f"{p['warning_ms']['p50']:.1f} / {p['warning_ms']['p99']:.1f} ms"),
                 ("probe p50 / p99", f"{p['probe_ms']['p50']:.1f} / {p['probe_ms']['p99']:.1f} ms"),
                 ("A CPU", f"{base['a_cpu_pct']:.1f}% of a core "
                           f"({base['a_cpu_s']:.2f} s over {base['window_s']:.1f} s)"),
                 ("others' share of the machine", f"{base['host']['other_share_of_machine']:.0%} "
                                                  f"(load {base['host']['loadavg_1m']})")]
    for kind in KINDS:
        r = phases.get(kind)
        if r is None:
            continue
        c, p = r["clients"], r["propagation"]
        rows += [(f"## storm: {kind} ({r['seconds']:g} s, {c['workers']} worker processes)", ""),
                 ("strangers offered / shed per s", f"{r['offered_per_s']:.1f} / {r['shed_per_s']:.1f} "
                                                    f"({c['attempted']:g} dials, {c['connected']:g} handshakes, "
                                                    f"A shed {r['shed']})"),
                 ("A counters", json.dumps(r["a_counters_delta"])),
                 ("A CPU per shed connection", f"{r['a_cpu_us_per_conn_gross']} us gross, "
                                               f"{r['a_cpu_us_per_conn_net']} us net of the baseline"),
                 ("A / B CPU", f"{r['a_cpu_pct']:.1f}% / {r['b_cpu_pct']:.1f}% of a core"),
                 ("warning p50 / p99", f"{p['warning_ms']['p50']:.1f} / {p['warning_ms']['p99']:.1f} ms "
                                       f"(x{r['latency_ratio']['warning_p50']} / x{r['latency_ratio']['warning_p99']}"
                                       f" the baseline)"),
                 ("probe p50 / p99", f"{p['probe_ms']['p50']:.1f} / {p['probe_ms']['p99']:.1f} ms "
                                     f"(x{r['latency_ratio']['probe_p50']} / x{r['latency_ratio']['probe_p99']})"),
                 ("A RSS before / after / max", f"{r['rss_mib_before']} / {r['rss_mib_after']} / "
                                                f"{r['sampled']['rss_mib_max']} MiB"),
                 ("A open fds before / after / max",
                  f"{r['fds_before']} / {r['fds_after']} / {r['sampled']['fds_max']}"),
                 ("GET /v1/peers entries before / after / max",
                  f"{r['peers_before']} / {r['peers_after']} / {r['sampled']['peers_max']}"),
                 ("client: CPU per connection, open at once", f"{c['client_cpu_ms_per_conn']} ms, {c['open_max']:g}"),
                 ("client: handshake p50 by worker", f"{c['handshake_ms_p50_by_worker']} ms"),
                 ("client: time A kept it, p50 by worker", f"{c['held_ms_p50_by_worker']} ms"),
                 ("client: replies / errors", f"{c['replies']} / {c['errors']}"),
                 ("streams A opened to strangers", json.dumps(c["inbound_streams"])),
                 ("others' share of the machine", f"{r['host']['other_share_of_machine']:.0%} "
                                                  f"(load {r['host']['loadavg_1m']})")]
    cc = res.get("client_costs")
    if cc:
        rows.append(("## client cost (garbage hello, 1 process x 4 loops)", ""))
        for client, label in (("lean", "raw TCP + TransportUpgrader"), ("host", "a build_host per identity")):
            x = cc[client]
            rows.append((label, f"{x['client_cpu_ms_per_conn']} ms CPU per connection, {x['per_s']}/s"))
    rows += checks_rows(res)
    print_table(rows, cap=48)
