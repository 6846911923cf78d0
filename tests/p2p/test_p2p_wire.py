"""Unit tests of the p2p wire and bookkeeping, no network: frames, messages, the peer book."""

from __future__ import annotations

import random

import msgpack
import pytest
import trio
import trio.testing

from crdt import CausalContext, RemoteProtocolError
from daemon.p2p import messages
from daemon.p2p.frames import MAX_FRAME_BYTES, close_quietly, encode_frame, read_frame
from daemon.p2p.peers import REDIAL_CAP_S, PeerBook, PeerRecord, redial_delay
from tests.helpers.crdt_sim import IDENTITIES

PEER = [identity.peer_id for identity in IDENTITIES]


class Stream:
    """A read side over `data` that records how many bytes were taken; at the end b"" or EOFError."""

    def __init__(self, data: bytes, *, eof_raises: bool = False) -> None:
        self.data = data
        self.taken = 0
        self.eof_raises = eof_raises

    async def read(self, n: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self.taken >= len(self.data):
            if self.eof_raises:
                raise EOFError("closed")
            return b""
        end = len(self.data) if n is None else self.taken + n
        chunk = self.data[self.taken:end]
        self.taken += len(chunk)
        return chunk


async def read_error(data: bytes, **kw: int) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        await read_frame(Stream(data), **kw)
    return info.value


# -- frames ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("size", "prefix"), [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16_383, b"\xff\x7f"), (16_384, b"\x80\x80\x01"), (MAX_FRAME_BYTES, None),
])
async def test_frame_round_trip_and_varint_prefix(size: int, prefix: bytes | None) -> None:
    payload = bytes(random.Random(size).randbytes(size))
    frame = encode_frame(payload)
    if prefix is not None:
        assert frame[: len(prefix)] == prefix and len(frame) == len(prefix) + size
    stream = Stream(frame + encode_frame(b"next"))
    assert await read_frame(stream) == payload
    assert await read_frame(stream) == b"next"
    with pytest.raises(EOFError):
        await read_frame(stream)


def test_encoding_an_oversized_frame_is_a_local_error() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame(b"x" * (MAX_FRAME_BYTES + 1))
    with pytest.raises(ValueError, match="exceeds 10"):
        encode_frame(b"x" * 11, max_bytes=10)
    assert encode_frame(b"x" * 10, max_bytes=10) == b"\x0a" + b"x" * 10


@pytest.mark.parametrize("announced", [MAX_FRAME_BYTES + 1, 2**32, 2**63])
async def test_an_oversized_frame_is_refused_before_its_body_is_read(announced: int) -> None:
    prefix = b""  # the varint by hand: encode_frame refuses to make an oversized frame
    n = announced
    while True:
        prefix += bytes([(n & 0x7F) | (0x80 if n >> 7 else 0)])
        n >>= 7
        if not n:
            break
    stream = Stream(prefix + b"\x00" * 4096)
    with pytest.raises(RemoteProtocolError) as info:
        await read_frame(stream)
    assert info.value.reason == "oversized"
    assert stream.taken <= len(prefix)  # not one byte of the body was read


async def test_a_frame_at_a_custom_cap() -> None:
    assert await read_frame(Stream(encode_frame(b"12345")), max_bytes=5) == b"12345"
    assert (await read_error(encode_frame(b"123456"), max_bytes=5)).reason == "oversized"


async def test_a_length_prefix_longer_than_ten_bytes_is_malformed() -> None:
    assert await read_frame(Stream(b"\x80" * 9 + b"\x00")) == b""  # ten bytes, non-canonical zero: accepted
    assert (await read_error(b"\x80" * 10 + b"\x00")).reason == "malformed"


@pytest.mark.parametrize("eof_raises", [False, True])
async def test_how_a_stream_ends(eof_raises: bool) -> None:
    with pytest.raises(EOFError):
        await read_frame(Stream(b"", eof_raises=eof_raises))
    for data in (b"\x80", b"\x05abc", b"\x80\x01" + b"x" * 127):
        with pytest.raises(RemoteProtocolError) as info:
            await read_frame(Stream(data, eof_raises=eof_raises))
        assert info.value.reason == "truncated"


async def test_close_quietly_swallows_a_failing_close_and_gives_up_on_a_hanging_one(
        autojump_clock: trio.testing.MockClock) -> None:
    class Failing:
        closed = False

        async def close(self) -> None:
            self.closed = True
            raise OSError("reset by peer")

    class Hanging:
        async def close(self) -> None:
            await trio.sleep_forever()

    failing = Failing()
    await close_quietly(failing)
    assert failing.closed
    start = trio.current_time()
    await close_quietly(Hanging())
    assert trio.current_time() - start == pytest.approx(2.0)


# -- messages ----------------------------------------------------------------------------------

CLADE = "ab" * 16
CONTEXT = CausalContext({PEER[0]: 4}, {PEER[1]: [2, 7]})
ROWS = sorted([[PEER[0], 4, []], [PEER[1], 0, [2, 7]]])  # rows go out sorted by writer
HELLO = messages.Hello(CLADE, b"cert", b"", ("/ip4/127.0.0.1/tcp/1",), (f"/ip4/10.0.0.1/tcp/2/p2p/{PEER[2]}",))


@pytest.mark.parametrize(("message", "layout"), [
    (HELLO, ["clade.hello", 1, bytes.fromhex(CLADE), b"cert", b"", ["/ip4/127.0.0.1/tcp/1"],
             [f"/ip4/10.0.0.1/tcp/2/p2p/{PEER[2]}"]]),
    (messages.Refused("revoked", "check failed"), ["clade.refused", 1, "revoked", "check failed"]),
    (messages.Want(CONTEXT), ["clade.want", 1, ROWS]),
    (messages.DeltaFrame(b"\x93\x01\x90\x90"), ["clade.delta", 1, b"\x93\x01\x90\x90"]),
    (messages.End(False, CausalContext()), ["clade.end", 1, False, []]),
    (messages.End(True, CONTEXT), ["clade.end", 1, True, ROWS]),
])
def test_each_message_has_its_documented_layout_and_round_trips(message: messages.Message,
                                                                 layout: list[object]) -> None:
    data = messages.encode(message)
    assert msgpack.unpackb(data, raw=False) == layout
    assert messages.decode(data) == message


def test_hello_without_siblings_defaults_to_none() -> None:
    hello = messages.Hello(CLADE, b"c", b"r", ())
    assert hello.siblings == () and messages.decode(messages.encode(hello)) == hello


def test_refusal_text_is_capped_both_ways() -> None:
    sent = messages.decode(messages.encode(messages.Refused("x", "d" * 2000)))
    assert isinstance(sent, messages.Refused) and sent.detail == "d" * 512
    received = messages.decode(msgpack.packb(["clade.refused", 1, "r" * 500, "d" * 5000]))
    assert received == messages.Refused("r" * 64, "d" * 512)


def refused_reason(body: object) -> str:
    with pytest.raises(RemoteProtocolError) as info:
        messages.decode(msgpack.packb(body, use_bin_type=True))
    return info.value.reason


@pytest.mark.parametrize("body", [
    ["clade.hello", 1, bytes(15), b"", b"", [], []],  # clade id of 15 bytes
    ["clade.hello", 1, CLADE, b"", b"", [], []],  # clade id as text
    ["clade.hello", 1, bytes(16), "cert", b"", [], []],
    ["clade.hello", 1, bytes(16), b"", None, [], []],
    ["clade.hello", 1, bytes(16), b"", b"", ["/a"] * (messages.MAX_ADDRS + 1), []],
    ["clade.hello", 1, bytes(16), b"", b"", ["a" * (messages.MAX_ADDR_CHARS + 1)], []],
    ["clade.hello", 1, bytes(16), b"", b"", [b"/ip4"], []],
    ["clade.hello", 1, bytes(16), b"", b"", [], ["/s"] * (messages.MAX_SIBLINGS + 1)],
    ["clade.hello", 1, bytes(16), b"", b"", []],  # siblings missing
    ["clade.refused", 1, "reason"],
    ["clade.refused", 1, "reason", 5],
    ["clade.want", 1],
    ["clade.want", 1, [[PEER[0], -1, []]]],
    ["clade.want", 1, [[PEER[0], 3, [2]]]],  # a cloud seq at or below the vv
    ["clade.want", 1, [["not a peer id!", 3, []]]],
    ["clade.delta", 1, "not bytes"],
    ["clade.end", 1, 1, []],  # `more` must be a bool
    ["clade.end", 1, True],
    ["clade.nope", 1],
    [1, 1],
    ["clade.want"],
    "clade.want",
])
def test_malformed_messages_are_refused(body: object) -> None:
    assert refused_reason(body) == "malformed"


def test_limits_that_are_exactly_allowed() -> None:
    addrs = ["a" * messages.MAX_ADDR_CHARS] * messages.MAX_ADDRS
    siblings = ["s"] * messages.MAX_SIBLINGS
    hello = messages.decode(msgpack.packb(["clade.hello", 1, bytes(16), b"", b"", addrs, siblings]))
    assert isinstance(hello, messages.Hello) and len(hello.addrs) == messages.MAX_ADDRS
    assert len(hello.siblings) == messages.MAX_SIBLINGS


@pytest.mark.parametrize("version", [0, 2, -1, True, 1.0, "1", None])
def test_other_versions_are_refused_as_unknown(version: object) -> None:
    assert refused_reason(["clade.want", version, []]) == "unknown_version"


def test_context_clouds_over_the_cap_are_oversized() -> None:
    rows = [[PEER[0], 0, list(range(1, 40_001))], [PEER[1], 0, list(range(1, 40_001))]]
    assert refused_reason(["clade.want", 1, rows]) == "oversized"


def test_a_full_delta_fits_in_one_frame() -> None:
    from crdt.replica import MAX_BATCH_BYTES

    data = messages.encode(messages.DeltaFrame(b"\x00" * MAX_BATCH_BYTES))
    assert len(encode_frame(data)) <= MAX_FRAME_BYTES + 10
    assert messages.decode(data) == messages.DeltaFrame(b"\x00" * MAX_BATCH_BYTES)


async def test_a_conversation_fed_byte_by_byte() -> None:
    """Messages in frames, the stream read one byte at a time, come out whole and in order."""
    sent: list[messages.Message] = [HELLO, messages.Want(CONTEXT), messages.DeltaFrame(b"d" * 300),
                                    messages.End(False, CONTEXT)]
    data = b"".join(encode_frame(messages.encode(m)) for m in sent)

    class OneByte(Stream):
        async def read(self, n: int | None = None) -> bytes:
            return await super().read(1)

    stream = OneByte(data)
    got = [messages.decode(await read_frame(stream)) for _ in sent]
    assert got == sent
    with pytest.raises(EOFError):
        await read_frame(stream)


# -- the peer book -----------------------------------------------------------------------------

def test_redial_delay_is_capped_exponential_with_jitter() -> None:
    rng = random.Random(7)
    for failures in range(0, 25):
        base = min(REDIAL_CAP_S, 0.5 * 2 ** min(failures, 16))
        delays = [redial_delay(failures, rng) for _ in range(50)]
        assert all(base * 0.5 <= d <= base for d in delays), (failures, delays)
        assert max(delays) - min(delays) > 0  # jittered, not constant
    assert redial_delay(3, random.Random(1)) == redial_delay(3, random.Random(1))  # seeded: reproducible
    assert redial_delay(100, random.Random(1)) <= REDIAL_CAP_S


def test_rtt_is_smoothed_and_json_is_rounded() -> None:
    record = PeerRecord(PEER[0])
    record.note_rtt(10.0)
    assert record.rtt_ms == 10.0
    record.note_rtt(20.0)
    assert record.rtt_ms == pytest.approx(13.0)
    record.rtt_ms = 1.23456
    shown = record.to_json()
    assert shown["rtt_ms"] == 1.235 and shown["peer_id"] == PEER[0] and shown["refused"] is None
    assert set(shown) == {"peer_id", "addrs", "connected", "member", "last_seen", "behind", "ahead", "withheld",
                          "rtt_ms", "msgs_in", "msgs_out", "bytes_in", "bytes_out", "refused", "last_sync",
                          "sync_protocol"}
    assert "hold_until" not in shown and "failures" not in shown  # internal dialing state stays inside


def test_get_creates_once_and_find_never_creates() -> None:
    book = PeerBook()
    assert book.find(PEER[0]) is None
    record = book.get(PEER[0])
    assert book.get(PEER[0]) is record and book.find(PEER[0]) is record
    assert book.find(PEER[1]) is None and [r.peer_id for r in book.all()] == [PEER[0]]


def test_addresses_newest_first_without_duplicates_at_most_eight() -> None:
    book = PeerBook()
    for i in range(10):
        book.add_addr(PEER[0], f"/ip4/10.0.0.{i}/tcp/1")
    record = book.add_addr(PEER[0], "/ip4/10.0.0.9/tcp/1")  # known: not moved, not doubled
    assert record.addrs == [f"/ip4/10.0.0.{i}/tcp/1" for i in range(9, 1, -1)]


def test_members_all_and_candidates() -> None:
    book = PeerBook()
    connected_member, idle_member, connected_stranger, learned, learned_member = (book.get(p) for p in PEER[:5])
    connected_member.member = connected_member.connected = True
    idle_member.member = True
    connected_stranger.connected = True
    learned.learned = True
    learned_member.learned = learned_member.member = True
    assert book.members() == [connected_member]  # members are the connected, verified ones
    assert book.candidates() == 1
    assert [r.peer_id for r in book.all()] == sorted([PEER[0], PEER[2]]) + sorted([PEER[1], PEER[3], PEER[4]])


def test_a_hold_stays_on_the_record() -> None:
    book = PeerBook()
    held = book.get(PEER[0])
    held.hold_until, held.refused, held.blacklisted = float("inf"), "revoked", True
    book.add_addr(PEER[0], "/ip4/10.0.0.1/tcp/1")
    assert book.get(PEER[0]) is held and held.hold_until == float("inf") and held.refused == "revoked"


def test_a_full_book_evicts_the_oldest_candidates_and_keeps_siblings() -> None:
    """Learned addresses never admitted (peer exchange, mDNS) fill the book: the least recently
    used go first; members, connected peers and bootstraps stay. (Strangers have their own,
    smaller cap: tests/p2p/test_p2p_strangers.py.)"""
    book = PeerBook()
    keep = {}
    for name, flags in (("connected", {"connected": True}), ("member", {"member": True}),
                        ("bootstrap", {"dial": True})):
        record = book.get(f"keep{name}")
        for attr, value in flags.items():
            setattr(record, attr, value)
        record.last_seen_ms = 0  # older than every stranger: age alone does not evict
        keep[name] = record
    learned_dial = book.get("learneddial")
    learned_dial.dial = learned_dial.learned = True
    learned_dial.last_seen_ms = 1
    for i in range(PeerBook.MAX_PEERS - 4):
        candidate = book.get(f"stranger{i:04d}")
        candidate.learned = candidate.dial = True
    assert len(book.all()) == PeerBook.MAX_PEERS
    book.get("newcomer")
    ids = {r.peer_id for r in book.all()}
    assert len(ids) <= PeerBook.MAX_PEERS and "newcomer" in ids
    assert {r.peer_id for r in keep.values()} <= ids
    assert "learneddial" not in ids and "stranger0000" not in ids  # the oldest strangers went first
    assert f"stranger{PeerBook.MAX_PEERS - 5:04d}" in ids  # the newest stayed
    evicted = PeerBook.MAX_PEERS + 1 - len(ids)
    assert evicted == PeerBook.MAX_PEERS // 10


def test_a_peers_refusal_reason_is_counted_only_from_our_own_vocabulary() -> None:
    """A refusal's reason is the peer's words: known reasons keep their counter, anything
    else (made up, hostile, one per hello) lands in one "other" counter."""
    from daemon.p2p.admission import counted_refusal

    assert counted_refusal("revoked") == "revoked"
    assert counted_refusal("other_clade") == "other_clade"
    assert counted_refusal("not_a_member") == "not_a_member"
    made_up = {counted_refusal(f"made_up_{i}") for i in range(100)} | {counted_refusal("<script>x")}
    assert made_up == {"other"}
