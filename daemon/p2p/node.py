"""The p2p service of `clade run`: one libp2p host, membership-gated, gossiping and syncing.

    connect ─▶ hello (both sides prove membership with their certificate; Noise has already
               proved the peer id) ─▶ member: pull anti-entropy from it, gossip with it
             └▶ refused: disconnected, not dialed again for HOLD_S (revoked: never)

The node is assembled from one part per job over a shared `core.NodeCore`: `dialing`
(bootstrap, mDNS, peer exchange, redial with backoff), `admission` (the hello, revocations),
`catchup` (anti-entropy), `broadcast` (gossip in and out). This file wires them to one
host and one GossipSub and runs their tasks. Every handler catches its own errors: an
exception escaping one would take the host down.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

import trio
from libp2p.discovery.events.peerDiscovery import peerDiscovery
from libp2p.peer.peerinfo import PeerInfo
from libp2p.tools.anyio_service import background_trio_service

from crypto import Membership, RevocationList

from .admission import Admission
from .broadcast import Broadcast
from .catchup import CatchUp
from .core import HELLO_PROTOCOL, SYNC_PROTOCOL, log
from .dialing import Dialing, Events
from .gossip import GossipCodec, Opened
from .host import build_host, build_pubsub, parse_multiaddr
from .peers import PeerBook

if TYPE_CHECKING:
    from daemon.service.state import DaemonState

__all__ = ["HELLO_PROTOCOL", "SYNC_PROTOCOL", "P2PNode", "topic_of"]


def topic_of(clade_id: str) -> str:
    return f"/clade/{clade_id}/v1"


class P2PNode(Dialing, Admission, CatchUp, Broadcast):
    """The p2p service: the parts above over one host, one GossipSub and one peer book."""

    def __init__(self, state: DaemonState, *, membership: Membership, clade_key: bytes,
                 revocations: RevocationList | None, listen: list[str], bootstrap: list[str], mdns: bool,
                 sync_interval_s: float, max_skew_ms: int) -> None:
        self.state = state
        self.me = state.identity.peer_id
        self.membership = membership
        self.revocations = revocations
        self.listen = [parse_multiaddr(a) for a in listen]
        self.mdns = mdns
        self.sync_interval_s = sync_interval_s
        self.topic = topic_of(membership.clade_id)
        self.probe_topic = f"/clade/{membership.clade_id}/probe/v1"
        self.book = PeerBook()
        self.codec = GossipCodec(identity=state.identity, membership=membership, clade_key=clade_key,
                                 revocations=lambda: self.revocations, max_skew_ms=max_skew_ms)
        self.max_skew_ms = max_skew_ms
        self.counters: Counter[str] = state.counters
        self.rng = random.Random()
        self.host = build_host(state.identity, mdns=mdns)
        self.router, self.pubsub = build_pubsub(self.host)
        self._accepted: OrderedDict[bytes, Opened] = OrderedDict()
        self._validating: set[bytes] = set()
        self._wake_publisher = trio.Event()
        self._wake_dialer = trio.Event()
        self._syncing: set[str] = set()
        self._dialing: set[str] = set()
        self._published_seq = 0
        self._nursery: trio.Nursery | None = None
        self._apply_send, self._apply_receive = trio.open_memory_channel[tuple[str, Opened]](1024)
        self.listen_addrs: list[str] = []
        for addr in bootstrap:
            self.add_bootstrap(addr)

    def peers(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.book.all()]

    def status(self) -> dict[str, Any]:
        return {"listen": self.listen_addrs, "topic": self.topic, "members_connected": len(self.book.members()),
                "revocations_version": None if self.revocations is None else self.revocations.version}

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self._load_known()
        events_send, events_receive = trio.open_memory_channel[tuple[str, str]](4096)
        self.host.get_network().register_notifee(Events(events_send))
        token = trio.lowlevel.current_trio_token()

        def discovered(info: PeerInfo) -> None:  # called from zeroconf's thread
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._discovered, info)

        if self.mdns:
            peerDiscovery.register_peer_discovered_handler(discovered)
        self._published_seq = await self.state.db(lambda s: s.local_top(self.me))
        try:
            async with self.host.run(self.listen):
                try:
                    async with background_trio_service(self.pubsub), background_trio_service(self.router):
                        await self.pubsub.wait_until_ready()
                        self.pubsub.set_topic_validator(self.topic, self._validate, True)
                        self.host.set_stream_handler(HELLO_PROTOCOL, self._hello_handler)
                        self.host.set_stream_handler(SYNC_PROTOCOL, self._sync_handler)
                        subscription = await self.pubsub.subscribe(self.topic)
                        self.pubsub.set_topic_validator(self.probe_topic, self._validate_probe, False)
                        probes = await self.pubsub.subscribe(self.probe_topic)
                        self.listen_addrs = [str(a) for a in self.host.get_addrs()]
                        async with trio.open_nursery() as nursery:
                            self._nursery = nursery
                            nursery.start_soon(self._drain, subscription)
                            nursery.start_soon(self._drain_probes, probes)
                            nursery.start_soon(self._applier)
                            nursery.start_soon(self._publisher)
                            nursery.start_soon(self._dialer)
                            nursery.start_soon(self._anti_entropy)
                            nursery.start_soon(self._connection_events, events_receive)
                            log.info("p2p listening on %s, topic %s", ", ".join(self.listen_addrs), self.topic)
                            task_status.started(self.listen_addrs)
                            try:
                                await trio.sleep_forever()
                            finally:
                                # Close the host before pubsub stops (NOTES-libp2p 9), shielded so
                                # live connections are closed even while we are being cancelled.
                                with trio.CancelScope(shield=True), trio.move_on_after(5):
                                    await self.host.close()
                finally:
                    self.pubsub.seen_messages.stop()
        finally:
            if self.mdns:
                peerDiscovery.unregister_peer_discovered_handler(discovered)
