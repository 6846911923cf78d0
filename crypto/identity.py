"""A golem's Ed25519 identity: the seed file, its libp2p peer id, signing and verifying.

The seed file (`identity.key`) holds exactly 32 raw bytes with mode 0600. The peer id is
the libp2p one: base58btc of the identity multihash of the protobuf-encoded public key
(libp2p peer-id spec; Ed25519 keys are small enough to be inlined). Because the key is
inlined, anyone can verify a signature from the peer id alone.
"""

from __future__ import annotations

import functools
from pathlib import Path

import base58
import nacl.bindings
import nacl.exceptions
import nacl.public
import nacl.signing

from .errors import BadSignature, InvalidPeerId, KeyFileError
from .keyfile import read_secret, write_secret

__all__ = ["SEED_BYTES", "Identity", "peer_id_of", "public_key_of", "verify"]

SEED_BYTES = 32
# protobuf PublicKey{Type: Ed25519 (1), Data: 32 bytes} = 08 01 12 20 <key>
_PROTOBUF_ED25519_PREFIX = b"\x08\x01\x12\x20"
# multihash: identity function (0x00), digest length 36
_MULTIHASH_PREFIX = b"\x00\x24" + _PROTOBUF_ED25519_PREFIX


def peer_id_of(public_key: bytes) -> str:
    """The libp2p peer id ("12D3KooW…") of a 32-byte Ed25519 public key."""
    if len(public_key) != 32:
        raise InvalidPeerId(f"an Ed25519 public key has 32 bytes, got {len(public_key)}")
    return base58.b58encode(_MULTIHASH_PREFIX + public_key).decode("ascii")


def public_key_of(peer_id: str) -> bytes:
    """The Ed25519 public key inlined in a peer id; raises `InvalidPeerId` otherwise."""
    try:
        raw = base58.b58decode(peer_id.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise InvalidPeerId(f"{peer_id!r} is not base58 text") from None
    if len(raw) != 38 or not raw.startswith(_MULTIHASH_PREFIX):
        raise InvalidPeerId(f"{peer_id!r} is not an Ed25519 libp2p peer id")
    return raw[6:]


@functools.lru_cache(maxsize=4096)
def _verify_key(peer_id: str) -> nacl.signing.VerifyKey:
    # A clade has few writers and every op names one: decode each peer id once.
    return nacl.signing.VerifyKey(public_key_of(peer_id))


def verify(peer_id: str, message: bytes, signature: bytes) -> None:
    """Check `signature` over `message` by `peer_id`; raises `BadSignature` or `InvalidPeerId`."""
    key = _verify_key(peer_id)
    try:
        key.verify(message, signature)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        raise BadSignature(f"signature does not verify for {peer_id}") from None


def signature_ok(peer_id: str, message: bytes, signature: bytes) -> bool:
    """`verify` as a predicate (the shape `crdt` takes): False for any bad signature or id.

    Called once per op a sibling sends (catch-up runs it on verifier threads): it goes to
    libsodium's `crypto_sign_open` (which runs without the GIL) with the writer's raw key,
    cached, and nothing else — the same check `VerifyKey.verify` makes, without its wrapping."""
    try:
        key = _public_key(peer_id)
    except InvalidPeerId:
        return False
    if type(signature) is not bytes or len(signature) != nacl.bindings.crypto_sign_BYTES:
        return False
    try:
        nacl.bindings.crypto_sign_open(signature + message, key)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _public_key(peer_id: str) -> bytes:
    return public_key_of(peer_id)


class Identity:
    """An Ed25519 signing identity (seed kept private; peer id and public key exposed)."""

    __slots__ = ("_signing_key", "peer_id", "public_key")

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise KeyFileError(f"an Ed25519 seed has {SEED_BYTES} bytes")
        self._signing_key = nacl.signing.SigningKey(seed)
        self.public_key: bytes = bytes(self._signing_key.verify_key)
        self.peer_id: str = peer_id_of(self.public_key)

    @classmethod
    def generate(cls) -> Identity:
        """A fresh identity from the OS random source."""
        return cls(bytes(nacl.signing.SigningKey.generate()))

    @property
    def seed(self) -> bytes:
        """The secret seed (for the libp2p key pair; never log it)."""
        return bytes(self._signing_key)

    def sign(self, message: bytes) -> bytes:
        """A 64-byte detached Ed25519 signature over `message`."""
        return self._signing_key.sign(message).signature

    def x25519_private_key(self) -> nacl.public.PrivateKey:
        """The X25519 key derived from this identity (opens what was sealed to the peer id)."""
        return self._signing_key.to_curve25519_private_key()

    def __repr__(self) -> str:
        return f"Identity({self.peer_id})"

    @classmethod
    def load(cls, path: Path) -> Identity:
        """Read a seed file, refusing one that group or others can read.

        Raises `UnsafeKeyFile` (with the chmod to run) or `KeyFileError`.
        """
        try:
            return cls(read_secret(path, SEED_BYTES, "identity key"))
        except KeyFileError as exc:
            if not path.exists():
                raise KeyFileError(f"{path} does not exist; run `clade init` to create an identity") from None
            raise exc from None

    def save(self, path: Path, *, overwrite: bool = False) -> None:
        """Write the seed with mode 0600, durably; never replaces a file unless `overwrite`."""
        write_secret(path, self.seed, overwrite=overwrite)
