"""Benchmark the CRDT layer: joining signed ops, extracting delta-intervals, bytes on the wire.

    .venv/bin/python -m bench.bench_crdt [--ops N] [--seed S] [--profile] [--out DIR]
    .venv/bin/python -m bench.bench_crdt --ops 5000      # a quick run

Workload: N signed ops (default 100,000) written by 4 replicas with real Ed25519 keys, in
generation order: entries created (a body op and an author op each), confidence updates of
the writer's own entries (author ops that supersede older ones) and endorsements of other
replicas' crossable entries. Contents are seeded, DeFi-flavoured and 60-1,500 characters long.

1. Join throughput (ops/s per batch; median, min, max over all batches of the workload):
   decode with signature checks (`crdt.decode_delta(data, crypto.signature_ok)`) and without
   (a verifier that always says yes); `crdt.apply_delta` into a `MemoryBackend`;
   `Grimoire.apply_delta` into a SQLite file (one transaction per batch); and end to end
   (decode + verify + `Grimoire.apply_delta`). Join-only batches hold exactly 4,096 ops;
   encoded batches hold at most 4,096 ops *and* at most 1 MiB (the codec refuses bigger
   messages, and 4,096 ops that include entry bodies do not fit in 1 MiB).
2. Delta extraction from the Grimoire built in 1 (N ops) for a peer that lacks the last 10%
   of the dots (10,000 by default) of one writer, or spread over all writers, for a peer that
   is up to date, and for an empty peer (full sync); the same with `crdt.extract_deltas` on a
   `MemoryBackend` holding the same ops.
3. Bytes on the wire per op against the raw msgpack of what it carries.

The generated workload is frozen out of the cyclic GC (`gc.freeze`) before anything is timed.
Prints a table to stdout (progress goes to stderr), then the JSON result line (bench.common).
The per-call costs of the same paths, measured by pyperf, are in bench_micro.py.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgpack

import crdt
import crypto
from bench.common import (
    machine_info,
    progress,
    rate_summary,
    size_summary,
)
from bench.common.ops import (
    JOIN_BATCH,
    P_CONFIDENCE,
    P_ENDORSE,
    WRITER_WEIGHTS,
    Workload,
    always_valid,
    build_workload,
    join_batches,
)
from bench.common.profile import top_functions
from bench.common.report import add_common_args, at_least, main_in_workdir
from bench.common.workload import encode_batches, encoded_size
from bench.crdt.report import print_report
from crdt import (
    CausalContext,
    Delta,
    EntryBody,
    MemoryBackend,
    Op,
    SlotKind,
)
from crdt.replica import MAX_BATCH_BYTES, MAX_BATCH_OPS, NEVER_CROSS
from daemon.grimoire import Grimoire

BEHIND_FRACTION = 0.10                 # the lagging peer misses 10% of the dots (10,000 of 100,000)
EXTRACT_REPEATS = 3
PROFILE_BATCHES = 4
PROFILE_TOP = 5


# -- 1. join throughput ------------------------------------------------------------------------


def bench_decode(wire: Sequence[tuple[int, bytes]], what: str) -> dict[str, Any]:
    """decode_delta with and without signature checks, alternating per batch."""
    progress(f"[1/3] decode_delta: {len(wire)} encoded batches ({what}), with and without signature checks")
    counts: list[int] = []
    verified_ns: list[int] = []
    unverified_ns: list[int] = []
    clock = time.perf_counter_ns
    for n, data in wire:
        t0 = clock()
        delta, rejected = crdt.decode_delta(data, crypto.signature_ok)
        t1 = clock()
        plain, rejected_plain = crdt.decode_delta(data, always_valid)
        t2 = clock()
        if rejected or rejected_plain or len(delta.ops) != n or len(plain.ops) != n:
            raise SystemExit(f"decode dropped ops: {rejected} / {rejected_plain}")
        counts.append(n)
        verified_ns.append(t1 - t0)
        unverified_ns.append(t2 - t1)
    per_op_verify_us = (sum(verified_ns) - sum(unverified_ns)) / sum(counts) / 1e3
    return {"verify": rate_summary(counts, verified_ns), "no_verify": rate_summary(counts, unverified_ns),
            "verify_us_per_op": round(per_op_verify_us, 2),
            "bytes_per_batch_median": statistics.median(len(d) for _, d in wire)}


def bench_memory_join(batches: Sequence[Delta]) -> tuple[dict[str, Any], MemoryBackend]:
    progress(f"[1/3] apply_delta into MemoryBackend: {len(batches)} batches of <= {JOIN_BATCH} ops")
    mem = MemoryBackend()
    counts: list[int] = []
    ns: list[int] = []
    for delta in batches:
        t0 = time.perf_counter_ns()
        report = crdt.apply_delta(mem, delta)
        ns.append(time.perf_counter_ns() - t0)
        if report.rejected or report.applied != len(delta.ops):
            raise SystemExit(f"memory join refused ops: {report}")
        counts.append(len(delta.ops))
    return rate_summary(counts, ns), mem


def bench_sqlite_join(path: Path, batches: Sequence[Delta]) -> dict[str, Any]:
    progress(f"[1/3] Grimoire.apply_delta: {len(batches)} batches of <= {JOIN_BATCH} ops, 1 txn each -> {path.name}")
    counts: list[int] = []
    ns: list[int] = []
    with Grimoire.open(path, create=True) as store:
        for i, delta in enumerate(batches, 1):
            t0 = time.perf_counter_ns()
            report = store.apply_delta(delta)
            ns.append(time.perf_counter_ns() - t0)
            if report.rejected or report.applied != len(delta.ops):
                raise SystemExit(f"sqlite join refused ops: {report.rejected}")
            counts.append(len(delta.ops))
            if i % 5 == 0 or i == len(batches):
                progress(f"  {i}/{len(batches)} batches ({sum(ns) / 1e9:.1f}s in apply_delta)")
        store.checkpoint()
    out = rate_summary(counts, ns)
    edge = max(1, len(ns) // 5)
    out["first_20pct_ops_s"] = round(sum(counts[:edge]) / (sum(ns[:edge]) / 1e9))
    out["last_20pct_ops_s"] = round(sum(counts[-edge:]) / (sum(ns[-edge:]) / 1e9))
    out["db_bytes"] = path.stat().st_size
    return out


def apply_wire(store: Grimoire, data: bytes) -> tuple[int, int]:
    """Decode, verify and join one encoded delta; returns (ops joined, ns spent decoding)."""
    t0 = time.perf_counter_ns()
    delta, rejected = crdt.decode_delta(data, crypto.signature_ok)
    t1 = time.perf_counter_ns()
    report = store.apply_delta(delta, rejected=rejected)
    if report.rejected or report.applied != len(delta.ops):
        raise SystemExit(f"end-to-end join refused ops: {report.rejected}")
    return len(delta.ops), t1 - t0


def bench_end_to_end(path: Path, wire: Sequence[tuple[int, bytes]]) -> dict[str, Any]:
    progress(f"[1/3] decode+verify+Grimoire.apply_delta: {len(wire)} encoded batches -> {path.name}")
    counts: list[int] = []
    ns: list[int] = []
    decode_ns = 0
    with Grimoire.open(path, create=True) as store:
        for i, (_, data) in enumerate(wire, 1):
            t0 = time.perf_counter_ns()
            n, dec = apply_wire(store, data)
            ns.append(time.perf_counter_ns() - t0)
            counts.append(n)
            decode_ns += dec
            if i % 10 == 0 or i == len(wire):
                progress(f"  {i}/{len(wire)} batches ({sum(ns) / 1e9:.1f}s)")
        store.checkpoint()
    out = rate_summary(counts, ns)
    out["share_in_decode_verify"] = round(decode_ns / sum(ns), 3)
    return out


# -- 2. delta extraction -----------------------------------------------------------------------


def lagging_peer(ctx: CausalContext, behind: dict[str, int]) -> CausalContext:
    """`ctx` minus the last `behind[w]` dots of each writer w (ctx must be cloud-free)."""
    rows = ctx.to_rows()
    if any(cloud for _, _, cloud in rows):
        raise SystemExit("expected a gap-free causal context")
    return CausalContext({r: vv - behind.get(r, 0) for r, vv, _ in rows})


def drain(extract: Callable[[CausalContext], Iterable[Delta]], peer: CausalContext) -> list[Delta]:
    return list(extract(peer))


def time_extraction(run: Callable[[], list[Delta]], repeats: int) -> dict[str, Any]:
    times: list[float] = []
    deltas: list[Delta] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        deltas = run()
        times.append(time.perf_counter() - t0)
    ops = sum(len(d.ops) for d in deltas)
    sizes = [encoded_size(d) for d in deltas]
    return {
        "seconds_median": round(statistics.median(times), 6), "seconds_min": round(min(times), 6),
        "repeats": repeats, "ops": ops, "deltas": len(deltas),
        "body_ops": sum(1 for d in deltas for op in d.ops if op.slot is SlotKind.BODY),
        "wire_bytes": sum(sizes), "over_cap": sum(1 for n in sizes if n > MAX_BATCH_BYTES),
        "max_delta_bytes": max(sizes, default=0),
        "ops_per_s": round(ops / statistics.median(times)) if ops else 0,
    }


def count_ops(path: Path) -> tuple[int, int]:
    """(slot-holding ops, those whose entry passes the default gate), read-only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT count(*) FROM ops").fetchone()[0]
        never = ", ".join(f"'{k.value}'" for k in NEVER_CROSS)
        crossing = conn.execute(
            "SELECT count(*) FROM ops o JOIN entries e ON e.id = o.entry_id "
            f"WHERE e.sensitivity = 'public' AND e.kind NOT IN ({never})"
        ).fetchone()[0]
    finally:
        conn.close()
    return int(total), int(crossing)


def bench_extraction(path: Path, mem: MemoryBackend, workload: Workload, behind: int) -> dict[str, Any]:
    progress(f"[2/3] delta extraction from {path.name} ({len(workload.ops):,} dots)")
    out: dict[str, Any] = {}
    with Grimoire.open(path) as store:
        t0 = time.perf_counter()
        ctx = store.causal_context()
        out["load_context_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        slot_ops, crossing = count_ops(path)
        out["store"] = {"dots": ctx.size(), "slot_holding_ops": slot_ops, "crossable_ops": crossing,
                        "writers": len(ctx.replicas())}
        if ctx != mem.context:
            raise SystemExit("the SQLite context differs from the in-memory one")
        biggest = max(ctx.replicas(), key=ctx.top)
        one_behind = min(behind, ctx.top(biggest))
        spread: dict[str, int] = {}
        left = behind
        for i, r in enumerate(ctx.replicas()):
            share = min(ctx.top(r), left // (len(ctx.replicas()) - i))
            spread[r] = share
            left -= share
        scenarios: list[tuple[str, str, CausalContext, int]] = [
            ("one_writer", f"1 writer {one_behind:,} dots behind ({ctx.top(biggest):,} of its dots)",
             lagging_peer(ctx, {biggest: one_behind}), EXTRACT_REPEATS),
            ("all_writers", f"{len(spread)} writers, {sum(spread.values()):,} dots behind in all "
             f"({', '.join(f'{v:,}' for v in spread.values())})", lagging_peer(ctx, spread), EXTRACT_REPEATS),
            ("up_to_date", "peer up to date", ctx.copy(), 10),
            ("empty_peer", "empty peer (full sync)", CausalContext(), 1),
        ]
        for key, label, peer, repeats in scenarios:
            lacking = peer.missing_count(ctx)
            progress(f"  {label}: iter_deltas x {repeats}, extract_deltas (memory) x {repeats}")
            sql = time_extraction(partial(drain, store.iter_deltas, peer), repeats)
            memory = time_extraction(partial(drain, partial(crdt.extract_deltas, mem), peer), repeats)
            if (sql["ops"], sql["deltas"]) != (memory["ops"], memory["deltas"]):
                raise SystemExit(f"{key}: SQLite and memory extraction disagree: {sql} vs {memory}")
            out[key] = {"label": label, "dots_lacking": lacking, "sqlite": sql, "memory": memory}
    return out


# -- 3. bytes on the wire ----------------------------------------------------------------------


def in_delta_bytes(op: Op) -> int:
    """Exact bytes one op takes inside an encoded delta: msgpack of [signed, signature]."""
    return len(msgpack.packb([op.signed, op.signature], use_bin_type=True))


def bench_wire(workload: Workload) -> dict[str, Any]:
    progress("[3/3] bytes on the wire per op")
    by_slot: dict[SlotKind, list[Op]] = {k: [] for k in SlotKind}
    for op in workload.ops:
        by_slot[op.slot].append(op)
    out: dict[str, Any] = {}
    for kind, ops in by_slot.items():
        if not ops:
            continue
        raw = [len(op.value.canonical()) if isinstance(op.value, EntryBody)
               else len(msgpack.packb(op.value.to_wire(), use_bin_type=True, use_single_float=False)) for op in ops]
        wire = [op.wire_size for op in ops]
        packed = [in_delta_bytes(op) for op in ops]
        out[kind.name.lower()] = {
            "ops": len(ops),
            "raw_value_bytes": size_summary(raw),
            "wire_size": size_summary(wire),
            "in_delta_bytes": size_summary(packed),
            "overhead_bytes": size_summary([p - r for p, r in zip(packed, raw, strict=True)]),
            "ratio_in_delta_to_raw": size_summary([p / r for p, r in zip(packed, raw, strict=True)]),
        }
        if kind is SlotKind.BODY:
            contents = [len(op.value.content) for op in ops if isinstance(op.value, EntryBody)]
            out["content_chars"] = size_summary(contents)
    # Whole deltas of a full sync to an empty peer (bodies first, then author/endorse ops).
    per_batch: dict[str, list[float]] = {"body_only": [], "mixed": [], "author_endorse_only": []}
    ops_per_batch: dict[str, list[int]] = {k: [] for k in per_batch}
    sizes: list[int] = []
    for delta in crdt.extract_deltas(workload.truth, CausalContext()):
        sizes.append(encoded_size(delta))
        bodies = sum(1 for op in delta.ops if op.slot is SlotKind.BODY)
        key = "body_only" if bodies == len(delta.ops) else "author_endorse_only" if bodies == 0 else "mixed"
        if delta.ops:
            per_batch[key].append(sizes[-1] / len(delta.ops))
            ops_per_batch[key].append(len(delta.ops))
    out["full_sync_deltas"] = {
        k: {"deltas": len(v), "bytes_per_op_median": round(statistics.median(v), 1),
            "ops_per_delta_median": statistics.median(ops_per_batch[k])}
        for k, v in per_batch.items() if v
    }
    out["full_sync_over_cap"] = {"deltas": len(sizes), "over_cap": sum(1 for n in sizes if n > MAX_BATCH_BYTES),
                                 "largest_bytes": max(sizes, default=0)}
    return out


# -- profiling -----------------------------------------------------------------------------------


def profile_paths(workdir: Path, wire: Sequence[tuple[int, bytes]], store_path: Path,
                  peer: CausalContext) -> dict[str, Any]:
    progress(f"profiling: end to end on {PROFILE_BATCHES} batches, and extraction for the lagging peer")
    out: dict[str, Any] = {}
    with Grimoire.open(workdir / "grimoire-profile.db", create=True) as store:
        prof = cProfile.Profile()
        ops = 0
        t0 = time.perf_counter()
        prof.enable()
        for _, data in wire[:PROFILE_BATCHES]:
            ops += apply_wire(store, data)[0]
        prof.disable()
        out["end_to_end"] = {"ops": ops, "seconds": round(time.perf_counter() - t0, 3),
                             "top": top_functions(prof, PROFILE_TOP, "cumulative", __file__),
                             "top_self": top_functions(prof, PROFILE_TOP, "self", __file__)}
    with Grimoire.open(store_path) as store:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        deltas = list(store.iter_deltas(peer))
        prof.disable()
        out["iter_deltas"] = {"ops": sum(len(d.ops) for d in deltas), "seconds": round(time.perf_counter() - t0, 3),
                              "top": top_functions(prof, PROFILE_TOP, "cumulative", __file__),
                              "top_self": top_functions(prof, PROFILE_TOP, "self", __file__)}
    return out


# -- output ------------------------------------------------------------------------------------


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--ops", type=at_least(1_000), default=100_000, help="ops in the workload (default 100,000)")
    p.add_argument("--profile", action="store_true", help="also cProfile end to end join and extraction")
    add_common_args(p, "directory for the SQLite files (kept); default: a temporary one, removed")
    return p.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {"machine": machine_info(workdir, ("msgpack", "pynacl"))}
    behind = max(1, round(args.ops * BEHIND_FRACTION))
    res["params"] = {"ops": args.ops, "seed": args.seed, "join_batch_ops": JOIN_BATCH,
                     "max_delta_ops": MAX_BATCH_OPS, "max_delta_bytes": MAX_BATCH_BYTES, "behind": behind,
                     "writer_weights": list(WRITER_WEIGHTS), "p_confidence": P_CONFIDENCE, "p_endorse": P_ENDORSE}
    progress(f"generating {args.ops:,} signed ops (seed {args.seed}); work dir {workdir}")
    wl = build_workload(args.ops, args.seed)
    per_writer = Counter(op.writer for op in wl.ops)
    res["workload"] = {
        "ops": len(wl.ops), "writers": len(wl.writers), "per_writer": [per_writer[w] for w in wl.writers],
        "steps": dict(wl.steps), "by_slot": {k.name.lower(): sum(1 for op in wl.ops if op.slot is k) for k in SlotKind},
        "seconds": round(wl.seconds, 2),
    }
    batches = join_batches(wl.ops)
    wire = encode_batches(wl.ops)
    # The harness holds every op and body; keep the cyclic GC from rescanning them during the
    # timed calls (a daemon does not hold its whole history as objects).
    gc.collect()
    gc.freeze()

    small = [op for op in wl.ops if op.slot is not SlotKind.BODY]
    small_wire = [(len(d.ops), crdt.encode_delta(d)) for d in join_batches(small)]
    join: dict[str, Any] = {
        "decode_mixed": bench_decode(wire, "all ops, generation order, <= 4,096 ops / 1 MiB"),
        "decode_small": bench_decode(small_wire, "author/endorse ops only, 4,096 a batch"),
    }
    join["memory"], mem = bench_memory_join(batches)
    store_a, store_b = workdir / "grimoire-join.db", workdir / "grimoire-e2e.db"
    join["sqlite"] = bench_sqlite_join(store_a, batches)
    join["end_to_end"] = bench_end_to_end(store_b, wire)
    res["join"] = join

    progress("checking that every state converged (state digests)")
    expected = crdt.digest(wl.truth.ops(), wl.truth.context)
    digests = [crdt.digest(mem.ops(), mem.context)]
    for path in (store_a, store_b):
        with Grimoire.open(path) as store:
            digests.append(store.state_digest())
    res["checks"] = {"digests_agree": all(d == expected for d in digests), "digest": expected}

    res["extract"] = bench_extraction(store_a, mem, wl, behind)
    res["wire"] = bench_wire(wl)
    if args.profile:
        with Grimoire.open(store_a) as store:
            ctx = store.causal_context()
        biggest = max(ctx.replicas(), key=ctx.top)
        res["profile"] = profile_paths(workdir, wire, store_a,
                                       lagging_peer(ctx, {biggest: min(behind, ctx.top(biggest))}))
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; the exit code is 0, or 2 when `--out` names a used directory."""

    def clash(path: Path) -> str | None:
        return "grimoire-*.db files" if any(path.glob("grimoire-*.db")) else None

    return main_in_workdir("crdt", parse_args(argv), run, partial(print_report, top=PROFILE_TOP), "clade-bench-crdt-",
                           clash=clash)


if __name__ == "__main__":
    raise SystemExit(main())
