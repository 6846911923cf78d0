"""What the node's four parts (Dialing, Admission, CatchUp, Broadcast) have in common."""

from __future__ import annotations

from .peers import PeerBook
from .ports import DaemonPort, Links

__all__ = ["NodePart"]


class NodePart:
    """A part of the p2p node: it holds the daemon, the host's links and the node's one peer
    book, and counts into the daemon's counters (`counters` is `daemon.counters`)."""

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook) -> None:
        self.daemon = daemon
        self.links = links
        self.book = book
        self.counters = daemon.counters
