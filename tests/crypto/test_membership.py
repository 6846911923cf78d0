"""Owner key, certificates, revocation lists and admission bundles: every refusal has its reason."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crypto import (
    AdmissionBundle,
    Certificate,
    Identity,
    KeyFileError,
    Membership,
    MembershipError,
    OwnerKey,
    Reason,
    RevocationList,
    UnsafeKeyFile,
    clade_id_of,
)
from crypto.wire import pack

NOW = 1_800_000_000
GOLEM = Identity(b"\x07" * 32)
OTHER = Identity(b"\x08" * 32)


@pytest.fixture
def owner(tmp_path: Path) -> OwnerKey:
    return OwnerKey.create(tmp_path / "owner", "alpha")


def cert(owner: OwnerKey, peer: Identity = GOLEM, **kw: int) -> Certificate:
    times = {"generation": 1, "not_before": NOW - 10, "not_after": NOW + 3600} | kw
    return Certificate.issue(owner, peer.peer_id, **times)


def test_owner_dir_round_trip_and_modes(tmp_path: Path, owner: OwnerKey) -> None:
    loaded = OwnerKey.load(tmp_path / "owner")
    assert loaded.public_key == owner.public_key and loaded.clade_key == owner.clade_key
    assert loaded.clade_id == clade_id_of(owner.public_key, "alpha")
    for name in ("owner.key", "clade.key"):
        assert stat.S_IMODE((tmp_path / "owner" / name).stat().st_mode) == 0o600
    with pytest.raises(KeyFileError, match="already exists"):
        OwnerKey.create(tmp_path / "owner", "alpha")
    os.chmod(tmp_path / "owner" / "owner.key", 0o644)
    with pytest.raises(UnsafeKeyFile, match="chmod 600"):
        OwnerKey.load(tmp_path / "owner")


def test_clade_id_depends_on_owner_and_name(owner: OwnerKey) -> None:
    assert clade_id_of(owner.public_key, "alpha") != clade_id_of(owner.public_key, "beta")
    assert clade_id_of(owner.public_key, "alpha") != clade_id_of(b"\x00" * 32, "alpha")


def test_valid_certificate_round_trips(owner: OwnerKey) -> None:
    c = Certificate.from_bytes(cert(owner).to_bytes())
    c.verify(owner.public_key, owner.clade_id, now=NOW)
    assert (c.peer_id, c.generation) == (GOLEM.peer_id, 1)


def reason_of(fn: object, *args: object, **kw: object) -> Reason:
    with pytest.raises(MembershipError) as info:
        fn(*args, **kw)  # type: ignore[operator]
    return info.value.reason


def test_bad_signature(owner: OwnerKey, tmp_path: Path) -> None:
    impostor = OwnerKey.create(tmp_path / "impostor", "alpha")
    forged = cert(impostor)
    assert reason_of(forged.verify, owner.public_key, impostor.clade_id, now=NOW) is Reason.BAD_SIGNATURE


def test_tampered_certificate_fails_signature(owner: OwnerKey) -> None:
    good = cert(owner)
    tampered = Certificate.from_bytes(pack([good.signed.replace(GOLEM.peer_id.encode(), OTHER.peer_id.encode()),
                                            good.signature]))
    assert tampered.peer_id == OTHER.peer_id
    assert reason_of(tampered.verify, owner.public_key, owner.clade_id, now=NOW) is Reason.BAD_SIGNATURE


def test_other_clade(owner: OwnerKey) -> None:
    other = clade_id_of(owner.public_key, "beta")
    assert reason_of(cert(owner).verify, owner.public_key, other, now=NOW) is Reason.OTHER_CLADE


def test_expired(owner: OwnerKey) -> None:
    assert reason_of(cert(owner).verify, owner.public_key, owner.clade_id, now=NOW + 3600) is Reason.EXPIRED


def test_not_yet_valid(owner: OwnerKey) -> None:
    c = cert(owner, not_before=NOW + 60)
    assert reason_of(c.verify, owner.public_key, owner.clade_id, now=NOW) is Reason.NOT_YET_VALID


def test_revoked(owner: OwnerKey) -> None:
    revs = RevocationList.issue(owner, version=1, revoked=[GOLEM.peer_id], issued_at=NOW)
    c = cert(owner)
    assert reason_of(c.verify, owner.public_key, owner.clade_id, now=NOW, revocations=revs) is Reason.REVOKED
    cert(owner, peer=OTHER).verify(owner.public_key, owner.clade_id, now=NOW, revocations=revs)


def test_revocation_lists_are_monotonic_and_signed(owner: OwnerKey, tmp_path: Path) -> None:
    v1 = RevocationList.issue(owner, version=1, revoked=[GOLEM.peer_id], issued_at=NOW)
    v2 = RevocationList.from_bytes(
        RevocationList.issue(owner, version=2, revoked=[GOLEM.peer_id, OTHER.peer_id], issued_at=NOW).to_bytes())
    v2.verify(owner.public_key, owner.clade_id)
    assert v2.replaces(v1) and v1.replaces(None)
    assert not v1.replaces(v2) and not v2.replaces(v2)
    impostor = OwnerKey.create(tmp_path / "imp", "alpha")
    forged = RevocationList.issue(impostor, version=99, revoked=[], issued_at=NOW)
    assert reason_of(forged.verify, owner.public_key, owner.clade_id) is Reason.BAD_SIGNATURE


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x92\xc4\x01x\xc4\x01y", pack([b"x", b"y" * 64]),
                                  pack([pack(["clade.cert", 9, 1, 2, 3, 4, 5]), b"s" * 64])])
def test_garbage_certificates_are_malformed(data: bytes) -> None:
    assert reason_of(Certificate.from_bytes, data) in (Reason.MALFORMED, Reason.UNKNOWN_VERSION)


def test_admission_bundle_round_trip(owner: OwnerKey) -> None:
    bundle = AdmissionBundle.create(owner, cert(owner))
    membership, clade_key = AdmissionBundle.open(bundle, GOLEM, now=NOW)
    assert clade_key == owner.clade_key
    assert membership.clade_id == owner.clade_id and membership.owner_public_key == owner.public_key
    again = Membership.from_bytes(membership.to_bytes())
    assert again == membership
    assert again.owner_x25519_public_key() == owner.x25519_public_key


def test_bundle_for_another_peer_is_refused(owner: OwnerKey) -> None:
    bundle = AdmissionBundle.create(owner, cert(owner, peer=OTHER))
    assert reason_of(AdmissionBundle.open, bundle, GOLEM, now=NOW) is Reason.WRONG_PEER


def test_bundle_with_bad_signature_is_refused(owner: OwnerKey) -> None:
    bundle = bytearray(AdmissionBundle.create(owner, cert(owner)))
    bundle[-5] ^= 0xFF  # inside the owner's signature
    assert reason_of(AdmissionBundle.open, bytes(bundle), GOLEM, now=NOW) is Reason.BAD_SIGNATURE


def test_bundle_with_expired_certificate_is_refused(owner: OwnerKey) -> None:
    bundle = AdmissionBundle.create(owner, cert(owner, not_after=NOW - 1, not_before=NOW - 100))
    assert reason_of(AdmissionBundle.open, bundle, GOLEM, now=NOW) is Reason.EXPIRED
