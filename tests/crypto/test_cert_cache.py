"""VerifiedCertificates: a certificate's owner signature is verified once per exact bytes and
owner key; its standing (clade, validity window, revocation) is checked on every admit, so every
verdict is the one `Certificate.verify` gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crypto import (
    Certificate,
    EnvelopeError,
    EnvelopeReason,
    Identity,
    Membership,
    MembershipError,
    OwnerKey,
    Reason,
    RevocationList,
    open_envelope,
    seal_envelope,
)
from crypto.cert_cache import VerifiedCertificates
from crypto.wire import pack, unpack

NOW = 1_800_000_000
PEER = Identity(b"\x31" * 32)


@pytest.fixture
def owner(tmp_path: Path) -> OwnerKey:
    return OwnerKey.create(tmp_path / "o", "alpha")


def issued(owner: OwnerKey, who: Identity = PEER, *, not_after: int = NOW + 3600) -> Certificate:
    return Certificate.issue(owner, who.peer_id, generation=0, not_before=NOW - 60, not_after=not_after)


@pytest.fixture
def signatures(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The certificates (their signed part) whose owner signature was verified, in order."""
    seen: list[bytes] = []
    real: Callable[[Certificate, bytes], None] = Certificate.verify_signature

    def counting(self: Certificate, owner_public_key: bytes) -> None:
        seen.append(self.signed)
        real(self, owner_public_key)

    monkeypatch.setattr(Certificate, "verify_signature", counting)
    return seen


def test_the_owner_signature_is_verified_once_per_certificate(owner: OwnerKey, signatures: list[bytes]) -> None:
    cache = VerifiedCertificates()
    data = issued(owner).to_bytes()
    for _ in range(3):
        cert = cache.admit(data, owner.public_key, owner.clade_id, now=NOW)
        assert cert.peer_id == PEER.peer_id
    assert len(signatures) == 1
    cache.admit(issued(owner, Identity(b"\x32" * 32)).to_bytes(), owner.public_key, owner.clade_id, now=NOW)
    assert len(signatures) == 2  # another certificate: verified


def test_a_remembered_certificate_is_still_refused_once_expired_revoked_or_for_another_clade(
        owner: OwnerKey) -> None:
    cache = VerifiedCertificates()
    data = issued(owner, not_after=NOW + 10).to_bytes()
    cache.admit(data, owner.public_key, owner.clade_id, now=NOW)
    with pytest.raises(MembershipError) as info:
        cache.admit(data, owner.public_key, owner.clade_id, now=NOW + 10)
    assert info.value.reason is Reason.EXPIRED
    with pytest.raises(MembershipError) as info:
        cache.admit(data, owner.public_key, owner.clade_id, now=NOW - 61)
    assert info.value.reason is Reason.NOT_YET_VALID
    revoked = RevocationList.issue(owner, version=1, revoked=[PEER.peer_id], issued_at=NOW)
    with pytest.raises(MembershipError) as info:
        cache.admit(data, owner.public_key, owner.clade_id, now=NOW, revocations=revoked)
    assert info.value.reason is Reason.REVOKED
    with pytest.raises(MembershipError) as info:
        cache.admit(data, owner.public_key, "00" * 16, now=NOW)
    assert info.value.reason is Reason.OTHER_CLADE
    assert cache.admit(data, owner.public_key, owner.clade_id, now=NOW).peer_id == PEER.peer_id


def test_a_bad_signature_is_never_remembered(owner: OwnerKey, tmp_path: Path, signatures: list[bytes]) -> None:
    cache = VerifiedCertificates()
    signed, signature = unpack(issued(owner).to_bytes(), max_len=1024, fields=2)
    assert isinstance(signed, bytes) and isinstance(signature, bytes)
    forged = pack([signed, bytes(64)])
    for _ in range(2):
        with pytest.raises(MembershipError) as info:
            cache.admit(forged, owner.public_key, owner.clade_id, now=NOW)
        assert info.value.reason is Reason.BAD_SIGNATURE
    assert len(signatures) == 2 and len(cache) == 0
    # Bytes verified under one owner key are verified again under another (and refused).
    data = issued(owner).to_bytes()
    cache.admit(data, owner.public_key, owner.clade_id, now=NOW)
    other = OwnerKey.create(tmp_path / "other", "alpha")
    with pytest.raises(MembershipError) as info:
        cache.admit(data, other.public_key, owner.clade_id, now=NOW)
    assert info.value.reason is Reason.BAD_SIGNATURE


def test_the_cache_is_bounded_least_recently_used_out(owner: OwnerKey, signatures: list[bytes]) -> None:
    cache = VerifiedCertificates(capacity=2)
    a, b, c = (issued(owner, Identity(bytes([i]) * 32)).to_bytes() for i in (1, 2, 3))
    for data in (a, b, a, c):  # b is the least recently used when c comes
        cache.admit(data, owner.public_key, owner.clade_id, now=NOW)
    assert len(cache) == 2 and len(signatures) == 3
    cache.admit(a, owner.public_key, owner.clade_id, now=NOW)
    assert len(signatures) == 3
    cache.admit(b, owner.public_key, owner.clade_id, now=NOW)
    assert len(signatures) == 4


def test_envelopes_get_the_same_verdicts_with_the_cache(owner: OwnerKey) -> None:
    """A sender's envelopes open with the cache; once its certificate expires or is revoked,
    its next envelope is refused exactly as without the cache."""
    cert = issued(owner, not_after=NOW + 10)
    membership = Membership(certificate=cert, owner_public_key=owner.public_key, clade_name=owner.clade_name)
    cache = VerifiedCertificates()

    def verdict(now_ms: int, **kw: object) -> str:
        sealed = seal_envelope(b"batch", sender=PEER, membership=membership, clade_key=owner.clade_key,
                               now_ms=now_ms)
        results = []
        for certificates in (cache, None):
            try:
                open_envelope(sealed, clade_key=owner.clade_key, owner_public_key=owner.public_key,
                              clade_id=owner.clade_id, now_ms=now_ms, certificates=certificates,
                              **kw)  # type: ignore[arg-type]
                results.append("ok")
            except EnvelopeError as exc:
                results.append(exc.reason.value)
        assert results[0] == results[1], results
        return results[0]

    assert verdict(NOW * 1000) == "ok"
    assert verdict(NOW * 1000 + 1) == "ok"
    assert verdict(NOW * 1000 + 10_000) == EnvelopeReason.NOT_A_MEMBER.value  # expired
    revoked = RevocationList.issue(owner, version=1, revoked=[PEER.peer_id], issued_at=NOW)
    assert verdict(NOW * 1000 + 2, revocations=revoked) == EnvelopeReason.REVOKED.value
    assert len(cache) == 1
