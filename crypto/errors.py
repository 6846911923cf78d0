"""Errors of the `crypto` package: one root, and a split between local and remote faults."""

from __future__ import annotations

__all__ = ["BadSignature", "CryptoError", "InvalidPeerId", "KeyFileError", "UnsafeKeyFile"]


class CryptoError(Exception):
    """Root of every error raised by `crypto`."""


class KeyFileError(CryptoError):
    """A key file is missing, unreadable, truncated or of the wrong size."""


class UnsafeKeyFile(KeyFileError):
    """A secret key file can be read by group or others; the message says how to fix it."""


class InvalidPeerId(CryptoError, ValueError):
    """Text that is not an Ed25519 libp2p peer id."""


class BadSignature(CryptoError):
    """A signature does not verify for the claimed signer."""
