"""Certificates whose owner signature was already verified, by their exact bytes.

Every gossip envelope carries its sender's full certificate (crypto/envelope.py), so a member
that gossips N messages has the same certificate checked N times; its owner signature (an
Ed25519 verification, ~70 µs) is the one costly part and depends on nothing but the bytes and
the owner key. `VerifiedCertificates.admit` verifies that signature once per distinct
(owner key, certificate bytes) and remembers the decoded certificate; everything else
(`Certificate.check_standing`: clade, validity window, revocation) depends on the time and the
current revocation list and is checked on every call, hit or miss. A certificate whose
signature fails is never remembered (each copy is verified again and refused again).

Bounded (least recently used out) and safe to share between threads (gossip is opened on
worker threads when several messages arrive at once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .membership import Certificate, RevocationList

__all__ = ["CERTIFICATES_KEPT", "VerifiedCertificates"]

CERTIFICATES_KEPT = 256  # distinct certificates remembered (each ≤ 1 KiB): far more than a clade's members


class VerifiedCertificates:
    """Decoded certificates whose owner signature verified, keyed by (owner public key,
    encoded certificate): the exact bytes the signature was checked over."""

    def __init__(self, capacity: int = CERTIFICATES_KEPT) -> None:
        self.capacity = capacity
        self._verified: OrderedDict[tuple[bytes, bytes], Certificate] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._verified)

    def admit(self, data: bytes, owner_public_key: bytes, clade_id: str, *, now: int,
              revocations: RevocationList | None = None) -> Certificate:
        """The certificate encoded in `data`, if it admits its peer to `clade_id` at `now` (Unix
        seconds): exactly `Certificate.from_bytes(data).verify(...)`, with the owner signature
        verified only the first time these bytes are seen under this owner key. Raises
        `MembershipError` as `verify` does."""
        key = (bytes(owner_public_key), bytes(data))
        with self._lock:
            certificate = self._verified.get(key)
            if certificate is not None:
                self._verified.move_to_end(key)
        if certificate is None:
            certificate = Certificate.from_bytes(key[1])
            certificate.verify_signature(key[0])  # raises: nothing is remembered
            with self._lock:
                self._verified[key] = certificate
                while len(self._verified) > self.capacity:
                    self._verified.popitem(last=False)
        certificate.check_standing(clade_id, now=now, revocations=revocations)
        return certificate
