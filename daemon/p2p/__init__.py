"""Clade sync over libp2p: the host, the hello (membership) exchange, gossip and anti-entropy.

    sync_state  the anti-entropy protocol, sans I/O: PullState / ServeState (messages in, events out)
    sync        the thin trio loops that drive those states over a stream
    messages, frames, gossip, peers   pure wire formats and bookkeeping
    neighbourhood   pure policy: which siblings to keep connected, dial, drop; pull partners in turn
    ports       the typing.Protocol ports the parts talk through; P2PControl, what the daemon may ask
    dialing, admission, catchup, broadcast   the node's four parts, each owning its state
    links, host, node   py-libp2p: the `Links` port over a real host, and the wiring

Only what needs no libp2p is re-exported here: importing libp2p takes about a second, so
`node` is imported by the runtime alone, when sync runs.
"""

from .errors import LocalProtocolError, P2PError, RemoteProtocolError, SyncRefused
from .ports import P2PControl
from .sync_state import Closed, DeltaArrived, PeerRefused, PullState, RoundEnded, ServeState, WantReceived

__all__ = [
    "Closed",
    "DeltaArrived",
    "LocalProtocolError",
    "P2PControl",
    "P2PError",
    "PeerRefused",
    "PullState",
    "RemoteProtocolError",
    "RoundEnded",
    "ServeState",
    "SyncRefused",
    "WantReceived",
]
