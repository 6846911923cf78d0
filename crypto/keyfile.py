"""Secret key files: exactly N bytes, mode 0600, written durably, never clobbered by accident."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import KeyFileError, UnsafeKeyFile

__all__ = ["read_secret", "read_secret_file", "write_public", "write_secret"]


def read_secret(path: Path, size: int, what: str) -> bytes:
    """Read a secret of exactly `size` bytes, refusing a file that group or others can access.

    Raises `UnsafeKeyFile` (with the chmod to run) or `KeyFileError`.
    """
    data = read_secret_file(path, size + 1, what)
    if len(data) != size:
        raise KeyFileError(
            f"{path} holds {len(data)} bytes, a {what} has {size}: the file is truncated or not a {what}"
        )
    return data


def read_secret_file(path: Path, max_size: int, what: str) -> bytes:
    """Read a secret file of at most `max_size` bytes (the rest is not read), refusing a file
    that group or others can access. Raises `UnsafeKeyFile` or `KeyFileError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise KeyFileError(f"{path} does not exist ({what})") from None
    except OSError as exc:
        raise KeyFileError(f"cannot open {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KeyFileError(f"{path} is not a regular file")
        if mode & 0o077:
            raise UnsafeKeyFile(
                f"{path} has mode {stat.S_IMODE(mode):04o}: group or others can access the "
                f"{what}; fix it with `chmod 600 {path}` and check who may have copied it"
            )
        chunks = []
        left = max_size
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _write(path: Path, data: bytes, *, mode: int, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise KeyFileError(f"{path} already exists")
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if overwrite:
        os.replace(tmp, path)
    else:
        try:
            os.link(tmp, path)  # fails if `path` appeared meanwhile: never clobber
        finally:
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_secret(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write a secret with mode 0600, durably (temp file, fsync, link/rename, fsync dir)."""
    _write(path, data, mode=0o600, overwrite=overwrite)


def write_public(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write a non-secret file (certificates, revocation lists) durably, mode 0644."""
    _write(path, data, mode=0o644, overwrite=overwrite)
