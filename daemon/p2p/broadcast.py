"""Gossip in and out: publish own ops that cross at once (batched, sealed), validate every
incoming message before GossipSub delivers or forwards it, and join accepted ones in
batches. Probes are raw GossipSub messages (no envelope, no store) between members, so a
benchmark can measure the transport's own delivery time next to the full path.

`Broadcast` owns the gossip codec (and its replay guard), the messages validated and
waiting for delivery, the queue into the applier, and how far our own ops were published.
A failed publish or join loses nothing (anti-entropy delivers it) and is counted
(`gossip_publish_failed`, `gossip_apply_failed`); anything else is a bug (`internal_errors`).
Gossip refused for the time it carries (a clock that stepped, ours or the publisher's:
`REFUSED_FOR_ITS_TIME`) has the node pull from its publisher at once (`CatchUp.pull_soon`).

Own gossip also declares the seqs it will never send (`crdt.withheld`: private, held or
already superseded ops), so siblings' contexts close over them without pulling from us: in
the message with the ops of that range, or alone at most every `WITHHELD_ALONE_S` when the
range published no op. Declarations received are merged for their sender's own row only
(`gossip_withheld_dots` counts the dots they closed; `gossip_withheld_refused` those that
covered an op of their own message).
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import trio
from libp2p.peer.id import ID

from crdt import CausalContext, Delta, EntryBody, Op, RemoteProtocolError
from crdt.replica import MAX_BATCH_BYTES, MAX_BATCH_OPS
from crdt.withheld import WITHHELD_PER_MESSAGE, declared_withheld, withheld_context, withheld_seqs
from daemon.embedding.shipped import VectorShipping, encode_section
from daemon.errors import StoreError
from daemon.grimoire import Grimoire
from daemon.grimoire.ingest import join_gossip
from daemon.grimoire.vectors import own_vectors

from .gossip import GossipCodec, Opened
from .links import TRANSPORT_ERRORS
from .part import NodePart
from .peer_names import base58_of
from .peers import PeerBook
from .ports import DaemonPort, Links, announce_received, internal_error

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["APPLY_BATCH", "Broadcast", "PendingBytes"]

log = logging.getLogger("clade.p2p")

APPLY_BATCH = 64  # gossip messages joined in one transaction at most
SHORT_JOIN_OPS = 8  # a join of this many ops or fewer runs on the trio thread (`on_writer_short`)
INLINE_OPEN_BYTES = 8 * 1024  # a message this small, alone, is opened on the trio thread (`_validate`)
WITHHELD_ALONE_S = 1.0  # a declaration with no op waits this long after our last publish (batches private writes)
RECENT_MESSAGES = 4096  # message ids kept in `_accepted` and in `_delivered`
# Opened gossip held in memory (validated and waiting for delivery, or queued for the applier)
# is bounded in bytes, per sender and in all: a message is up to 1 MiB, so a count alone let
# one member pin ~4 GiB. Past a bound a message is still valid (GossipSub forwards it) but not
# kept here: anti-entropy brings it (`gossip_dropped_over_budget`).
PENDING_PER_SENDER_BYTES = 16 * 1024 * 1024
PENDING_TOTAL_BYTES = 64 * 1024 * 1024
V = TypeVar("V")
# Gossip refused for the time it carries, against our clock: sent too long ago or ahead
# (`stale`), a certificate or key epoch not valid now. Either clock may be the one that
# stepped; the publisher's ops are good, and a pull (which compares no wall clocks) brings them.
REFUSED_FOR_ITS_TIME = frozenset({"stale", "not_a_member", "epoch_expired"})
STORE_ERRORS = (sqlite3.Error, StoreError, OSError)  # the store could not do it (disk, lock): retried later
PUBLISH_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, *STORE_ERRORS)


class PendingBytes:
    """Bytes of opened gossip held per sender and in all, within two bounds (pure bookkeeping)."""

    def __init__(self, *, per_sender: int = PENDING_PER_SENDER_BYTES, total: int = PENDING_TOTAL_BYTES) -> None:
        self.per_sender = per_sender
        self.total_cap = total
        self.total = 0
        self.by_sender: dict[str, int] = {}

    def take(self, sender: str, size: int) -> bool:
        """Hold `size` more bytes of `sender`'s, if both bounds allow; whether it was taken."""
        held = self.by_sender.get(sender, 0)
        if held + size > self.per_sender or self.total + size > self.total_cap:
            return False
        self.by_sender[sender] = held + size
        self.total += size
        return True

    def release(self, sender: str, size: int) -> None:
        left = self.by_sender.get(sender, 0) - size
        if left > 0:
            self.by_sender[sender] = left
        else:
            self.by_sender.pop(sender, None)
        self.total = max(0, self.total - size)


class Broadcast(NodePart):
    """Gossip on the clade topic and the probe topic (see the module docstring)."""

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook, *, me: str, codec: GossipCodec,
                 topic: str, probe_topic: str, max_skew_ms: int, vector_topic: str | None = None) -> None:
        super().__init__(daemon, links, book)
        self.me = me
        self.codec = codec
        self.topic, self.probe_topic = topic, probe_topic
        self.vector_topic = vector_topic  # gossip that also carries the sender's vectors (node.topic_of)
        self.max_skew_ms = max_skew_ms
        # Told the publisher of gossip refused for its time (REFUSED_FOR_ITS_TIME): the node
        # wires it to `CatchUp.pull_soon`.
        self.on_refused_for_its_time: Callable[[str], None] = lambda publisher: None
        self._accepted: OrderedDict[bytes, Opened] = OrderedDict()  # validated, not delivered yet
        # Message ids delivered lately: py-libp2p checks "seen" before it verifies the
        # libp2p signature, so a copy that passed that check while the first was being validated
        # reaches the validator after the first was delivered (measured: 1.5–5.5 ms after it).
        self._delivered: OrderedDict[bytes, None] = OrderedDict()
        self._validating: set[bytes] = set()  # (publisher, seqno) of messages being checked now
        self._published_seq = 0  # our own ops up to this seq were considered for gossip
        self._last_publish = -float("inf")  # trio.current_time() of our last gossip message
        self._wake_publisher = trio.Event()
        self._apply_send, self._apply_receive = trio.open_memory_channel[tuple[str, Opened]](1024)
        self.pending = PendingBytes()  # bytes of `_accepted` and of the applier's queue, per sender

    async def run(self, subscription: Any, probes: Any, with_vectors: Any = None, *,
                  task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Drain the subscriptions, join accepted gossip, publish own ops; until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._drain, subscription)
            if with_vectors is not None:
                nursery.start_soon(self._drain, with_vectors)
            nursery.start_soon(self._drain_probes, probes)
            nursery.start_soon(self._applier)
            nursery.start_soon(self._publisher)
            task_status.started()

    async def prime(self) -> None:
        """Start gossip after the ops already in the store (anti-entropy carries those)."""
        self._published_seq = await self.daemon.on_writer(lambda s: s.local_top(self.me))

    def local_write(self) -> None:
        """Own ops were written: the publisher gossips those that cross at once."""
        self._wake_publisher.set()

    async def publish_probe(self, probe_id: str) -> int:
        """Publish a probe; returns the send time (wall ms)."""
        sent_ms = self.daemon.now_ms()
        await self.links.publish(self.probe_topic, json.dumps({"id": probe_id[:64], "sent_ms": sent_ms}).encode())
        return sent_ms

    async def validate(self, forwarder: ID, msg: Any) -> bool:
        """GossipSub validator: only fully checked messages are delivered and forwarded."""
        return await self._validate(forwarder, msg, with_vectors=False)

    async def validate_with_vectors(self, forwarder: ID, msg: Any) -> bool:
        """`validate` for the vectors topic (the batch also carries the sender's vectors)."""
        return await self._validate(forwarder, msg, with_vectors=True)

    def validate_inline(self, forwarder: ID, msg: Any) -> bool | None:
        """`validate` without waiting (`GatedPubsub.set_inline_validator`): its verdict when it
        is reached on this thread, the same one with the same counts; None, with nothing noted
        or counted, when the envelope is to be opened on a worker thread (`validate` then does
        the whole check)."""
        return self._validate_now(forwarder, msg, with_vectors=False)

    def validate_inline_with_vectors(self, forwarder: ID, msg: Any) -> bool | None:
        """`validate_inline` for the vectors topic."""
        return self._validate_now(forwarder, msg, with_vectors=True)

    async def _validate(self, forwarder: ID, msg: Any, *, with_vectors: bool) -> bool:
        verdict = self._validate_now(forwarder, msg, with_vectors=with_vectors)
        if verdict is not None:
            return verdict
        # Several at once or a large batch: opened on worker threads, where libsodium runs
        # without the GIL. Shielded: the envelope's id enters the replay guard when it is
        # opened, so an open that Pubsub's timeout cancelled halfway would turn the next copy
        # into a false "replayed". It finishes, and its result waits in `_accepted` for that copy.
        publisher, key = _publisher_of(msg), _key_of(msg)
        forwarded_by = self._arrived(forwarder, msg)
        self._validating.add(key)
        data = bytes(msg.data)
        try:
            with trio.CancelScope(shield=True):
                opened = await trio.to_thread.run_sync(lambda: self._open(data, publisher, with_vectors))
        except RemoteProtocolError as exc:
            return self._refused(exc, publisher, forwarded_by)
        finally:
            self._validating.discard(key)
        return self._keep(key, opened)

    def _validate_now(self, forwarder: ID, msg: Any, *, with_vectors: bool) -> bool | None:
        """The verdict on `msg` if it is reached here: our own message, a duplicate, or a small
        message with no other being checked (a golem's usual gossip), opened on this thread as a
        thread hand-off costs more than the open (~0.3 ms of libsodium). None, before anything is
        noted, for a message to open on a worker thread (`_validate`)."""
        publisher = _publisher_of(msg)
        if publisher == self.me:
            return True
        key = _key_of(msg)
        if (self._validating or len(msg.data) > INLINE_OPEN_BYTES) and not self._seen(key):
            return None
        forwarded_by = self._arrived(forwarder, msg)
        # py-libp2p marks a message seen only after validation: the same message arriving from
        # a second mesh peer meanwhile is a GossipSub duplicate, not a replay by anyone.
        if key in self._accepted:
            # Opened before and not delivered yet: a copy racing the first one's delivery, or
            # a retransmission after Pubsub gave up waiting for our first answer (its
            # validation timeout). Valid either way; `_drain` delivers it once.
            self.counters["gossip_duplicates"] += 1
            return True
        if key in self._validating or key in self._delivered:
            # The same libp2p message (its publisher's signature covers the id): a copy racing
            # the first one's validation, or one that slipped past py-libp2p's seen check.
            self.counters["gossip_duplicates"] += 1
            return False
        self._validating.add(key)
        try:
            opened = self._open(bytes(msg.data), publisher, with_vectors)
        except RemoteProtocolError as exc:
            return self._refused(exc, publisher, forwarded_by)
        finally:
            self._validating.discard(key)
        return self._keep(key, opened)

    def _seen(self, key: bytes) -> bool:
        """A copy of a message opened, being opened or delivered (a duplicate)."""
        return key in self._accepted or key in self._validating or key in self._delivered

    def _arrived(self, forwarder: ID, msg: Any) -> str:
        """Note a message's traffic (the operator's rates, tui/: gossip apart from sync); returns
        its forwarder's name."""
        forwarded_by = forwarder.to_base58()
        self.book.note_traffic(forwarded_by, received=len(msg.data), now_ms=self.daemon.now_ms())
        self.counters["gossip_msgs_in"] += 1
        self.counters["gossip_bytes_in"] += len(msg.data)
        return forwarded_by

    def _open(self, data: bytes, publisher: str, with_vectors: bool) -> Opened:
        return self.codec.open(data, publisher=publisher, now_ms=self.daemon.now_ms(), with_vectors=with_vectors)

    def _refused(self, exc: RemoteProtocolError, publisher: str, forwarded_by: str) -> bool:
        self.counters[f"gossip_rejected_{exc.reason}"] += 1
        log.info("gossip from %s (via %s) rejected: %s", publisher, forwarded_by, exc)
        if exc.reason in REFUSED_FOR_ITS_TIME:
            self.on_refused_for_its_time(publisher)
        return False

    def _keep(self, key: bytes, opened: Opened) -> bool:
        """Hold an opened message for delivery, within the pending bounds; valid either way."""
        if not self.pending.take(opened.sender, opened.size):
            self.counters["gossip_dropped_over_budget"] += 1  # valid: forwarded, not kept; anti-entropy brings it
            return True
        for evicted in _remember(self._accepted, key, opened):
            self.pending.release(evicted.sender, evicted.size)
        return True

    def validate_probe(self, forwarder: ID, msg: Any) -> bool:
        publisher = base58_of(bytes(msg.from_id)) if msg.from_id else ""
        record = self.book.find(publisher)
        return publisher == self.me or (len(msg.data) <= 256 and record is not None and record.member)

    async def _drain_probes(self, subscription: Any) -> None:
        while True:
            msg = await subscription.get()
            if base58_of(bytes(msg.from_id)) == self.me:
                continue
            try:
                probe = json.loads(bytes(msg.data))
                self.daemon.publish("probe_received", {"id": str(probe["id"]), "sent_ms": int(probe["sent_ms"]),
                                                      "received_ms": self.daemon.now_ms()})
            except (ValueError, KeyError, TypeError):
                self.counters["probes_malformed"] += 1

    async def _drain(self, subscription: Any) -> None:
        """Empty the subscription promptly (it holds 32 messages) into the applier's queue."""
        while True:
            msg = await subscription.get()
            key = bytes(msg.from_id) + bytes(msg.seqno)
            opened = self._accepted.pop(key, None)
            _remember(self._delivered, key, None)
            if opened is None:
                continue  # our own message, or one the validator did not keep
            try:
                self._apply_send.send_nowait((opened.sender, opened))
            except trio.WouldBlock:
                self.pending.release(opened.sender, opened.size)
                self.counters["gossip_dropped_backlog"] += 1  # anti-entropy will bring it

    async def _applier(self) -> None:
        """Join accepted gossip, several messages per transaction."""
        while True:
            batch = [await self._apply_receive.receive()]
            while len(batch) < APPLY_BATCH:
                try:
                    batch.append(self._apply_receive.receive_nowait())
                except trio.WouldBlock:
                    break
            ops: tuple[Op, ...] = tuple(op for _, opened in batch for op in opened.delta.ops)
            delta = Delta(ops, CausalContext())
            withheld = CausalContext()  # each sender's own declaration, checked against its own message
            for sender, opened in batch:
                declared = declared_withheld(opened.delta.context, sender, opened.delta.ops)
                if declared is None:
                    self.counters["gossip_withheld_refused"] += 1
                    log.info("gossip from %s declares withheld a seq it publishes in the same message: "
                             "declaration ignored", sender)
                else:
                    withheld.merge(declared)
            shipping = self.daemon.vector_shipping()
            shipped = [(sender, opened.shipped) for sender, opened in batch
                       if opened.shipped is not None and opened.shipped.vectors]
            for _, opened in batch:  # out of the queue: the ops above are all that is held now
                self.pending.release(opened.sender, opened.size)
            # A golem's usual gossip (a warning is two ops) is joined on this thread: handing it
            # to the writer thread and back took longer than the join (StoreAccess.on_writer_short).
            on_writer = self.daemon.on_writer_short if len(ops) <= SHORT_JOIN_OPS else self.daemon.on_writer
            try:
                report, used = await on_writer(functools.partial(
                    join_gossip, delta=delta, withheld=withheld, local_replica=self.me, max_skew_ms=self.max_skew_ms,
                    shipping=shipping, shipped=shipped))
            except STORE_ERRORS as exc:  # a failed apply loses nothing: anti-entropy resends
                self.counters["gossip_apply_failed"] += 1
                log.error("joining gossip failed (anti-entropy will retry): %r", exc)
                continue
            except Exception:  # noqa: BLE001 - a bug: logged with its traceback; the applier goes on
                internal_error(self.counters, "joining %d gossip message(s)", len(batch))
                continue
            self.counters["gossip_accepted"] += len(batch)
            self.counters["gossip_vectors_used"] += used
            self.counters["gossip_vectors_unused"] += sum(len(x.vectors) for _, x in shipped) - used
            self.counters["gossip_ops_applied"] += report.applied
            self.counters["gossip_withheld_dots"] += report.withheld
            for reason, n in report.rejected.items():
                self.counters[f"gossip_rejected_{reason}"] += n
            if report.applied:
                senders = sorted({sender for sender, _ in batch})
                announce_received(self.daemon, ",".join(senders), report, via="gossip")

    async def _publisher(self) -> None:
        """Gossip own ops as soon as they are written (those the gate lets cross)."""
        while True:
            with trio.move_on_after(1.0):
                await self._wake_publisher.wait()
            self._wake_publisher = trio.Event()
            try:
                await self._publish_new()
            except PUBLISH_ERRORS as exc:  # anti-entropy delivers what gossip could not
                self.counters["gossip_publish_failed"] += 1
                log.warning("publishing own ops failed (anti-entropy will deliver them): %r", exc)
            except Exception:  # noqa: BLE001 - a bug: logged with its traceback; the publisher goes on
                internal_error(self.counters, "publishing own ops")

    def _shipping_now(self) -> VectorShipping | None:
        """The space to ship vectors in now: shipping is on and every connected sibling is on
        the vectors topic (an older sibling reads only the plain topic); else None."""
        shipping = self.daemon.vector_shipping()
        if shipping is None or self.vector_topic is None:
            return None
        members = {r.peer_id for r in self.book.members()}
        return shipping if members and members <= self.links.subscribed(self.vector_topic) else None

    async def _publish_new(self) -> None:
        """Gossip our ops of seqs `(published, top]` that pass the sync gate, with the seqs of
        that range they leave out declared withheld (`crdt.withheld`). A range that publishes no
        op but withholds some waits until `WITHHELD_ALONE_S` after our last message (the
        publisher's tick comes back to it), so a run of private writes costs one message."""
        since = self._published_seq
        shipping = self._shipping_now()

        def outgoing(store: Grimoire) -> tuple[int, list[Op], dict[str, NDArray[np.float32]]]:  # in the writer thread
            top = store.local_top(self.me)
            if top <= since:
                return top, [], {}
            ops = store.ops_of(self.me, since)
            gate = store.sync_gate(self.me, {op.entry_id for op in ops})
            bodies: dict[str, EntryBody | None] = {
                op.entry_id: op.value for op in ops if isinstance(op.value, EntryBody)}
            kept = []
            for op in ops:
                body = bodies.get(op.entry_id) or store.body(op.entry_id)
                if body is not None and gate(body):
                    kept.append(op)
            mine = [i for i, b in bodies.items() if b is not None and b.author == self.me]
            vectors = {} if shipping is None or not mine else own_vectors(store, shipping.info, self.me, mine)
            return top, kept, vectors

        top, ops, vectors = await self.daemon.on_writer(outgoing)
        withheld = withheld_seqs(since, top, (op.seq for op in ops))
        if not ops and withheld and trio.current_time() - self._last_publish < WITHHELD_ALONE_S:
            return  # declared with the next op, or alone on a later tick
        self._published_seq = max(self._published_seq, top)
        op_chunks = _chunks(ops, vectors)
        seq_chunks = [withheld[i:i + WITHHELD_PER_MESSAGE] for i in range(0, len(withheld), WITHHELD_PER_MESSAGE)]
        for i in range(max(len(op_chunks), len(seq_chunks))):
            chunk = op_chunks[i] if i < len(op_chunks) else []
            seqs = seq_chunks[i] if i < len(seq_chunks) else []
            delta = Delta(tuple(chunk), withheld_context(self.me, seqs))
            carried = {op.entry_id: vectors[op.entry_id] for op in chunk
                       if isinstance(op.value, EntryBody) and op.entry_id in vectors}
            if shipping is not None and self.vector_topic is not None:
                data = self.codec.seal(delta, now_ms=self.daemon.now_ms(),
                                       vectors=encode_section(shipping.space, carried))
                await self.links.publish(self.vector_topic, data)
                self.counters["gossip_vectors_shipped"] += len(carried)
            else:
                data = self.codec.seal(delta, now_ms=self.daemon.now_ms())
                await self.links.publish(self.topic, data)
            self._last_publish = trio.current_time()
            self.counters["gossip_published"] += 1
            self.counters["gossip_ops_published"] += len(chunk)
            self.counters["gossip_withheld_published"] += len(seqs)
            for record in self.book.members():
                self.book.note_traffic(record.peer_id, sent=len(data), now_ms=self.daemon.now_ms())
                self.counters["gossip_msgs_out"] += 1
                self.counters["gossip_bytes_out"] += len(data)


def _publisher_of(msg: Any) -> str:
    """The base58 name of a GossipSub message's publisher ("" if it names none)."""
    return base58_of(bytes(msg.from_id)) if msg.from_id else ""


def _key_of(msg: Any) -> bytes:
    """A GossipSub message's id: its publisher and seqno (the publisher's signature covers both)."""
    return bytes(msg.from_id) + bytes(msg.seqno)


def _remember(recent: OrderedDict[bytes, V], key: bytes, value: V) -> list[V]:
    """Add to a map of recent messages, forgetting the oldest beyond `RECENT_MESSAGES`; returns
    the values forgotten."""
    recent[key] = value
    forgotten: list[V] = []
    while len(recent) > RECENT_MESSAGES:
        forgotten.append(recent.popitem(last=False)[1])
    return forgotten


def _chunks(ops: list[Op], vectors: Mapping[str, Any] | None = None) -> list[list[Op]]:
    """Split ops into batches well within the codec's caps (the envelope adds ~1 KiB); an
    entry's body op costs its shipped vector too (`vectors`: entry id -> vector)."""
    out: list[list[Op]] = []
    current: list[Op] = []
    size = 0
    budget = MAX_BATCH_BYTES - 64 * 1024
    for op in ops:
        cost = op.wire_size + 64
        if vectors and isinstance(op.value, EntryBody) and op.entry_id in vectors:
            cost += len(vectors[op.entry_id]) + 160  # int8 components, scale, id and framing
        if current and (len(current) >= MAX_BATCH_OPS or size + cost > budget):
            out.append(current)
            current, size = [], 0
        current.append(op)
        size += cost
    if current:
        out.append(current)
    return out
