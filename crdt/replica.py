"""Replicated Grimoire state: apply ops, join states, extract delta-intervals.

The state is a map slot → op, where a slot is (entry id, slot kind, writer) and every
slot keeps the op with the highest seq of its single writer (ties between two ops a
Byzantine writer signed with one seq are broken by their bytes, so join stays a lattice).
It is a product of max-registers, so join is commutative, associative and idempotent,
and the causal context is a grow-only set of dots.

Anti-entropy follows the delta-interval protocol (Almeida, Shoker, Baquero 2018, §6): a
peer sends its context; we answer with every op whose dot it lacks *plus our context for
the writers covered*, so it can also mark the seqs of ops that were superseded (and will
never be sent) as seen. Ops are sent bodies first, then the rest, writer by writer in seq
order; a writer's context travels with the batch that completes it, so a delta cut short
never makes the receiver claim a dot whose op it lacks.

The algorithms run against `Backend`, a small storage protocol: `MemoryBackend` here (the
reference, used by the property tests) and the SQLite store in `daemon.grimoire` share
this one implementation.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import msgpack

from .body import EntryBody, Kind, Sensitivity
from .context import CausalContext, Dot
from .errors import RemoteProtocolError
from .ops import Op, SlotKind

__all__ = [
    "NEVER_CROSS",
    "ApplyReport",
    "Backend",
    "Delta",
    "DeltaJoin",
    "Gate",
    "MemoryBackend",
    "Outcome",
    "apply_delta",
    "apply_op",
    "bodies_first",
    "context_digest",
    "digest",
    "extract_deltas",
    "join",
    "may_cross",
    "sendable",
    "signed_digest",
    "wins",
]

MAX_BATCH_OPS = 4096
MAX_BATCH_BYTES = 1024 * 1024

NEVER_CROSS = frozenset({Kind.PREFERENCE, Kind.STRATEGY_OUTCOME, Kind.EPISODE_SUMMARY})

Gate = Callable[[EntryBody], bool]
"""Whether an entry's ops may be sent to siblings at all (static: body fields only)."""


def may_cross(body: EntryBody) -> bool:
    """The static part of the promotion gate: public, and of a kind that may ever cross."""
    return body.sensitivity is Sensitivity.PUBLIC and body.kind not in NEVER_CROSS


class Outcome(StrEnum):
    APPLIED = "applied"          # the op now holds its slot
    SUPERSEDED = "superseded"    # a newer op of the same writer already holds the slot
    DUPLICATE = "duplicate"      # the dot was already seen


class Backend(Protocol):
    """Storage the algorithms run against. Calls happen inside one transaction."""

    @property
    def context(self) -> CausalContext:
        """The live causal context (mutated in place; the backend persists it)."""
        ...

    def slot(self, key: tuple[str, int, str]) -> Op | None:
        """The op holding a slot, if any."""
        ...

    def op_at(self, dot: Dot) -> Op | None:
        """The op with this dot, if it still holds its slot."""
        ...

    def body(self, entry_id: str) -> EntryBody | None:
        """The entry's body, if known."""
        ...

    def put(self, op: Op, replaces: Op | None) -> None:
        """Store `op` in its slot, dropping `replaces` (the op that held it)."""
        ...

    def ops_after(self, writer: str, seq: int, *, bodies: bool) -> Iterable[Op]:
        """Slot-holding ops of `writer` with seq > `seq`, ascending by seq: only body ops
        if `bodies`, else only the others."""
        ...

    def dots_after(self, writer: str, seq: int) -> Iterable[tuple[int, str]]:
        """(seq, entry id) of the same ops as `ops_after` (both kinds), without opening them."""
        ...


def wins(incoming: Op, current: Op | None) -> bool:
    """The slot order: higher seq wins; equal seqs (equivocation) by bytes, deterministically."""
    if current is None:
        return True
    if incoming.seq != current.seq:
        return incoming.seq > current.seq
    return (incoming.signed, incoming.signature) > (current.signed, current.signature)


def check_authority(op: Op, body: EntryBody | None) -> None:
    """Refuse an op in a slot its signer may not write.

    Raises `RemoteProtocolError` with reason `orphan` (entry unknown: retry after its body
    arrives) or `forbidden_slot` (the signer is not the slot's single writer).
    """
    if op.slot is SlotKind.BODY:
        return  # open_op/make_op checked body.author == writer and the id
    if body is None:
        raise RemoteProtocolError("orphan", f"op {op.dot} for unknown entry {op.entry_id}")
    if op.slot is SlotKind.AUTHOR and op.writer != body.author:
        raise RemoteProtocolError(
            "forbidden_slot", f"{op.writer} wrote the author slot of {op.entry_id}, authored by {body.author}"
        )
    if op.slot is SlotKind.ENDORSE and op.writer == body.author:
        raise RemoteProtocolError("forbidden_slot", f"{op.writer} endorsed its own entry {op.entry_id}")


def apply_op(backend: Backend, op: Op) -> Outcome:
    """Join one verified op into the state. Raises `RemoteProtocolError` (authority,
    equivocation); then nothing changes."""
    ctx = backend.context
    if op.dot in ctx:
        held = backend.op_at(op.dot)
        if held is not None and (held.signed, held.signature) != (op.signed, op.signature):
            raise RemoteProtocolError("equivocation", f"{op.writer} signed two different ops as seq {op.seq}")
        return Outcome.DUPLICATE
    check_authority(op, op.value if isinstance(op.value, EntryBody) else backend.body(op.entry_id))
    current = backend.slot(op.key)
    ctx.add(op.dot)
    if wins(op, current):
        backend.put(op, current)
        return Outcome.APPLIED
    return Outcome.SUPERSEDED


@dataclass(frozen=True, slots=True)
class Delta:
    """A delta-interval: ops plus the context of the writers it covers completely."""

    ops: tuple[Op, ...]
    context: CausalContext

    def wire_size(self) -> int:
        """An upper bound of the encoded size."""
        writers = {op.writer for op in self.ops}
        return (DELTA_FRAMING + sum(op.wire_size for op in self.ops) + sum(group_framing(w) for w in writers)
                + sum(context_row_size(self.context, w) for w in self.context.replicas()))


@dataclass(slots=True)
class ApplyReport:
    """What joining a delta did; `rejected` counts refusals by reason."""

    applied: int = 0
    superseded: int = 0
    duplicate: int = 0
    withheld: int = 0            # dots marked seen from their writers' withheld declarations
    rejected: Counter[str] = field(default_factory=Counter)
    applied_ops: list[Op] = field(default_factory=list, repr=False)

    def add(self, other: ApplyReport) -> None:
        self.applied += other.applied
        self.superseded += other.superseded
        self.duplicate += other.duplicate
        self.withheld += other.withheld
        self.rejected.update(other.rejected)
        self.applied_ops.extend(other.applied_ops)


class DeltaJoin:
    """Join one delta whose ops arrive in pieces (e.g. as a worker thread verifies them).

    `add` joins ops at once, except a non-body op whose entry is still unknown: it waits
    for `finish`, since its body may come in a later piece (the wire orders ops by writer,
    not bodies first). `refuse` records ops dropped before they got here (bad signature,
    clock skew) against their writer. `finish(context)` retries the waiting ops, merges the
    delta's context rows under the rules of `apply_delta` (and `withheld`, dots declared
    withheld by their own authenticated writers, whole: `crdt.withheld`), and returns the
    report. The
    state reached is the one `apply_delta` reaches for the same ops, in any split.
    """

    def __init__(self, backend: Backend, *, sender: str | None = None) -> None:
        self._backend = backend
        self._sender = sender
        self._refused_writers: set[str] = set()
        self._waiting: list[Op] = []
        self.report = ApplyReport()

    def refuse(self, writer: str | None, reason: str, count: int = 1) -> None:
        """Count `count` ops refused for `reason`; their writer's context row is then not merged."""
        self.report.rejected[reason] += count
        if writer is not None:
            self._refused_writers.add(writer)

    def add(self, ops: Iterable[Op]) -> None:
        """Join verified ops (bodies before the other ops of their entries where possible)."""
        backend = self._backend
        for op in ops:
            if op.slot is not SlotKind.BODY and op.dot not in backend.context and backend.body(op.entry_id) is None:
                self._waiting.append(op)
            else:
                self._join(op)

    def finish(self, context: CausalContext, *, withheld: CausalContext | None = None) -> ApplyReport:
        """Join the ops still waiting for a body, then merge `context` (and `withheld`); the report."""
        waiting, self._waiting = self._waiting, []
        for op in sorted(waiting, key=lambda o: (o.writer, o.seq)):
            self._join(op)
        ctx = self._backend.context
        for writer in context.replicas():
            if writer in self._refused_writers:
                continue
            if self._sender is None:
                ctx.merge_replica(context, writer, limit=ctx.top(writer))
            elif writer == self._sender:
                ctx.merge_replica(context, writer)
        if withheld is not None:
            before = ctx.size()
            ctx.merge(withheld)
            self.report.withheld += ctx.size() - before
        return self.report

    def _join(self, op: Op) -> None:
        report = self.report
        try:
            outcome = apply_op(self._backend, op)
        except RemoteProtocolError as exc:
            self.refuse(op.writer, exc.reason)
            return
        if outcome is Outcome.APPLIED:
            report.applied += 1
            report.applied_ops.append(op)
        elif outcome is Outcome.SUPERSEDED:
            report.superseded += 1
        else:
            report.duplicate += 1


def apply_delta(backend: Backend, delta: Delta, *, rejected: Counter[str] | None = None,
                sender: str | None = None, withheld: CausalContext | None = None) -> ApplyReport:
    """Join a delta: bodies first, then the other ops, then the covered context.

    A writer's context row is merged only if none of its ops in this delta was refused.
    With `sender` (the peer the delta came from, authenticated by the transport) only the
    sender's own row is merged: a writer is the authority on its own seqs (it may cover its
    superseded, private or withheld ones), while a relay could lie that a writer's seqs were
    seen and make us skip them for good; relayed ops still add their own dots. Without
    `sender` (trusted local callers, tests) rows are merged up to the highest seq we have
    seen signed by that writer.
    `rejected` carries refusals that happened before (e.g. bad signatures while decoding).
    `withheld`: dots their own writers declared withheld in gossip (`crdt.withheld`: checked
    by the caller against each message's sender and ops), marked seen whatever else happens.
    """
    join = DeltaJoin(backend, sender=sender)
    for reason, n in (rejected or Counter()).items():
        join.refuse(None, reason, n)
    join.add(bodies_first(delta.ops))
    return join.finish(delta.context, withheld=withheld)


def bodies_first(ops: Iterable[Op]) -> list[Op]:
    """Ops in join order: every body, then the rest, each by writer and seq."""
    return sorted(ops, key=lambda o: (o.slot is not SlotKind.BODY, o.writer, o.seq))


def extract_deltas(
    backend: Backend,
    peer: CausalContext,
    *,
    gate: Gate = may_cross,
    max_ops: int = MAX_BATCH_OPS,
    max_bytes: int = MAX_BATCH_BYTES,
    first_max_ops: int | None = None,
) -> Iterator[Delta]:
    """Every op the peer lacks that passes `gate`, in bounded deltas.

    Yields nothing when the peer is up to date. Ops failing the gate are not sent, but
    their dots are covered by the context (they will never cross, so the peer may treat
    them as seen). Each delta holds at most `max_ops` ops and encodes (`codec`) to at most
    `max_bytes` bytes: the size is counted with the codec's framing, not estimated.
    `first_max_ops`: a smaller cap for the first delta only, so a streaming receiver can
    start joining while the rest is still read (catch-up's first delta).
    """
    local = backend.context
    bodies: dict[str, EntryBody | None] = {}

    def passes(op: Op) -> bool:
        if isinstance(op.value, EntryBody):
            body: EntryBody | None = op.value
            bodies[op.entry_id] = body  # the later phase's ops of this entry need it again
        else:
            if op.entry_id not in bodies:
                bodies[op.entry_id] = backend.body(op.entry_id)
            body = bodies[op.entry_id]
        return body is not None and gate(body)

    writers = [w for w in local.replicas() if not _covers(peer, local, w)]
    if not writers:
        return
    batch: list[Op] = []
    covered: list[str] = []
    grouped: set[str] = set()
    size = DELTA_FRAMING
    cap = min(max_ops, first_max_ops) if first_max_ops else max_ops

    def fits(extra: int) -> bool:
        return (not batch and not covered) or (len(batch) < cap and size + extra <= max_bytes)

    def flush() -> Delta:
        nonlocal batch, covered, grouped, size, cap
        delta = Delta(tuple(batch), local.restricted(covered))
        batch, covered, grouped, size, cap = [], [], set(), DELTA_FRAMING, max_ops
        return delta

    for phase_bodies in (True, False):
        for writer in writers:
            for op in backend.ops_after(writer, peer.vv(writer), bodies=phase_bodies):
                if op.dot in peer or not passes(op):
                    continue
                cost = op.wire_size + (0 if writer in grouped else group_framing(writer))
                if not fits(cost):
                    yield flush()
                    cost = op.wire_size + group_framing(writer)
                batch.append(op)
                grouped.add(writer)
                size += cost
            if not phase_bodies:
                cost = context_row_size(local, writer)
                if not fits(cost):
                    yield flush()
                covered.append(writer)
                size += cost
    if batch or covered:
        yield flush()


def sendable(backend: Backend, peer: CausalContext, *, gate: Gate = may_cross) -> int:
    """How many ops `extract_deltas(backend, peer, gate=gate)` would send (the ops the peer
    lacks that pass `gate`), counted without building deltas or opening an op: each op's dot
    and entry, and each entry's body once, for the gate."""
    local = backend.context
    passes: dict[str, bool] = {}
    count = 0
    for writer in local.replicas():
        if _covers(peer, local, writer):
            continue
        cloud = peer.cloud(writer)
        for seq, entry_id in backend.dots_after(writer, peer.vv(writer)):
            if seq in cloud:
                continue
            if entry_id not in passes:
                body = backend.body(entry_id)
                passes[entry_id] = body is not None and gate(body)
            count += passes[entry_id]
    return count


# Encoded sizes of the codec's framing (crdt.codec), counted generously:
DELTA_FRAMING = 16  # [version, groups, context] and the headers of its two lists


def group_framing(writer: str) -> int:
    """Bytes a writer's op group adds besides its ops: [writer, [ops…]] headers."""
    return len(writer.encode()) + 8


def context_row_size(ctx: CausalContext, writer: str) -> int:
    """Bytes of one context row [writer, vv, [seq…]] (every int counted as 9 bytes)."""
    return len(writer.encode()) + 16 + 9 * len(ctx.cloud(writer))


def _covers(peer: CausalContext, local: CausalContext, writer: str) -> bool:
    """True if the peer has seen every dot of `writer` that we have."""
    seen = peer.vv(writer)
    if seen >= local.top(writer):
        return True
    # Only our seqs above the peer's contiguous prefix need checking, against its cloud.
    cloud = peer.cloud(writer)
    contiguous = local.vv(writer)
    if contiguous - seen > len(cloud):
        return False
    return all(s in cloud for s in range(seen + 1, contiguous + 1)) and all(
        s <= seen or s in cloud for s in local.cloud(writer)
    )


class MemoryBackend:
    """In-memory state: the reference implementation of `Backend`."""

    def __init__(self) -> None:
        self._context = CausalContext()
        self._slots: dict[tuple[str, int, str], Op] = {}
        self._by_writer: dict[str, dict[int, Op]] = {}
        self._bodies: dict[str, EntryBody] = {}

    @property
    def context(self) -> CausalContext:
        return self._context

    def slot(self, key: tuple[str, int, str]) -> Op | None:
        return self._slots.get(key)

    def op_at(self, dot: Dot) -> Op | None:
        return self._by_writer.get(dot.replica, {}).get(dot.seq)

    def body(self, entry_id: str) -> EntryBody | None:
        return self._bodies.get(entry_id)

    def put(self, op: Op, replaces: Op | None) -> None:
        if replaces is not None:
            self._by_writer[replaces.writer].pop(replaces.seq, None)
        self._slots[op.key] = op
        self._by_writer.setdefault(op.writer, {})[op.seq] = op
        if isinstance(op.value, EntryBody):
            self._bodies[op.entry_id] = op.value

    def ops_after(self, writer: str, seq: int, *, bodies: bool) -> Iterable[Op]:
        ops = self._by_writer.get(writer, {})
        return [ops[s] for s in sorted(ops) if s > seq and (ops[s].slot is SlotKind.BODY) == bodies]

    def dots_after(self, writer: str, seq: int) -> Iterable[tuple[int, str]]:
        ops = self._by_writer.get(writer, {})
        return [(s, ops[s].entry_id) for s in sorted(ops) if s > seq]

    def ops(self) -> list[Op]:
        """Every slot-holding op, sorted by slot."""
        return [self._slots[k] for k in sorted(self._slots)]

    def copy(self) -> MemoryBackend:
        out = MemoryBackend()
        out._context = self._context.copy()
        out._slots = dict(self._slots)
        out._by_writer = {w: dict(ops) for w, ops in self._by_writer.items()}
        out._bodies = dict(self._bodies)
        return out


def join(a: MemoryBackend, b: MemoryBackend) -> MemoryBackend:
    """The lattice join of two states (pure: neither argument changes)."""
    out = a.copy()
    for op in b.ops():
        current = out.slot(op.key)
        if wins(op, current):
            out.put(op, current)
    out.context.merge(b.context)
    return out


def digest(ops: Sequence[Op], context: CausalContext | None) -> str:
    """A canonical hash of a state: slot-holding ops (exact signed bytes) and the context
    (None: the ops alone, e.g. to compare what siblings hold apart from what they have seen)."""
    return signed_digest(((op.writer, op.signed, op.signature) for op in sorted(ops, key=lambda o: o.key)), context)


def signed_digest(signed: Iterable[tuple[str, bytes, bytes]], context: CausalContext | None) -> str:
    """`digest` of ops given as their (writer, signed bytes, signature), already in the order of
    their `Op.key` (entry id, slot, writer): the same hash without decoding a single op."""
    h = hashlib.blake2b(digest_size=16, person=b"clade.state.v1")
    pack = msgpack.Packer(use_bin_type=True)
    for writer, signed_bytes, signature in signed:
        h.update(pack.pack([writer, signed_bytes, signature]))
    if context is not None:
        h.update(msgpack.packb(context.to_rows(), use_bin_type=True))
    return h.hexdigest()


def context_digest(context: CausalContext) -> str:
    """A canonical hash of a causal context alone (equal once two replicas have seen the same dots)."""
    h = hashlib.blake2b(digest_size=16, person=b"clade.context.v1")
    h.update(msgpack.packb(context.to_rows(), use_bin_type=True))
    return h.hexdigest()
