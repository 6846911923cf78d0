"""What every part of the p2p node shares: its state, constants, and a few connection helpers.

`P2PNode` (node.py) is assembled from one mixin per job — `Dialing` (finding and keeping
siblings), `Admission` (the hello: membership at connect, revocations), `CatchUp`
(anti-entropy), `Broadcast` (gossip in and out) — each over this `NodeCore`. The methods a
part calls on another are declared here, so each file reads on its own.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

import trio
from libp2p.abc import IHost
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import GossipSub
from libp2p.pubsub.pubsub import Pubsub

from crdt import ApplyReport
from crypto import Membership, RevocationList

from .gossip import GossipCodec, Opened
from .peers import PeerBook, PeerRecord

if TYPE_CHECKING:
    from daemon.service.state import DaemonState

__all__ = ["HELLO_PROTOCOL", "SYNC_PROTOCOL", "NodeCore", "log"]

log = logging.getLogger("clade.p2p")

HELLO_PROTOCOL = TProtocol("/clade/hello/1.0.0")
SYNC_PROTOCOL = TProtocol("/clade/sync/1.0.0")
DIAL_TIMEOUT_S = 10.0


class NodeCore:
    state: DaemonState
    me: str
    membership: Membership
    revocations: RevocationList | None
    codec: GossipCodec
    book: PeerBook
    counters: Counter[str]
    rng: random.Random
    host: IHost
    router: GossipSub
    pubsub: Pubsub
    topic: str
    probe_topic: str
    max_skew_ms: int
    sync_interval_s: float
    listen_addrs: list[str]
    _nursery: trio.Nursery | None
    _wake_dialer: trio.Event
    _wake_publisher: trio.Event
    _dialing: set[str]
    _syncing: set[str]
    _accepted: OrderedDict[bytes, Opened]
    _validating: set[bytes]
    _published_seq: int
    _apply_send: trio.MemorySendChannel[tuple[str, Opened]]
    _apply_receive: trio.MemoryReceiveChannel[tuple[str, Opened]]

    # -- implemented by the parts (declared here for the others) ---------------------------

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        raise NotImplementedError

    async def _hello(self, peer_id: str, then_sync: bool = True) -> None:
        raise NotImplementedError

    async def _save_known(self) -> None:
        raise NotImplementedError

    def _learn_sibling(self, addr: str) -> None:
        raise NotImplementedError

    # -- shared helpers ----------------------------------------------------------------------

    def _connected(self, peer_id: str) -> bool:
        try:
            return bool(self.host.get_network().get_connections(ID.from_base58(peer_id)))
        except Exception:  # noqa: BLE001 - a malformed id is simply not connected
            return False

    async def _drop(self, peer_id: str) -> None:
        try:
            with trio.move_on_after(5):
                await self.host.disconnect(ID.from_base58(peer_id))
        except Exception as exc:  # noqa: BLE001 - disconnecting a half-closed peer may fail; it is gone
            log.debug("disconnect %s: %s", peer_id, exc)
        record = self.book.find(peer_id)
        if record is not None:
            record.connected = self._connected(peer_id)

    def _shut_out(self, record: PeerRecord) -> None:
        """Keep GossipSub from exchanging messages with a held or revoked peer: a revoked
        member still has the clade key, so the envelope alone does not stop it reading."""
        record.blacklisted = True
        with contextlib.suppress(Exception):
            self.pubsub.add_to_blacklist(ID.from_base58(record.peer_id))

    def _let_in(self, record: PeerRecord) -> None:
        if record.blacklisted and record.refused != "revoked":
            record.blacklisted = False
            with contextlib.suppress(Exception):
                self.pubsub.remove_from_blacklist(ID.from_base58(record.peer_id))

    def _count_traffic(self, peer_id: str, *, sent: int = 0, received: int = 0, msgs_out: int = 0,
                       msgs_in: int = 0) -> None:
        record = self.book.get(peer_id)
        record.bytes_out += sent
        record.bytes_in += received
        record.msgs_out += msgs_out or (1 if sent else 0)
        record.msgs_in += msgs_in or (1 if received else 0)
        if received:
            record.last_seen_ms = self.state.now_ms()

    def _announce_received(self, source: str, report: ApplyReport, *, via: str) -> None:
        ids = sorted({op.entry_id for op in report.applied_ops})
        self.state.publish("entries_received", {
            "from": source, "via": via, "ops": report.applied, "entries": len(ids), "ids": ids[:100],
            "committed_ms": self.state.now_ms()})

