"""bench_clade's catch-up phase (2. catch-up throughput, 3. bytes on the wire per synced op):
a laggard stopped while its writer writes `--catchup` ops, restarted, and timed to its pull's
last commit; then the in-process ceiling (bench.common.ceiling) for the same ops."""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import out, progress
from bench.common.ceiling import bench_ceiling
from bench.common.clade import (
    Api,
    SyncWatch,
    content,
    report_odd,
    start_clade,
    wait_embedded,
    writes_by_day_count,
)
from bench.common.machine import CLK_TCK, proc_cpu_ticks
from bench.common.profile import start_profiles, stop_profiles
from daemon.testing.harness import EventLog, LoopbackClade

__all__ = ["bench_catchup"]


def bench_catchup(root: Path, args: argparse.Namespace, rng: random.Random, results: dict[str, Any]) -> None:
    n = max(2, args.catchup_golems)
    clade = LoopbackClade(root / "catchup", n)
    log: EventLog | None = None
    api: Api | None = None
    try:
        progress(f"[2] catch-up: starting {n} daemons")
        start_clade(clade, args.connect_timeout)
        writer, laggard = clade.golems[0], clade.golems[-1]
        others = [g for g in clade.golems if g is not laggard]
        time.sleep(args.settle)
        laggard.stop()
        api = Api(writer)
        warnings = args.catchup // 2
        progress(f"[2] {laggard.name} stopped; writing {warnings:,} warnings on {writer.name} (4 threads)")
        t0 = time.monotonic()
        done = [0]
        finished: list[float] = []  # each write's completion, monotonic s
        lock = threading.Lock()

        def write(i: int) -> None:
            assert api is not None
            api.call("POST", "/v1/memory", json={"content": content(random.Random(i), "catchup", i),
                                                 "memory_type": "warning"})
            with lock:
                done[0] += 1
                finished.append(time.monotonic())
                if done[0] % 1000 == 0:
                    progress(f"  {done[0]:,}/{warnings:,} written ({done[0] / (time.monotonic() - t0):.0f}/s)")

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, range(warnings)))
        write_s = time.monotonic() - t0
        out(f"\ncatch-up: {n} daemons; {laggard.name} stopped, {warnings:,} warnings written on {writer.name} in "
            f"{write_s:.1f} s ({warnings / write_s:.0f} writes/s over HTTP, 4 concurrent clients)")
        day = writes_by_day_count(t0, finished)
        if day:
            out(f"  warning writes/s as the day's warnings grow (each a repeat check): the first 100 "
                f"{day['first_100']:.1f}/s, the last 100 (to {warnings:,}) {day['last_100']:.1f}/s, "
                f"ratio {day['ratio']:.2f}")
        drain_s, drained = wait_embedded(others, args.catchup_timeout)
        out(f"  waited {drain_s:.1f} s for the embedders of {', '.join(g.name for g in others)} to catch up "
            f"({'done' if drained else 'NOT done'}), so they do not compete with the catch-up for CPU")
        writer_digest = writer.call("GET", "/v1/state-digest")["shared"]

        launched = time.time() * 1000
        clade.start(laggard, bootstrap=[writer])
        ready = time.time() * 1000
        assert laggard.proc is not None and writer.proc is not None
        cpu_at_ready = (proc_cpu_ticks(laggard.proc.pid), proc_cpu_ticks(writer.proc.pid))
        profiles = start_profiles(args.profile, {"catchup-asker": laggard.proc, "catchup-responder": writer.proc})
        log = EventLog(laggard.socket).start()
        progress(f"[2] {laggard.name} restarted ({ready - launched:.0f} ms to ready); waiting for the pull")
        expected = 2 * warnings
        synced = SyncWatch(log)
        synced.wait(expected, args.catchup_timeout,
                    caught_up=lambda: laggard.call("GET", "/v1/state-digest")["shared"] == writer_digest)
        syncs, committed, progress_at = synced.syncs, synced.committed, synced.progress_at
        cpu_s = [(proc_cpu_ticks(proc.pid) - t0) / CLK_TCK
                 for proc, t0 in zip((laggard.proc, writer.proc), cpu_at_ready, strict=True)]
        profiled = stop_profiles(profiles)
        counters = laggard.call("GET", "/v1/status")["counters"]
        applied_counter = int(counters.get("sync_ops_applied", 0))
        applied_events = sum(int(s["applied"]) for _, s in syncs)
        if applied_events < expected and laggard.call("GET", "/v1/state-digest")["shared"] != writer_digest:
            out(f"  !! sync_complete events report {applied_events} ops applied after {args.catchup_timeout} s "
                f"(counter sync_ops_applied={applied_counter}, expected {expected}); forcing POST /v1/sync")
            out(f"     forced sync: {laggard.call('POST', '/v1/sync', json={})}")
        laggard_digest = laggard.call("GET", "/v1/state-digest")["shared"]
        record = {p["peer_id"]: p for p in laggard.peers()}.get(writer.peer_id, {})
        odd = report_odd(clade.golems, "catch-up")
    finally:
        if log is not None:
            log.close()
        if api is not None:
            api.close()
        clade.close()

    done_ms = max(committed) if committed else (syncs[-1][0] if syncs else float("nan"))
    wall_s = (done_ms - ready) / 1000
    sync_s = sum(float(s["seconds"]) for _, s in syncs if int(s["applied"]))
    bytes_in = sum(int(s["bytes_in"]) for _, s in syncs)
    applied = applied_events or applied_counter
    catch: dict[str, Any] = {
        "daemons": n, "warnings_written": warnings, "expected_ops": expected, "write_seconds": round(write_s, 1),
        "embed_drain_s": round(drain_s, 1), "writes_per_s_by_day_count": day,
        "restart_to_ready_ms": round(ready - launched),
        "ready_to_committed_s": round(wall_s, 3), "launch_to_committed_s": round((done_ms - launched) / 1000, 3),
        "sync_seconds_reported": round(sync_s, 3), "applied_events": applied_events,
        "applied_counter": applied_counter, "gossip_ops_applied": int(counters.get("gossip_ops_applied", 0)),
        "syncs": [s for _, s in syncs], "ops_per_s_ready": round(applied / wall_s) if wall_s > 0 else None,
        "ops_per_s_sync": round(applied / sync_s) if sync_s > 0 else None,
        "digest_equal": laggard_digest == writer_digest, "bytes_in_sync": bytes_in,
        "bytes_in_peer_record": int(record.get("bytes_in", 0)), "msgs_in_peer_record": record.get("msgs_in"),
        "behind": record.get("behind"), "odd_counters": odd,
        "deltas_committed_ms_after_ready": [round(at - ready) for at in progress_at],
        "cpu_s_ready_to_committed": {"laggard": round(cpu_s[0], 2), "writer": round(cpu_s[1], 2)},
        "profiles": profiled,
    }
    out(f"  {laggard.name} restarted: ready {catch['restart_to_ready_ms']} ms after launch; "
        f"{len(syncs)} sync(s) reported: " + "; ".join(
            f"from {'writer' if s['peer_id'] == writer.peer_id else s['peer_id'][:12]} {s['applied']} ops, "
            f"{s['rounds']} rounds, {s['deltas']} deltas, {s['bytes_in']:,} B, {s['seconds']} s"
            for _, s in syncs))
    out(f"  each delta committed at (ms after ready): {catch['deltas_committed_ms_after_ready']}; CPU from ready "
        f"to the last (±20 ms): {catch['cpu_s_ready_to_committed']['laggard']} s in {laggard.name} (the asker), "
        f"{catch['cpu_s_ready_to_committed']['writer']} s in {writer.name} (the responder), of "
        f"{len(os.sched_getaffinity(0)) * wall_s:.2f} core-s")
    ceiling = bench_ceiling(root, expected, args.ceiling_repeats, rng, content)  # every daemon is stopped by now
    rate_ready = catch["ops_per_s_ready"] or float("nan")
    rate_sync = catch["ops_per_s_sync"] or float("nan")
    out(f"\n  {'catch-up':<60} {'value':>12}")
    rows = [
        ("ops applied by sync (sync_complete events)", f"{applied_events:,}"),
        ("ops applied by sync (counter sync_ops_applied)", f"{applied_counter:,}"),
        ("expected ops (2 per warning)", f"{expected:,}"),
        ("shared state-digest equal to the writer's", str(catch["digest_equal"])),
        ("restart ready -> last synced op committed (s)", f"{wall_s:.3f}"),
        ("  catch-up throughput (ops/s)", f"{rate_ready:,.0f}"),
        ("sync duration reported by the daemon (s)", f"{sync_s:.3f}"),
        ("  throughput over that (ops/s)", f"{rate_sync:,.0f}"),
        (f"ceiling: ingest.apply_frames (verify || join), best of {args.ceiling_repeats} (ops/s)",
         f"{ceiling['ops_per_s_best']:,}"),
        ("ceiling: median (ops/s); process CPU / wall", f"{ceiling['ops_per_s_median']:,}; {ceiling['cpu_per_wall']}"),
        ("serial decode+verify+apply_delta, best (ops/s); CPU / wall",
         f"{ceiling['serial']['ops_per_s_best']:,}; {ceiling['serial']['cpu_per_wall']}"),
        ("catch-up / ceiling (ready -> committed)", f"{rate_ready / ceiling['ops_per_s_best']:.2f}"),
        ("catch-up / ceiling (daemon-reported sync time)", f"{rate_sync / ceiling['ops_per_s_best']:.2f}"),
    ]
    for label, value in rows:
        out(f"  {label:<60} {value:>12}")
    catch["ceiling"] = ceiling
    catch["ratio_ready"] = round(rate_ready / ceiling["ops_per_s_best"], 3)
    catch["ratio_sync"] = round(rate_sync / ceiling["ops_per_s_best"], 3)
    results["catchup"] = catch
    # 3. bytes per op
    out(f"\n  {'bytes on the wire during catch-up':<60} {'value':>12}")
    per_op_sync = bytes_in / applied if applied else float("nan")
    per_op_rec = catch["bytes_in_peer_record"] / applied if applied else float("nan")
    rows = [
        ("bytes_in of the sync(s) (sync_complete)", f"{bytes_in:,}"),
        ("  per synced op (B)", f"{per_op_sync:.1f}"),
        (f"bytes_in in {laggard.name}'s peer record for the writer", f"{catch['bytes_in_peer_record']:,}"),
        ("  per synced op (B, includes hello)", f"{per_op_rec:.1f}"),
        ("encode_delta bytes per op of the ceiling's batches (B)", f"{ceiling['encoded_bytes_per_op']:.1f}"),
    ]
    for label, value in rows:
        out(f"  {label:<60} {value:>12}")
    results["bytes_per_op"] = {"sync": round(per_op_sync, 1), "peer_record": round(per_op_rec, 1),
                               "encoded_local": ceiling["encoded_bytes_per_op"]}
