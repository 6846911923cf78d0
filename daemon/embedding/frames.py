"""Length-prefixed msgpack frames over a byte stream: the embedding process's wire.

A frame is a 4-byte big-endian length, then that many bytes of one msgpack map. Vectors
travel as raw float32 bytes (`bin`), row-major, never as lists of floats. Pure apart from
the stream it is given; no numpy, no model.
"""

from __future__ import annotations

import struct
from typing import IO, Any

import msgpack

__all__ = ["MAX_FRAME", "FrameError", "read_frame", "write_frame"]

MAX_FRAME = 256 * 1024 * 1024  # a batch of a few thousand 2,048-character texts is a few MiB
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The stream carried something that is not a frame (cut short, oversized, not a map)."""


def write_frame(stream: IO[bytes], message: dict[str, Any]) -> None:
    """Write one frame and flush it (the caller serialises writers)."""
    body: bytes = msgpack.packb(message, use_bin_type=True)
    if len(body) > MAX_FRAME:
        raise FrameError(f"a frame of {len(body)} bytes is over the {MAX_FRAME}-byte limit")
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def _exactly(stream: IO[bytes], n: int) -> bytes | None:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got:
                raise FrameError(f"the stream ended {n - got} bytes into a frame")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next frame's map; None at a clean end of the stream (between frames)."""
    header = _exactly(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise FrameError(f"a frame of {size} bytes is over the {MAX_FRAME}-byte limit")
    body = _exactly(stream, size) if size else b""
    if body is None:
        raise FrameError("the stream ended after a frame's header")
    try:
        message = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FrameError(f"a frame that is not msgpack: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"a frame that is not a map: {type(message).__name__}")
    return message
