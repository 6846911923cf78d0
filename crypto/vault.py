"""Encrypted vault stream (age-style): a random data key, wrapped for each recipient, and
libsodium secretstream (XChaCha20-Poly1305) over 64 KiB chunks.

    file    = MAGIC ‖ u32 header length ‖ header ‖ secretstream header (24 B) ‖ chunk…
    header  = msgpack ["clade.vault", 1, golem peer id, created ms, chunk size, recipients]
    recipient = ["clade", key id (8 B), SecretBox(clade key, data key)]
              | ["x25519", public key (32 B), SealedBox(public key, data key)]

Every chunk carries the hash of MAGIC ‖ length ‖ header as associated data, so a change
anywhere in the header (a recipient swapped, the peer id edited) fails authentication;
the chunk sequence is chained by secretstream, so reordering, dropping or truncating
chunks fails too, and the last chunk must carry TAG_FINAL (no silent truncation at a
chunk boundary) with nothing after it. Memory use is one chunk, whatever the size.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import BinaryIO

import nacl.bindings as sodium
import nacl.exceptions
import nacl.public
import nacl.secret
import nacl.utils

from .errors import CryptoError
from .wire import Malformed, pack, unpack

__all__ = ["CHUNK_BYTES", "DecryptingReader", "EncryptingWriter", "VaultError", "VaultHeader", "VaultKeys",
           "read_header"]

MAGIC = b"CLADEVLT\x01"
CHUNK_BYTES = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
_ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES
_STREAM_HEADER = sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES
_TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
_TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL


class VaultError(CryptoError):
    """A vault file could not be read or decrypted; the message says what and what to try."""


def clade_key_id(clade_key: bytes) -> bytes:
    """8 bytes that name a clade key without revealing it."""
    return hashlib.blake2b(clade_key, digest_size=8, person=b"clade.vaultkey").digest()


@dataclass(frozen=True, slots=True)
class VaultKeys:
    """The keys a reader holds: any one matching recipient unlocks the file."""

    clade_key: bytes | None = None
    x25519: nacl.public.PrivateKey | None = None
    clade_keys: tuple[bytes, ...] = ()  # more clade keys to try (older epochs, after a rotation)

    def all_clade_keys(self) -> list[bytes]:
        return ([self.clade_key] if self.clade_key is not None else []) + list(self.clade_keys)


@dataclass(frozen=True, slots=True)
class VaultHeader:
    golem: str
    created_ms: int
    chunk_bytes: int
    recipients: tuple[tuple[str, bytes, bytes], ...]
    digest: bytes  # authenticates every chunk

    def describe(self) -> list[str]:
        return [f"{kind}:{ident.hex()}" for kind, ident, _ in self.recipients]


class EncryptingWriter:
    """A write-only binary file object that encrypts into `sink` as a vault stream."""

    def __init__(self, sink: BinaryIO, *, golem: str, created_ms: int, clade_keys: list[bytes],
                 x25519_recipients: list[bytes]) -> None:
        if not clade_keys and not x25519_recipients:
            raise VaultError("a backup needs at least one recipient (a clade key or an X25519 public key)")
        data_key = sodium.crypto_secretstream_xchacha20poly1305_keygen()
        recipients: list[list[object]] = []
        for key in clade_keys:
            recipients.append(["clade", clade_key_id(key), bytes(nacl.secret.SecretBox(key).encrypt(data_key))])
        for public in x25519_recipients:
            if len(public) != 32:
                raise VaultError("an X25519 recipient is 32 bytes")
            sealed = nacl.public.SealedBox(nacl.public.PublicKey(public)).encrypt(data_key)
            recipients.append(["x25519", public, sealed])
        header = pack(["clade.vault", 1, golem, created_ms, CHUNK_BYTES, recipients])
        prefix = MAGIC + struct.pack(">I", len(header)) + header
        self._ad = hashlib.blake2b(prefix, digest_size=32).digest()
        self._state = sodium.crypto_secretstream_xchacha20poly1305_state()
        stream_header = sodium.crypto_secretstream_xchacha20poly1305_init_push(self._state, data_key)
        self._sink = sink
        self._buffer = bytearray()
        self._closed = False
        sink.write(prefix + stream_header)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._closed:
            raise ValueError("write to a closed vault stream")
        self._buffer += data
        while len(self._buffer) > CHUNK_BYTES:  # keep one chunk back: the last one is FINAL
            self._push(bytes(self._buffer[:CHUNK_BYTES]), _TAG_MESSAGE)
            del self._buffer[:CHUNK_BYTES]
        return len(data)

    def _push(self, chunk: bytes, tag: int) -> None:
        self._sink.write(sodium.crypto_secretstream_xchacha20poly1305_push(self._state, chunk, self._ad, tag))

    def flush(self) -> None:
        self._sink.flush()

    def close(self) -> None:
        """Write the final chunk (tagged FINAL). Call exactly once, after the last write."""
        if not self._closed:
            self._push(bytes(self._buffer), _TAG_FINAL)
            self._buffer.clear()
            self._closed = True
            self._sink.flush()

    def __enter__(self) -> EncryptingWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()


def _read_full(source: BinaryIO, n: int) -> bytes:
    """`n` bytes, fewer only where the file ends: a raw stream (pipe, socket) may return
    less than asked before its end, and every field of the grammar has a fixed length."""
    first = source.read(n)  # a file gives it all at once
    if len(first) == n or not first:
        return first
    buf = bytearray(first)
    while len(buf) < n:
        chunk = source.read(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def read_header(source: BinaryIO) -> tuple[VaultHeader, bytes]:
    """Parse (not yet authenticate) the header; returns it and the secretstream header.
    Raises `VaultError` (not a vault, unsupported version, truncated or corrupt header)."""
    magic = _read_full(source, len(MAGIC))
    if magic != MAGIC:
        if magic[:8] == MAGIC[:8]:
            raise VaultError(f"vault format version {magic[8:9].hex()} is not supported by this clade")
        raise VaultError("not a clade vault backup (bad magic bytes)")
    raw_len = _read_full(source, 4)
    if len(raw_len) != 4:
        raise VaultError("vault file is truncated inside its header")
    (length,) = struct.unpack(">I", raw_len)
    if length > MAX_HEADER_BYTES:
        raise VaultError(f"vault header claims {length} bytes (corrupt file)")
    header = _read_full(source, length)
    stream_header = _read_full(source, _STREAM_HEADER)
    if len(header) != length or len(stream_header) != _STREAM_HEADER:
        raise VaultError("vault file is truncated inside its header")
    try:
        fields = unpack(header, max_len=MAX_HEADER_BYTES, fields=6, tag="clade.vault")
        _, version, golem, created_ms, chunk_bytes, recipients = fields
        if version != 1 or not isinstance(golem, str) or type(created_ms) is not int or chunk_bytes != CHUNK_BYTES:
            raise Malformed("unsupported header fields")
        parsed = []
        for r in recipients if isinstance(recipients, list) else []:
            if not (isinstance(r, list) and len(r) == 3 and r[0] in ("clade", "x25519")
                    and isinstance(r[1], bytes) and isinstance(r[2], bytes)):
                raise Malformed("bad recipient")
            parsed.append((r[0], r[1], r[2]))
        if not parsed:
            raise Malformed("no recipients")
    except Malformed as exc:
        raise VaultError(f"vault header is corrupt: {exc}") from None
    digest = hashlib.blake2b(MAGIC + raw_len + header, digest_size=32).digest()
    return VaultHeader(golem=golem, created_ms=created_ms, chunk_bytes=chunk_bytes, recipients=tuple(parsed),
                       digest=digest), stream_header


def _unwrap(header: VaultHeader, keys: VaultKeys) -> bytes:
    tried = []
    clade_keys = {clade_key_id(k): k for k in keys.all_clade_keys()}
    for kind, ident, wrapped in header.recipients:
        try:
            if kind == "clade" and ident in clade_keys:
                return nacl.secret.SecretBox(clade_keys[ident]).decrypt(wrapped)
            if kind == "x25519" and keys.x25519 is not None and ident == bytes(keys.x25519.public_key):
                return nacl.public.SealedBox(keys.x25519).decrypt(wrapped)
        except nacl.exceptions.CryptoError:
            raise VaultError(f"the {kind} recipient entry is corrupt (tampered file)") from None
        tried.append(kind)
    held = [n for n, k in (("a clade key", clade_keys or None), ("an owner/X25519 key", keys.x25519)) if k is not None]
    raise VaultError(
        f"none of the keys given ({', '.join(held) or 'none'}) is a recipient of this backup "
        f"(recipients: {', '.join(header.describe())}); try --owner-dir or --clade-key"
    )


class DecryptingReader:
    """A read-only binary file object yielding the plaintext of a vault stream.

    Raises `VaultError` on the first chunk that fails authentication, on truncation
    (end of file before the FINAL chunk) and on data after the FINAL chunk. Callers must
    read to the end before trusting anything they read.
    """

    def __init__(self, source: BinaryIO, keys: VaultKeys) -> None:
        self.header, stream_header = read_header(source)
        data_key = _unwrap(self.header, keys)
        self._state = sodium.crypto_secretstream_xchacha20poly1305_state()
        try:
            sodium.crypto_secretstream_xchacha20poly1305_init_pull(self._state, stream_header, data_key)
        except (nacl.exceptions.CryptoError, ValueError):
            raise VaultError("vault stream header is corrupt") from None
        self._source = source
        self._buffer = bytearray()
        self._finished = False
        self.chunks = 0

    def _pull(self) -> None:
        block = _read_full(self._source, CHUNK_BYTES + _ABYTES)
        if not block:
            raise VaultError(f"vault file is truncated after {self.chunks} chunks (no final chunk)")
        try:
            plain, tag = sodium.crypto_secretstream_xchacha20poly1305_pull(self._state, block, self.header.digest)
        except (nacl.exceptions.CryptoError, ValueError):
            raise VaultError(
                f"vault chunk {self.chunks} failed authentication: the file is corrupt, truncated, "
                "reordered or was tampered with"
            ) from None
        self.chunks += 1
        self._buffer += plain
        if tag == _TAG_FINAL:
            self._finished = True
            if self._source.read(1):
                raise VaultError("vault file has data after its final chunk")
        elif len(block) < CHUNK_BYTES + _ABYTES:
            raise VaultError(f"vault file is truncated in chunk {self.chunks}")

    def read(self, size: int = -1) -> bytes:
        while not self._finished and (size < 0 or len(self._buffer) < size):
            self._pull()
        if size < 0 or size >= len(self._buffer):
            out = bytes(self._buffer)
            self._buffer.clear()
        else:
            out = bytes(self._buffer[:size])
            del self._buffer[:size]
        return out

    def readable(self) -> bool:
        return True

    def drain(self) -> None:
        """Read and authenticate the rest of the stream (for verify)."""
        while not self._finished:
            self._pull()
            self._buffer.clear()

    @property
    def finished(self) -> bool:
        return self._finished
