"""The clade keys a golem holds, by epoch, and which of them may still open gossip.

    keyring file = msgpack ["clade.keyring", 1, clade id (16 B), [[epoch, installed ms, key (32 B)], …]]

The owner rotates the clade key (`clade owner rotate`) after a revocation: epoch N+1 is
sealed to every remaining member, never to the revoked one. A golem keeps every epoch it
was given (old backups were encrypted to old keys) until its operator drops them, and
seals its own gossip with the newest key only.

Opening a gossip envelope of epoch `e` (`KeyRing.key_for`):

- `e` is the current (newest held) epoch: its key;
- `e` is older: its key while `now < installed_ms(next newer held epoch) + grace`, so a
  sibling that has not installed the rotation yet is still heard for the grace period,
  counted from when *this* golem installed the epoch that superseded `e` (a golem that
  jumps from epoch 0 to 2 gives epoch 0 the grace from its install of 2); after that
  `epoch_expired`;
- `e` not held (a newer epoch not installed yet, or one dropped): `unknown_epoch`.

Pure: the caller passes the time (wall-clock ms, the one clock `open_envelope` also uses),
so tests drive the grace window with plain numbers.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from .envelope import EnvelopeError, EnvelopeReason
from .errors import CryptoError, KeyFileError
from .membership import CLADE_KEY_BYTES
from .wire import Malformed, pack, unpack

__all__ = ["MAX_EPOCH", "EpochKey", "KeyRing"]

MAX_EPOCH = (1 << 32) - 1  # the envelope carries the epoch as a u32
MAX_KEYRING_BYTES = 256 * 1024
_TAG = "clade.keyring"


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochKey:
    """One clade key: its epoch, when this golem installed it (wall ms), and the 32 bytes."""

    epoch: int
    installed_ms: int
    key: bytes = b""

    def __post_init__(self) -> None:
        if type(self.epoch) is not int or not 0 <= self.epoch <= MAX_EPOCH:
            raise CryptoError(f"key epoch must be an integer in 0..{MAX_EPOCH}")
        if not isinstance(self.key, bytes) or len(self.key) != CLADE_KEY_BYTES:
            raise CryptoError(f"a clade key is {CLADE_KEY_BYTES} bytes")
        if type(self.installed_ms) is not int or self.installed_ms < 0:
            raise CryptoError("installed_ms must be a non-negative integer")

    def __repr__(self) -> str:  # never print a key
        return f"EpochKey(epoch={self.epoch}, installed_ms={self.installed_ms})"


class KeyRing:
    """An immutable set of clade keys of one clade, at most one per epoch."""

    __slots__ = ("_keys", "clade_id")

    def __init__(self, clade_id: str, keys: Iterable[EpochKey]) -> None:
        by_epoch: dict[int, EpochKey] = {}
        for k in keys:
            held = by_epoch.get(k.epoch)
            if held is not None and not hmac.compare_digest(held.key, k.key):
                raise CryptoError(f"two different keys for epoch {k.epoch}")
            if held is None or k.installed_ms < held.installed_ms:
                by_epoch[k.epoch] = k
        if not by_epoch:
            raise CryptoError("a keyring holds at least one key")
        self.clade_id = clade_id
        self._keys = dict(sorted(by_epoch.items()))

    def __repr__(self) -> str:
        return f"KeyRing(clade_id={self.clade_id!r}, epochs={self.epochs})"

    @property
    def current(self) -> EpochKey:
        """The newest epoch held: the key own gossip and new backups use."""
        return self._keys[max(self._keys)]

    @property
    def epochs(self) -> list[int]:
        return list(self._keys)

    def entries(self) -> list[EpochKey]:
        """Every key held, oldest epoch first."""
        return list(self._keys.values())

    def get(self, epoch: int) -> bytes | None:
        held = self._keys.get(epoch)
        return None if held is None else held.key

    def all_keys(self) -> list[bytes]:
        """Every key, newest first (what a backup restore tries)."""
        return [k.key for k in reversed(self._keys.values())]

    def grace_ends_ms(self, epoch: int, grace_ms: int) -> int | None:
        """When gossip of `epoch` stops being accepted (None: the current epoch, or not held)."""
        if epoch not in self._keys or epoch == self.current.epoch:
            return None
        successor = min(e for e in self._keys if e > epoch)
        return self._keys[successor].installed_ms + grace_ms

    def key_for(self, epoch: int, *, now_ms: int, grace_ms: int) -> bytes:
        """The key to open gossip sealed under `epoch` at `now_ms`.

        Raises `EnvelopeError`: `unknown_epoch` (not held), `epoch_expired` (superseded
        longer than `grace_ms` ago)."""
        held = self._keys.get(epoch)
        if held is None:
            raise EnvelopeError(EnvelopeReason.UNKNOWN_EPOCH,
                                f"key epoch {epoch} is not held here (current {self.current.epoch})")
        ends = self.grace_ends_ms(epoch, grace_ms)
        if ends is not None and now_ms >= ends:
            raise EnvelopeError(EnvelopeReason.EPOCH_EXPIRED,
                                f"key epoch {epoch} was superseded by {self.current.epoch}; its grace ended "
                                f"{now_ms - ends} ms ago")
        return held.key

    def with_key(self, key: EpochKey) -> KeyRing:
        """This ring plus `key` (the same key again is a no-op; another key for a held epoch
        raises `CryptoError`)."""
        return KeyRing(self.clade_id, [*self._keys.values(), key])

    def merged(self, other: KeyRing) -> KeyRing:
        """Both rings' keys (same clade); raises `CryptoError` on a clash."""
        if other.clade_id != self.clade_id:
            raise CryptoError(f"keyrings of two clades ({self.clade_id}, {other.clade_id})")
        return KeyRing(self.clade_id, [*self._keys.values(), *other._keys.values()])

    def dropping_before(self, epoch: int) -> KeyRing:
        """Without the keys of epochs below `epoch` (the current key always stays)."""
        kept = [k for e, k in self._keys.items() if e >= epoch or e == self.current.epoch]
        return KeyRing(self.clade_id, kept)

    def to_bytes(self) -> bytes:
        return pack([_TAG, 1, bytes.fromhex(self.clade_id),
                     [[k.epoch, k.installed_ms, k.key] for k in self._keys.values()]])

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyRing:
        """Decode a keyring file; raises `KeyFileError` for anything that is not one."""
        try:
            fields = unpack(data, max_len=MAX_KEYRING_BYTES, fields=4, tag=_TAG)
            _, version, clade_id, rows = fields
            if version != 1:
                raise Malformed(f"keyring format version {version} (this clade reads 1)")
            if not isinstance(clade_id, bytes) or len(clade_id) != 16 or not isinstance(rows, list):
                raise Malformed("keyring fields have the wrong types")
            keys = []
            for row in rows:
                if not (isinstance(row, list) and len(row) == 3):
                    raise Malformed("a keyring row is [epoch, installed ms, key]")
                keys.append(EpochKey(epoch=row[0], installed_ms=row[1], key=row[2]))
            return cls(clade_id.hex(), keys)
        except (Malformed, CryptoError) as exc:
            raise KeyFileError(f"clade keyring is corrupt: {exc}") from None
