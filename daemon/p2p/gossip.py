"""Gossip payloads: a batch of signed ops, sealed for the clade (`crypto.envelope`).

`GossipCodec.open` is the whole check a GossipSub message goes through before it is
delivered or forwarded: envelope (size, ciphertext, clade, certificate, revocation,
sender signature, freshness, replay), then the delta codec (every op's writer signature),
then the clock (no op stamped more than `max_skew_ms` ahead). Any failure raises
`RemoteProtocolError` with the counter label; nothing of a rejected message is used.

The clade keys come from a function (the daemon's keyring, replaced when `clade join` of a
rotation bundle reloads it): own gossip is sealed with the newest epoch; a message is
opened with the key of the epoch it names, an older one only within the grace period
(`crypto.keyring`: `unknown_epoch`, `epoch_expired` otherwise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from crdt import Delta, EntryBody, RemoteProtocolError
from crdt.codec import decode_delta, encode_delta
from crdt.ops import unpack_strict
from crdt.replica import MAX_BATCH_BYTES
from crypto import (
    EnvelopeError,
    EpochKey,
    Identity,
    KeyRing,
    Membership,
    ReplayGuard,
    RevocationList,
    open_envelope,
    seal_envelope,
)
from crypto.cert_cache import VerifiedCertificates
from crypto.identity import signature_ok
from daemon.embedding.shipped import MAX_SHIPPED, Shipped, decode_section

__all__ = ["WITH_VECTORS", "GossipCodec", "Opened"]


# The batch of a message on the vectors topic (`topic_of(…, vectors=True)`): the delta's bytes
# and the sender's own vectors of the entries it carries (daemon/embedding/shipped.py):
#     [WITH_VECTORS, delta bytes, [space, [[entry id, scale, q], …]]]
# A message on the plain topic is the delta's bytes alone, as every release reads it.
WITH_VECTORS = 2


@dataclass(frozen=True, slots=True)
class Opened:
    sender: str
    delta: Delta
    size: int
    shipped: Shipped | None = None  # the sender's vectors of its own entries in `delta` (vectors topic)


class GossipCodec:
    """Seal own deltas and open siblings' messages.

    Keys: `keyring` (called for each message, so a reload takes effect at once) and
    `key_grace_ms`; or, for a clade that never rotates (tests, tools), one `clade_key` as
    epoch 0. `counters`, if given, counts `gossip_accepted_old_epoch` (opened in the grace
    period)."""

    def __init__(self, *, identity: Identity, membership: Membership,
                 revocations: Callable[[], RevocationList | None], max_skew_ms: int,
                 clade_key: bytes | None = None, keyring: Callable[[], KeyRing] | None = None,
                 key_grace_ms: Callable[[], int] | None = None, counters: Counter[str] | None = None) -> None:
        if keyring is None:
            if clade_key is None:
                raise TypeError("GossipCodec needs a clade_key or a keyring")
            fixed = KeyRing(membership.clade_id, [EpochKey(epoch=0, installed_ms=0, key=clade_key)])

            def keyring() -> KeyRing:
                return fixed

        self.identity = identity
        self.membership = membership
        self.keyring: Callable[[], KeyRing] = keyring
        self.key_grace_ms: Callable[[], int] = key_grace_ms or (lambda: 0)
        self.counters = counters
        self.revocations = revocations
        self.max_skew_ms = max_skew_ms
        self.replay = ReplayGuard()
        self.certificates = VerifiedCertificates()  # senders' certificates, owner signature checked once each

    def seal(self, delta: Delta, *, now_ms: int, vectors: list[Any] | None = None) -> bytes:
        """Seal `delta` for the clade; with `vectors` (a `shipped.encode_section`), in the
        vectors topic's form (publish it there)."""
        current = self.keyring().current
        batch = encode_delta(delta)
        if vectors is not None:
            batch = msgpack.packb([WITH_VECTORS, batch, vectors], use_bin_type=True)
        return seal_envelope(batch, sender=self.identity, membership=self.membership,
                             clade_key=current.key, epoch=current.epoch, now_ms=now_ms)

    def open(self, data: bytes, *, publisher: str, now_ms: int, with_vectors: bool = False) -> Opened:
        """Check a message published by `publisher` (GossipSub's signed origin); `with_vectors`:
        it came on the vectors topic. Shipped vectors are kept only for entries whose body is
        in the delta and whose author is the sender (its envelope signature covers them); a
        malformed section refuses the message (`malformed_vectors`)."""
        ring, grace_ms = self.keyring(), self.key_grace_ms()

        def key_of(epoch: int) -> bytes:
            return ring.key_for(epoch, now_ms=now_ms, grace_ms=grace_ms)

        try:
            envelope = open_envelope(data, clade_key=key_of, owner_public_key=self.membership.owner_public_key,
                                     clade_id=self.membership.clade_id, now_ms=now_ms,
                                     revocations=self.revocations(), replay=self.replay,
                                     certificates=self.certificates)
        except EnvelopeError as exc:
            raise RemoteProtocolError(exc.reason.value, exc.detail) from None
        if envelope.sender != publisher:
            raise RemoteProtocolError("sender_mismatch",
                                      f"envelope sealed by {envelope.sender}, published by {publisher}")
        batch, section = envelope.batch, None
        if with_vectors:
            wrapped = unpack_strict(batch, max_len=MAX_BATCH_BYTES, max_array=MAX_SHIPPED)
            if not isinstance(wrapped, list) or len(wrapped) != 3 or wrapped[0] != WITH_VECTORS \
                    or not isinstance(wrapped[1], bytes):
                raise RemoteProtocolError("malformed_vectors", "a vectors-topic batch is [2, delta, vectors]")
            batch, section = wrapped[1], wrapped[2]
        delta, dropped = decode_delta(batch, signature_ok)  # raises RemoteProtocolError
        if dropped:
            reason, _ = dropped.most_common(1)[0]
            raise RemoteProtocolError(reason, f"{sum(dropped.values())} op(s) failed their checks")
        future = [op for op in delta.ops if op.hlc.ms - now_ms > self.max_skew_ms]
        if future:
            raise RemoteProtocolError("clock_skew", f"{len(future)} op(s) stamped up to "
                                      f"{max(op.hlc.ms for op in future) - now_ms} ms ahead")
        if envelope.epoch < ring.current.epoch and self.counters is not None:
            self.counters["gossip_accepted_old_epoch"] += 1  # a sibling that has not rotated yet
        shipped = None
        if section is not None:
            shipped = decode_section(section)
            own = {op.entry_id for op in delta.ops
                   if isinstance(op.value, EntryBody) and op.value.author == envelope.sender}
            kept = {i: v for i, v in shipped.vectors.items() if i in own}
            if len(kept) < len(shipped.vectors) and self.counters is not None:
                self.counters["gossip_vectors_not_senders"] += len(shipped.vectors) - len(kept)
            shipped = Shipped(shipped.space, kept)
        return Opened(envelope.sender, delta, len(data), shipped)
