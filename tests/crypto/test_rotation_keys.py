"""Clade key rotation, the pure parts: which epoch opens when (the grace window on an injected
clock), envelopes that carry their epoch, rotation bundles only the named member opens, the
owner's restartable rotation, and the decoders under hostile bytes."""

from __future__ import annotations

import stat
from collections import Counter
from pathlib import Path

import nacl.secret
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crdt import RemoteProtocolError
from crypto import (
    AdmissionBundle,
    Certificate,
    CryptoError,
    EnvelopeError,
    EnvelopeReason,
    EpochKey,
    Identity,
    KeyFileError,
    KeyRing,
    Membership,
    MembershipError,
    OwnerKey,
    Reason,
    RevocationList,
    open_envelope,
    seal_envelope,
)
from crypto.envelope import envelope_epoch
from crypto.rotation import (
    MemberRecord,
    RotationBundle,
    commit_rotation,
    is_rotation_bundle,
    load_members,
    owner_epoch_keys,
    prepare_rotation,
    record_member,
    rotation_recipients,
)
from crypto.wire import pack, unpack
from daemon.p2p.gossip import GossipCodec
from tests.helpers.fuzzing import FUZZ, mutations_of, only, truncations

NOW = 1_800_000_000
NOW_MS = NOW * 1000
HOUR_MS = 3_600_000
GOLEM = Identity(b"\x07" * 32)
SIBLING = Identity(b"\x09" * 32)
REVOKED = Identity(b"\x0a" * 32)
K0, K1, K2 = b"\x30" * 32, b"\x31" * 32, b"\x32" * 32
CLADE = "ab" * 16


def ring(*keys: tuple[int, int, bytes]) -> KeyRing:
    return KeyRing(CLADE, [EpochKey(epoch=e, installed_ms=t, key=k) for e, t, k in keys])


# -- which key opens which epoch, when ------------------------------------------------------------

def test_current_epoch_always_opens_and_the_previous_only_within_the_grace() -> None:
    r = ring((0, 0, K0), (1, NOW_MS, K1))
    assert r.current.epoch == 1 and r.current.key == K1
    assert r.key_for(1, now_ms=NOW_MS + 10**9, grace_ms=HOUR_MS) == K1
    assert r.key_for(0, now_ms=NOW_MS, grace_ms=HOUR_MS) == K0
    assert r.key_for(0, now_ms=NOW_MS + HOUR_MS - 1, grace_ms=HOUR_MS) == K0
    with pytest.raises(EnvelopeError) as late:
        r.key_for(0, now_ms=NOW_MS + HOUR_MS, grace_ms=HOUR_MS)  # the grace is half-open
    assert late.value.reason is EnvelopeReason.EPOCH_EXPIRED
    with pytest.raises(EnvelopeError) as none:
        r.key_for(0, now_ms=NOW_MS, grace_ms=0)
    assert none.value.reason is EnvelopeReason.EPOCH_EXPIRED


def test_an_epoch_not_held_is_unknown_newer_or_dropped() -> None:
    r = ring((0, 0, K0), (1, NOW_MS, K1))
    for epoch in (2, 7):
        with pytest.raises(EnvelopeError) as exc:
            r.key_for(epoch, now_ms=NOW_MS, grace_ms=HOUR_MS)
        assert exc.value.reason is EnvelopeReason.UNKNOWN_EPOCH
    dropped = r.dropping_before(1)
    assert dropped.epochs == [1]
    with pytest.raises(EnvelopeError) as exc:
        dropped.key_for(0, now_ms=NOW_MS, grace_ms=HOUR_MS)
    assert exc.value.reason is EnvelopeReason.UNKNOWN_EPOCH


def test_grace_runs_from_the_install_of_the_epoch_that_superseded_it() -> None:
    # epochs 0, 1, 2 installed an hour apart: 0 ends an hour after 1 came, 1 an hour after 2
    r = ring((0, 0, K0), (1, NOW_MS, K1), (2, NOW_MS + HOUR_MS // 2, K2))
    assert r.grace_ends_ms(0, HOUR_MS) == NOW_MS + HOUR_MS
    assert r.grace_ends_ms(1, HOUR_MS) == NOW_MS + HOUR_MS + HOUR_MS // 2
    assert r.grace_ends_ms(2, HOUR_MS) is None
    # a golem that missed epoch 1 (0 → 2) hears epoch 0 for the grace after installing 2
    jumped = ring((0, 0, K0), (2, NOW_MS, K2))
    assert jumped.key_for(0, now_ms=NOW_MS + HOUR_MS - 1, grace_ms=HOUR_MS) == K0


def test_dropping_never_drops_the_current_key() -> None:
    r = ring((0, 0, K0), (1, NOW_MS, K1))
    assert r.dropping_before(99).epochs == [1]
    assert r.dropping_before(0).epochs == [0, 1]


def test_keyring_round_trips_and_never_prints_a_key() -> None:
    r = ring((0, 0, K0), (1, NOW_MS, K1))
    back = KeyRing.from_bytes(r.to_bytes())
    assert back.epochs == [0, 1] and back.get(0) == K0 and back.get(1) == K1 and back.clade_id == CLADE
    assert K0.hex() not in repr(r) + repr(r.entries()) and "0x30" not in repr(r.entries())


def test_two_keys_for_one_epoch_are_refused_and_merges_keep_the_first_install() -> None:
    with pytest.raises(CryptoError, match="epoch 1"):
        ring((1, 0, K1), (1, 5, K2))
    a, b = ring((0, 0, K0), (1, 100, K1)), ring((1, 50, K1), (2, 200, K2))
    merged = a.merged(b)
    assert merged.epochs == [0, 1, 2] and merged.entries()[1].installed_ms == 50
    with pytest.raises(CryptoError, match="two clades"):
        a.merged(KeyRing("cd" * 16, [EpochKey(epoch=0, installed_ms=0, key=K0)]))


# -- envelopes carry the epoch ---------------------------------------------------------------------

@pytest.fixture
def owner(tmp_path: Path) -> OwnerKey:
    return OwnerKey.create(tmp_path / "owner", "alpha")


def member(owner: OwnerKey, who: Identity) -> Membership:
    cert = Certificate.issue(owner, who.peer_id, generation=0, not_before=NOW - 10, not_after=NOW + 86_400)
    return Membership(certificate=cert, owner_public_key=owner.public_key, clade_name=owner.clade_name)


def open_with(data: bytes, owner: OwnerKey, keys: KeyRing, *, now_ms: int = NOW_MS, grace_ms: int = HOUR_MS,
              revocations: RevocationList | None = None) -> EnvelopeReason | int:
    try:
        env = open_envelope(data, clade_key=lambda e: keys.key_for(e, now_ms=now_ms, grace_ms=grace_ms),
                            owner_public_key=owner.public_key, clade_id=owner.clade_id, now_ms=now_ms,
                            revocations=revocations)
    except EnvelopeError as exc:
        return exc.reason
    return env.epoch


def test_epoch_zero_is_the_version_1_envelope_and_later_epochs_version_2(owner: OwnerKey) -> None:
    m = member(owner, GOLEM)
    v1 = seal_envelope(b"batch", sender=GOLEM, membership=m, clade_key=K0, now_ms=NOW_MS)
    v2 = seal_envelope(b"batch", sender=GOLEM, membership=m, clade_key=K1, now_ms=NOW_MS, epoch=1)
    assert v1[0] == 1 and envelope_epoch(v1) == 0
    assert v2[:5] == b"\x02\x00\x00\x00\x01" and envelope_epoch(v2) == 1
    keys = KeyRing(owner.clade_id, [EpochKey(epoch=0, installed_ms=0, key=K0),
                                    EpochKey(epoch=1, installed_ms=NOW_MS, key=K1)])
    assert open_with(v2, owner, keys) == 1
    assert open_with(v1, owner, keys) == 0  # within the grace
    assert open_with(v1, owner, keys, now_ms=NOW_MS + HOUR_MS) is EnvelopeReason.EPOCH_EXPIRED
    # a v1 envelope still opens with a plain key, as before rotation existed
    assert open_envelope(v1, clade_key=K0, owner_public_key=owner.public_key, clade_id=owner.clade_id,
                         now_ms=NOW_MS).batch == b"batch"


def test_a_golem_without_the_new_key_cannot_open_the_new_epoch(owner: OwnerKey) -> None:
    """What a revoked member holds (epoch 0 only) opens nothing sealed under epoch 1: not by
    the epoch it names (unknown_epoch), not by trying its old key (bad_ciphertext)."""
    sealed = seal_envelope(b"secret ops", sender=GOLEM, membership=member(owner, GOLEM), clade_key=K1,
                           now_ms=NOW_MS, epoch=1)
    old_only = KeyRing(owner.clade_id, [EpochKey(epoch=0, installed_ms=0, key=K0)])
    assert open_with(sealed, owner, old_only) is EnvelopeReason.UNKNOWN_EPOCH
    assert open_with(sealed, owner, old_only, grace_ms=10**12) is EnvelopeReason.UNKNOWN_EPOCH
    with pytest.raises(EnvelopeError) as exc:
        open_envelope(sealed, clade_key=K0, owner_public_key=owner.public_key, clade_id=owner.clade_id,
                      now_ms=NOW_MS)
    assert exc.value.reason is EnvelopeReason.BAD_CIPHERTEXT
    relabelled = b"\x01" + sealed[5:]  # the same ciphertext claimed as epoch 0
    with pytest.raises(EnvelopeError) as exc:
        open_envelope(relabelled, clade_key=K0, owner_public_key=owner.public_key, clade_id=owner.clade_id,
                      now_ms=NOW_MS)
    assert exc.value.reason is EnvelopeReason.BAD_CIPHERTEXT
    assert b"secret ops" not in sealed


def test_an_envelope_resealed_under_another_epoch_is_refused(owner: OwnerKey) -> None:
    """A member holding two keys re-encrypts someone's signed inner part under another epoch:
    the epoch inside the signature no longer matches."""
    sealed = seal_envelope(b"ops", sender=GOLEM, membership=member(owner, GOLEM), clade_key=K2, now_ms=NOW_MS,
                           epoch=2)
    plaintext = nacl.secret.SecretBox(K2).decrypt(sealed[5:])
    moved = b"\x02\x00\x00\x00\x01" + bytes(nacl.secret.SecretBox(K1).encrypt(plaintext))
    keys = KeyRing(owner.clade_id, [EpochKey(epoch=1, installed_ms=0, key=K1),
                                    EpochKey(epoch=2, installed_ms=NOW_MS, key=K2)])
    assert open_with(sealed, owner, keys) == 2
    assert open_with(moved, owner, keys) is EnvelopeReason.MALFORMED


def test_gossip_codec_seals_with_the_newest_key_and_counts_grace_openings(owner: OwnerKey) -> None:
    from crdt import CausalContext, Delta

    holder: dict[str, KeyRing] = {"ring": KeyRing(owner.clade_id, [EpochKey(epoch=0, installed_ms=0, key=K0)])}
    counters: Counter[str] = Counter()
    grace = {"ms": HOUR_MS}
    receiver = GossipCodec(identity=SIBLING, membership=member(owner, SIBLING), keyring=lambda: holder["ring"],
                           key_grace_ms=lambda: grace["ms"], counters=counters, revocations=lambda: None,
                           max_skew_ms=60_000)
    sender = GossipCodec(identity=GOLEM, membership=member(owner, GOLEM), clade_key=K0, revocations=lambda: None,
                         max_skew_ms=60_000)
    empty = Delta((), CausalContext())
    before = sender.seal(empty, now_ms=NOW_MS)
    receiver.open(before, publisher=GOLEM.peer_id, now_ms=NOW_MS)
    assert counters["gossip_accepted_old_epoch"] == 0
    holder["ring"] = holder["ring"].with_key(EpochKey(epoch=1, installed_ms=NOW_MS, key=K1))  # a reload
    assert envelope_epoch(receiver.seal(empty, now_ms=NOW_MS)) == 1
    receiver.open(sender.seal(empty, now_ms=NOW_MS + 1), publisher=GOLEM.peer_id, now_ms=NOW_MS + 1)
    assert counters["gossip_accepted_old_epoch"] == 1
    grace["ms"] = 0  # the config says no grace (a SIGHUP): refused, with the label counted upstream
    with pytest.raises(RemoteProtocolError) as exc:
        receiver.open(sender.seal(empty, now_ms=NOW_MS + 2), publisher=GOLEM.peer_id, now_ms=NOW_MS + 2)
    assert exc.value.reason == "epoch_expired"


# -- rotation bundles ------------------------------------------------------------------------------

def test_rotation_bundle_opens_only_for_its_member_of_its_clade(owner: OwnerKey, tmp_path: Path) -> None:
    rotated = owner.with_clade_key(K1, 1)
    bundle = RotationBundle.create(rotated, GOLEM.peer_id, issued_at=NOW)
    assert is_rotation_bundle(bundle) and not is_rotation_bundle(b"junk")
    assert RotationBundle.open(bundle, GOLEM, member(owner, GOLEM)) == (1, K1)
    with pytest.raises(MembershipError) as exc:
        RotationBundle.open(bundle, REVOKED, member(owner, REVOKED))
    assert exc.value.reason is Reason.WRONG_PEER
    # a bundle from another owner (same clade name) is not this clade owner's
    other = OwnerKey.create(tmp_path / "other", "alpha").with_clade_key(K2, 1)
    with pytest.raises(MembershipError) as exc:
        RotationBundle.open(RotationBundle.create(other, GOLEM.peer_id, issued_at=NOW), GOLEM, member(owner, GOLEM))
    assert exc.value.reason is Reason.BAD_SIGNATURE
    # the key is sealed to the member: the revoked golem cannot open the sealed box either
    signed = unpack(unpack(bundle, max_len=4096, fields=2)[0], max_len=4096)
    with pytest.raises(MembershipError):
        from crypto.membership import open_clade_key
        open_clade_key(signed[5], REVOKED)
    with pytest.raises(CryptoError):
        RotationBundle.create(owner, GOLEM.peer_id, issued_at=NOW)  # epoch 0 is never a rotation


def test_rotation_recipients_leave_out_revoked_and_expired_members(owner: OwnerKey) -> None:
    members = [MemberRecord(peer_id=p.peer_id, generation=0, not_after=NOW + 10) for p in (GOLEM, SIBLING, REVOKED)]
    members.append(MemberRecord(peer_id="12D3KooWexpired", generation=0, not_after=NOW))
    revocations = RevocationList.issue(owner, version=1, revoked=[REVOKED.peer_id], issued_at=NOW)
    chosen, left_out = rotation_recipients(members, revocations, now=NOW)
    assert chosen == sorted([GOLEM.peer_id, SIBLING.peer_id])
    assert left_out == {REVOKED.peer_id: "revoked", "12D3KooWexpired": "expired"}
    assert rotation_recipients(members[:3], None, now=NOW)[0] == sorted(p.peer_id for p in (GOLEM, SIBLING, REVOKED))


def test_owner_rotation_is_restartable_and_keeps_every_epoch(owner: OwnerKey, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    first = prepare_rotation(owner, owner_dir)
    again = prepare_rotation(owner, owner_dir)  # cut short before commit, run again: the same key
    assert first.key_epoch == again.key_epoch == 1 and first.clade_key == again.clade_key != owner.clade_key
    assert OwnerKey.load(owner_dir).key_epoch == 0  # nothing committed yet
    commit_rotation(first, owner_dir)
    loaded = OwnerKey.load(owner_dir)
    assert loaded.key_epoch == 1 and loaded.clade_key == first.clade_key
    assert set(owner_epoch_keys(owner_dir, loaded)) == {owner.clade_key, first.clade_key}
    for path in (owner_dir / "clade-keys").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record_member(owner_dir, MemberRecord(peer_id=GOLEM.peer_id, generation=0, not_after=NOW))
    record_member(owner_dir, MemberRecord(peer_id=GOLEM.peer_id, generation=2, not_after=NOW + 5))
    assert load_members(owner_dir) == [MemberRecord(peer_id=GOLEM.peer_id, generation=2, not_after=NOW + 5)]


def test_admission_after_a_rotation_carries_the_epoch_and_before_stays_version_1(owner: OwnerKey) -> None:
    cert = Certificate.issue(owner, GOLEM.peer_id, generation=0, not_before=NOW - 10, not_after=NOW + 100)
    v1 = AdmissionBundle.create(owner, cert)
    assert unpack(unpack(v1, max_len=4096, fields=2)[0], max_len=4096)[1] == 1
    assert AdmissionBundle.open_epoch(v1, GOLEM, now=NOW)[1:] == (0, owner.clade_key)
    v2 = AdmissionBundle.create(owner.with_clade_key(K1, 4), cert)
    membership, epoch, key = AdmissionBundle.open_epoch(v2, GOLEM, now=NOW)
    assert (epoch, key) == (4, K1) and membership.certificate == cert
    assert AdmissionBundle.open(v2, GOLEM, now=NOW)[1] == K1


# -- decoders under hostile bytes ------------------------------------------------------------------

FUZZ_OWNER = OwnerKey(b"\x21" * 32, "alpha", b"\x22" * 32, 1)
FUZZ_MEMBER = Membership(
    certificate=Certificate.issue(FUZZ_OWNER, GOLEM.peer_id, generation=0, not_before=NOW - 10, not_after=NOW + 99),
    owner_public_key=FUZZ_OWNER.public_key, clade_name="alpha")
ROTATION = RotationBundle.create(FUZZ_OWNER, GOLEM.peer_id, issued_at=NOW)
KEYRING = ring((0, 0, K0), (1, NOW_MS, K1)).to_bytes()


def open_rotation(data: bytes) -> tuple[int, bytes] | None:
    return only(MembershipError, lambda: RotationBundle.open(data, GOLEM, FUZZ_MEMBER))


@FUZZ
@given(st.binary(max_size=2048) | mutations_of(ROTATION))
def test_rotation_bundles_from_hostile_bytes(data: bytes) -> None:
    opened = open_rotation(data)
    assert opened is None or opened == (1, FUZZ_OWNER.clade_key)
    assert isinstance(is_rotation_bundle(data), bool)


def test_every_truncation_of_a_rotation_bundle() -> None:
    for data in truncations(ROTATION):
        assert open_rotation(data) is None


@FUZZ
@given(st.binary(max_size=1024) | mutations_of(KEYRING))
def test_keyrings_from_hostile_bytes(data: bytes) -> None:
    r = only(KeyFileError, lambda: KeyRing.from_bytes(data))
    assert r is None or all(len(k.key) == 32 for k in r.entries())


def test_keyring_fields_of_the_wrong_type_are_refused() -> None:
    for bad in ([["clade.keyring", 2, bytes(16), []]], [["clade.keyring", 1, bytes(16), []]],
                [["clade.keyring", 1, bytes(16), [[0, 0, b"short"]]]], [["clade.keyring", 1, bytes(16), [[-1, 0, K0]]]],
                [["clade.keyring", 1, bytes(16), [[True, 0, K0]]]], [["clade.keyring", 1, bytes(15), [[0, 0, K0]]]]):
        with pytest.raises(KeyFileError):
            KeyRing.from_bytes(pack(bad[0]))
