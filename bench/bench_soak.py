"""Soak under faults: five real daemons at a golem's rates for a long run, with faults on a schedule.

    .venv/bin/python -m bench.bench_soak [--minutes 30] [--seed 1] [--out DIR]
    .venv/bin/python -m bench.bench_soak --short          # the few-minute form the slow test runs

Five `clade run` daemons g0..g4 on 127.0.0.1 (`daemon.testing.harness`), a reference Styx
server (daemon/testing/styx_server.py) all of them push to, and a load at a golem's rates: each
golem writes a few entries a minute (insights, warnings, facts, heuristics; `--writes-per-min`),
searches or asks for a digest every few seconds (`--read-every`), a burst of 50 warnings lands on
one golem every `--burst-every` s, a vault backup on one every `--backup-every` s, and each
runs its curator every `--cycle-s` s. Faults, at fixed fractions of the run (each golem has
one role, so faults do not mask each other):

| fault | golem | what is done |
|---|---|---|
| kill | g2 | SIGKILL, restarted at once |
| partition | g3 | held from every sibling (both ends) for a while |
| disk full | g0 | its data dir is its own small tmpfs; a filler file takes every byte, then is removed |
| read-only | g0 | stopped, tmpfs remounted read-only, started (must refuse clearly), read-write, started |
| clock | g1 | its wall clock (libfaketime, LD_PRELOAD) stepped an hour back, then an hour forward |
| flood | g4 | writes a burst at its write budget's limit (`[trust] budget_entries` minus what it wrote) |
| Styx 3xx / 5xx / hang | all | the Styx server answers 302, then 503, then never |

Reported: acknowledged writes lost (each acknowledged id read back from its writer at the end:
must be 0); requests by outcome (refused with 507/503 and the reason given, server errors
— must be 0 —, client timeouts: a daemon that hangs); per fault, the time from its end until a
probe warning written on the faulted golem is on every sibling (Styx faults: until every outbox
is empty again); RSS, open fds, threads and store size per daemon sampled over the run, with the
slope per hour (least squares after the warm-up, as % of the mean; goal under 1 %/h; every
sample is in the JSON result, `samples`; descriptors are judged as files and pipes by that
slope, and as sockets — connections, which come and go with the load — by the slope of their
median in each quarter of the window, so a burst's API connections are not read as growth); the
outbox depth; convergence (every acknowledged warning on every golem, from the load's end and
from the last fault's);
with `--still-minutes M`, then M minutes in which every golem goes on (searches, digests,
backups, curator cycles, sync) but nothing is written: RSS and descriptors over that phase
(after its first `STILL_SETTLE_S`), the memory that grows when the stores do not (goal under
1 %/h, judged when M is at least 20);
then what must converge, with the load stopped and every curator quiet: after one sync round
(each golem pulls once from each sibling) the ops that may cross (`GET /v1/state-digest`
`shared`) equal on every golem at once, and, reported apart, the seconds until the causal
contexts (which also learn the dots each golem withheld) are equal; `PRAGMA integrity_check` on every store and `clade
backup verify` of g0's last backup; and a search for secrets (the API token, a sensitive
entry's text) in every daemon's log, PLAYBOOK.md, `/v1/status`, `/metrics`, `clade config
show` and everything the Styx server received.

Needs root (mount a tmpfs) for the disk faults; without it they are skipped and said so.
Progress on stderr; a table, then the JSON result line (bench.common). Exit 1 on any failed goal.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.machine import HostLoad, machine_info
from bench.common.report import main_in_workdir, print_table, progress
from bench.soak.faults import Volume, hold, probe, styx_drained
from bench.soak.load import Load, Tally, now
from bench.soak.samples import HEAP_KEYS, Sampler, resources
from bench.soak.verdicts import converge, gated_ops_after_one_round, integrity, secrets_found, served, verify_backup
from daemon.testing.harness import Golem, LoopbackClade
from daemon.testing.styx_server import StyxServer

TOKEN = "soak-api-token-" + "5" * 32
SECRET_TEXT = "soak-sensitive-marker: the vault passphrase is lilac-orbit-7731"
STYX_TOKEN = "soak-styx-token"
STILL_SETTLE_S = 120.0  # the still phase's own warm-up: the last writes' index refresh, caches, a curator cycle


# -- the run -----------------------------------------------------------------------------------


def golem_config(styx: StyxServer, args: argparse.Namespace, *, cycle_ticks: int | None = None) -> str:
    ticks = max(1, int(args.cycle_s)) if cycle_ticks is None else cycle_ticks
    return (f"[api]\ntoken = \"{TOKEN}\"\n"
            f"[curator]\ntick_seconds = 1.0\ncycle_ticks = {ticks}\n"
            f"[styx]\nenabled = true\nurl = \"{styx.url}\"\ntoken = \"{STYX_TOKEN}\"\nclade_enabled = true\n"
            "vault_enabled = true\nbackoff_cap_s = 5.0\ntimeout_s = 5.0\n"
            # A free Styx: the soak measures recovery from its faults, not the spending caps
            # (bench_styx and tests/styx/test_styx_month.py measure those).
            "[styx.prices]\nper_call = 0.0\nper_item = 0.0\nper_query = 0.0\nper_upload = 0.0\nper_mib = 0.0\n")


def schedule(total: float) -> list[tuple[str, float, float]]:
    """(fault, start s, duration s) at fixed fractions of the run."""
    return [("kill", 0.20 * total, 0.0), ("partition", 0.26 * total, 0.05 * total),
            ("disk_full", 0.34 * total, 0.05 * total), ("read_only", 0.42 * total, 0.04 * total),
            ("clock", 0.49 * total, 0.05 * total), ("flood", 0.57 * total, 0.0),
            ("styx_3xx", 0.62 * total, 0.04 * total), ("styx_5xx", 0.68 * total, 0.04 * total),
            ("styx_hang", 0.74 * total, 0.04 * total)]


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    total = args.minutes * 60
    host = HostLoad()
    res: dict[str, Any] = {"machine": machine_info(root), "params": vars(args) | {"out": str(args.out)},
                           "failed": []}
    (root / "styx").mkdir(parents=True, exist_ok=True)
    styx = StyxServer(root / "styx" / "styx.db", token=STYX_TOKEN)
    styx.start()
    volume = Volume(root / "g0", args.disk_mib)
    disk_faults = volume.mount()
    if not disk_faults:
        res["notes"] = ["not root (or no tmpfs): the disk-full and read-only faults are skipped"]
    clock_file = root / "g1-clock"
    clock_file.write_text("+0\n")
    spec = importlib.util.find_spec("libfaketime")  # its wheel ships a built libfaketime.so
    if spec is None or spec.origin is None:
        raise SystemExit("bench_soak needs the libfaketime package (make install installs it)")
    preload = str(Path(spec.origin).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1")
    envs: dict[str, dict[str, str]] = {
        "g1": {"LD_PRELOAD": preload, "FAKETIME_TIMESTAMP_FILE": str(clock_file),
               "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_CACHE_DURATION": "1"}}
    clade = LoopbackClade(root, 5, clade_name="soak")
    logs: dict[str, list[str]] = {}
    tally = Tally()
    load = Load(clade.golems, args, tally)
    sampler = Sampler(clade.golems, load, args.sample_every)
    faults: list[dict[str, Any]] = []
    try:
        for golem in clade.golems:
            golem.data.config_path.write_text(golem_config(styx, args))
        for golem in clade.golems:
            clade.start(golem, env=envs.get(golem.name), timeout=args.start_timeout)
        clade.wait_connected(clade.golems, timeout=args.start_timeout)
        g = {x.name: x for x in clade.golems}
        g["g0"].call("POST", "/v1/memory", json={"content": SECRET_TEXT, "memory_type": "insight",
                                                 "sensitivity": "sensitive"})
        progress(f"soak: 5 daemons up; {args.minutes:g} min with faults")
        t0 = now()
        load.start()
        threading.Thread(target=sampler.run, args=(t0,), daemon=True).start()
        sampler.sample(t0)
        last_end = t0

        def back_up(victim: Golem, **start: Any) -> None:
            """Start a stopped golem again and put it back under the load; note when (for the slopes)."""
            clade.start(victim, env=envs.get(victim.name), timeout=args.start_timeout, **start)
            load.down.discard(victim.name)
            sampler.restarts[victim.name] = now() - t0

        for name, at, duration in schedule(total):
            wait = t0 + at - now()
            if wait > 0:
                time.sleep(wait)  # the schedule's own pacing
            record: dict[str, Any] = {"fault": name, "at_s": round(now() - t0, 1), "duration_s": round(duration, 1)}
            progress(f"  t={now() - t0:.0f} s: {name}")
            others = list(clade.golems)
            if name == "kill":
                victim = g["g2"]
                logs.setdefault("g2", []).extend(victim.stderr_lines)
                load.down.add("g2")
                victim.stop(signal.SIGKILL)
                back_up(victim, bootstrap=[g["g0"]])
                end = now()
                record["recovered_s"] = probe(load, victim, [x for x in others if x is not victim], timeout=120)
            elif name == "partition":
                victim = g["g3"]
                for other in others:
                    if other is not victim:
                        hold(victim, other, duration)
                        hold(other, victim, duration)
                time.sleep(duration)  # the fault lasts this long
                end = now()
                record["recovered_s"] = probe(load, victim, [x for x in others if x is not victim], timeout=120)
            elif name in ("disk_full", "read_only"):
                if not disk_faults:
                    record["skipped"] = "no tmpfs"
                    faults.append(record)
                    continue
                victim = g["g0"]
                if name == "disk_full":
                    filler = volume.fill()
                    time.sleep(duration)  # the fault lasts this long
                    filler.unlink()
                else:
                    # A mounted filesystem cannot be made read-only under open writable files
                    # (EBUSY), so the daemon stops first; it must then refuse to start clearly.
                    load.down.add("g0")
                    logs.setdefault("g0", []).extend(victim.stderr_lines)
                    victim.stop()
                    volume.remount("ro")
                    try:
                        clade.start(victim, env=envs.get("g0"), timeout=args.start_timeout)
                        record["start_on_read_only"] = "started (unexpected)"
                    except (RuntimeError, TimeoutError) as exc:
                        record["start_on_read_only"] = str(exc)[-300:]
                        victim.stop()  # reap it and close its pipe
                    time.sleep(duration)  # the fault lasts this long
                    volume.remount("rw")
                    back_up(victim)
                end = now()
                record["recovered_s"] = probe(load, victim, [x for x in others if x is not victim], timeout=120)
            elif name == "clock":
                victim = g["g1"]
                clock_file.write_text("-1h\n")
                time.sleep(duration)  # the fault lasts this long
                clock_file.write_text("+0\n")
                end = now()
                record["recovered_s"] = probe(load, victim, [x for x in others if x is not victim], timeout=120)
            elif name == "flood":
                victim = g["g4"]
                wrote = sum(1 for a in tally.acks if a.golem == "g4")
                burst = max(1, args.flood - wrote)
                for _ in range(burst):
                    load.write(victim, "warning")
                record["burst"] = burst
                end = now()
                record["recovered_s"] = probe(load, victim, [x for x in others if x is not victim], timeout=120)
                record["suspect_at"] = [x.name for x in others if x is not victim
                                        and victim.peer_id in {a["author"] for a in x.call("GET", "/v1/trust")
                                                               ["authors"] if a.get("suspect")}]
            else:
                styx_faults: dict[str, dict[str, Any]] = {
                    "styx_3xx": {"status": 302}, "styx_5xx": {"status": 503}, "styx_hang": {"hang": True}}
                fault = styx_faults[name]
                styx.set_faults(**fault, times=-1)
                time.sleep(duration)  # the fault lasts this long
                styx.clear_faults()
                end = now()
                record["recovered_s"] = styx_drained(clade.golems, timeout=180)
            record["ended_at_s"] = round(end - t0, 1)
            last_end = max(last_end, end)
            faults.append(record)
        wait = t0 + 0.9 * total - now()
        if wait > 0:
            time.sleep(wait)  # the load runs on after the faults
        load.close()
        sampler.sample(t0)
        load_end = now() - t0
        res["faults"] = faults
        res["convergence"] = converge(clade.golems, tally, last_end, timeout=args.timeout)
        res["convergence_after_last_fault_s"] = res["convergence"]["seconds"]
        if args.still_minutes > 0:
            res["still"] = still_phase(clade.golems, args, tally, sampler, t0)
        sampler.stop.set()
        quiet_curators(clade.golems, styx, args)
        res["after_one_sync_round"] = gated_ops_after_one_round(clade.golems, timeout=args.timeout)
        lost = [a.entry_id for a in tally.acks if g[a.golem].request("GET", f"/v1/entries/{a.entry_id}").status_code
                != 200]
        res["writes"] = {"acknowledged": len(tally.acks), "lost": len(lost), "lost_ids": lost[:20]}
        res["requests"] = dict(tally.outcomes)
        res["refusals"] = dict(tally.refusals)
        res["server_errors"] = tally.server_errors[:20]
        res["timeouts"] = tally.timeouts[:20]
        res["resources"] = resources(sampler, warmup=min(1800.0, 0.25 * total), settle=min(600.0, 0.1 * total),
                                     until=load_end)
        if "still" in res:
            begin, end = res["still"]["window_s"]
            res["still"]["resources"] = resources(sampler, warmup=begin, settle=0.0, start=begin, until=end)
        # Every sample, per daemon, with its restarts: warm-up is told from growth by the curve, not only its slope.
        res["samples"] = {"rows": sampler.samples, "restarts_s": dict(sampler.restarts)}
        for golem in clade.golems:
            logs.setdefault(golem.name, []).extend(golem.stderr_lines)
        res["tracebacks"] = sum(1 for lines in logs.values() for line in lines if "Traceback" in line)
        (root / "logs").mkdir(exist_ok=True)
        for name, lines in logs.items():
            (root / "logs" / f"{name}.log").write_text("\n".join(lines) + "\n")
        pages = served(clade.golems)
        clade.close()
        res["integrity"] = {x.name: integrity(x.data.db_path) for x in clade.golems}
        res["vault_restore"] = verify_backup(clade.golems)
        res["secrets_found"] = secrets_found(clade.golems, logs, styx, pages,
                                             {"api token": TOKEN, "sensitive text": SECRET_TEXT})
    finally:
        load.close()
        clade.close()
        styx.stop()
        volume.unmount()
    res["host"] = host.report("soak", quiet=True)
    check(res)
    return res


def still_phase(golems: Sequence[Golem], args: argparse.Namespace, tally: Tally, sampler: Sampler,
                t0: float) -> dict[str, Any]:
    """`--still-minutes` after the load: every golem goes on as before (searches, digests,
    backups, its curator's cycles, sync) but nothing is written, so the stores stop growing and
    what memory still grows is not the data's. The window judged starts `STILL_SETTLE_S` in."""
    acked = len(tally.acks)
    start = now() - t0
    progress(f"  t={start:.0f} s: {args.still_minutes:g} min with no writes")
    reads = Load(golems, args, tally)
    reads.start(writes=False)
    time.sleep(args.still_minutes * 60)  # the phase's own length
    reads.close()
    sampler.sample(t0)
    end = now() - t0
    return {"minutes": args.still_minutes, "window_s": [round(start + min(STILL_SETTLE_S, 0.2 * (end - start)), 1),
                                                         round(end, 1)],
            "writes_acknowledged": len(tally.acks) - acked}


def quiet_curators(golems: Sequence[Golem], styx: StyxServer, args: argparse.Namespace) -> None:
    """Stop every curator from cycling (config without cycles, SIGHUP), then wait out a cycle
    that was already scheduled under the old period: after this no golem writes an op by itself."""
    for golem in golems:
        # the config's most ticks (about a day at 1 s ticks): a larger value is refused, and the reload with it
        golem.data.config_path.write_text(golem_config(styx, args, cycle_ticks=100_000))
        if golem.proc is not None and golem.proc.poll() is None:
            golem.proc.send_signal(signal.SIGHUP)
    time.sleep(args.cycle_s + 5.0)  # the schedule's own pacing: one old period, then the curators are quiet


def check(res: dict[str, Any]) -> None:
    failed: list[str] = res["failed"]
    writes = res.get("writes", {})
    if writes.get("lost"):
        failed.append(f"{writes['lost']} acknowledged writes lost")
    if res.get("requests", {}).get("server_error"):
        failed.append(f"{res['requests']['server_error']} server errors")
    if res.get("requests", {}).get("timeout"):
        failed.append(f"{res['requests']['timeout']} requests hung (client timeout)")
    for fault in res.get("faults", []):
        if "skipped" not in fault and (fault.get("recovered_s") is None or fault["recovered_s"] > 30):
            failed.append(f"{fault['fault']}: recovered in {fault.get('recovered_s')} s (goal 30 s)")
    if res.get("convergence_after_last_fault_s") is None:
        failed.append("no convergence after the last fault")
    rounded = res.get("after_one_sync_round", {})
    if rounded and not rounded.get("gated_ops_equal"):
        failed.append(f"gated ops differ after one sync round ({rounded.get('gated_ops_distinct')} distinct)")
    for name, figures in res.get("resources", {}).items():
        # Descriptors: files, pipes and anon inodes by their slope; sockets (connections, which
        # come and go with the load) by the slope of their quarter medians (samples.resources, stats.quarter_medians).
        for k, what in (("rss_mib", "rss_mib"), ("file_fds", "file_fds"),
                        ("socket_fds_median", "socket_fds (quarter medians)")):
            slope = figures.get(f"{k}_slope_pct_per_h")
            if slope is not None and slope >= 1.0 and res["params"]["minutes"] >= 30:
                failed.append(f"{name} {what} grows {slope} %/h (goal under 1 %/h)")
    still = res.get("still") or {}
    if still.get("minutes", 0) >= 20:
        for name, figures in still.get("resources", {}).items():
            slope = figures.get("rss_mib_slope_pct_per_h")
            if slope is not None and slope >= 1.0:
                failed.append(f"{name} rss_mib grows {slope} %/h with no writes (goal under 1 %/h)")
    if still.get("writes_acknowledged"):
        failed.append(f"{still['writes_acknowledged']} writes acknowledged in the phase with no writes")
    for name, verdict in res.get("integrity", {}).items():
        if verdict != "ok":
            failed.append(f"{name} integrity_check: {verdict}")
    if res.get("vault_restore") not in ("ok", None):
        failed.append(f"vault: {res['vault_restore']}")
    if res.get("secrets_found"):
        failed.append("secrets found: " + ", ".join(res["secrets_found"]))
    if res.get("tracebacks"):
        failed.append(f"{res['tracebacks']} tracebacks in the daemons' logs")


def report(res: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [("## soak under faults", "")]
    w = res.get("writes", {})
    rows.append(("writes acknowledged / lost", f"{w.get('acknowledged')} / {w.get('lost')}"))
    rows.append(("requests", ", ".join(f"{k} {v}" for k, v in sorted(res.get("requests", {}).items()))))
    rows.append(("refused (status reason)", ", ".join(f"{k}: {v}" for k, v in res.get("refusals", {}).items())
                 or "none"))
    rows.append(("## fault", "recovered (s after its end)"))
    for f in res.get("faults", []):
        extra = f" (skipped: {f['skipped']})" if "skipped" in f else ""
        rows.append((f"{f['fault']} at {f['at_s']} s for {f['duration_s']} s{extra}", str(f.get("recovered_s"))))
    rows.append(("convergence: every acknowledged warning on every golem (`after_load_s` from the load's end, "
                 "`seconds` from the last fault's, the load after it included)", json.dumps(res.get("convergence"))))
    rows.append(("after one sync round, curators quiet: gated ops; context",
                 json.dumps(res.get("after_one_sync_round"))))
    rows.append(("## daemon", "RSS MiB first→last (slope %/h); fds (slope); files, pipes (slope); sockets' "
                 "quarter medians (their slope); threads; store MiB; max outbox"))
    for name, r in sorted(res.get("resources", {}).items()):
        rows.append((name, f"{r['rss_mib_first_last'][0]}→{r['rss_mib_first_last'][1]} "
                           f"({r['rss_mib_slope_pct_per_h']}); {r['fds_first_last'][0]}→{r['fds_first_last'][1]} "
                           f"({r['fds_slope_pct_per_h']}); files {r['file_fds_first_last'][0]}→"
                           f"{r['file_fds_first_last'][1]} ({r['file_fds_slope_pct_per_h']}); sockets "
                           f"{r.get('socket_fds_quarter_medians')} ({r.get('socket_fds_median_slope_pct_per_h')}); "
                           f"{r['threads_first_last'][0]}→{r['threads_first_last'][1]}; "
                           f"{r['store_mib_first_last'][1]}; {r['max_outbox']}"))
    rows.append(("## daemon's own memory", "first→last (slope %/h): own RSS; of it anonymous, files; malloc in "
                 "use; free kept; mapped; SQLite; its page caches (MiB); Python's allocated blocks"))
    for name, r in sorted(res.get("resources", {}).items()):
        own = ("own_rss_mib", "own_anon_mib", "own_file_mib", *HEAP_KEYS)
        rows.append((name, "; ".join(_trend(r, k) for k in own)))
    rows.append(("## own RSS per entry stored", "entries first→last; stored per hour and own RSS KiB per entry "
                 "after the warm-up (the vector index alone: 1.5 KiB an entry)"))
    for name, r in sorted(res.get("resources", {}).items()):
        first_last = r.get("entries_first_last") or [None, None]
        rows.append((name, f"{first_last[0]}→{first_last[1]}; {r.get('entries_per_h')}/h; "
                           f"{r.get('own_rss_kib_per_entry')} KiB; slope in the window's later half: RSS "
                           f"{r.get('rss_mib_slope_pct_per_h_later_half')} %/h, own "
                           f"{r.get('own_rss_mib_slope_pct_per_h_later_half')} %/h"))
    still = res.get("still")
    if still:
        rows.append(("## no writes", f"{still['minutes']:g} min, judged over {still['window_s'][0]}–"
                                     f"{still['window_s'][1]} s, first→last (slope %/h): RSS; own RSS; malloc in "
                                     "use; Python's allocated blocks; files, pipes; sockets' quarter medians; entries"))
        for name, r in sorted(still.get("resources", {}).items()):
            rows.append((name, "; ".join(_trend(r, k) for k in ("rss_mib", "own_rss_mib", "heap_in_use_mib",
                                                                 "python_blocks", "file_fds"))
                         + f"; {r.get('socket_fds_quarter_medians')}; "
                           f"{r['entries_first_last'][0]}→{r['entries_first_last'][1]}"))
    rows.append(("integrity_check", ", ".join(f"{k} {v}" for k, v in res.get("integrity", {}).items())))
    rows.append(("vault backup verify (newest)", str(res.get("vault_restore"))))
    rows.append(("secrets found", ", ".join(res.get("secrets_found", [])) or "none"))
    rows.append(("host", json.dumps(res.get("host"))))
    rows.append(("failed", "; ".join(res["failed"]) or "none"))
    print_table(rows)


def _trend(figures: dict[str, Any], key: str) -> str:
    """A resource's first→last sample and its slope: "138.5→157.1 (3.53)"."""
    first, last = figures[key + "_first_last"]
    return f"{first}→{last} ({figures.get(key + '_slope_pct_per_h')})"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="length of the run (default 30)")
    p.add_argument("--short", action="store_true", help="the few-minute form (4 min, faster rates)")
    p.add_argument("--writes-per-min", type=float, default=3.0)
    p.add_argument("--read-every", type=float, default=4.0, help="a search or digest per golem this often (s)")
    p.add_argument("--burst-every", type=float, default=300.0, help="a burst of 50 warnings this often (s)")
    p.add_argument("--backup-every", type=float, default=300.0)
    p.add_argument("--cycle-s", type=float, default=120.0, help="curator cycle period (s)")
    p.add_argument("--sample-every", type=float, default=30.0)
    p.add_argument("--flood", type=int, default=100, help="the flood fills g4's write budget up to this")
    p.add_argument("--disk-mib", type=int, default=192, help="g0's tmpfs size")
    p.add_argument("--request-timeout", type=float, default=20.0)
    p.add_argument("--start-timeout", type=float, default=180.0, help="for a daemon's READY (a loaded machine is slow)")
    p.add_argument("--timeout", type=float, default=180.0, help="wait this long for convergence")
    p.add_argument("--still-minutes", type=float, default=0.0,
                   help="after the load, this long with no writes (reads, backups, curators, sync go on): "
                        "what memory grows when the stores do not")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="keep the data directories here")
    args = p.parse_args(argv)
    if args.short:
        args.minutes = min(args.minutes, 4.0)
        args.burst_every, args.backup_every, args.cycle_s, args.sample_every = 60.0, 60.0, 30.0, 5.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return main_in_workdir("soak", args, run, report, "clade-bench-soak-")


if __name__ == "__main__":
    raise SystemExit(main())
