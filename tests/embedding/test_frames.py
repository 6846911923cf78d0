"""The embedding process's wire (daemon/embedding/frames.py): frames round-trip, a clean end
between frames is None, and anything else (cut short, oversized, not msgpack, not a map) is a
`FrameError` that says what was wrong."""

from __future__ import annotations

import io
import struct

import msgpack
import numpy as np
import pytest

from daemon.embedding.frames import MAX_FRAME, FrameError, read_frame, write_frame


def test_frames_round_trip_with_raw_float32_bytes() -> None:
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    stream = io.BytesIO()
    write_frame(stream, {"id": 1, "rows": 2, "dim": 3, "data": matrix.tobytes()})
    write_frame(stream, {"id": 2, "texts": ["a", "ü"]})
    stream.seek(0)
    first = read_frame(stream)
    assert first is not None and first["id"] == 1
    assert np.array_equal(np.frombuffer(first["data"], dtype=np.float32).reshape(2, 3), matrix)
    assert read_frame(stream) == {"id": 2, "texts": ["a", "ü"]}
    assert read_frame(stream) is None  # a clean end


@pytest.mark.parametrize(("raw", "says"), [
    (struct.pack(">I", 10) + b"abc", "ended 7 bytes into a frame"),
    (b"\x00\x00", "ended 2 bytes into a frame"),
    (struct.pack(">I", MAX_FRAME + 1), "over the"),
    (struct.pack(">I", 1) + b"\xc1", "not msgpack"),
    (struct.pack(">I", 2) + msgpack.packb([1]), "not a map"),
])
def test_a_broken_stream_is_a_frame_error(raw: bytes, says: str) -> None:
    with pytest.raises(FrameError, match=says):
        read_frame(io.BytesIO(raw))


def test_an_oversized_frame_is_refused_before_anything_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("daemon.embedding.frames.MAX_FRAME", 16)
    stream = io.BytesIO()
    with pytest.raises(FrameError, match="over the 16-byte limit"):
        write_frame(stream, {"texts": ["x" * 64]})
    assert stream.getvalue() == b""
