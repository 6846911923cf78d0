"""Errors of the pure CRDT package.

One root (`CrdtError`) and, as in h11, a split between the caller misusing the API
(`InvalidValue`: a local write that breaks a rule) and a remote peer sending garbage
(`RemoteProtocolError`: count it, drop it, keep running).
"""

from __future__ import annotations

__all__ = ["CrdtError", "InvalidValue", "RemoteProtocolError"]


class CrdtError(Exception):
    """Root of every error raised by `crdt`."""


class InvalidValue(CrdtError, ValueError):
    """A value breaks a rule of the data model; `field` names it, `reason` says what is allowed."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class RemoteProtocolError(CrdtError):
    """Bytes or ops from a peer were malformed, forged or out of bounds.

    `reason` is a short stable label (for counters); the message says what was wrong.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
