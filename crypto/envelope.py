"""Sealed gossip envelopes: sign-then-encrypt a batch of (already writer-signed) ops.

    envelope v1 = 0x01 ‖ SecretBox(clade key of epoch 0, [inner, sender signature])
    inner v1    = ["clade.env", 1, clade id, sender certificate, sent ms, batch]
    envelope v2 = 0x02 ‖ u32 key epoch (big-endian) ‖ SecretBox(clade key of that epoch, [inner, signature])
    inner v2    = ["clade.env", 2, clade id, key epoch, sender certificate, sent ms, batch]

The key epoch is in the clear so a receiver picks the key without trying each (the owner
rotates the clade key after a revocation: `crypto.keyring`); it is repeated inside the
signed part, so an envelope re-encrypted under another epoch's key is refused. Epoch 0 is
sealed as v1, byte for byte what daemons before rotation send and read, so a clade that
never rotated works across the upgrade; epoch 1 and later are v2 only (a v2 envelope
claiming epoch 0 is malformed).

The sender signs `inner` with its identity, then the clade key (XSalsa20-Poly1305 with a
random nonce, libsodium `crypto_secretbox`) hides everything, so a non-member relaying
GossipSub traffic learns nothing and cannot forge. The full certificate rides inside
(the first design carried only its hash): a GossipSub message may arrive relayed from a member we
have never spoken to, and a self-contained envelope can still be checked. Opening checks,
in order: size, version, ciphertext, structure, clade, the certificate (owner signature,
validity, revocation), the sender's signature, then freshness and replay.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import nacl.exceptions
import nacl.secret

from .cert_cache import VerifiedCertificates
from .errors import CryptoError, Refused
from .identity import Identity, signature_ok
from .membership import Certificate, Membership, MembershipError, Reason, RevocationList
from .wire import Malformed, pack, unpack

__all__ = ["Envelope", "EnvelopeError", "EnvelopeReason", "ReplayGuard", "envelope_epoch", "open_envelope",
           "seal_envelope"]

ENVELOPE_VERSION = 1  # epoch 0
EPOCH_ENVELOPE_VERSION = 2  # epochs 1 and later
MAX_BATCH_BYTES = 1024 * 1024
MAX_ENVELOPE_BYTES = MAX_BATCH_BYTES + 4096
_TAG = "clade.env"
_DOMAIN = b"clade.envelope.v1\x00"
_DOMAIN_V2 = b"clade.envelope.v2\x00"
_EPOCH = struct.Struct(">I")


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
    UNKNOWN_EPOCH = "unknown_epoch"
    EPOCH_EXPIRED = "epoch_expired"


class EnvelopeError(Refused[EnvelopeReason]):
    """An envelope was refused; `reason` (an `EnvelopeReason`) is the label to count."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """An opened envelope: who sent which batch, when."""

    sender: str
    certificate: Certificate
    sent_ms: int
    batch: bytes
    id: bytes  # hash of the signed inner part: the same envelope always has the same id
    epoch: int = 0  # the clade key epoch it was sealed under


def seal_envelope(batch: bytes, *, sender: Identity, membership: Membership, clade_key: bytes, now_ms: int,
                  epoch: int = 0) -> bytes:
    """Sign `batch` as `sender` and encrypt it for the clade with `clade_key`, the key of `epoch`."""
    if len(batch) > MAX_BATCH_BYTES:
        raise CryptoError(f"batch of {len(batch)} bytes exceeds {MAX_BATCH_BYTES}")
    if membership.certificate.peer_id != sender.peer_id:
        raise CryptoError("the certificate is not the sender's")
    if type(epoch) is not int or not 0 <= epoch < 1 << 32:
        raise CryptoError("a key epoch is an integer in 0..2**32-1")
    clade, cert = bytes.fromhex(membership.clade_id), membership.certificate.to_bytes()
    if epoch == 0:
        inner = pack([_TAG, ENVELOPE_VERSION, clade, cert, now_ms, batch])
        head, domain = bytes([ENVELOPE_VERSION]), _DOMAIN
    else:
        inner = pack([_TAG, EPOCH_ENVELOPE_VERSION, clade, epoch, cert, now_ms, batch])
        head, domain = bytes([EPOCH_ENVELOPE_VERSION]) + _EPOCH.pack(epoch), _DOMAIN_V2
    plaintext = pack([inner, sender.sign(domain + inner)])
    return head + bytes(nacl.secret.SecretBox(clade_key).encrypt(plaintext))


def envelope_epoch(data: bytes) -> int:
    """The key epoch an envelope claims (not yet authenticated); raises `EnvelopeError`
    (oversized, unknown_version, malformed)."""
    if not isinstance(data, bytes) or len(data) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(EnvelopeReason.OVERSIZED, f"envelope over {MAX_ENVELOPE_BYTES} bytes")
    if data[:1] == bytes([ENVELOPE_VERSION]):
        return 0
    if data[:1] != bytes([EPOCH_ENVELOPE_VERSION]):
        raise EnvelopeError(EnvelopeReason.UNKNOWN_VERSION, f"envelope version {data[:1].hex() or 'missing'}")
    if len(data) < 1 + _EPOCH.size:
        raise EnvelopeError(EnvelopeReason.MALFORMED, "envelope too short for its key epoch")
    (epoch,) = _EPOCH.unpack_from(data, 1)
    if epoch == 0:
        raise EnvelopeError(EnvelopeReason.MALFORMED, "epoch 0 is sealed as a version 1 envelope")
    return int(epoch)


@dataclass
class ReplayGuard:
    """Refuses an envelope seen before, and any older than the window it remembers.

    Pure: the caller passes the time. Envelopes sent before the window are forgotten (they are
    refused as stale whatever is remembered), in one pass once the count has doubled since the
    last: memory is bounded by twice the traffic of one window (at least `PRUNE_ABOVE`
    envelopes), and a check costs O(1) amortised. (Pruning whenever more than `PRUNE_ABOVE`
    were remembered re-read every one on each check once a window's traffic passed it: ~0.6 ms
    a message at 10 messages a second.)
    """

    PRUNE_ABOVE: ClassVar[int] = 1024

    window_ms: int = 10 * 60 * 1000
    max_future_ms: int = 60 * 1000
    _seen: dict[bytes, int] = field(default_factory=dict)
    _prune_above: int = PRUNE_ABOVE  # the count past which the next check prunes

    def check(self, envelope_id: bytes, sent_ms: int, now_ms: int) -> None:
        """Raise `EnvelopeError` (stale or replayed); otherwise remember the envelope."""
        if sent_ms < now_ms - self.window_ms:
            raise EnvelopeError(EnvelopeReason.STALE, f"sent {now_ms - sent_ms} ms ago (window {self.window_ms} ms)")
        if sent_ms > now_ms + self.max_future_ms:
            raise EnvelopeError(EnvelopeReason.STALE, f"sent {sent_ms - now_ms} ms in the future")
        if envelope_id in self._seen:
            raise EnvelopeError(EnvelopeReason.REPLAYED, "this envelope was already received")
        if len(self._seen) > self._prune_above:
            self._seen = {k: t for k, t in self._seen.items() if t >= now_ms - self.window_ms}
            self._prune_above = max(self.PRUNE_ABOVE, 2 * len(self._seen))
        self._seen[envelope_id] = sent_ms


def open_envelope(
    data: bytes,
    *,
    clade_key: bytes | Callable[[int], bytes],
    owner_public_key: bytes,
    clade_id: str,
    now_ms: int,
    revocations: RevocationList | None = None,
    replay: ReplayGuard | None = None,
    certificates: VerifiedCertificates | None = None,
) -> Envelope:
    """Decrypt and check an envelope; raises `EnvelopeError` with the reason to count.

    `clade_key` is the key to try, or a function from the envelope's key epoch to its key
    (`KeyRing.key_for`, which raises `unknown_epoch` / `epoch_expired`). `certificates`: the
    sender certificates whose owner signature was verified before (same verdicts, the
    signature checked once per distinct certificate; its standing at `now_ms` every time)."""
    epoch = envelope_epoch(data)
    key = clade_key(epoch) if callable(clade_key) else clade_key
    body = data[1:] if epoch == 0 else data[1 + _EPOCH.size:]
    try:
        plaintext = nacl.secret.SecretBox(key).decrypt(body)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise EnvelopeError(EnvelopeReason.BAD_CIPHERTEXT,
                            "does not decrypt with the clade key (tampered, or another clade's)") from None
    version = ENVELOPE_VERSION if epoch == 0 else EPOCH_ENVELOPE_VERSION
    try:
        inner, signature = unpack(plaintext, max_len=MAX_ENVELOPE_BYTES, fields=2)
        if not isinstance(inner, bytes) or not isinstance(signature, bytes):
            raise Malformed("expected [inner, signature]")
        fields = unpack(inner, max_len=MAX_ENVELOPE_BYTES, tag=_TAG)
        if fields[1] != version or len(fields) != (6 if epoch == 0 else 7):
            raise Malformed("unknown inner layout")
        if epoch:
            if type(fields[3]) is not int or fields[3] != epoch:
                raise Malformed(f"sealed under epoch {epoch} but signed for epoch {fields[3]!r}")
            del fields[3]
        _, _, env_clade, cert_bytes, sent_ms, batch = fields
        if (not isinstance(env_clade, bytes) or not isinstance(cert_bytes, bytes) or type(sent_ms) is not int
                or not isinstance(batch, bytes)):
            raise Malformed("inner fields have the wrong types")
    except Malformed as exc:
        raise EnvelopeError(EnvelopeReason.MALFORMED, str(exc)) from None
    if env_clade.hex() != clade_id:
        raise EnvelopeError(EnvelopeReason.OTHER_CLADE, f"envelope for clade {env_clade.hex()}")
    try:
        if certificates is None:
            certificate = Certificate.from_bytes(cert_bytes)
            certificate.verify(owner_public_key, clade_id, now=now_ms // 1000, revocations=revocations)
        else:
            certificate = certificates.admit(cert_bytes, owner_public_key, clade_id, now=now_ms // 1000,
                                             revocations=revocations)
    except MembershipError as exc:
        reason = {Reason.REVOKED: EnvelopeReason.REVOKED, Reason.OTHER_CLADE: EnvelopeReason.OTHER_CLADE}.get(
            exc.reason, EnvelopeReason.NOT_A_MEMBER)
        raise EnvelopeError(reason, f"sender certificate: {exc}") from None
    if not signature_ok(certificate.peer_id, (_DOMAIN if epoch == 0 else _DOMAIN_V2) + inner, signature):
        raise EnvelopeError(EnvelopeReason.BAD_SIGNATURE, f"not signed by {certificate.peer_id}")
    envelope_id = hashlib.blake2b(inner, digest_size=16).digest()
    if replay is not None:
        replay.check(envelope_id, sent_ms, now_ms)
    return Envelope(sender=certificate.peer_id, certificate=certificate, sent_ms=sent_ms, batch=batch, id=envelope_id,
                    epoch=epoch)
