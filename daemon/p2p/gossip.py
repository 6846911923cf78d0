"""Gossip payloads: a batch of signed ops, sealed for the clade (`crypto.envelope`).

`GossipCodec.open` is the whole check a GossipSub message goes through before it is
delivered or forwarded: envelope (size, ciphertext, clade, certificate, revocation,
sender signature, freshness, replay), then the delta codec (every op's writer signature),
then the clock (no op stamped more than `max_skew_ms` ahead). Any failure raises
`RemoteProtocolError` with the counter label; nothing of a rejected message is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crdt import Delta, RemoteProtocolError
from crdt.codec import decode_delta, encode_delta
from crypto import EnvelopeError, Identity, Membership, ReplayGuard, RevocationList, open_envelope, seal_envelope
from crypto.identity import signature_ok

__all__ = ["GossipCodec", "Opened"]


@dataclass(frozen=True, slots=True)
class Opened:
    sender: str
    delta: Delta
    size: int


class GossipCodec:
    def __init__(self, *, identity: Identity, membership: Membership, clade_key: bytes,
                 revocations: Callable[[], RevocationList | None], max_skew_ms: int) -> None:
        self.identity = identity
        self.membership = membership
        self.clade_key = clade_key
        self.revocations = revocations
        self.max_skew_ms = max_skew_ms
        self.replay = ReplayGuard()

    def seal(self, delta: Delta, *, now_ms: int) -> bytes:
        return seal_envelope(encode_delta(delta), sender=self.identity, membership=self.membership,
                             clade_key=self.clade_key, now_ms=now_ms)

    def open(self, data: bytes, *, publisher: str, now_ms: int) -> Opened:
        """Check a message published by `publisher` (GossipSub's signed origin)."""
        try:
            envelope = open_envelope(data, clade_key=self.clade_key, owner_public_key=self.membership.owner_public_key,
                                     clade_id=self.membership.clade_id, now_ms=now_ms,
                                     revocations=self.revocations(), replay=self.replay)
        except EnvelopeError as exc:
            raise RemoteProtocolError(exc.reason.value, exc.detail) from None
        if envelope.sender != publisher:
            raise RemoteProtocolError("sender_mismatch",
                                      f"envelope sealed by {envelope.sender}, published by {publisher}")
        delta, dropped = decode_delta(envelope.batch, signature_ok)  # raises RemoteProtocolError
        if dropped:
            reason, _ = dropped.most_common(1)[0]
            raise RemoteProtocolError(reason, f"{sum(dropped.values())} op(s) failed their checks")
        future = [op for op in delta.ops if op.hlc.ms - now_ms > self.max_skew_ms]
        if future:
            raise RemoteProtocolError("clock_skew", f"{len(future)} op(s) stamped up to "
                                      f"{max(op.hlc.ms for op in future) - now_ms} ms ahead")
        return Opened(envelope.sender, delta, len(data))
