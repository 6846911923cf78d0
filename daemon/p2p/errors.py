"""Errors of the p2p room, split as h11 splits them.

- `crdt.RemoteProtocolError` (re-exported here): the remote peer sent something malformed,
  out of turn or out of bounds. Count it under its `reason`, drop the stream (or the peer),
  keep running. The frame and message decoders and the sync states raise only this.
- `LocalProtocolError`: this daemon drove a sync state out of turn (answered a want that
  was never received, reported a round applied twice …). Always a bug here, never the peer.
- `SyncRefused`: the responder refused the sync (it does not count us as a member). Not a
  protocol error: the peer said no, politely, in the protocol.

The network's own failures (a stream reset, a dial refused, a timeout) are named in
`links.TRANSPORT_ERRORS` (it imports libp2p, so it lives there): counted as failures of the
operation and backed off from. Anything else escaping a p2p task is a bug: it is logged
with its traceback and counted as `internal_errors` (`ports.internal_error`), never as a
sync failure.
"""

from __future__ import annotations

from crdt import RemoteProtocolError

__all__ = ["LocalProtocolError", "P2PError", "RemoteProtocolError", "SyncRefused"]


class P2PError(Exception):
    """Root of the errors `daemon.p2p` defines itself."""


class LocalProtocolError(P2PError):
    """The caller used a sync state out of turn: a bug in this daemon, not in the peer."""


class SyncRefused(P2PError):
    """The responder refused the sync (e.g. it does not count us as a member)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
