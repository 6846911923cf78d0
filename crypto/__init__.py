"""Crypto of clade: identities and signatures, owner key, membership certificates and
revocations, sealed gossip envelopes (and the vault).

Pure functions over bytes and files; every primitive comes from PyNaCl (libsodium).
"""

from .envelope import Envelope, EnvelopeError, EnvelopeReason, ReplayGuard, open_envelope, seal_envelope
from .errors import BadSignature, CryptoError, InvalidPeerId, KeyFileError, UnsafeKeyFile
from .identity import Identity, peer_id_of, public_key_of, signature_ok, verify
from .keyring import EpochKey, KeyRing
from .membership import (
    AdmissionBundle,
    Certificate,
    Membership,
    MembershipError,
    OwnerKey,
    Reason,
    RevocationList,
    clade_id_of,
)

__all__ = [
    "AdmissionBundle",
    "BadSignature",
    "Certificate",
    "CryptoError",
    "Envelope",
    "EnvelopeError",
    "EnvelopeReason",
    "EpochKey",
    "Identity",
    "InvalidPeerId",
    "KeyFileError",
    "KeyRing",
    "Membership",
    "MembershipError",
    "OwnerKey",
    "Reason",
    "ReplayGuard",
    "RevocationList",
    "UnsafeKeyFile",
    "clade_id_of",
    "open_envelope",
    "peer_id_of",
    "public_key_of",
    "seal_envelope",
    "signature_ok",
    "verify",
]
