"""Length-prefixed frames on a libp2p stream: unsigned varint length, then that many bytes.

Every read is capped before a byte of the body is read: a peer announcing a 4 GiB frame
gets `RemoteProtocolError("oversized")`, never an allocation. A stream that ends mid-frame
is `RemoteProtocolError("truncated")`; one that ends cleanly between frames is `EOFError`.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import trio

from crdt import RemoteProtocolError

__all__ = ["MAX_FRAME_BYTES", "ReadStream", "close_quietly", "encode_frame", "read_frame"]

MAX_FRAME_BYTES = 1024 * 1024 + 64 * 1024  # a full delta (1 MiB) plus its message framing
_MAX_VARINT_BYTES = 10


class ReadStream(Protocol):
    async def read(self, n: int | None = None) -> bytes: ...


def encode_frame(payload: bytes, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """The frame for `payload`; raises `ValueError` if it is over the cap (a local bug)."""
    if len(payload) > max_bytes:
        raise ValueError(f"frame of {len(payload)} bytes exceeds {max_bytes}")
    n = len(payload)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out) + payload


async def _read_exactly(stream: ReadStream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = await stream.read(n - len(buf))
        except EOFError:
            chunk = b""
        if not chunk:
            raise RemoteProtocolError("truncated", f"stream ended after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


async def read_frame(stream: ReadStream, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Read one frame. Raises `EOFError` at a clean end, `RemoteProtocolError` on a bad frame."""
    length = 0
    for i in range(_MAX_VARINT_BYTES):
        try:
            first = await stream.read(1)
        except EOFError:
            first = b""
        if not first:
            if i == 0:
                raise EOFError("stream closed")
            raise RemoteProtocolError("truncated", "stream ended inside a length prefix")
        byte = first[0]
        length |= (byte & 0x7F) << (7 * i)
        if length > max_bytes:
            raise RemoteProtocolError("oversized", f"frame announces more than {max_bytes} bytes")
        if not byte & 0x80:
            break
    else:
        raise RemoteProtocolError("malformed", "length prefix longer than 10 bytes")
    return await _read_exactly(stream, length)


async def close_quietly(stream: Any) -> None:
    """Close a libp2p stream, at most 2 s; a stream the peer already reset may fail to close,
    and there is nothing left to do about it."""
    with contextlib.suppress(Exception), trio.move_on_after(2):
        await stream.close()
