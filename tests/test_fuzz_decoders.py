"""Every decoder a peer or a file can reach, under hostile bytes: only its documented error escapes.

For each decoder: arbitrary bytes, mutated valid encodings (bit flips, overwritten, inserted
and deleted bytes, appended bytes), truncation at every length, and — where the content is
signed or sealed — structure-aware garbage carried under a *valid* signature or clade key,
so the checks behind the signature are reached too. A mutated encoding that still decodes
must decode to the original (signatures and AEAD leave no other way through).

Decoders (reachable from → the only error that may escape):

- `daemon.p2p.frames.read_frame` (every libp2p stream) → RemoteProtocolError; EOFError at a clean end
- `daemon.p2p.messages.decode` (hello and sync frames) → RemoteProtocolError
- `crypto.open_envelope` (GossipSub messages) → EnvelopeError
- `daemon.p2p.gossip.GossipCodec.open` (GossipSub messages, the whole check) → RemoteProtocolError
- `Certificate.from_bytes` + `verify` (a hello; inside envelopes and bundles) → MembershipError
- `RevocationList.from_bytes` + `verify` (a hello; `revocations.bin`) → MembershipError
- `Membership.from_bytes` (`membership.cert`) → MembershipError
- `AdmissionBundle.open` (`clade join BUNDLE`) → MembershipError
- `crypto.vault.read_header`, `DecryptingReader` (`clade restore` / `backup verify`) → VaultError

The delta codec (`crdt.decode_delta`) has its own file, tests/test_crdt_codec_fuzz.py; here
it is reached through `GossipCodec.open` with member-sealed garbage.
"""

from __future__ import annotations

import copy
import functools
import io
import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgpack
import nacl.bindings as sodium
import nacl.secret
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crdt import CausalContext, Delta, Kind, RemoteProtocolError
from crypto import (
    AdmissionBundle,
    Certificate,
    EnvelopeError,
    Identity,
    Membership,
    MembershipError,
    OwnerKey,
    RevocationList,
    clade_id_of,
    open_envelope,
    seal_envelope,
)
from crypto.vault import MAGIC, DecryptingReader, EncryptingWriter, VaultError, VaultKeys, clade_key_id, read_header
from crypto.wire import pack
from daemon.p2p import messages
from daemon.p2p.frames import encode_frame, read_frame
from daemon.p2p.gossip import GossipCodec
from tests.crdt_sim import IDENTITIES, SimReplica

# derandomize: the same examples on every run (a shared CI machine must not find a new one
# by luck); the budget keeps the whole file well under a minute on two shared cores.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

NOW = 1_800_000_000
NOW_MS = NOW * 1000
OWNER = OwnerKey(b"\x21" * 32, "alpha", b"\x22" * 32)
GOLEM = Identity(b"\x07" * 32)
STRANGER = Identity(b"\x08" * 32)
CERT = Certificate.issue(OWNER, GOLEM.peer_id, generation=1, not_before=NOW - 60, not_after=NOW + 86_400)
MEMBERSHIP = Membership(certificate=CERT, owner_public_key=OWNER.public_key, clade_name=OWNER.clade_name)
REVOCATIONS = RevocationList.issue(OWNER, version=3, revoked=[STRANGER.peer_id], issued_at=NOW)


T = TypeVar("T")


# -- mutation ----------------------------------------------------------------------------------

@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """`valid` with 1..8 edits: a flipped bit, an overwritten, inserted or deleted byte, a tail."""
    message = bytearray(valid)
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["flip", "set", "insert", "delete", "extend"]))
        if action == "extend" or not message:
            message += draw(st.binary(min_size=1, max_size=16))
            continue
        pos = draw(st.integers(0, len(message) - 1))
        if action == "flip":
            message[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            message[pos] = draw(st.integers(0, 255))
        elif action == "insert":
            message[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            del message[pos]
    return bytes(message)


def mutations_of(*valid: bytes) -> st.SearchStrategy[bytes]:
    return st.sampled_from(valid).flatmap(mutated)


def truncations(valid: bytes) -> Iterator[bytes]:
    """Every strict prefix, and the valid encoding with one extra byte."""
    for cut in range(len(valid)):
        yield valid[:cut]
    yield valid + b"\x00"


# Leaves include the sizes and values the decoders single out (16-byte ids, 32-byte keys,
# 64-byte signatures, a real peer id, the edges of the integer ranges).
msgpack_leaves = (
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.floats() | st.binary(max_size=40)
    | st.text(max_size=40)
    | st.sampled_from([bytes(16), bytes(32), bytes(64), "", 0, 1, -1, 2**31, 2**63, 2**64 - 1, -(2**63),
                       IDENTITIES[0].peer_id, "clade.cert", "clade"])
)
msgpack_values = st.recursive(msgpack_leaves, lambda children: st.lists(children, max_size=6), max_leaves=20)


def _lists(value: object) -> Iterator[list[object]]:
    if isinstance(value, list):
        yield value
        for item in value:
            yield from _lists(item)


@st.composite
def tree_mutated(draw: st.DrawFn, valid: object) -> object:
    """Structure-aware: the decoded `valid` with 1..3 edits, each in a list node drawn
    uniformly (the top level, a context row, the recipients, …): an item replaced by any
    msgpack value, removed, or a new one inserted. So every field and every nested row meets
    every type and a wrong count."""
    value = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(list(_lists(value))))
        action = draw(st.sampled_from(["replace", "replace", "drop", "insert"]) if node else st.just("insert"))
        index = draw(st.integers(0, len(node) - (0 if action == "insert" else 1)))
        if action == "replace":
            node[index] = draw(msgpack_values)
        elif action == "drop":
            del node[index]
        else:
            node.insert(index, draw(msgpack_values))
    return value


# One representative of every msgpack type and of the sizes and values decoders single out.
SAMPLES: list[object] = [None, True, False, 0, 1, -1, 2**31, 2**63, 2**64 - 1, -(2**63), 1.5, "", "x" * 300,
                         IDENTITIES[0].peer_id, b"", bytes(16), bytes(32), bytes(64), [], [[]], [b"x"], ["x"], [1]]


def _list_paths(value: object, prefix: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    if isinstance(value, list):
        yield prefix
        for i, item in enumerate(value):
            yield from _list_paths(item, (*prefix, i))


def every_edit(valid: object) -> Iterator[object]:
    """Exhaustively, `valid` with one item of one list node (any depth) replaced by each of
    SAMPLES, or removed, or with one SAMPLE inserted anywhere: every field meets every type."""
    for path in _list_paths(valid):
        size = len(_at(valid, path))
        for index in range(size + 1):
            edits: list[tuple[str, object]] = [("insert", sample) for sample in SAMPLES]
            if index < size:
                edits += [("drop", None)] + [("replace", sample) for sample in SAMPLES]
            for action, sample in edits:
                value = copy.deepcopy(valid)
                node = _at(value, path)
                if action == "replace":
                    node[index] = sample
                elif action == "drop":
                    del node[index]
                else:
                    node.insert(index, sample)
                yield value


def _at(value: object, path: tuple[int, ...]) -> list[object]:
    for i in path:
        assert isinstance(value, list)
        value = value[i]
    assert isinstance(value, list)
    return value


def fields_of(data: bytes) -> list[object]:
    value = msgpack.unpackb(data, raw=False)
    assert isinstance(value, list)
    return value


def packable(value: object) -> bytes | None:
    try:
        return bytes(msgpack.packb(value, use_bin_type=True))
    except (OverflowError, ValueError):
        return None


def only(error: type[BaseException] | tuple[type[BaseException], ...], decode: Callable[[], T]) -> T | None:
    """Run `decode`; return its value, or None if it raised `error`. Anything else fails the test."""
    try:
        return decode()
    except error:
        return None


def refused(error: type[BaseException], check: Callable[[], None]) -> bool:
    """True if `check` raised `error`, False if it passed. Anything else fails the test."""
    try:
        check()
    except error:
        return True
    return False


# -- frames: read from a stream, whole, byte by byte, in any chunks ---------------------------

class ChunkStream:
    """A libp2p-like read side over fixed chunks; at the end, b"" or (like libp2p) EOFError."""

    def __init__(self, data: bytes, sizes: list[int], *, eof_raises: bool) -> None:
        self._data = data
        self._sizes = sizes or [1]
        self._eof_raises = eof_raises
        self._reads = 0

    async def read(self, n: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if not self._data:
            if self._eof_raises:
                raise EOFError("stream closed")
            return b""
        size = self._sizes[self._reads % len(self._sizes)]
        self._reads += 1
        take = min(size, len(self._data), len(self._data) if n is None else n)
        chunk, self._data = self._data[:take], self._data[take:]
        return chunk


async def _read_all(stream: ChunkStream, max_bytes: int | None) -> tuple[list[bytes], BaseException]:
    frames: list[bytes] = []
    kw = {} if max_bytes is None else {"max_bytes": max_bytes}
    while True:
        try:
            frames.append(await read_frame(stream, **kw))
        except (RemoteProtocolError, EOFError) as exc:
            return frames, exc


def read_frames(data: bytes, sizes: list[int], *, eof_raises: bool = False,
                max_bytes: int | None = None) -> tuple[list[bytes], BaseException]:
    """Every frame in `data` and what ended the reading (only the documented errors may)."""
    return trio.run(_read_all, ChunkStream(data, sizes, eof_raises=eof_raises), max_bytes)


FRAME_PAYLOADS = [b"", b"x", b"y" * 127, b"z" * 128, bytes(range(256))]
FRAME_STREAM = b"".join(encode_frame(p) for p in FRAME_PAYLOADS)
chunkings = st.lists(st.integers(1, 300), min_size=1, max_size=8)


@FUZZ
@given(st.binary(max_size=2048), chunkings, st.booleans())
def test_frames_from_arbitrary_bytes(data: bytes, sizes: list[int], eof_raises: bool) -> None:
    frames, end = read_frames(data, sizes, eof_raises=eof_raises, max_bytes=1024)
    assert sum(len(f) for f in frames) <= len(data)
    if isinstance(end, RemoteProtocolError):
        assert end.reason in {"truncated", "oversized", "malformed"}


@FUZZ
@given(chunkings, st.booleans())
def test_valid_frames_read_back_in_any_chunking(sizes: list[int], eof_raises: bool) -> None:
    frames, end = read_frames(FRAME_STREAM, sizes, eof_raises=eof_raises)
    assert frames == FRAME_PAYLOADS
    assert type(end) is EOFError


def test_valid_frames_read_back_byte_by_byte_and_every_truncation_is_named() -> None:
    boundaries = {0}
    for payload in FRAME_PAYLOADS:
        boundaries.add(max(boundaries) + len(encode_frame(payload)))
    async def every_cut() -> list[tuple[list[bytes], BaseException]]:
        return [await _read_all(ChunkStream(FRAME_STREAM[:cut], [1], eof_raises=False), None)
                for cut in range(len(FRAME_STREAM) + 1)]

    for cut, (frames, end) in enumerate(trio.run(every_cut)):
        whole = sorted(b for b in boundaries if b <= cut)
        assert frames == FRAME_PAYLOADS[: len(whole) - 1]
        if cut in boundaries:
            assert type(end) is EOFError, cut
        else:
            assert isinstance(end, RemoteProtocolError) and end.reason == "truncated", (cut, end)


@FUZZ
@given(mutations_of(FRAME_STREAM), chunkings)
def test_mutated_frames(data: bytes, sizes: list[int]) -> None:
    frames, end = read_frames(data, sizes)
    assert sum(len(f) for f in frames) <= len(data)
    assert not isinstance(end, RemoteProtocolError) or end.reason in {"truncated", "oversized", "malformed"}


async def test_frames_fed_byte_by_byte_through_a_memory_stream() -> None:
    """The real trio stream machinery: a writer sends one byte at a time, the reader waits."""
    send, receive = trio.testing.memory_stream_pair()

    class Reader:
        async def read(self, n: int | None = None) -> bytes:
            return bytes(await receive.receive_some(n))

    async def writer() -> None:
        for i in range(len(FRAME_STREAM)):
            await send.send_all(FRAME_STREAM[i:i + 1])
            await trio.testing.wait_all_tasks_blocked()
        await send.aclose()

    got: list[bytes] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            with pytest.raises(EOFError):
                while True:
                    got.append(await read_frame(Reader()))
    assert got == FRAME_PAYLOADS


# -- p2p messages ------------------------------------------------------------------------------

CONTEXT = CausalContext({IDENTITIES[0].peer_id: 5}, {IDENTITIES[1].peer_id: [3, 9]})
MESSAGES: list[messages.Message] = [
    messages.Hello(OWNER.clade_id, CERT.to_bytes(), REVOCATIONS.to_bytes(), ("/ip4/127.0.0.1/tcp/4001",),
                   (f"/ip4/10.0.0.2/tcp/4001/p2p/{STRANGER.peer_id}",)),
    messages.Refused("revoked", "membership check failed"),
    messages.Want(CONTEXT),
    messages.DeltaFrame(b"\x93\x01\x90\x90"),
    messages.End(True, CONTEXT),
]
MESSAGE_BYTES = [messages.encode(m) for m in MESSAGES]
MESSAGE_REASONS = {"malformed", "oversized", "unknown_version"}


def decode_message(data: bytes) -> messages.Message | None:
    try:
        message = messages.decode(data)
    except RemoteProtocolError as exc:
        assert exc.reason in MESSAGE_REASONS
        return None
    assert messages.decode(messages.encode(message)) == message  # what decodes re-encodes stably
    return message


def test_valid_messages_decode() -> None:
    assert [messages.decode(b) for b in MESSAGE_BYTES] == MESSAGES


@FUZZ
@given(st.binary(max_size=2048))
def test_messages_from_arbitrary_bytes(data: bytes) -> None:
    decode_message(data)


@FUZZ
@given(mutations_of(*MESSAGE_BYTES))
def test_mutated_messages(data: bytes) -> None:
    decode_message(data)


def test_every_truncation_of_every_message() -> None:
    for valid in MESSAGE_BYTES:
        for data in truncations(valid):
            assert decode_message(data) is None, data


@FUZZ
@given(st.sampled_from(MESSAGE_BYTES).flatmap(lambda data: tree_mutated(fields_of(data))))
def test_messages_with_any_field_replaced(value: object) -> None:
    data = packable(value)
    if data is not None:
        decode_message(data)


def test_every_edit_of_every_message() -> None:
    for valid in MESSAGE_BYTES:
        for value in every_edit(fields_of(valid)):
            decode_message(pack(value))


@FUZZ
@given(st.sampled_from(["clade.hello", "clade.refused", "clade.want", "clade.delta", "clade.end", "x"]),
       st.sampled_from([1, 1, 1, 2, 0, -1, True, 1.0, "1", None]), st.lists(msgpack_values, max_size=6))
def test_messages_of_the_right_tag_and_wrong_fields(tag: str, version: object, fields: list[object]) -> None:
    data = packable([tag, version, *fields])
    if data is not None:
        decode_message(data)


@FUZZ
@given(msgpack_values)
def test_contexts_of_wrong_shape(value: object) -> None:
    for body in (["clade.want", 1, value], ["clade.end", 1, False, value], ["clade.want", 1, [value]],
                 ["clade.want", 1, [[IDENTITIES[0].peer_id, 0, value]]],
                 ["clade.want", 1, [[IDENTITIES[0].peer_id, value, []]]]):
        data = packable(body)
        if data is not None:
            decode_message(data)


# -- gossip envelopes --------------------------------------------------------------------------

def _delta_bytes() -> bytes:
    from crdt import encode_delta

    author = SimReplica(GOLEM, wall=NOW_MS)
    ops = author.create("Aave utilisation above 90% means withdrawals can stall", Kind.WARNING)
    return encode_delta(Delta(tuple(ops), CausalContext()))


DELTA = _delta_bytes()
ENVELOPE = seal_envelope(DELTA, sender=GOLEM, membership=MEMBERSHIP, clade_key=OWNER.clade_key, now_ms=NOW_MS)


def open_(data: bytes, *, signed_by_golem: bool = False) -> object:
    """Open with the clade's keys; only `EnvelopeError` may escape. What opens is GOLEM's
    original batch, or (`signed_by_golem`: the test signed an edited inner part) GOLEM's."""
    try:
        envelope = open_envelope(data, clade_key=OWNER.clade_key, owner_public_key=OWNER.public_key,
                                 clade_id=OWNER.clade_id, now_ms=NOW_MS, revocations=REVOCATIONS)
    except EnvelopeError:
        return None
    assert envelope.sender == GOLEM.peer_id
    assert signed_by_golem or envelope.batch == DELTA  # nothing else can open
    return envelope


def sealed(plaintext: bytes) -> bytes:
    """Bytes that decrypt with the clade key: what a member (or a leaked key) can send."""
    return b"\x01" + bytes(nacl.secret.SecretBox(OWNER.clade_key).encrypt(plaintext, b"\x00" * 24))


def test_valid_envelope_opens() -> None:
    assert open_(ENVELOPE) is not None


@FUZZ
@given(st.binary(max_size=1024))
def test_envelopes_from_arbitrary_bytes(data: bytes) -> None:
    assert open_(data) is None
    assert open_(b"\x01" + data) is None


@FUZZ
@given(mutations_of(ENVELOPE))
def test_mutated_envelopes(data: bytes) -> None:
    open_(data)


def test_every_truncation_of_an_envelope() -> None:
    for data in truncations(ENVELOPE):
        assert open_(data) is None


@FUZZ
@given(st.one_of(st.binary(max_size=512), msgpack_values.map(packable).filter(bool)))
def test_sealed_garbage_plaintexts(plaintext: bytes) -> None:
    assert open_(sealed(plaintext)) is None


@FUZZ
@given(st.lists(msgpack_values, max_size=7), st.binary(max_size=80), st.booleans())
def test_sealed_inner_of_wrong_shape(fields: list[object], signature: bytes, real_tag: bool) -> None:
    inner = packable(["clade.env", 1, *fields] if real_tag else fields)
    if inner is not None:
        assert open_(sealed(pack([inner, signature]))) is None


@FUZZ
@given(mutations_of(CERT.to_bytes()) | st.binary(max_size=300), st.integers(-(2**63), 2**63 - 1))
def test_sealed_inner_with_a_bad_certificate(certificate: bytes, sent_ms: int) -> None:
    """A well-formed, sender-signed inner part whose certificate bytes are garbage."""
    inner = pack(["clade.env", 1, bytes.fromhex(OWNER.clade_id), certificate, sent_ms, DELTA])
    plaintext = pack([inner, GOLEM.sign(b"clade.envelope.v1\x00" + inner)])
    opened = only(EnvelopeError, lambda: open_envelope(
        sealed(plaintext), clade_key=OWNER.clade_key, owner_public_key=OWNER.public_key, clade_id=OWNER.clade_id,
        now_ms=NOW_MS, revocations=REVOCATIONS))
    assert opened is None or certificate == CERT.to_bytes() or Certificate.from_bytes(certificate) == CERT


ENVELOPE_INNER: list[object] = ["clade.env", 1, bytes.fromhex(OWNER.clade_id), CERT.to_bytes(), NOW_MS, DELTA]


def signed_by_sender(inner_value: object) -> bytes | None:
    inner = packable(inner_value)
    return None if inner is None else sealed(pack([inner, GOLEM.sign(b"clade.envelope.v1\x00" + inner)]))


@FUZZ
@given(tree_mutated(ENVELOPE_INNER))
def test_sender_signed_sealed_inner_with_any_field_replaced(value: object) -> None:
    data = signed_by_sender(value)
    if data is not None:
        open_(data, signed_by_golem=True)


def test_every_edit_of_a_sender_signed_inner() -> None:
    for value in every_edit(ENVELOPE_INNER):
        data = signed_by_sender(value)
        assert data is not None
        open_(data, signed_by_golem=True)


def gossip_codec() -> GossipCodec:
    return GossipCodec(identity=GOLEM, membership=MEMBERSHIP, clade_key=OWNER.clade_key,
                       revocations=lambda: REVOCATIONS, max_skew_ms=60_000)


@FUZZ
@given(st.one_of(st.binary(max_size=1024), mutations_of(DELTA), msgpack_values.map(packable).filter(bool)))
def test_gossip_codec_on_member_sealed_garbage_batches(batch: bytes) -> None:
    """A member's validly sealed envelope whose batch is garbage: the delta codec refuses it."""
    data = seal_envelope(batch, sender=GOLEM, membership=MEMBERSHIP, clade_key=OWNER.clade_key, now_ms=NOW_MS)
    opened = only(RemoteProtocolError, lambda: gossip_codec().open(data, publisher=GOLEM.peer_id, now_ms=NOW_MS))
    assert opened is None or opened.sender == GOLEM.peer_id


@FUZZ
@given(mutations_of(ENVELOPE) | st.binary(max_size=512))
def test_gossip_codec_on_mutated_envelopes(data: bytes) -> None:
    opened = only(RemoteProtocolError, lambda: gossip_codec().open(data, publisher=GOLEM.peer_id, now_ms=NOW_MS))
    assert opened is None or opened.sender == GOLEM.peer_id


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


def read_vault(data: bytes, sizes: list[int] | None = None) -> bytes | None:
    """Read every plaintext byte (in `sizes` steps) and check the end; None on `VaultError`."""
    try:
        reader = DecryptingReader(io.BytesIO(data), VaultKeys(clade_key=VAULT_KEY))
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

