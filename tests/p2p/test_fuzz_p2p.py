"""Fuzzing what a peer sends: frames on a stream, p2p messages, gossip envelopes (see tests/helpers/fuzzing.py)."""

from __future__ import annotations

import nacl.secret
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from crdt import CausalContext, Delta, Kind, RemoteProtocolError
from crypto import (
    Certificate,
    EnvelopeError,
    open_envelope,
    seal_envelope,
)
from crypto.wire import pack
from daemon.p2p import messages
from daemon.p2p.frames import encode_frame, read_frame
from daemon.p2p.gossip import GossipCodec
from daemon.p2p.host import parse_multiaddr
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.fuzzing import (
    CERT,
    FUZZ,
    GOLEM,
    MEMBERSHIP,
    NOW_MS,
    OWNER,
    REVOCATIONS,
    STRANGER,
    every_edit,
    fields_of,
    msgpack_values,
    mutations_of,
    only,
    packable,
    tree_mutated,
    truncations,
)

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


# -- addresses a peer names (hello addrs and siblings, at most MAX_ADDR_CHARS each) ------------

VALID_ADDRS = ["/ip4/127.0.0.1/tcp/4001", "/ip6/::1/tcp/4001", "/dns4/golem.example/tcp/4001",
               f"/ip4/10.0.0.2/tcp/4001/p2p/{STRANGER.peer_id}"]
addr_texts = st.one_of(
    st.text(max_size=messages.MAX_ADDR_CHARS),
    mutations_of(*(a.encode() for a in VALID_ADDRS)).map(lambda b: b.decode("utf-8", "replace")),
    st.lists(st.sampled_from(["/ip4", "/ip6", "/tcp", "/udp", "/p2p", "/dns4", "/quic", "/", "1.2.3.4", "::",
                              "65536", "-1", STRANGER.peer_id, "%", "\x00"]), max_size=12).map("".join),
)


@FUZZ
@given(addr_texts)
def test_addresses_from_a_peer(text: str) -> None:
    """`parse_multiaddr` (what dialing and peer exchange use) raises only `ValueError`."""
    parsed = only(ValueError, lambda: parse_multiaddr(text[: messages.MAX_ADDR_CHARS]))
    assert parsed is None or parse_multiaddr(str(parsed)) == parsed  # what parses, round-trips


def test_valid_addresses_parse() -> None:
    assert [str(parse_multiaddr(a)) for a in VALID_ADDRS] == VALID_ADDRS
