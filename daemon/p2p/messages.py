"""The messages of `/clade/hello/1.0.0` and `/clade/sync/1.0.0` (pure: bytes in, values out).

    hello   = ["clade.hello", 1, clade id (16 B), certificate, revocation list or b"", [addr, …],
               [sibling addr /…/p2p/ID, …]]           (peer exchange: members the sender is connected to)
    refused = ["clade.refused", 1, reason, detail]
    want    = ["clade.want", 1, context]                  (sync: "send me what I lack")
    delta   = ["clade.delta", 1, encoded delta]           (crdt.codec)
    end     = ["clade.end", 1, more, context]             (this round is over; more = ask again)

`/clade/sync/2.0.0` (`crdt.summary`: contexts reconciled by their difference) has the same
`refused` and `delta` (version 2) and instead of v1's want and end:

    want    = ["clade.want", 2, nonce (8 B), "rows", [[tag, vv, cloud], …]]   (a small context, whole)
            | ["clade.want", 2, nonce, "buckets", [fingerprint (8 B), …]]     (a power of two of them)
    ask     = ["clade.ask", 2, [bucket, …]]               (responder: these buckets differ, send their rows)
    rows    = ["clade.rows", 2, [[tag, vv, cloud], …]]   (asker: the rows of the asked buckets)
    end     = ["clade.end", 2, more, [[tag or peer id, vv, cloud], …]]   (the responder's rows that differ)

`/clade/sync/3.0.0` is v2 with its version, 3, in every message; its deltas may carry seals
(`crdt.codec` version 2, `crdt.seals`), and its want says whose seals the asker lacks:

    want    = ["clade.want", 3, nonce, "rows" | "buckets", payload, [[writer, first block], …]]

Each message is one frame (`frames`). Decoding is strict (`crdt.ops.unpack_strict`: caps on
every length, no maps, no extensions) and raises `RemoteProtocolError` with a counter
label; the certificate and revocation list are only *parsed* here, checked by the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from crdt import CausalContext, InvalidValue, RemoteProtocolError
from crdt.body import check_peer_id
from crdt.codec import MAX_CLOUD, MAX_REPLICAS, decode_context, encode_context
from crdt.ops import unpack_strict
from crdt.summary import (
    NONCE_BYTES,
    TAG_BYTES,
    TaggedRow,
    WireRow,
    check_buckets,
    decode_rows,
    decode_tagged_rows,
    encode_rows,
)

from .frames import MAX_FRAME_BYTES

__all__ = ["MAX_SEAL_ASKS", "SYNC_V2", "SYNC_V3", "Ask", "DeltaFrame", "End", "EndDiff", "Hello", "Message", "Refused",
           "Rows", "Want", "WantSummary", "decode", "encode"]

VERSION = 1
SYNC_V2 = 2
SYNC_V3 = 3
MAX_SEAL_ASKS = 64
MAX_ADDRS = 16
MAX_ADDR_CHARS = 256
MAX_SIBLINGS = 64


def _addr_list(value: object, limit: int) -> bool:
    return (isinstance(value, list) and len(value) <= limit
            and all(isinstance(a, str) and len(a) <= MAX_ADDR_CHARS for a in value))


@dataclass(frozen=True, slots=True)
class Hello:
    clade_id: str
    certificate: bytes
    revocations: bytes
    addrs: tuple[str, ...]
    siblings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Want:
    context: CausalContext


@dataclass(frozen=True, slots=True)
class DeltaFrame:
    delta: bytes


@dataclass(frozen=True, slots=True)
class End:
    more: bool
    context: CausalContext


@dataclass(frozen=True, slots=True)
class WantSummary:
    """v2's want: the asker's rows (`rows`, a small context) or its bucket fingerprints; v3's
    adds `seal_asks`: (writer, first block) for each writer whose seals the asker lacks."""

    nonce: bytes
    rows: tuple[TaggedRow, ...] | None = None
    fingerprints: tuple[bytes, ...] = ()
    seal_asks: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Ask:
    buckets: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rows:
    rows: tuple[TaggedRow, ...]


@dataclass(frozen=True, slots=True)
class EndDiff:
    more: bool
    rows: tuple[WireRow, ...]


Message = Hello | Refused | Want | DeltaFrame | End | WantSummary | Ask | Rows | EndDiff


def encode(message: Message, version: int = VERSION) -> bytes:
    """The frame payload of a message (`version`: the sync stream's, for refused and delta)."""
    body: list[Any]
    v2 = max(version, SYNC_V2)  # the v2 family's messages (v3 is v2 with seals)
    match message:
        case WantSummary(rows=None):
            body = ["clade.want", v2, message.nonce, "buckets", list(message.fingerprints)]
        case WantSummary():
            body = ["clade.want", v2, message.nonce, "rows", encode_rows(message.rows or ())]
        case Ask():
            body = ["clade.ask", v2, list(message.buckets)]
        case Rows():
            body = ["clade.rows", v2, encode_rows(message.rows)]
        case EndDiff():
            body = ["clade.end", v2, message.more, encode_rows(message.rows)]
        case Hello():
            body = ["clade.hello", VERSION, bytes.fromhex(message.clade_id), message.certificate,
                    message.revocations, list(message.addrs), list(message.siblings)]
        case Refused():
            body = ["clade.refused", version, message.reason, message.detail[:512]]
        case Want():
            body = ["clade.want", VERSION, encode_context(message.context)]
        case DeltaFrame():
            body = ["clade.delta", version, message.delta]
        case End():
            body = ["clade.end", VERSION, message.more, encode_context(message.context)]
    if isinstance(message, WantSummary) and version >= SYNC_V3:
        body.append([[writer, block] for writer, block in message.seal_asks])
    return bytes(msgpack.packb(body, use_bin_type=True))


def _bad(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError("malformed", detail)


def decode(data: bytes, version: int = VERSION) -> Message:
    """Parse one message from a peer on a stream of `version` (1, or SYNC_V2 on
    `/clade/sync/2.0.0`); raises `RemoteProtocolError` (malformed, unknown_version)."""
    fields = unpack_strict(data, max_len=MAX_FRAME_BYTES, max_array=MAX_CLOUD)
    if not isinstance(fields, list) or len(fields) < 2 or not isinstance(fields[0], str):
        raise _bad("a message is [tag, version, …]")
    tag, got = fields[0], fields[1]
    if type(got) is not int or got != version:
        raise RemoteProtocolError("unknown_version", f"{tag} version {got!r} (this stream speaks {version})")
    rest = fields[2:]
    if version >= SYNC_V2:
        return _decode_v2(tag, rest, version)
    if tag == "clade.hello" and len(rest) == 5:
        clade, cert, revocations, addrs, siblings = rest
        if not (isinstance(clade, bytes) and len(clade) == 16 and isinstance(cert, bytes)
                and isinstance(revocations, bytes) and _addr_list(addrs, MAX_ADDRS)
                and _addr_list(siblings, MAX_SIBLINGS)):
            raise _bad("hello fields have the wrong types or sizes")
        return Hello(clade.hex(), cert, revocations, tuple(addrs), tuple(siblings))
    if tag == "clade.refused" and len(rest) == 2 and all(isinstance(x, str) for x in rest):
        return Refused(rest[0][:64], rest[1][:512])
    if tag == "clade.want" and len(rest) == 1:
        return Want(decode_context(rest[0]))
    if tag == "clade.delta" and len(rest) == 1 and isinstance(rest[0], bytes):
        return DeltaFrame(rest[0])
    if tag == "clade.end" and len(rest) == 2 and isinstance(rest[0], bool):
        return End(rest[0], decode_context(rest[1]))
    raise _bad(f"unknown message {tag[:32]!r} or wrong field count")


def _seal_asks(raw: object) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, list) or len(raw) > MAX_SEAL_ASKS:
        raise _bad(f"seal asks are a list of at most {MAX_SEAL_ASKS}")
    asks: list[tuple[str, int]] = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and type(item[1]) is int and 0 <= item[1] < (1 << 55)):
            raise _bad("a seal ask is [writer, first block]")
        try:
            check_peer_id("seal ask writer", item[0])
        except InvalidValue as exc:
            raise _bad(str(exc)) from None
        asks.append((item[0], item[1]))
    if len({w for w, _ in asks}) != len(asks):
        raise _bad("a writer is asked for seals twice")
    return tuple(asks)


def _decode_v2(tag: str, rest: list[Any], version: int) -> Message:
    if tag == "clade.refused" and len(rest) == 2 and all(isinstance(x, str) for x in rest):
        return Refused(rest[0][:64], rest[1][:512])
    if tag == "clade.delta" and len(rest) == 1 and isinstance(rest[0], bytes):
        return DeltaFrame(rest[0])
    width = 4 if version >= SYNC_V3 else 3
    if tag == "clade.want" and len(rest) == width and isinstance(rest[0], bytes) and len(rest[0]) == NONCE_BYTES:
        nonce, form, payload = rest[:3]
        asks = _seal_asks(rest[3]) if width == 4 else ()
        if form == "rows":
            return WantSummary(nonce, rows=tuple(decode_tagged_rows(payload, max_rows=MAX_REPLICAS,
                                                                    max_cloud=MAX_CLOUD)), seal_asks=asks)
        if form == "buckets" and isinstance(payload, list):
            check_buckets(len(payload))
            if not all(isinstance(f, bytes) and len(f) == TAG_BYTES for f in payload):
                raise _bad(f"a bucket fingerprint is {TAG_BYTES} bytes")
            return WantSummary(nonce, fingerprints=tuple(payload), seal_asks=asks)
        raise _bad("a want is [nonce, 'rows', rows] or [nonce, 'buckets', fingerprints]")
    if tag == "clade.ask" and len(rest) == 1 and isinstance(rest[0], list):
        asked = rest[0]
        if not all(type(b) is int and b >= 0 for b in asked) or len(set(asked)) != len(asked):
            raise _bad("an ask is a list of distinct bucket numbers")
        return Ask(tuple(asked))
    if tag == "clade.rows" and len(rest) == 1:
        return Rows(tuple(decode_tagged_rows(rest[0], max_rows=MAX_REPLICAS, max_cloud=MAX_CLOUD)))
    if tag == "clade.end" and len(rest) == 2 and isinstance(rest[0], bool):
        return EndDiff(rest[0], tuple(decode_rows(rest[1], names=True, max_rows=MAX_REPLICAS, max_cloud=MAX_CLOUD)))
    raise _bad(f"unknown message {tag[:32]!r} or wrong field count")
