"""Strict msgpack for crypto's own formats: capped, no maps, no extensions, typed errors."""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = ["Malformed", "pack", "unpack"]


class Malformed(ValueError):
    """Bytes that are not the expected msgpack structure."""


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, use_single_float=False)


def _refuse_ext(code: int, data: bytes) -> object:
    raise Malformed(f"msgpack extension type {code} is not allowed")


def unpack(data: bytes, *, max_len: int, fields: int | None = None, tag: str | None = None) -> list[Any]:
    """Decode a msgpack list; with `tag`, its first element must be that string and its
    second an int version (returned as part of the list). Raises `Malformed`."""
    if not isinstance(data, bytes) or len(data) > max_len:
        raise Malformed(f"expected at most {max_len} bytes")
    try:
        value = msgpack.unpackb(
            data, raw=False, use_list=True, strict_map_key=True, ext_hook=_refuse_ext,
            max_str_len=max_len, max_bin_len=max_len, max_array_len=max(16, max_len // 8),
            max_map_len=0, max_ext_len=0,
        )
    except Malformed:
        raise
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        raise Malformed(f"undecodable msgpack ({type(exc).__name__})") from None
    if not isinstance(value, list):
        raise Malformed("expected a list")
    if fields is not None and len(value) != fields:
        raise Malformed(f"expected {fields} fields, got {len(value)}")
    if tag is not None and (len(value) < 2 or value[0] != tag or type(value[1]) is not int):
        raise Malformed(f"not a {tag}")
    return value
