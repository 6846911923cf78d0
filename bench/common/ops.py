"""The seeded CRDT op workload bench_crdt and bench_micro measure: 4 replicas with real Ed25519
keys sharing one simulated wall clock, writing entries, re-scoring their own and endorsing their
siblings' crossable ones (`build_workload`), cut into gossip-shaped deltas (`join_batches`);
and `always_valid`, a verifier that checks nothing (to isolate the cost of Ed25519)."""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import crdt
from crdt import (
    AuthorValue,
    CausalContext,
    Delta,
    EndorseValue,
    HybridClock,
    MemoryBackend,
    Mutator,
    Op,
    SlotKind,
)
from crdt.replica import MAX_BATCH_OPS, may_cross
from crypto import Identity

from .report import progress
from .workload import Generator

__all__ = ["JOIN_BATCH", "P_CONFIDENCE", "P_ENDORSE", "WRITER_WEIGHTS", "Workload",
           "always_valid", "build_workload", "join_batches"]

WRITER_WEIGHTS = (40, 30, 20, 10)      # share of the steps each of the 4 replicas takes
P_CONFIDENCE = 0.16                    # a step updates the confidence of one of the writer's entries
P_ENDORSE = 0.10                       # a step endorses a sibling's crossable entry
JOIN_BATCH = MAX_BATCH_OPS             # 4,096


@dataclass
class Writer:
    identity: Identity
    clock: HybridClock
    seq: int = 0
    own: list[str] = field(default_factory=list)
    mutator: Mutator | None = None

    @property
    def peer_id(self) -> str:
        return self.identity.peer_id

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq


@dataclass
class Workload:
    ops: list[Op]                 # every op, in generation order (dots 1..n per writer)
    truth: MemoryBackend          # the state after all of them
    writers: list[str]
    steps: Counter[str]           # creates / confidence updates / endorsements
    seconds: float


def build_workload(n_ops: int, seed: int) -> Workload:
    """`n_ops` signed ops from 4 replicas sharing one simulated wall clock in the recent past."""
    rng = random.Random(seed)
    gen = Generator(rng)
    # Each step is >= 1 op and advances the clock by <= 5 s, so the last op is stamped in the past
    # (Grimoire.apply_delta refuses ops more than a minute ahead of the local clock).
    wall = [time.time_ns() // 1_000_000 - n_ops * 5_000 - 86_400_000]
    writers: list[Writer] = []
    for i in range(len(WRITER_WEIGHTS)):
        identity = Identity(hashlib.sha256(f"clade-bench-crdt:{seed}:{i}".encode()).digest())
        w = Writer(identity, HybridClock(lambda: wall[0]))
        w.mutator = Mutator(identity.peer_id, identity.sign, next_seq=w.next_seq, now=w.clock.now)
        writers.append(w)
    truth = MemoryBackend()
    crossable: list[tuple[str, str]] = []  # (id, author) of entries that may cross: what siblings endorse
    ops: list[Op] = []
    steps: Counter[str] = Counter()
    t0 = time.perf_counter()
    next_report = 20_000
    while len(ops) < n_ops:
        wall[0] += rng.randint(50, 5_000)
        w = rng.choices(writers, WRITER_WEIGHTS)[0]
        m = w.mutator
        assert m is not None
        roll = rng.random()
        new: list[Op]
        if (roll < P_CONFIDENCE or len(ops) == n_ops - 1) and w.own:
            # recent entries are re-scored more often than old ones
            eid = w.own[-rng.randint(1, min(len(w.own), 2_000))] if rng.random() < 0.7 else rng.choice(w.own)
            body = truth.body(eid)
            slot = truth.slot((eid, int(SlotKind.AUTHOR), w.peer_id))
            assert body is not None and slot is not None and isinstance(slot.value, AuthorValue)
            new = [m.set_confidence(body, slot.value, round(rng.uniform(0.05, 0.99), 3))]
            steps["confidence_update"] += 1
        elif roll < P_CONFIDENCE + P_ENDORSE and crossable and (pick := rng.choice(crossable))[1] != w.peer_id:
            eid = pick[0]
            body = truth.body(eid)
            slot = truth.slot((eid, int(SlotKind.ENDORSE), w.peer_id))
            assert body is not None
            current = slot.value if slot is not None and isinstance(slot.value, EndorseValue) else None
            new = [m.endorse(body, current, confirm=rng.random() < 0.8)]
            steps["endorse"] += 1
        elif len(ops) <= n_ops - 2:
            body = gen.body(w.peer_id, m.now())
            new = m.create(body, round(rng.uniform(0.3, 0.95), 3))
            w.own.append(body.id)
            if may_cross(body):
                crossable.append((body.id, body.author))
            steps["create"] += 1
        else:
            continue
        for op in new:
            crdt.apply_op(truth, op)
        ops.extend(new)
        if len(ops) >= next_report:
            progress(f"  generated {len(ops):,}/{n_ops:,} ops ({time.perf_counter() - t0:.1f}s)")
            next_report += 20_000
    return Workload(ops, truth, [w.peer_id for w in writers], steps, time.perf_counter() - t0)


def join_batches(ops: Sequence[Op]) -> list[Delta]:
    """Gossip-shaped deltas of exactly 4,096 ops (the last one shorter), for the join-only paths."""
    return [Delta(tuple(ops[i : i + JOIN_BATCH]), CausalContext()) for i in range(0, len(ops), JOIN_BATCH)]


def always_valid(writer: str, message: bytes, signature: bytes) -> bool:
    """A verifier that checks nothing (to isolate the cost of Ed25519 verification)."""
    return True
