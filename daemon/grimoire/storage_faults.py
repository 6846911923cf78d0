"""Which store failures are the storage's, not the daemon's: a full filesystem, a read-only one,
an I/O error (pure classification).

A write refused because the data directory's filesystem is full is answered 507 (Insufficient
Storage), one refused because it is read-only or failing 503, each with what to do; nothing is
half-written (SQLite rolls the transaction back) and the next write after the operator frees
space or remounts succeeds by itself. Everything else stays an unexpected error (500).
"""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass

__all__ = ["StorageRefusal", "sole_cause", "storage_refusal"]

# SQLite's primary result codes (the low byte of an extended code): https://sqlite.org/rescode.html
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
# Growing the WAL's shared-memory file failed: a full filesystem (SQLite says "disk I/O error";
# a read-only one fails earlier, with SQLITE_READONLY_*). Seen on a full tmpfs when a backup opens the store.
_SQLITE_IOERR_SHMSIZE = 4874


@dataclass(frozen=True, slots=True)
class StorageRefusal:
    """How to answer a request the storage refused: HTTP status, error name, what to do."""

    status: int
    error: str
    detail: str


_FULL = StorageRefusal(507, "insufficient_storage",
                       "the data directory's filesystem is full: nothing was written; free space there "
                       "(df DATA_DIR) and retry — writes resume by themselves")
_READ_ONLY = StorageRefusal(503, "read_only",
                            "the data directory is read-only: nothing was written; remount it read-write "
                            "and retry — writes resume by themselves")
_IO = StorageRefusal(503, "storage_unavailable",
                     "the data directory's storage failed (I/O error): nothing was written; check the disk "
                     "(dmesg) and retry")


def storage_refusal(exc: BaseException) -> StorageRefusal | None:
    """The refusal `exc` stands for, or None when it is not a storage failure. An error raised
    *from* a storage failure (`raise DaemonError("cannot snapshot …") from exc`) stands for that
    failure: its explicit causes are followed."""
    cause: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; a cycle must not spin
        if cause is None:
            return None
        refusal = _refusal(cause)
        if refusal is not None:
            return refusal
        cause = cause.__cause__
    return None


def _refusal(exc: BaseException) -> StorageRefusal | None:
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = None if code is None else int(code) & 0xFF
        text = str(exc).lower()
        if primary == _SQLITE_FULL or code == _SQLITE_IOERR_SHMSIZE or "disk is full" in text:
            return _FULL
        if primary == _SQLITE_READONLY or "readonly database" in text:
            return _READ_ONLY
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN) or "disk i/o error" in text:
            return _IO
        return None
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return _FULL
        if exc.errno == errno.EROFS:
            return _READ_ONLY
        if exc.errno == errno.EIO:
            return _IO
    return None


def sole_cause(exc: BaseException) -> BaseException:
    """The one exception inside nested exception groups (a trio nursery wraps what its task
    raised), else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
