"""Clade key rotation: a new clade key (epoch + 1), sealed to each remaining member.

    rotation bundle = [signed, owner signature]
    signed          = ["clade.rotation", 1, clade id (16 B), peer id, epoch, sealed key, issued at (s)]

Revoking a golem (an owner-signed revocation list) cuts it off the clade's connections,
but it still holds the clade key: it could read any gossip envelope or clade-keyed backup
that reaches it. `clade owner rotate` makes a new key and writes one bundle per member
that is neither revoked nor expired, the key sealed (libsodium SealedBox, the primitive
admission bundles use) to that member's X25519 key, so a revoked golem never gets it.
A member checks the bundle against the owner key it already trusts (from its
membership), not against a key the bundle names.

The owner directory keeps every epoch's key (`clade-keys/<epoch>.key`, 0600) and a
register of admitted members (`members.json`, written by `clade owner admit`). Rotation
is restartable: the new key is written to `clade-keys/<epoch+1>.key` before any bundle and
becomes `clade.key` only after all bundles are written, so a rotation cut short and run
again reuses the same key for the same epoch.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import CryptoError, KeyFileError
from .identity import Identity, public_key_of
from .keyfile import read_secret, write_public, write_secret
from .membership import (
    CLADE_KEY_BYTES,
    FORMAT_VERSION,
    MAX_BUNDLE_BYTES,
    Membership,
    MembershipError,
    OwnerKey,
    Reason,
    RevocationList,
    _decode,
    _verify,
    open_clade_key,
    seal_clade_key,
)
from .wire import Malformed, pack, unpack

__all__ = ["MemberRecord", "RotationBundle", "commit_rotation", "is_rotation_bundle", "load_members",
           "owner_epoch_keys", "prepare_rotation", "record_member", "rotation_recipients"]

_MEMBERS = "members.json"
_KEYS_DIR = "clade-keys"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRecord:
    """A golem the owner admitted (what `owner rotate` seals the new key to)."""

    peer_id: str
    generation: int
    not_after: int

    def to_json(self) -> dict[str, object]:
        return {"peer_id": self.peer_id, "generation": self.generation, "not_after": self.not_after}


def load_members(owner_dir: Path) -> list[MemberRecord]:
    """The admitted-members register (empty if none was written yet). Raises `KeyFileError`."""
    path = owner_dir / _MEMBERS
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text())["members"]
        return [MemberRecord(peer_id=str(r["peer_id"]), generation=int(r["generation"]),
                             not_after=int(r["not_after"])) for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KeyFileError(f"{path} is unreadable: {exc}") from None


def record_member(owner_dir: Path, record: MemberRecord) -> None:
    """Add (or replace, by peer id) a member in the register."""
    members = {m.peer_id: m for m in load_members(owner_dir)}
    members[record.peer_id] = record
    doc = {"members": [m.to_json() for m in sorted(members.values(), key=lambda m: m.peer_id)]}
    write_public(owner_dir / _MEMBERS, json.dumps(doc, indent=2).encode() + b"\n", overwrite=True)


def rotation_recipients(members: Iterable[MemberRecord], revocations: RevocationList | None, *,
                        now: int) -> tuple[list[str], dict[str, str]]:
    """(peer ids that get the new key, {peer id: why not} for the others): revoked and
    expired members get nothing."""
    chosen: list[str] = []
    left_out: dict[str, str] = {}
    for member in sorted(members, key=lambda m: m.peer_id):
        if revocations is not None and revocations.is_revoked(member.peer_id):
            left_out[member.peer_id] = "revoked"
        elif member.not_after <= now:
            left_out[member.peer_id] = "expired"
        elif member.peer_id not in chosen:
            chosen.append(member.peer_id)
    return chosen, left_out


def _epoch_key_path(owner_dir: Path, epoch: int) -> Path:
    return owner_dir / _KEYS_DIR / f"{epoch}.key"


def prepare_rotation(owner: OwnerKey, owner_dir: Path) -> OwnerKey:
    """The owner as it will be after rotating: epoch + 1 and its key, persisted as
    `clade-keys/<epoch+1>.key` (reused if a rotation was cut short). Nothing else changes
    until `commit_rotation`."""
    keys = owner_dir / _KEYS_DIR
    keys.mkdir(mode=0o700, exist_ok=True)
    current = _epoch_key_path(owner_dir, owner.key_epoch)
    if not current.exists():
        write_secret(current, owner.clade_key)
    new_epoch = owner.key_epoch + 1
    pending = _epoch_key_path(owner_dir, new_epoch)
    if pending.exists():
        new_key = read_secret(pending, CLADE_KEY_BYTES, f"clade key of epoch {new_epoch}")
    else:
        new_key = secrets.token_bytes(CLADE_KEY_BYTES)
        write_secret(pending, new_key)
    return owner.with_clade_key(new_key, new_epoch)


def commit_rotation(rotated: OwnerKey, owner_dir: Path) -> None:
    """Make `rotated`'s key the owner's current one (`clade.key`, `clade.json`)."""
    write_secret(owner_dir / "clade.key", rotated.clade_key, overwrite=True)
    write_public(owner_dir / "clade.json", rotated.info_json(), overwrite=True)


def owner_epoch_keys(owner_dir: Path, owner: OwnerKey) -> list[bytes]:
    """Every clade key the owner directory holds, the current one first."""
    out = [owner.clade_key]
    keys = owner_dir / _KEYS_DIR
    for path in sorted(keys.glob("*.key")) if keys.is_dir() else []:
        key = read_secret(path, CLADE_KEY_BYTES, "clade key")
        if key not in out:
            out.append(key)
    return out


def is_rotation_bundle(data: bytes) -> bool:
    """True if `data` looks like a rotation bundle (not yet checked)."""
    try:
        signed, _ = unpack(data, max_len=MAX_BUNDLE_BYTES, fields=2)
        return isinstance(signed, bytes) and unpack(signed, max_len=MAX_BUNDLE_BYTES)[0] == RotationBundle.TAG
    except (Malformed, IndexError):
        return False


class RotationBundle:
    """Make and open the owner-signed file that gives one member the new clade key."""

    TAG = "clade.rotation"

    @staticmethod
    def create(owner: OwnerKey, peer_id: str, *, issued_at: int) -> bytes:
        """The bundle giving `owner`'s current key (its `key_epoch`) to `peer_id`."""
        public_key_of(peer_id)  # an Ed25519 peer id, or InvalidPeerId
        if owner.key_epoch < 1:
            raise CryptoError("a rotation bundle carries an epoch of 1 or more: rotate first")
        signed = pack([RotationBundle.TAG, FORMAT_VERSION, bytes.fromhex(owner.clade_id), peer_id,
                       owner.key_epoch, seal_clade_key(peer_id, owner.clade_key), issued_at])
        return pack([signed, owner.sign(signed)])

    @staticmethod
    def open(data: bytes, identity: Identity, membership: Membership) -> tuple[int, bytes]:
        """Check a bundle for this golem of its clade; returns (epoch, clade key).

        Raises `MembershipError`: malformed or unknown version, not signed by this clade's
        owner (`bad_signature`), another clade (`other_clade`), another golem
        (`wrong_peer`), or a key that does not open with this golem's key.
        """
        signed, signature, clade_id, peer_id, epoch, sealed, issued_at = _decode(
            data, tag=RotationBundle.TAG, fields=7, max_len=MAX_BUNDLE_BYTES, what="rotation bundle")
        if (not isinstance(clade_id, bytes) or len(clade_id) != 16 or not isinstance(peer_id, str)
                or type(epoch) is not int or not 1 <= epoch < 1 << 32 or not isinstance(sealed, bytes)
                or type(issued_at) is not int):
            raise MembershipError(Reason.MALFORMED, "rotation bundle fields have the wrong types")
        assert isinstance(signed, bytes) and isinstance(signature, bytes)
        _verify(membership.owner_public_key, signed, signature, "rotation bundle")
        if clade_id.hex() != membership.clade_id:
            raise MembershipError(Reason.OTHER_CLADE, f"rotation bundle is for clade {clade_id.hex()}")
        if peer_id != identity.peer_id:
            raise MembershipError(Reason.WRONG_PEER,
                                  f"rotation bundle is for {peer_id}, but this golem is {identity.peer_id}")
        return epoch, open_clade_key(sealed, identity)
