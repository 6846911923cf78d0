"""Clade membership: the owner key, membership certificates, revocation lists, admission.

The owner key (Ed25519) stays off the golems. It signs:

- a **certificate** per golem: clade id, peer id, generation, validity window;
- **revocation lists**: a monotonic version and the revoked peer ids (an older list never
  replaces a newer one);
- **admission bundles**: the certificate, the owner's public key, the clade name and the
  32-byte clade key sealed (libsodium SealedBox) to the golem's X25519 key, which is
  derived from its Ed25519 identity, so only that golem can open it.

The clade id is `blake2b-128(owner public key ‖ clade name)`: a certificate names exactly
one owner's one clade. Every check reports *why* it failed (`MembershipError.reason`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import nacl.exceptions
import nacl.public
import nacl.signing

from .errors import CryptoError, KeyFileError, Refused
from .identity import Identity, public_key_of
from .keyfile import read_secret, write_public, write_secret
from .wire import Malformed, pack, unpack

__all__ = [
    "CLADE_KEY_BYTES",
    "AdmissionBundle",
    "Certificate",
    "Membership",
    "MembershipError",
    "OwnerKey",
    "Reason",
    "RevocationList",
    "clade_id_of",
    "open_clade_key",
    "seal_clade_key",
]

CLADE_KEY_BYTES = 32
MAX_CERT_BYTES = 1024
MAX_BUNDLE_BYTES = 4096
MAX_REVOCATION_BYTES = 1024 * 1024
FORMAT_VERSION = 1


class Reason(StrEnum):
    BAD_SIGNATURE = "bad_signature"
    OTHER_CLADE = "other_clade"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    REVOKED = "revoked"
    WRONG_PEER = "wrong_peer"
    MALFORMED = "malformed"
    UNKNOWN_VERSION = "unknown_version"
    STALE = "stale"


class MembershipError(Refused[Reason]):
    """A certificate, revocation list or bundle was refused; `reason` says why."""


def clade_id_of(owner_public_key: bytes, name: str) -> str:
    """32 hex chars naming one owner's clade."""
    return hashlib.blake2b(owner_public_key + name.encode("utf-8"), digest_size=16,
                           person=b"clade.id.v1").hexdigest()


def _verify(public_key: bytes, message: bytes, signature: bytes, what: str) -> None:
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError, TypeError):
        raise MembershipError(Reason.BAD_SIGNATURE, f"{what} is not signed by the clade's owner") from None


def _decode(data: bytes, *, tag: str, fields: int, max_len: int, what: str,
            versions: dict[int, int] | None = None) -> list[object]:
    """[signed, signature, *fields after tag and version]; `versions` maps each accepted
    format version to its field count (default: only FORMAT_VERSION with `fields`)."""
    accepted = versions or {FORMAT_VERSION: fields}
    try:
        outer = unpack(data, max_len=max_len, fields=2)
        signed, signature = outer
        if not isinstance(signed, bytes) or not isinstance(signature, bytes) or len(signature) != 64:
            raise Malformed("expected [signed bytes, 64-byte signature]")
        inner = unpack(signed, max_len=max_len, tag=tag)
    except Malformed as exc:
        raise MembershipError(Reason.MALFORMED, f"{what}: {exc}") from None
    if inner[1] not in accepted:
        readable = ", ".join(str(v) for v in sorted(accepted))
        raise MembershipError(Reason.UNKNOWN_VERSION, f"{what} format version {inner[1]} (this clade reads {readable})")
    if len(inner) != accepted[inner[1]]:
        raise MembershipError(Reason.MALFORMED, f"{what}: expected {accepted[inner[1]]} fields")
    return [signed, signature, *inner[2:]]


class OwnerKey:
    """The owner's signing key and clade, kept in an owner directory off the golems.

    Files: `owner.key` (Ed25519 seed, 0600), `clade.key` (the current clade key, 32 bytes,
    0600), `clade.json` (name, clade id, owner public key, key epoch), `revocations.bin`
    (the latest signed list); after a rotation (`crypto.rotation`) also `members.json` and
    `clade-keys/<epoch>.key` (every epoch's key, 0600).
    """

    def __init__(self, seed: bytes, clade_name: str, clade_key: bytes, key_epoch: int = 0) -> None:
        self._signing_key = nacl.signing.SigningKey(seed)
        self.public_key = bytes(self._signing_key.verify_key)
        self.clade_name = clade_name
        self.clade_key = clade_key
        self.key_epoch = key_epoch
        self.clade_id = clade_id_of(self.public_key, clade_name)

    def sign(self, message: bytes) -> bytes:
        return self._signing_key.sign(message).signature

    @property
    def x25519_public_key(self) -> bytes:
        """The owner's X25519 key (vault backups are also sealed to it)."""
        return bytes(self._signing_key.verify_key.to_curve25519_public_key())

    def x25519_private_key(self) -> nacl.public.PrivateKey:
        return self._signing_key.to_curve25519_private_key()

    @classmethod
    def create(cls, owner_dir: Path, clade_name: str) -> OwnerKey:
        """Make a new owner key and clade key in `owner_dir` (refuses to overwrite)."""
        name = clade_name.strip()
        if not name or len(name) > 64 or any(ord(c) < 32 for c in name):
            raise CryptoError(f"clade name {clade_name!r} must be 1..64 printable characters")
        owner_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if (owner_dir / "owner.key").exists():
            raise KeyFileError(f"{owner_dir / 'owner.key'} already exists; this directory holds an owner key")
        owner = cls(secrets.token_bytes(32), name, secrets.token_bytes(CLADE_KEY_BYTES))
        write_secret(owner_dir / "clade.key", owner.clade_key)
        write_public(owner_dir / "clade.json", owner.info_json())
        write_secret(owner_dir / "owner.key", bytes(owner._signing_key))
        return owner

    @classmethod
    def load(cls, owner_dir: Path) -> OwnerKey:
        """Read an owner directory made by `create`."""
        seed = read_secret(owner_dir / "owner.key", 32, "owner key")
        clade_key = read_secret(owner_dir / "clade.key", CLADE_KEY_BYTES, "clade key")
        try:
            info = json.loads((owner_dir / "clade.json").read_text())
            name = info["clade"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KeyFileError(f"{owner_dir / 'clade.json'} is missing or unreadable: {exc}") from None
        epoch = info.get("key_epoch", 0)
        if type(epoch) is not int or epoch < 0:
            raise KeyFileError(f"{owner_dir / 'clade.json'}: key_epoch must be a non-negative integer")
        owner = cls(seed, name, clade_key, epoch)
        if info.get("clade_id") != owner.clade_id:
            raise KeyFileError(f"{owner_dir / 'clade.json'} does not match owner.key (clade id differs)")
        return owner

    def with_clade_key(self, clade_key: bytes, key_epoch: int) -> OwnerKey:
        """The same owner and clade with another clade key (a rotation)."""
        return OwnerKey(bytes(self._signing_key), self.clade_name, clade_key, key_epoch)

    def info_json(self) -> bytes:
        """The `clade.json` document (public: no key material)."""
        return json.dumps({"clade": self.clade_name, "clade_id": self.clade_id,
                           "owner_public_key": self.public_key.hex(), "key_epoch": self.key_epoch},
                          indent=2).encode() + b"\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Certificate:
    """An owner-signed statement that `peer_id` belongs to clade `clade_id`."""

    clade_id: str
    peer_id: str
    generation: int
    not_before: int
    not_after: int
    signed: bytes
    signature: bytes

    TAG = "clade.cert"

    @classmethod
    def issue(cls, owner: OwnerKey, peer_id: str, *, generation: int, not_before: int, not_after: int) -> Certificate:
        """Sign a certificate (times in Unix seconds)."""
        public_key_of(peer_id)  # only Ed25519 peer ids can be admitted
        if not 0 <= generation < 1 << 31 or not not_before < not_after:
            raise CryptoError("generation must be >= 0 and not_before < not_after")
        signed = pack([cls.TAG, FORMAT_VERSION, bytes.fromhex(owner.clade_id), peer_id, generation,
                       not_before, not_after])
        return cls(clade_id=owner.clade_id, peer_id=peer_id, generation=generation, not_before=not_before,
                   not_after=not_after, signed=signed, signature=owner.sign(signed))

    def to_bytes(self) -> bytes:
        return pack([self.signed, self.signature])

    @property
    def digest(self) -> bytes:
        """32-byte hash of the encoded certificate."""
        return hashlib.blake2b(self.to_bytes(), digest_size=32).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> Certificate:
        """Decode (not verify) a certificate; raises `MembershipError` (malformed, version)."""
        signed, signature, clade_id, peer_id, generation, not_before, not_after = _decode(
            data, tag=cls.TAG, fields=7, max_len=MAX_CERT_BYTES, what="certificate")
        if (not isinstance(clade_id, bytes) or len(clade_id) != 16 or not isinstance(peer_id, str)
                or type(generation) is not int or type(not_before) is not int or type(not_after) is not int):
            raise MembershipError(Reason.MALFORMED, "certificate fields have the wrong types")
        assert isinstance(signed, bytes) and isinstance(signature, bytes)
        return cls(clade_id=clade_id.hex(), peer_id=peer_id, generation=generation, not_before=not_before,
                   not_after=not_after, signed=signed, signature=signature)

    def verify(self, owner_public_key: bytes, clade_id: str, *, now: int,
               revocations: RevocationList | None = None) -> None:
        """Raise `MembershipError` unless this certificate admits its peer to `clade_id` now:
        the owner's signature (`verify_signature`), then `check_standing`."""
        self.verify_signature(owner_public_key)
        self.check_standing(clade_id, now=now, revocations=revocations)

    def verify_signature(self, owner_public_key: bytes) -> None:
        """Raise `MembershipError` (bad_signature) unless `owner_public_key` signed this certificate."""
        _verify(owner_public_key, self.signed, self.signature, "certificate")

    def check_standing(self, clade_id: str, *, now: int, revocations: RevocationList | None = None) -> None:
        """Every check of `verify` but the signature: the clade, the validity window at `now`
        (Unix seconds) and revocation. Raises `MembershipError` (other_clade, not_yet_valid,
        expired, revoked)."""
        if self.clade_id != clade_id:
            raise MembershipError(Reason.OTHER_CLADE, f"certificate is for clade {self.clade_id}, not {clade_id}")
        if now < self.not_before:
            raise MembershipError(Reason.NOT_YET_VALID,
                                  f"certificate for {self.peer_id} is valid from {self.not_before}")
        if now >= self.not_after:
            raise MembershipError(Reason.EXPIRED, f"certificate for {self.peer_id} expired at {self.not_after}")
        if revocations is not None and revocations.is_revoked(self.peer_id):
            raise MembershipError(Reason.REVOKED, f"{self.peer_id} was revoked (list v{revocations.version})")


@dataclass(frozen=True, slots=True, kw_only=True)
class RevocationList:
    """An owner-signed, versioned set of revoked peer ids."""

    clade_id: str
    version: int
    revoked: frozenset[str]
    issued_at: int
    signed: bytes
    signature: bytes

    TAG = "clade.revocations"

    @classmethod
    def issue(cls, owner: OwnerKey, *, version: int, revoked: Iterable[str], issued_at: int) -> RevocationList:
        peers = sorted(set(revoked))
        signed = pack([cls.TAG, FORMAT_VERSION, bytes.fromhex(owner.clade_id), version, peers, issued_at])
        return cls(clade_id=owner.clade_id, version=version, revoked=frozenset(peers), issued_at=issued_at,
                   signed=signed, signature=owner.sign(signed))

    def to_bytes(self) -> bytes:
        return pack([self.signed, self.signature])

    @classmethod
    def from_bytes(cls, data: bytes) -> RevocationList:
        """Decode (not verify) a revocation list; raises `MembershipError` (malformed, version)."""
        signed, signature, clade_id, version, peers, issued_at = _decode(
            data, tag=cls.TAG, fields=6, max_len=MAX_REVOCATION_BYTES, what="revocation list")
        if (not isinstance(clade_id, bytes) or len(clade_id) != 16 or type(version) is not int
                or not isinstance(peers, list) or not all(isinstance(p, str) for p in peers)
                or type(issued_at) is not int):
            raise MembershipError(Reason.MALFORMED, "revocation list fields have the wrong types")
        assert isinstance(signed, bytes) and isinstance(signature, bytes)
        return cls(clade_id=clade_id.hex(), version=version, revoked=frozenset(peers),
                   issued_at=issued_at, signed=signed, signature=signature)

    def verify(self, owner_public_key: bytes, clade_id: str) -> None:
        """Raise `MembershipError` (bad_signature, other_clade) unless the clade's owner signed it."""
        _verify(owner_public_key, self.signed, self.signature, "revocation list")
        if self.clade_id != clade_id:
            raise MembershipError(Reason.OTHER_CLADE, f"revocation list is for clade {self.clade_id}")

    def is_revoked(self, peer_id: str) -> bool:
        return peer_id in self.revoked

    def replaces(self, current: RevocationList | None) -> bool:
        """True if this list may replace `current` (strictly newer version)."""
        return current is None or self.version > current.version


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """What a golem keeps after joining: its certificate and the clade it names."""

    certificate: Certificate
    owner_public_key: bytes
    clade_name: str

    TAG = "clade.membership"

    @property
    def clade_id(self) -> str:
        return self.certificate.clade_id

    def to_bytes(self) -> bytes:
        return pack([self.TAG, FORMAT_VERSION, self.certificate.to_bytes(), self.owner_public_key, self.clade_name])

    @classmethod
    def from_bytes(cls, data: bytes) -> Membership:
        """Decode a `membership.cert` file; raises `MembershipError` (malformed, version, other_clade)."""
        try:
            fields = unpack(data, max_len=MAX_BUNDLE_BYTES, fields=5, tag=cls.TAG)
        except Malformed as exc:
            raise MembershipError(Reason.MALFORMED, f"membership file: {exc}") from None
        _, version, cert, owner_pub, name = fields
        if version != FORMAT_VERSION:
            raise MembershipError(Reason.UNKNOWN_VERSION, f"membership format version {version}")
        if not isinstance(cert, bytes) or not isinstance(owner_pub, bytes) or len(owner_pub) != 32 \
                or not isinstance(name, str):
            raise MembershipError(Reason.MALFORMED, "membership file fields have the wrong types")
        membership = cls(certificate=Certificate.from_bytes(cert), owner_public_key=owner_pub, clade_name=name)
        if clade_id_of(owner_pub, name) != membership.clade_id:
            raise MembershipError(Reason.OTHER_CLADE, "certificate does not name the owner's clade")
        return membership

    def owner_x25519_public_key(self) -> bytes:
        return bytes(nacl.signing.VerifyKey(self.owner_public_key).to_curve25519_public_key())


def seal_clade_key(peer_id: str, clade_key: bytes) -> bytes:
    """`clade_key` sealed (SealedBox) to the X25519 key derived from `peer_id`'s Ed25519 key:
    only that golem can open it (`open_clade_key`)."""
    golem_x25519 = nacl.signing.VerifyKey(public_key_of(peer_id)).to_curve25519_public_key()
    return bytes(nacl.public.SealedBox(golem_x25519).encrypt(clade_key))


def open_clade_key(sealed: bytes, identity: Identity) -> bytes:
    """Open `seal_clade_key`'s box; raises `MembershipError` (not for this golem, wrong length)."""
    try:
        clade_key = nacl.public.SealedBox(identity.x25519_private_key()).decrypt(sealed)
    except nacl.exceptions.CryptoError:
        raise MembershipError(Reason.BAD_SIGNATURE,
                              "the sealed clade key does not open with this golem's key") from None
    if len(clade_key) != CLADE_KEY_BYTES:
        raise MembershipError(Reason.MALFORMED, "sealed clade key has the wrong length")
    return bytes(clade_key)


class AdmissionBundle:
    """Make and open the owner-signed file that admits one golem to the clade.

        v1: [signed, signature], signed = ["clade.bundle", 1, certificate, owner public key, clade name, sealed key]
        v2: the same plus the key epoch: ["clade.bundle", 2, …, sealed key, epoch]

    An owner whose clade key was never rotated (epoch 0) writes v1, which daemons from
    before rotation also read.
    """

    TAG = "clade.bundle"

    @staticmethod
    def create(owner: OwnerKey, certificate: Certificate) -> bytes:
        sealed = seal_clade_key(certificate.peer_id, owner.clade_key)
        fields: list[object] = [AdmissionBundle.TAG, FORMAT_VERSION, certificate.to_bytes(), owner.public_key,
                                owner.clade_name, sealed]
        if owner.key_epoch:
            fields[1] = 2
            fields.append(owner.key_epoch)
        signed = pack(fields)
        return pack([signed, owner.sign(signed)])

    @staticmethod
    def open(data: bytes, identity: Identity, *, now: int) -> tuple[Membership, bytes]:
        """Check a bundle for this golem and return (membership, clade key); see `open_epoch`."""
        membership, _, clade_key = AdmissionBundle.open_epoch(data, identity, now=now)
        return membership, clade_key

    @staticmethod
    def open_epoch(data: bytes, identity: Identity, *, now: int) -> tuple[Membership, int, bytes]:
        """Check a bundle for this golem and return (membership, key epoch, clade key).

        Raises `MembershipError`: malformed or unknown version, not signed by the owner it
        names, for another peer (`wrong_peer`), certificate invalid now, or a clade key
        that does not open with this golem's key.
        """
        signed, signature, cert_bytes, owner_pub, name, sealed, *rest = _decode(
            data, tag=AdmissionBundle.TAG, fields=6, max_len=MAX_BUNDLE_BYTES, what="admission bundle",
            versions={FORMAT_VERSION: 6, 2: 7})
        epoch = rest[0] if rest else 0
        if (not isinstance(cert_bytes, bytes) or not isinstance(owner_pub, bytes) or len(owner_pub) != 32
                or not isinstance(name, str) or not isinstance(sealed, bytes) or type(epoch) is not int
                or not 0 <= epoch < 1 << 32 or (rest and epoch == 0)):
            raise MembershipError(Reason.MALFORMED, "admission bundle fields have the wrong types")
        assert isinstance(signed, bytes) and isinstance(signature, bytes)
        _verify(owner_pub, signed, signature, "admission bundle")
        certificate = Certificate.from_bytes(cert_bytes)
        if certificate.peer_id != identity.peer_id:
            raise MembershipError(Reason.WRONG_PEER,
                                  f"bundle admits {certificate.peer_id}, but this golem is {identity.peer_id}")
        certificate.verify(owner_pub, clade_id_of(owner_pub, name), now=now)
        clade_key = open_clade_key(sealed, identity)
        return Membership(certificate=certificate, owner_public_key=owner_pub, clade_name=name), epoch, clade_key
