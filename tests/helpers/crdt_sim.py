"""A small simulated clade for CRDT tests: replicas with real keys, in-memory state."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from crdt import (
    ApplyReport,
    AuthorValue,
    EndorseValue,
    EntryBody,
    EvidenceValue,
    HybridClock,
    Kind,
    MemoryBackend,
    Mutator,
    Op,
    SlotKind,
    apply_delta,
    apply_op,
    decode_delta,
    digest,
    encode_delta,
    extract_deltas,
)
from crdt.replica import Delta
from crypto import Identity, signature_ok

IDENTITIES = [Identity(bytes([i + 1]) * 32) for i in range(8)]


class CountingVerifier:
    """`signature_ok`, counting its calls (how many ops a seal spared a check)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, writer: str, message: bytes, signature: bytes) -> bool:
        self.calls += 1
        return signature_ok(writer, message, signature)


@dataclass
class SimReplica:
    identity: Identity
    state: MemoryBackend = field(default_factory=MemoryBackend)
    seq: int = 0
    wall: int = 1_000_000

    def __post_init__(self) -> None:
        self.clock = HybridClock(lambda: self.wall)
        self.mutator = Mutator(self.peer_id, self.identity.sign, next_seq=self._next_seq, now=self.clock.now)

    @property
    def peer_id(self) -> str:
        return self.identity.peer_id

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def local(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            apply_op(self.state, op)
        return ops

    def create(self, content: str, kind: Kind = Kind.INSIGHT, confidence: float = 0.7, **kw: object) -> list[Op]:
        self.wall += 1
        body = EntryBody(author=self.peer_id, kind=kind, content=content, created=self.clock.now(), **kw)  # type: ignore[arg-type]
        return self.local(self.mutator.create(body, confidence))

    def body(self, entry_id: str) -> EntryBody:
        body = self.state.body(entry_id)
        assert body is not None
        return body

    def author_value(self, entry_id: str) -> AuthorValue:
        op = self.state.slot((entry_id, int(SlotKind.AUTHOR), self.body(entry_id).author))
        assert op is not None and isinstance(op.value, AuthorValue)
        return op.value

    def set_confidence(self, entry_id: str, confidence: float) -> list[Op]:
        body = self.body(entry_id)
        return self.local([self.mutator.set_confidence(body, self.author_value(entry_id), confidence)])

    def retract(self, entry_id: str) -> list[Op]:
        return self.local([self.mutator.retract(self.body(entry_id), self.author_value(entry_id))])

    def endorse(self, entry_id: str, confirm: bool) -> list[Op]:
        op = self.state.slot((entry_id, int(SlotKind.ENDORSE), self.peer_id))
        current = op.value if op is not None and isinstance(op.value, EndorseValue) else None
        return self.local([self.mutator.endorse(self.body(entry_id), current, confirm=confirm)])

    def evidence(self, entry_id: str, positive: bool) -> list[Op]:
        """One more outcome in this replica's evidence tally for an entry (its own or another's)."""
        op = self.state.slot((entry_id, int(SlotKind.EVIDENCE), self.peer_id))
        current = op.value if op is not None and isinstance(op.value, EvidenceValue) else None
        return self.local([self.mutator.evidence(self.body(entry_id), current, positive=positive)])

    def receive(self, data: bytes) -> ApplyReport:
        delta, rejected = decode_delta(data, signature_ok)
        return apply_delta(self.state, delta, rejected=rejected)

    def digest(self) -> str:
        return digest(self.state.ops(), self.state.context)


def gossip(ops: list[Op]) -> bytes:
    """A gossip message for freshly made ops: the ops, no context beyond their own dots."""
    from crdt import CausalContext

    return encode_delta(Delta(tuple(ops), CausalContext()))


def sync(sender: SimReplica, receiver: SimReplica, *, max_ops: int = 4096) -> tuple[int, int]:
    """One anti-entropy pass sender → receiver over the wire codec; returns (ops sent, messages)."""
    sent = messages = 0
    for delta in extract_deltas(sender.state, receiver.state.context.copy(), max_ops=max_ops):
        report = receiver.receive(encode_delta(delta))
        assert not report.rejected, report.rejected
        sent += len(delta.ops)
        messages += 1
    return sent, messages


def sync_all(replicas: list[SimReplica]) -> int:
    """Pairwise anti-entropy until nothing moves; returns rounds used."""
    for rounds in range(1, 10):
        moved = 0
        for a in replicas:
            for b in replicas:
                if a is not b:
                    moved += sync(a, b)[0]
        if moved == 0:
            return rounds
    raise AssertionError("anti-entropy did not quiesce in 10 rounds")


def random_op(rng: random.Random, replica: SimReplica, counter: list[int]) -> list:
    """One random local write on `replica` (create, confidence change, retract, endorse, evidence)."""
    known = sorted({op.entry_id for op in replica.state.ops()})  # sorted: set order is hash-randomised
    own = [e for e in known if replica.body(e).author == replica.peer_id]
    others = [e for e in known if replica.body(e).author != replica.peer_id]
    choice = rng.random()
    counter[0] += 1
    if choice < 0.4 or not known:
        kind = rng.choice([Kind.WARNING, Kind.INSIGHT, Kind.FACT, Kind.HEURISTIC])
        return replica.create(f"note {counter[0]} from {replica.peer_id[-4:]}", kind, rng.random())
    if choice < 0.6 and own:
        return replica.set_confidence(rng.choice(own), round(rng.random(), 3))
    if choice < 0.7 and own:
        return replica.retract(rng.choice(own))
    if choice < 0.8:
        return replica.evidence(rng.choice(known), rng.random() < 0.6)
    if others:
        return replica.endorse(rng.choice(others), rng.random() < 0.7)
    return replica.create(f"note {counter[0]}", Kind.INSIGHT, 0.5)
