"""Sealed gossip envelopes: sign-then-encrypt a batch of (already writer-signed) ops.

    envelope  = 0x01 ‖ SecretBox(clade key, [inner, sender signature])
    inner     = ["clade.env", 1, clade id, sender certificate, sent ms, batch]

The sender signs `inner` with its identity, then the clade key (XSalsa20-Poly1305 with a
random nonce, libsodium `crypto_secretbox`) hides everything, so a non-member relaying
GossipSub traffic learns nothing and cannot forge. The full certificate rides inside
(DESIGN.md names only its hash): a GossipSub message may arrive relayed from a member we
have never spoken to, and a self-contained envelope can still be checked. Opening checks,
in order: size, version, ciphertext, structure, clade, the certificate (owner signature,
validity, revocation), the sender's signature, then freshness and replay.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

import nacl.exceptions
import nacl.secret

from .errors import CryptoError
from .identity import Identity, signature_ok
from .membership import Certificate, Membership, MembershipError, Reason, RevocationList
from .wire import Malformed, pack, unpack

__all__ = ["Envelope", "EnvelopeError", "EnvelopeReason", "ReplayGuard", "open_envelope", "seal_envelope"]

ENVELOPE_VERSION = 1
MAX_BATCH_BYTES = 1024 * 1024
MAX_ENVELOPE_BYTES = MAX_BATCH_BYTES + 4096
_TAG = "clade.env"
_DOMAIN = b"clade.envelope.v1\x00"


class EnvelopeReason(StrEnum):
    OVERSIZED = "oversized"
    UNKNOWN_VERSION = "unknown_version"
    BAD_CIPHERTEXT = "bad_ciphertext"
    MALFORMED = "malformed"
    OTHER_CLADE = "other_clade"
    NOT_A_MEMBER = "not_a_member"
    REVOKED = "revoked"
    BAD_SIGNATURE = "bad_signature"
    STALE = "stale"
    REPLAYED = "replayed"


class EnvelopeError(CryptoError):
    """An envelope was refused; `reason` (an `EnvelopeReason`) is the label to count."""

    def __init__(self, reason: EnvelopeReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Envelope:
    """An opened envelope: who sent which batch, when."""

    sender: str
    certificate: Certificate
    sent_ms: int
    batch: bytes
    id: bytes  # hash of the signed inner part: the same envelope always has the same id


def seal_envelope(batch: bytes, *, sender: Identity, membership: Membership, clade_key: bytes, now_ms: int) -> bytes:
    """Sign `batch` as `sender` and encrypt it for the clade."""
    if len(batch) > MAX_BATCH_BYTES:
        raise CryptoError(f"batch of {len(batch)} bytes exceeds {MAX_BATCH_BYTES}")
    if membership.certificate.peer_id != sender.peer_id:
        raise CryptoError("the certificate is not the sender's")
    inner = pack([_TAG, ENVELOPE_VERSION, bytes.fromhex(membership.clade_id),
                  membership.certificate.to_bytes(), now_ms, batch])
    plaintext = pack([inner, sender.sign(_DOMAIN + inner)])
    return bytes([ENVELOPE_VERSION]) + bytes(nacl.secret.SecretBox(clade_key).encrypt(plaintext))


@dataclass
class ReplayGuard:
    """Refuses an envelope seen before, and any older than the window it remembers.

    Pure: the caller passes the time. Memory is bounded by the traffic of one window.
    """

    window_ms: int = 10 * 60 * 1000
    max_future_ms: int = 60 * 1000
    _seen: dict[bytes, int] = field(default_factory=dict)

    def check(self, envelope_id: bytes, sent_ms: int, now_ms: int) -> None:
        """Raise `EnvelopeError` (stale or replayed); otherwise remember the envelope."""
        if sent_ms < now_ms - self.window_ms:
            raise EnvelopeError(EnvelopeReason.STALE, f"sent {now_ms - sent_ms} ms ago (window {self.window_ms} ms)")
        if sent_ms > now_ms + self.max_future_ms:
            raise EnvelopeError(EnvelopeReason.STALE, f"sent {sent_ms - now_ms} ms in the future")
        if envelope_id in self._seen:
            raise EnvelopeError(EnvelopeReason.REPLAYED, "this envelope was already received")
        if len(self._seen) > 1024:
            self._seen = {k: t for k, t in self._seen.items() if t >= now_ms - self.window_ms}
        self._seen[envelope_id] = sent_ms


def open_envelope(
    data: bytes,
    *,
    clade_key: bytes,
    owner_public_key: bytes,
    clade_id: str,
    now_ms: int,
    revocations: RevocationList | None = None,
    replay: ReplayGuard | None = None,
) -> Envelope:
    """Decrypt and check an envelope; raises `EnvelopeError` with the reason to count."""
    if not isinstance(data, bytes) or len(data) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(EnvelopeReason.OVERSIZED, f"envelope over {MAX_ENVELOPE_BYTES} bytes")
    if not data or data[0] != ENVELOPE_VERSION:
        raise EnvelopeError(EnvelopeReason.UNKNOWN_VERSION, f"envelope version {data[:1].hex() or 'missing'}")
    try:
        plaintext = nacl.secret.SecretBox(clade_key).decrypt(data[1:])
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise EnvelopeError(EnvelopeReason.BAD_CIPHERTEXT,
                            "does not decrypt with the clade key (tampered, or another clade's)") from None
    try:
        inner, signature = unpack(plaintext, max_len=MAX_ENVELOPE_BYTES, fields=2)
        if not isinstance(inner, bytes) or not isinstance(signature, bytes):
            raise Malformed("expected [inner, signature]")
        fields = unpack(inner, max_len=MAX_ENVELOPE_BYTES, tag=_TAG)
        if fields[1] != ENVELOPE_VERSION or len(fields) != 6:
            raise Malformed("unknown inner layout")
        _, _, env_clade, cert_bytes, sent_ms, batch = fields
        if (not isinstance(env_clade, bytes) or not isinstance(cert_bytes, bytes) or type(sent_ms) is not int
                or not isinstance(batch, bytes)):
            raise Malformed("inner fields have the wrong types")
    except Malformed as exc:
        raise EnvelopeError(EnvelopeReason.MALFORMED, str(exc)) from None
    if env_clade.hex() != clade_id:
        raise EnvelopeError(EnvelopeReason.OTHER_CLADE, f"envelope for clade {env_clade.hex()}")
    try:
        certificate = Certificate.from_bytes(cert_bytes)
        certificate.verify(owner_public_key, clade_id, now=now_ms // 1000, revocations=revocations)
    except MembershipError as exc:
        reason = {Reason.REVOKED: EnvelopeReason.REVOKED, Reason.OTHER_CLADE: EnvelopeReason.OTHER_CLADE}.get(
            exc.reason, EnvelopeReason.NOT_A_MEMBER)
        raise EnvelopeError(reason, f"sender certificate: {exc}") from None
    if not signature_ok(certificate.peer_id, _DOMAIN + inner, signature):
        raise EnvelopeError(EnvelopeReason.BAD_SIGNATURE, f"not signed by {certificate.peer_id}")
    envelope_id = hashlib.blake2b(inner, digest_size=16).digest()
    if replay is not None:
        replay.check(envelope_id, sent_ms, now_ms)
    return Envelope(sender=certificate.peer_id, certificate=certificate, sent_ms=sent_ms, batch=batch, id=envelope_id)
