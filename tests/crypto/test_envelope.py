"""Sealed gossip envelopes: members' batches open; everything else is refused with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from crypto import (
    Certificate,
    EnvelopeError,
    EnvelopeReason,
    Identity,
    Membership,
    OwnerKey,
    ReplayGuard,
    RevocationList,
    open_envelope,
    seal_envelope,
)

NOW_MS = 1_800_000_000_000
SENDER = Identity(b"\x11" * 32)
BATCH = b"\x93\x01\x90\x90" * 10


def member(owner: OwnerKey, who: Identity = SENDER) -> Membership:
    c = Certificate.issue(owner, who.peer_id, generation=0, not_before=NOW_MS // 1000 - 60,
                          not_after=NOW_MS // 1000 + 86_400)
    return Membership(certificate=c, owner_public_key=owner.public_key, clade_name=owner.clade_name)


@pytest.fixture
def owner(tmp_path: Path) -> OwnerKey:
    return OwnerKey.create(tmp_path / "o", "alpha")


def open_(data: bytes, owner: OwnerKey, **kw: object) -> object:
    args: dict[str, object] = {"clade_key": owner.clade_key, "owner_public_key": owner.public_key,
                               "clade_id": owner.clade_id, "now_ms": NOW_MS} | kw
    return open_envelope(data, **args)  # type: ignore[arg-type]


def refused(data: bytes, owner: OwnerKey, **kw: object) -> EnvelopeReason:
    with pytest.raises(EnvelopeError) as info:
        open_(data, owner, **kw)
    return info.value.reason


def test_member_envelope_opens(owner: OwnerKey) -> None:
    sealed = seal_envelope(BATCH, sender=SENDER, membership=member(owner), clade_key=owner.clade_key, now_ms=NOW_MS)
    env = open_(sealed, owner)
    assert env.sender == SENDER.peer_id and env.batch == BATCH and env.sent_ms == NOW_MS  # type: ignore[attr-defined]
    assert BATCH not in sealed  # encrypted


def test_non_member_envelope_is_refused(owner: OwnerKey, tmp_path: Path) -> None:
    """A node with a valid identity and the clade key, but a certificate from another owner."""
    impostor = OwnerKey.create(tmp_path / "imp", "alpha")
    fake = Membership(certificate=Certificate.issue(impostor, SENDER.peer_id, generation=0,
                                                    not_before=0, not_after=NOW_MS),
                      owner_public_key=impostor.public_key, clade_name="alpha")
    sealed = seal_envelope(BATCH, sender=SENDER, membership=fake, clade_key=owner.clade_key, now_ms=NOW_MS)
    assert refused(sealed, owner) in (EnvelopeReason.OTHER_CLADE, EnvelopeReason.NOT_A_MEMBER)


def test_expired_member_is_refused(owner: OwnerKey) -> None:
    c = Certificate.issue(owner, SENDER.peer_id, generation=0, not_before=0, not_after=NOW_MS // 1000 - 1)
    m = Membership(certificate=c, owner_public_key=owner.public_key, clade_name="alpha")
    sealed = seal_envelope(BATCH, sender=SENDER, membership=m, clade_key=owner.clade_key, now_ms=NOW_MS)
    assert refused(sealed, owner) is EnvelopeReason.NOT_A_MEMBER


def test_revoked_member_is_refused(owner: OwnerKey) -> None:
    sealed = seal_envelope(BATCH, sender=SENDER, membership=member(owner), clade_key=owner.clade_key, now_ms=NOW_MS)
    revs = RevocationList.issue(owner, version=3, revoked=[SENDER.peer_id], issued_at=NOW_MS // 1000)
    assert refused(sealed, owner, revocations=revs) is EnvelopeReason.REVOKED


def test_tampered_ciphertext_is_refused(owner: OwnerKey) -> None:
    sealed = seal_envelope(BATCH, sender=SENDER, membership=member(owner), clade_key=owner.clade_key, now_ms=NOW_MS)
    for pos in (1, 30, len(sealed) // 2, len(sealed) - 1):
        flipped = bytearray(sealed)
        flipped[pos] ^= 0x01
        assert refused(bytes(flipped), owner) is EnvelopeReason.BAD_CIPHERTEXT
    assert refused(sealed[:-1], owner) is EnvelopeReason.BAD_CIPHERTEXT


def test_replay_is_refused(owner: OwnerKey) -> None:
    guard = ReplayGuard()
    sealed = seal_envelope(BATCH, sender=SENDER, membership=member(owner), clade_key=owner.clade_key, now_ms=NOW_MS)
    open_(sealed, owner, replay=guard)
    assert refused(sealed, owner, replay=guard) is EnvelopeReason.REPLAYED
    stale = NOW_MS + guard.window_ms + 1
    assert refused(sealed, owner, replay=ReplayGuard(), now_ms=stale) is EnvelopeReason.STALE


def test_envelope_for_another_clade_is_refused(owner: OwnerKey, tmp_path: Path) -> None:
    other = OwnerKey.create(tmp_path / "other", "beta")
    sealed = seal_envelope(BATCH, sender=SENDER, membership=member(other), clade_key=other.clade_key,
                           now_ms=NOW_MS)
    assert refused(sealed, owner) is EnvelopeReason.BAD_CIPHERTEXT  # another clade's key
    # even with our key (a member of both clades re-sealing), the clade id gives it away
    resealed = seal_envelope(BATCH, sender=SENDER, membership=member(other), clade_key=owner.clade_key,
                             now_ms=NOW_MS)
    assert refused(resealed, owner) is EnvelopeReason.OTHER_CLADE


def test_forged_sender_signature_is_refused(owner: OwnerKey) -> None:
    """Someone with the clade key wraps a member's certificate around their own signature."""
    import nacl.secret

    from crypto.envelope import _DOMAIN, _TAG
    from crypto.wire import pack

    m = member(owner)
    inner = pack([_TAG, 1, bytes.fromhex(owner.clade_id), m.certificate.to_bytes(), NOW_MS, BATCH])
    mallory = Identity(b"\x66" * 32)
    plaintext = pack([inner, mallory.sign(_DOMAIN + inner)])
    sealed = bytes([1]) + bytes(nacl.secret.SecretBox(owner.clade_key).encrypt(plaintext))
    assert refused(sealed, owner) is EnvelopeReason.BAD_SIGNATURE


@pytest.mark.parametrize(("data", "reason"), [
    (b"", EnvelopeReason.UNKNOWN_VERSION),
    (b"\x03" + b"x" * 64, EnvelopeReason.UNKNOWN_VERSION),
    (b"\x02" + b"x" * 64, EnvelopeReason.BAD_CIPHERTEXT),  # v2: an epoch, then ciphertext
    (b"\x02\x00\x00", EnvelopeReason.MALFORMED),  # too short for its epoch
    (b"\x02\x00\x00\x00\x00" + b"x" * 64, EnvelopeReason.MALFORMED),  # epoch 0 is v1 only
    (b"\x01" + b"x" * 10, EnvelopeReason.BAD_CIPHERTEXT),
    (b"\x01" + b"x" * (2 * 1024 * 1024), EnvelopeReason.OVERSIZED),
])
def test_garbage_is_refused(owner: OwnerKey, data: bytes, reason: EnvelopeReason) -> None:
    assert refused(data, owner) is reason


def test_malformed_plaintext_is_refused(owner: OwnerKey) -> None:
    import nacl.secret

    sealed = bytes([1]) + bytes(nacl.secret.SecretBox(owner.clade_key).encrypt(b"\xc1 not msgpack"))
    assert refused(sealed, owner) is EnvelopeReason.MALFORMED
