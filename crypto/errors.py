"""Errors of the `crypto` package: one root, and a split between local and remote faults."""

from __future__ import annotations

from enum import StrEnum
from typing import Generic, TypeVar

__all__ = ["BadSignature", "CryptoError", "InvalidPeerId", "KeyFileError", "Refused", "UnsafeKeyFile"]

R = TypeVar("R", bound=StrEnum)


class CryptoError(Exception):
    """Root of every error raised by `crypto`."""


class Refused(CryptoError, Generic[R]):
    """Input was refused; `reason` (a member of the refusing module's enum) is the label to count."""

    def __init__(self, reason: R, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class KeyFileError(CryptoError):
    """A key file is missing, unreadable, truncated or of the wrong size."""


class UnsafeKeyFile(KeyFileError):
    """A secret key file can be read by group or others; the message says how to fix it."""


class InvalidPeerId(CryptoError, ValueError):
    """Text that is not an Ed25519 libp2p peer id."""


class BadSignature(CryptoError):
    """A signature does not verify for the claimed signer."""
