"""A testament archive in Styx's vault layer, pure: its envelope, its name, which one is latest.

    archive = msgpack ["clade.archive", 1, membership certificate, testament file]

The testament file is the one `clade testament` writes (vault-encrypted to the clade key and
the owner, signed by the golem: curator/testament.py). The certificate beside it is the
golem's owner-signed membership certificate: an heir checks it against its own owner key and
clade before it opens the testament, so an archive that a stranger (or another clade's golem)
put under a predecessor's name is refused. Neither part is trusted here; `unpack` only
frames, and says what was wrong (`ArchiveError`).

Names: `testament-<created ms>.archive` under `/v1/styx/vault/<peer>/`; the latest is the one
with the largest time (`latest`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgpack

__all__ = ["MAX_ARCHIVE_BYTES", "ArchiveError", "archive_name", "latest", "pack", "unpack"]

TAG = "clade.archive"
VERSION = 1
MAX_ARCHIVE_BYTES = 96 * 1024 * 1024
_NAME = re.compile(r"^testament-(\d{1,16})\.archive$")


class ArchiveError(ValueError):
    """The archive cannot be read: says what was wrong."""


def archive_name(created_ms: int) -> str:
    """The vault object name of a testament archive written at `created_ms`."""
    return f"testament-{int(created_ms)}.archive"


def latest(names: Iterable[str]) -> str | None:
    """The newest testament archive among vault object names (None: there is none)."""
    found = [(int(m.group(1)), name) for name in names if (m := _NAME.match(name))]
    return max(found)[1] if found else None


def pack(certificate: bytes, testament_file: bytes) -> bytes:
    """The archive's bytes."""
    return msgpack.packb([TAG, VERSION, certificate, testament_file], use_bin_type=True)


def unpack(data: bytes) -> tuple[bytes, bytes]:
    """(certificate bytes, testament file bytes). Raises `ArchiveError` for anything else: too
    large, truncated, trailing bytes, another format or version, fields of the wrong type."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise ArchiveError(f"{len(data)} bytes: larger than any testament archive ({MAX_ARCHIVE_BYTES})")
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True, max_bin_len=MAX_ARCHIVE_BYTES,
                                 max_str_len=64, max_array_len=8, max_map_len=0)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ArchiveError(f"not a testament archive (truncated or corrupt: {type(exc).__name__})") from None
    if not isinstance(fields, list) or len(fields) != 4 or fields[0] != TAG:
        raise ArchiveError("not a testament archive (wrong format tag)")
    if fields[1] != VERSION:
        raise ArchiveError(f"testament archive version {fields[1]!r} is not one this daemon reads ({VERSION})")
    certificate, testament_file = fields[2], fields[3]
    if not isinstance(certificate, bytes) or not isinstance(testament_file, bytes) or not certificate \
            or not testament_file:
        raise ArchiveError("testament archive fields have the wrong types")
    return certificate, testament_file
