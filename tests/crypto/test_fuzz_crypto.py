"""Fuzzing the owner-signed and sealed formats: certificates, revocation lists, membership files,
admission bundles, vault files (see tests/helpers/fuzzing.py)."""

from __future__ import annotations

import functools
import io
import struct
from typing import Any

import nacl.bindings as sodium
import nacl.secret
from hypothesis import given, settings
from hypothesis import strategies as st

from crypto import (
    AdmissionBundle,
    Certificate,
    Membership,
    MembershipError,
    RevocationList,
    clade_id_of,
)
from crypto.vault import MAGIC, DecryptingReader, EncryptingWriter, VaultError, VaultKeys, clade_key_id, read_header
from crypto.wire import pack
from tests.helpers.fuzzing import (
    CERT,
    FUZZ,
    GOLEM,
    MEMBERSHIP,
    NOW,
    NOW_MS,
    OWNER,
    REVOCATIONS,
    every_edit,
    fields_of,
    msgpack_values,
    mutations_of,
    only,
    packable,
    refused,
    tree_mutated,
    truncations,
)

# -- certificates, revocation lists, membership files, admission bundles -----------------------

def owner_signed(tag: str, version: object, fields: list[object]) -> bytes | None:
    """A structure the owner really signed, with arbitrary fields: reaches the checks after
    the signature (type checks, validity, the sealed clade key)."""
    signed = packable([tag, version, *fields])
    return None if signed is None else pack([signed, OWNER.sign(signed)])


def decode_certificate(data: bytes) -> Certificate | None:
    certificate = only(MembershipError, lambda: Certificate.from_bytes(data))
    if certificate is not None:
        refused(MembershipError, lambda: certificate.verify(OWNER.public_key, OWNER.clade_id, now=NOW,
                                                          revocations=REVOCATIONS))
    return certificate


def test_valid_certificate_decodes() -> None:
    assert decode_certificate(CERT.to_bytes()) == CERT


@FUZZ
@given(st.binary(max_size=1200))
def test_certificates_from_arbitrary_bytes(data: bytes) -> None:
    decode_certificate(data)


@FUZZ
@given(mutations_of(CERT.to_bytes()))
def test_mutated_certificates(data: bytes) -> None:
    certificate = decode_certificate(data)
    # it decodes: then it is the owner's only if it is the original
    if certificate is not None and not refused(
            MembershipError, lambda: certificate.verify(OWNER.public_key, OWNER.clade_id, now=NOW)):
        assert (certificate.signed, certificate.signature) == (CERT.signed, CERT.signature)


def test_every_truncation_of_a_certificate() -> None:
    for data in truncations(CERT.to_bytes()):
        assert decode_certificate(data) is None


@FUZZ
@given(st.lists(msgpack_values, max_size=7), st.sampled_from([1, 1, 2, 0]))
def test_owner_signed_certificates_of_wrong_shape(fields: list[object], version: int) -> None:
    data = owner_signed(Certificate.TAG, version, fields)
    if data is not None:
        decode_certificate(data)


CERT_FIELDS = fields_of(CERT.signed)


def signed_by_owner(value: object) -> bytes | None:
    signed = packable(value)
    return None if signed is None else pack([signed, OWNER.sign(signed)])


owner_signed_certificates = tree_mutated(CERT_FIELDS).map(signed_by_owner).filter(bool)


@FUZZ
@given(owner_signed_certificates)
def test_owner_signed_certificates_with_any_field_replaced(data: bytes) -> None:
    decode_certificate(data)


EDITED_CERTIFICATES = [signed_by_owner(value) for value in every_edit(CERT_FIELDS)]


def test_every_edit_of_an_owner_signed_certificate() -> None:
    for data in EDITED_CERTIFICATES:
        assert data is not None
        decode_certificate(data)


def decode_revocations(data: bytes) -> RevocationList | None:
    revocations = only(MembershipError, lambda: RevocationList.from_bytes(data))
    if revocations is not None:
        refused(MembershipError, lambda: revocations.verify(OWNER.public_key, OWNER.clade_id))
    return revocations


def test_valid_revocation_list_decodes() -> None:
    assert decode_revocations(REVOCATIONS.to_bytes()) == REVOCATIONS


@FUZZ
@given(st.binary(max_size=1200))
def test_revocation_lists_from_arbitrary_bytes(data: bytes) -> None:
    decode_revocations(data)


@FUZZ
@given(mutations_of(REVOCATIONS.to_bytes()))
def test_mutated_revocation_lists(data: bytes) -> None:
    revocations = decode_revocations(data)
    if revocations is not None and not refused(
            MembershipError, lambda: revocations.verify(OWNER.public_key, OWNER.clade_id)):
        assert revocations.signed == REVOCATIONS.signed


def test_every_truncation_of_a_revocation_list() -> None:
    for data in truncations(REVOCATIONS.to_bytes()):
        assert decode_revocations(data) is None


@FUZZ
@given(st.lists(msgpack_values, max_size=6), st.sampled_from([1, 1, 2]))
def test_owner_signed_revocation_lists_of_wrong_shape(fields: list[object], version: int) -> None:
    data = owner_signed(RevocationList.TAG, version, fields)
    if data is not None:
        decode_revocations(data)


@FUZZ
@given(tree_mutated(fields_of(REVOCATIONS.signed)))
def test_owner_signed_revocation_lists_with_any_field_replaced(value: object) -> None:
    data = signed_by_owner(value)
    if data is not None:
        decode_revocations(data)


def test_every_edit_of_an_owner_signed_revocation_list() -> None:
    for value in every_edit(fields_of(REVOCATIONS.signed)):
        data = signed_by_owner(value)
        assert data is not None
        decode_revocations(data)


MEMBERSHIP_FILE = MEMBERSHIP.to_bytes()


def test_valid_membership_file_decodes() -> None:
    assert Membership.from_bytes(MEMBERSHIP_FILE) == MEMBERSHIP


@FUZZ
@given(st.binary(max_size=1200) | mutations_of(MEMBERSHIP_FILE))
def test_membership_files_arbitrary_and_mutated(data: bytes) -> None:
    membership = only(MembershipError, lambda: Membership.from_bytes(data))
    assert membership is None or clade_id_of(membership.owner_public_key, membership.clade_name) == membership.clade_id


def test_every_truncation_of_a_membership_file() -> None:
    for data in truncations(MEMBERSHIP_FILE):
        assert only(MembershipError, functools.partial(Membership.from_bytes, data)) is None


@FUZZ
@given(st.lists(msgpack_values, max_size=5), st.sampled_from([1, 1, 2]))
def test_membership_files_of_wrong_shape(fields: list[object], version: int) -> None:
    data = packable([Membership.TAG, version, *fields])
    if data is not None:
        only(MembershipError, lambda: Membership.from_bytes(data))


@FUZZ
@given(tree_mutated(fields_of(MEMBERSHIP_FILE)) | owner_signed_certificates.map(
    lambda cert: [Membership.TAG, 1, cert, OWNER.public_key, OWNER.clade_name]))
def test_membership_files_with_any_field_replaced(value: object) -> None:
    data = packable(value)
    if data is not None:
        membership = only(MembershipError, lambda: Membership.from_bytes(data))
        assert membership is None or membership.owner_public_key == OWNER.public_key


def test_every_edit_of_a_membership_file() -> None:
    fields = fields_of(MEMBERSHIP_FILE)
    for value in [*every_edit(fields), *([*fields[:2], cert, *fields[3:]] for cert in EDITED_CERTIFICATES)]:
        data = pack(value)
        membership = only(MembershipError, lambda: Membership.from_bytes(data))  # noqa: B023
        assert membership is None or membership.owner_public_key == OWNER.public_key


BUNDLE = AdmissionBundle.create(OWNER, CERT)


def open_bundle(data: bytes) -> tuple[Membership, bytes] | None:
    return only(MembershipError, lambda: AdmissionBundle.open(data, GOLEM, now=NOW))


def test_valid_bundle_opens() -> None:
    assert open_bundle(BUNDLE) == (MEMBERSHIP, OWNER.clade_key)


@FUZZ
@given(st.binary(max_size=2048))
def test_bundles_from_arbitrary_bytes(data: bytes) -> None:
    assert open_bundle(data) is None


@FUZZ
@given(mutations_of(BUNDLE))
def test_mutated_bundles(data: bytes) -> None:
    opened = open_bundle(data)
    assert opened is None or opened == (MEMBERSHIP, OWNER.clade_key)


def test_every_truncation_of_a_bundle() -> None:
    for data in truncations(BUNDLE):
        assert open_bundle(data) is None


def _sealed_to_golem(secret: bytes) -> bytes:
    golem_x25519 = sodium.crypto_sign_ed25519_pk_to_curve25519(GOLEM.public_key)
    return bytes(sodium.crypto_box_seal(secret, golem_x25519))


@FUZZ
@given(st.one_of(
    st.lists(msgpack_values, max_size=6),
    st.tuples(st.just(CERT.to_bytes()) | st.binary(max_size=200), st.just(OWNER.public_key) | st.binary(max_size=40),
              st.just(OWNER.clade_name) | st.text(max_size=10),
              st.binary(max_size=100) | st.binary(max_size=80).map(_sealed_to_golem)).map(list),
), st.sampled_from([1, 1, 2]))
def test_owner_signed_bundles_of_wrong_shape(fields: list[object], version: int) -> None:
    """Signed by the owner it names (the signature passes), with garbage behind it: a bad
    certificate, another owner key, a sealed clade key of the wrong length or not sealed."""
    data = owner_signed(AdmissionBundle.TAG, version, fields)
    if data is not None:
        opened = open_bundle(data)
        assert opened is None or (opened[0].certificate == CERT and len(opened[1]) == 32)


BUNDLE_FIELDS = fields_of(fields_of(BUNDLE)[0])  # type: ignore[arg-type]


@FUZZ
@given(tree_mutated(BUNDLE_FIELDS) | owner_signed_certificates.map(
    lambda cert: [*BUNDLE_FIELDS[:2], cert, *BUNDLE_FIELDS[3:]]))
def test_owner_signed_bundles_with_any_field_replaced(value: object) -> None:
    data = signed_by_owner(value)
    if data is not None:
        owner_signed_bundle_opens_consistently(data)


def owner_signed_bundle_opens_consistently(data: bytes) -> None:
    """The owner may sign anything; what opens must still be a membership of this golem in
    the clade the bundle names, with a 32-byte clade key."""
    opened = open_bundle(data)
    if opened is not None:
        membership, clade_key = opened
        assert membership.certificate.peer_id == GOLEM.peer_id and len(clade_key) == 32
        assert membership.clade_id == clade_id_of(membership.owner_public_key, membership.clade_name)


def test_every_edit_of_an_owner_signed_bundle() -> None:
    edits = [*every_edit(BUNDLE_FIELDS),
             *([*BUNDLE_FIELDS[:2], cert, *BUNDLE_FIELDS[3:]] for cert in EDITED_CERTIFICATES)]
    for value in edits:
        data = signed_by_owner(value)
        assert data is not None
        owner_signed_bundle_opens_consistently(data)


# -- vault files -------------------------------------------------------------------------------

VAULT_KEY = b"\x33" * 32
VAULT_PLAIN = bytes(range(256)) * 4


def _vault(plain: bytes) -> bytes:
    sink = io.BytesIO()
    with EncryptingWriter(sink, golem=GOLEM.peer_id, created_ms=NOW_MS, clade_keys=[VAULT_KEY],
                          x25519_recipients=[]) as writer:
        writer.write(plain)
    return sink.getvalue()


VAULT = _vault(VAULT_PLAIN)


class ShortReads(io.RawIOBase):
    """A raw stream (a pipe, a socket, an HTTP body) that hands out at most `sizes[i]` bytes a
    read, in turn: a read may return less than asked without the file having ended."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._data, self._sizes, self._reads = data, sizes, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), self._sizes[self._reads % len(self._sizes)])
        self._reads += 1
        chunk, self._data = self._data[:size], self._data[size:]
        buffer[:len(chunk)] = chunk
        return len(chunk)


def read_vault(data: bytes, sizes: list[int] | None = None, *, source_reads: list[int] | None = None) -> bytes | None:
    """Read every plaintext byte (in `sizes` steps) and check the end; None on `VaultError`.
    With `source_reads`, the file comes through `ShortReads` in reads of those sizes."""
    source = io.BytesIO(data) if source_reads is None else ShortReads(data, source_reads)
    try:
        reader = DecryptingReader(source, VaultKeys(clade_key=VAULT_KEY))  # type: ignore[arg-type]
        out = bytearray()
        for size in sizes or [-1]:
            out += reader.read(size)
        out += reader.read()
        assert reader.finished
        return bytes(out)
    except VaultError:
        return None


def test_valid_vault_reads_back() -> None:
    assert read_vault(VAULT) == VAULT_PLAIN


@FUZZ
@given(st.binary(max_size=1024))
def test_vaults_from_arbitrary_bytes(data: bytes) -> None:
    assert read_vault(data) is None
    assert read_vault(MAGIC + data) is None
    only(VaultError, lambda: read_header(io.BytesIO(MAGIC + data)))


@FUZZ
@given(mutations_of(VAULT), st.lists(st.integers(1, 400), max_size=6))
def test_mutated_vaults(data: bytes, sizes: list[int]) -> None:
    plain = read_vault(data, sizes)
    assert plain is None or plain == VAULT_PLAIN  # authenticated: no other plaintext comes out


BIG_PLAIN = bytes(range(256)) * 600  # three chunks
BIG_VAULT = _vault(BIG_PLAIN)


def test_a_vault_fed_byte_by_byte_reads_back() -> None:
    assert read_vault(BIG_VAULT, source_reads=[1]) == BIG_PLAIN


@settings(FUZZ, max_examples=40)  # 150 KiB a example; byte by byte is the test above
@given(st.lists(st.integers(100, 70_000), min_size=1, max_size=6), st.lists(st.integers(1, 100_000), max_size=4))
def test_a_vault_read_in_any_pieces_reads_back(source_reads: list[int], sizes: list[int]) -> None:
    assert read_vault(BIG_VAULT, sizes, source_reads=source_reads) == BIG_PLAIN


@FUZZ
@given(mutations_of(VAULT), st.lists(st.integers(1, 300), min_size=1, max_size=6))
def test_mutated_vaults_in_short_reads(data: bytes, source_reads: list[int]) -> None:
    plain = read_vault(data, source_reads=source_reads)
    assert plain is None or plain == VAULT_PLAIN


def test_every_truncation_of_a_vault() -> None:
    for data in truncations(VAULT):
        assert read_vault(data) is None


def _vault_file(header_fields: list[object]) -> bytes | None:
    header = packable(header_fields)
    if header is None:
        return None
    return MAGIC + struct.pack(">I", len(header)) + header + b"\x00" * 24 + b"\x00" * 40


@FUZZ
@given(st.lists(msgpack_values, max_size=6), st.lists(st.lists(msgpack_values, max_size=4), max_size=3))
def test_vault_headers_of_wrong_shape(fields: list[object], recipients: list[object]) -> None:
    for header in (["clade.vault", 1, *fields], ["clade.vault", 1, GOLEM.peer_id, NOW_MS, 64 * 1024, recipients]):
        data = _vault_file(header)
        if data is not None:
            only(VaultError, functools.partial(read_header, io.BytesIO(data)))
            assert read_vault(data) is None


_HEADER_END = len(MAGIC) + 4 + struct.unpack(">I", VAULT[len(MAGIC):len(MAGIC) + 4])[0]
VAULT_HEADER = fields_of(VAULT[len(MAGIC) + 4:_HEADER_END])


@FUZZ
@given(tree_mutated(VAULT_HEADER))
def test_vault_headers_with_any_field_replaced(value: object) -> None:
    header = packable(value)
    if header is not None:
        data = MAGIC + struct.pack(">I", len(header)) + header + VAULT[_HEADER_END:]
        only(VaultError, functools.partial(read_header, io.BytesIO(data)))
        plain = read_vault(data)
        assert plain is None or plain == VAULT_PLAIN


def test_every_edit_of_a_vault_header() -> None:
    for value in every_edit(VAULT_HEADER):
        header = pack(value)
        data = MAGIC + struct.pack(">I", len(header)) + header + VAULT[_HEADER_END:]
        only(VaultError, functools.partial(read_header, io.BytesIO(data)))
        plain = read_vault(data)
        assert plain is None or plain == VAULT_PLAIN


@FUZZ
@given(st.binary(max_size=64), st.binary(min_size=24, max_size=24), st.binary(max_size=200))
def test_vault_whose_data_key_unwraps_to_garbage(data_key: bytes, stream_header: bytes, body: bytes) -> None:
    """A header made with the right clade key around a data key of any length, then garbage."""
    wrapped = bytes(nacl.secret.SecretBox(VAULT_KEY).encrypt(data_key))
    header = pack(["clade.vault", 1, GOLEM.peer_id, NOW_MS, 64 * 1024, [["clade", clade_key_id(VAULT_KEY), wrapped]]])
    data = MAGIC + struct.pack(">I", len(header)) + header + stream_header + body
    assert read_vault(data) is None


def test_a_mutated_header_is_refused_not_crashed_on_every_bit() -> None:
    """Every bit of the magic, length and header fields, one at a time."""
    end = len(MAGIC) + 4 + struct.unpack(">I", VAULT[len(MAGIC):len(MAGIC) + 4])[0]
    for pos in range(end):
        for bit in range(8):
            data = bytearray(VAULT)
            data[pos] ^= 1 << bit
            assert read_vault(bytes(data)) is None, (pos, bit)
