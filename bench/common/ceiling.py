"""The local ceiling of catch-up: how fast this machine joins signed ops with no network.

`warning_ops` builds the ops a writer's `POST /v1/memory` warnings make (body + author slot
each); `bench_ceiling` joins them into a fresh store two ways, interleaved in each repeat:

- serial: decode + verify + `Grimoire.apply_delta`, one frame after the other on one thread
  (the receive path before the pipeline);
- pipelined: `daemon.grimoire.ingest.apply_frames`, the daemon's catch-up path (a verifier
  thread opens the next ops while the caller joins the ones already opened), frames as sync v2
  sends them (every op's signature checked);
- sealed: the same path on the frames sync v3 sends (`crdt.seals`: each frame carries the
  writer's seals of the blocks it brings, so one signature is checked per block of 256 ops).

Both report ops/s (best and median) and the process CPU over the wall time (1.0: no
overlap; up to 2.0 on two cores). `stage_costs` times each stage of one op alone, in thread
CPU time (steadier than wall time on a shared machine): the signature check, opening the op
without it (checks and decoding, GIL held) and the join (`Grimoire.join_delta`, pieces of
`PIECE_OPS` as the pipeline hands them); their sum over the cores is the ceiling's floor.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common.report import progress
from bench.common.workload import encode_batches
from crdt import EntryBody, HybridClock, Kind, Mutator, Op, decode_delta
from crdt.codec import open_ops, unpack_delta
from crdt.ops import DOMAIN
from crdt.seals import BLOCK_OPS, Seal, block_of, leaf, make_seal
from crypto import Identity, signature_ok
from daemon.grimoire import Grimoire
from daemon.grimoire.ingest import PIECE_OPS, apply_frames
from daemon.grimoire.seal_store import SEALED_OPS_BYTES, SEALS_PER_DELTA, blocks_to_seal

__all__ = ["bench_ceiling", "sealed_frames", "stage_costs", "warning_ops", "warning_writer"]


def warning_ops(n_ops: int, rng: random.Random, content: Callable[[random.Random, str, int], str]) -> list[Op]:
    """Signed ops of n_ops/2 warnings (body + author slot each), like `POST /v1/memory` writes."""
    return warning_writer(n_ops, rng, content)[1]


def warning_writer(n_ops: int, rng: random.Random, content: Callable[[random.Random, str, int], str]
                   ) -> tuple[Identity, list[Op]]:
    """`warning_ops`, and the writer that signed them."""
    identity = Identity(rng.randbytes(32))
    clock = HybridClock(lambda: time.time_ns() // 1_000_000)
    seq = [0]

    def next_seq() -> int:
        seq[0] += 1
        return seq[0]

    mutator = Mutator(identity.peer_id, identity.sign, next_seq=next_seq, now=clock.now)
    ops: list[Op] = []
    for i in range(n_ops // 2):
        body = EntryBody(author=identity.peer_id, kind=Kind.WARNING, content=content(rng, "ceiling", i),
                         created=clock.now())
        ops.extend(mutator.create(body, 0.7))
    return identity, ops


def sealed_frames(identity: Identity, ops: list[Op]) -> list[tuple[int, bytes]]:
    """`ops` in the frames a sync v3 responder sends (`CatchUp._extract` with seals): within
    SEALED_OPS_BYTES, each with the writer's seals chosen as the store chooses them
    (`seal_store.blocks_to_seal`, at most SEALS_PER_DELTA), made as it makes them (`seal_own_blocks`)."""
    leaves: dict[int, dict[int, bytes]] = {}
    for op in ops:
        leaves.setdefault(block_of(op.seq), {})[op.seq] = leaf(op.signed, op.signature)
    top = max(op.seq for op in ops)
    seals = {b: make_seal(identity.peer_id, b, by_seq, identity.sign) for b, by_seq in leaves.items()
             if (b + 1) * BLOCK_OPS <= top}

    sent: set[tuple[str, int]] = set()  # each seal once: the asker keeps a round's seals for its later frames

    def covering(batch: Sequence[Op]) -> list[Seal]:
        chosen = [seals[b] for _, b in blocks_to_seal(batch, sent=sent) if b in seals][:SEALS_PER_DELTA]
        sent.update((s.writer, s.block) for s in chosen)
        return chosen

    return encode_batches(ops, max_bytes=SEALED_OPS_BYTES, seals=covering)


def _serial(store: Grimoire, frames: list[bytes]) -> int:
    applied = 0
    for data in frames:
        delta, dropped = decode_delta(data, signature_ok)
        applied += store.apply_delta(delta, rejected=dropped).applied
    return applied


def _pipelined(store: Grimoire, frames: list[bytes]) -> int:
    return sum(f.report.applied for f in apply_frames(store, frames, signature_ok))


def _sealed(store: Grimoire, frames: list[bytes]) -> int:
    return sum(f.report.applied for f in apply_frames(store, frames, signature_ok, sealed=True))


def _summary(n_ops: int, runs: list[tuple[float, float]]) -> dict[str, Any]:
    walls = [w for w, _ in runs]
    best = min(walls)
    return {"best_seconds": round(best, 3), "median_seconds": round(statistics.median(walls), 3),
            "ops_per_s_best": round(n_ops / best), "ops_per_s_median": round(n_ops / statistics.median(walls)),
            "cpu_per_wall": round(statistics.median(c / w for w, c in runs), 2)}


def bench_ceiling(root: Path, n_ops: int, repeats: int, rng: random.Random,
                  content: Callable[[random.Random, str, int], str]) -> dict[str, Any]:
    """Join n_ops fresh ops `repeats` times each way (see the module docstring)."""
    progress(f"[2] ceiling: building {n_ops:,} signed warning ops")
    identity, ops = warning_writer(n_ops, rng, content)
    batches = encode_batches(ops)
    frames = [data for _, data in batches]
    sealed = [data for _, data in sealed_frames(identity, ops)]
    runs: dict[str, list[tuple[float, float]]] = {"serial": [], "pipelined": [], "sealed": []}
    for rep in range(repeats):
        for name, join, given in (("serial", _serial, frames), ("pipelined", _pipelined, frames),
                                  ("sealed", _sealed, sealed)):
            path = root / f"ceiling-{name}-{rep}.db"
            with Grimoire.open(path, create=True) as store:
                cpu0, t0 = time.process_time(), time.perf_counter()
                applied = join(store, given)
                seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if applied != n_ops:
                raise SystemExit(f"ceiling ({name}): applied {applied} of {n_ops} ops")
            runs[name].append((seconds, cpu))
            progress(f"  run {rep + 1}/{repeats} {name}: {n_ops / seconds:,.0f} ops/s, CPU {cpu / seconds:.2f}x wall")
            path.unlink(missing_ok=True)
    wire = sum(len(f) for f in frames)
    return {"ops": n_ops, "batches": len(frames), "ops_per_batch": [n for n, _ in batches][:3],
            "encoded_bytes_per_op": round(wire / n_ops, 1),
            "sealed_bytes_per_op": round(sum(len(f) for f in sealed) / n_ops, 1),
            "serial": _summary(n_ops, runs["serial"]), "sealed": _summary(n_ops, runs["sealed"]),
            **_summary(n_ops, runs["pipelined"])}


def _yes(writer: str, message: bytes, signature: bytes) -> bool:
    return True


def stage_costs(root: Path, frames: list[bytes], n_ops: int, repeats: int) -> dict[str, float]:
    """Thread CPU per op (us, best of `repeats`) of each stage alone (see the module docstring)."""
    packed = [unpack_delta(f) for f in frames]
    raw = [r for p in packed for r in p.raw_ops]

    def timed(run: Callable[[], object]) -> float:
        t0 = time.thread_time()
        run()
        return time.thread_time() - t0

    def verify() -> None:
        for writer, signed, signature in raw:
            signature_ok(writer, DOMAIN + signed, signature)  # type: ignore[arg-type, operator]

    def join() -> float:
        pieces = [(p.context, [open_ops(p.raw_ops[at:at + PIECE_OPS], _yes) for at in range(0, len(p.raw_ops),
                                                                                          PIECE_OPS)])
                  for p in packed]
        path = root / "ceiling-stages.db"
        try:
            with Grimoire.open(path, create=True) as store:
                return timed(lambda: [store.join_delta(context, iter(opened)) for context, opened in pieces])
        finally:
            path.unlink(missing_ok=True)

    costs = {"verify_us": min(timed(verify) for _ in range(max(1, repeats // 2))),
             "open_us": min(timed(lambda: [open_ops(p.raw_ops, _yes) for p in packed]) for _ in range(repeats)),
             "join_us": min(join() for _ in range(repeats))}
    return {name: round(seconds * 1e6 / n_ops, 1) for name, seconds in costs.items()}
