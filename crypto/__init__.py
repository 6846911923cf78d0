"""Crypto of clade: identities, signatures (and, later, membership, envelopes, vault).

Pure functions over bytes and files; every primitive comes from PyNaCl (libsodium).
"""

from .errors import BadSignature, CryptoError, InvalidPeerId, KeyFileError, UnsafeKeyFile
from .identity import Identity, peer_id_of, public_key_of, signature_ok, verify

__all__ = [
    "BadSignature",
    "CryptoError",
    "Identity",
    "InvalidPeerId",
    "KeyFileError",
    "UnsafeKeyFile",
    "peer_id_of",
    "public_key_of",
    "signature_ok",
    "verify",
]
