"""The messages of `/clade/hello/1.0.0` and `/clade/sync/1.0.0` (pure: bytes in, values out).

    hello   = ["clade.hello", 1, clade id (16 B), certificate, revocation list or b"", [addr, …],
               [sibling addr /…/p2p/ID, …]]           (peer exchange: members the sender is connected to)
    refused = ["clade.refused", 1, reason, detail]
    want    = ["clade.want", 1, context]                  (sync: "send me what I lack")
    delta   = ["clade.delta", 1, encoded delta]           (crdt.codec)
    end     = ["clade.end", 1, more, context]             (this round is over; more = ask again)

Each message is one frame (`frames`). Decoding is strict (`crdt.ops.unpack_strict`: caps on
every length, no maps, no extensions) and raises `RemoteProtocolError` with a counter
label; the certificate and revocation list are only *parsed* here, checked by the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from crdt import CausalContext, RemoteProtocolError
from crdt.codec import MAX_CLOUD, decode_context, encode_context
from crdt.ops import unpack_strict

from .frames import MAX_FRAME_BYTES

__all__ = ["DeltaFrame", "End", "Hello", "Message", "Refused", "Want", "decode", "encode"]

VERSION = 1
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


Message = Hello | Refused | Want | DeltaFrame | End


def encode(message: Message) -> bytes:
    """The frame payload of a message."""
    body: list[Any]
    match message:
        case Hello():
            body = ["clade.hello", VERSION, bytes.fromhex(message.clade_id), message.certificate,
                    message.revocations, list(message.addrs), list(message.siblings)]
        case Refused():
            body = ["clade.refused", VERSION, message.reason, message.detail[:512]]
        case Want():
            body = ["clade.want", VERSION, encode_context(message.context)]
        case DeltaFrame():
            body = ["clade.delta", VERSION, message.delta]
        case End():
            body = ["clade.end", VERSION, message.more, encode_context(message.context)]
    return bytes(msgpack.packb(body, use_bin_type=True))


def _bad(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError("malformed", detail)


def decode(data: bytes) -> Message:
    """Parse one message from a peer; raises `RemoteProtocolError` (malformed, unknown_version)."""
    fields = unpack_strict(data, max_len=MAX_FRAME_BYTES, max_array=MAX_CLOUD)
    if not isinstance(fields, list) or len(fields) < 2 or not isinstance(fields[0], str):
        raise _bad("a message is [tag, version, …]")
    tag, version = fields[0], fields[1]
    if type(version) is not int or version != VERSION:
        raise RemoteProtocolError("unknown_version", f"{tag} version {version!r} (this daemon speaks {VERSION})")
    rest = fields[2:]
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
