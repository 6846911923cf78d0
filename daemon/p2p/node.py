"""The p2p service of `clade run`: one libp2p host, membership-gated, gossiping and syncing.

    connect ─▶ hello (both sides prove membership with their certificate; Noise has already
               proved the peer id) ─▶ member: pull anti-entropy from it, gossip with it
             └▶ refused: disconnected, not dialed again for HOLD_S (revoked: never)

The node is four parts, each owning its state, over one host (`HostLinks`), one peer book
and the daemon (`ports.DaemonPort`):

    Dialing    bootstrap, mDNS, peer exchange, known siblings, redial backoff, holds,
               the bounded neighbourhood (neighbourhood.py: whom to keep, dial, drop)
    Admission  the hello both ways, membership, revocations        → Siblings (Dialing), Syncer (CatchUp)
    CatchUp    anti-entropy: pull on connect and on a timer, serve pulls
    Broadcast  gossip out (own ops), gossip in (validate, join), probes

This file builds them, routes libp2p's callbacks (connection events, stream handlers,
topic validators, mDNS) to them, runs their tasks, and is the `ports.P2PControl` the daemon
uses. Stream handlers never raise: an exception escaping one takes the host down.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from libp2p.abc import INetConn, INetStream, INetwork, INotifee
from libp2p.custom_types import TProtocol
from libp2p.discovery.events.peerDiscovery import peerDiscovery
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr
from libp2p.tools.anyio_service import background_trio_service
from multiaddr.exceptions import Error as MultiaddrError

from crypto import Identity, KeyRing, Membership, RevocationList

from . import admission, catchup
from .admission import Admission
from .broadcast import Broadcast
from .catchup import CatchUp
from .dialing import DEFAULT_ROTATE_S, Dialing
from .gate import MemberGate
from .gossip import GossipCodec
from .host import build_host, build_pubsub, parse_multiaddr
from .links import TRANSPORT_ERRORS, HostLinks
from .neighbourhood import DEFAULT_TARGET
from .peers import PeerBook, PeerRecord
from .ports import DaemonPort, log

__all__ = ["HELLO_PROTOCOL", "SYNC_PROTOCOL", "SYNC_V2_PROTOCOL", "SYNC_V3_PROTOCOL", "ConnectionNotifee", "P2PNode",
           "parse_peer_addr", "topic_of"]

HELLO_PROTOCOL = TProtocol(admission.HELLO_PROTOCOL)
SYNC_PROTOCOL = TProtocol(catchup.SYNC_PROTOCOL)
SYNC_V2_PROTOCOL = TProtocol(catchup.SYNC_V2_PROTOCOL)
SYNC_V3_PROTOCOL = TProtocol(catchup.SYNC_V3_PROTOCOL)


GOSSIP_GATE_WAIT_S = 60.0  # a peer's pubsub stream waits for its hello at most this long (see gate)


def topic_of(clade_id: str, *, vectors: bool = False) -> str:
    """The clade's gossip topic; `vectors`: the topic whose messages also carry the sender's
    vectors (gossip.WITH_VECTORS), which a daemon uses while every connected sibling is on it."""
    return f"/clade/{clade_id}/v2" if vectors else f"/clade/{clade_id}/v1"


def parse_peer_addr(addr: str) -> tuple[str, str]:
    """`/…/p2p/PEERID` → (peer id, the address as libp2p prints it); `ValueError` if malformed."""
    try:
        info = info_from_p2p_addr(parse_multiaddr(addr))
        return info.peer_id.to_base58(), str(info.addrs[0])
    except (ValueError, LookupError, MultiaddrError) as exc:  # libp2p and multiaddr raise several types
        raise ValueError(str(exc)) from None


ConnEvent = tuple[str, str, bool]  # ("connected" | "disconnected", peer id, we dialed it)


class ConnectionNotifee(INotifee):
    """An `INotifee` for connection events only: the stream and listen events do nothing."""

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def listen(self, network: INetwork, multiaddr: Any) -> None:
        pass

    async def listen_close(self, network: INetwork, multiaddr: Any) -> None:
        pass


class Events(ConnectionNotifee):
    """Connection events from libp2p, handed to the node's task (never handled inline)."""

    def __init__(self, send: trio.MemorySendChannel[ConnEvent]) -> None:
        self.send = send

    def _post(self, kind: str, conn: INetConn) -> None:
        outbound = bool(getattr(conn.muxed_conn, "is_initiator", False))
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.send.send_nowait((kind, conn.muxed_conn.peer_id.to_base58(), outbound))

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        self._post("connected", conn)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self._post("disconnected", conn)


class P2PNode:
    """The p2p service: the parts above over one host, one GossipSub and one peer book."""

    def __init__(self, daemon: DaemonPort, *, identity: Identity, membership: Membership,
                 keyring: Callable[[], KeyRing], key_grace_ms: Callable[[], int],
                 revocations: RevocationList | None, persist_revocations: Callable[[RevocationList], object],
                 known_path: Path, listen: list[str], bootstrap: list[str], mdns: bool,
                 sync_interval_s: float, max_skew_ms: int, neighbours: int = DEFAULT_TARGET,
                 rotate_s: float = DEFAULT_ROTATE_S) -> None:
        self.daemon = daemon
        self.me = me = identity.peer_id
        self.listen = [parse_multiaddr(a) for a in listen]
        self.mdns = mdns
        self.topic = topic_of(membership.clade_id)
        self.probe_topic = f"/clade/{membership.clade_id}/probe/v1"
        self.book = PeerBook()
        self.rng = random.Random()
        self.host = build_host(identity, mdns=mdns)
        self.gate = MemberGate(live=lambda peer: self.links.connection_ids(peer))
        self.router, self.pubsub = build_pubsub(self.host, self.gate, wait_s=GOSSIP_GATE_WAIT_S,
                                                counters=daemon.counters)
        self.links = HostLinks(self.host, self.pubsub, self.gate)
        self.book.on_evict = self._evicted
        self.dialing = Dialing(daemon, self.links, self.book, me=me, known_path=known_path, rng=self.rng,
                               parse_addr=parse_peer_addr, dial_errors=(*TRANSPORT_ERRORS, ValueError),
                               target=neighbours, rotate_s=rotate_s, busy=lambda: self.catchup.syncing,
                               regreet=lambda peer_id: self.admission.greet(peer_id))
        self.catchup = CatchUp(daemon, self.links, self.book, me=me, max_skew_ms=max_skew_ms,
                               sync_interval_s=sync_interval_s, rng=self.rng)
        self.admission = Admission(daemon, self.links, self.book, membership=membership, revocations=revocations,
                                   persist_revocations=persist_revocations, siblings=self.dialing,
                                   syncer=self.catchup)
        codec = GossipCodec(identity=identity, membership=membership, keyring=keyring, key_grace_ms=key_grace_ms,
                            counters=daemon.counters, revocations=lambda: self.admission.revocations,
                            max_skew_ms=max_skew_ms)
        self.vector_topic = topic_of(membership.clade_id, vectors=True)
        self.broadcast = Broadcast(daemon, self.links, self.book, me=me, codec=codec, topic=self.topic,
                                   vector_topic=self.vector_topic, probe_topic=self.probe_topic,
                                   max_skew_ms=max_skew_ms)
        self.broadcast.on_refused_for_its_time = self.catchup.pull_soon
        self.listen_addrs: list[str] = []
        for addr in bootstrap:
            self.dialing.add_bootstrap(addr)

    # -- P2PControl ------------------------------------------------------------------------------

    def peers(self) -> list[dict[str, Any]]:
        """The peer book's records, each with how many connections to it are open now."""
        return [{**r.to_json(), "connections": len(self.links.connections(r.peer_id)) if r.connected else 0}
                for r in self.book.all()]

    def siblings(self) -> list[str]:
        return [r.peer_id for r in self.book.members()]

    def status(self) -> dict[str, Any]:
        revocations = self.admission.revocations
        return {"listen": self.listen_addrs, "topic": self.topic, "members_connected": len(self.book.members()),
                "revocations_version": None if revocations is None else revocations.version}

    def add_bootstrap(self, addr: str) -> str:
        return self.dialing.add_bootstrap(addr, pin=True)  # the operator's `clade peers connect`

    async def disconnect(self, peer_id: str, *, hold_s: float) -> None:
        await self.dialing.disconnect(peer_id, hold_s=hold_s)

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        return await self.catchup.sync_with(peer_id)

    async def adopt_revocations(self, revocations: RevocationList) -> bool:
        return await self.admission.adopt_revocations(revocations)

    def local_write(self) -> None:
        self.broadcast.local_write()

    async def publish_probe(self, probe_id: str) -> int:
        return await self.broadcast.publish_probe(probe_id)

    # -- libp2p's callbacks, routed to the parts -----------------------------------------------

    async def _connection_events(self, receive: trio.MemoryReceiveChannel[ConnEvent]) -> None:
        async for kind, peer_id, outbound in receive:
            if kind == "connected":
                new = self.dialing.on_connected(peer_id)
                if new is None:  # held off: dropped at once
                    continue
                if outbound:  # the dialer proves membership first (admission's module docstring)
                    self.admission.greet(peer_id)
                elif new:
                    self.admission.expect_hello(peer_id)
            else:
                if not self.links.connected(peer_id):
                    self.admission.forget(peer_id)
                else:  # one of two closed (a duplicate, `Dialing._settle_duplicates`): gossip on the other
                    self.links.drop_stale_gossip(peer_id)
                self.dialing.on_disconnected(peer_id)

    def _evicted(self, record: PeerRecord) -> None:
        """A stranger left the peer book: lift its GossipSub blacklist (a revoked peer's stays)."""
        if record.blacklisted and record.refused != "revoked":
            self.links.let_in(record.peer_id)

    async def _hello_handler(self, stream: INetStream) -> None:
        await self.admission.serve_hello(stream, stream.muxed_conn.peer_id.to_base58())

    async def _sync_handler(self, stream: INetStream) -> None:
        await self.catchup.serve_sync(stream, stream.muxed_conn.peer_id.to_base58(), version=1)

    async def _sync_v2_handler(self, stream: INetStream) -> None:
        await self.catchup.serve_sync(stream, stream.muxed_conn.peer_id.to_base58(), version=2)

    async def _sync_v3_handler(self, stream: INetStream) -> None:
        await self.catchup.serve_sync(stream, stream.muxed_conn.peer_id.to_base58(), version=3)

    def _discovered(self, info: PeerInfo) -> None:
        self.dialing.discovered(info.peer_id.to_base58(), [str(a) for a in info.addrs])

    # -- running ---------------------------------------------------------------------------------

    async def _stop_listening(self) -> None:
        """Close the listeners before the connections: py-libp2p's `Swarm.close` closes them
        after, and siblings redial within ~0.3 s of losing us, so for that moment a stopping
        daemon accepted their redials and then cut them off mid-hello (`hello_failed` on
        every sibling at each restart). Refused dials are what a stopped daemon should give."""
        for address, listener in list(self.host.get_network().listeners.items()):
            try:
                await listener.close()
            except Exception:  # noqa: BLE001 - stopping anyway: Swarm.close tries again
                log.warning("closing the listener on %s failed", address, exc_info=True)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self.dialing.load_known()
        events_send, events_receive = trio.open_memory_channel[ConnEvent](4096)
        self.host.get_network().register_notifee(Events(events_send))
        token = trio.lowlevel.current_trio_token()

        def discovered(info: PeerInfo) -> None:  # called from zeroconf's thread
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._discovered, info)

        if self.mdns:
            peerDiscovery.register_peer_discovered_handler(discovered)
        await self.broadcast.prime()
        try:
            async with self.host.run(self.listen):
                try:
                    async with background_trio_service(self.pubsub), background_trio_service(self.router):
                        await self.pubsub.wait_until_ready()
                        self.pubsub.set_topic_validator(self.topic, self.broadcast.validate, True)
                        self.pubsub.set_inline_validator(self.topic, self.broadcast.validate_inline)
                        self.host.set_stream_handler(HELLO_PROTOCOL, self._hello_handler)
                        self.host.set_stream_handler(SYNC_PROTOCOL, self._sync_handler)
                        self.host.set_stream_handler(SYNC_V2_PROTOCOL, self._sync_v2_handler)
                        self.host.set_stream_handler(SYNC_V3_PROTOCOL, self._sync_v3_handler)
                        subscription = await self.pubsub.subscribe(self.topic)
                        self.pubsub.set_topic_validator(self.vector_topic, self.broadcast.validate_with_vectors, True)
                        self.pubsub.set_inline_validator(self.vector_topic, self.broadcast.validate_inline_with_vectors)
                        with_vectors = await self.pubsub.subscribe(self.vector_topic)
                        self.pubsub.set_topic_validator(self.probe_topic, self.broadcast.validate_probe, False)
                        probes = await self.pubsub.subscribe(self.probe_topic)
                        self.listen_addrs = self.links.listen_addrs()
                        async with trio.open_nursery() as nursery:
                            await nursery.start(self.admission.run)
                            await nursery.start(self.dialing.run)
                            await nursery.start(self.broadcast.run, subscription, probes, with_vectors)
                            nursery.start_soon(self.catchup.run)
                            nursery.start_soon(self._connection_events, events_receive)
                            log.info("p2p listening on %s, topic %s", ", ".join(self.listen_addrs), self.topic)
                            task_status.started(self.listen_addrs)
                            try:
                                await trio.sleep_forever()
                            finally:
                                # Close the host before pubsub stops (docs/design/libp2p.md, pitfall 9), shielded so
                                # live connections are closed even while we are being cancelled.
                                with trio.CancelScope(shield=True), trio.move_on_after(5):
                                    await self._stop_listening()
                                    await self.host.close()
                finally:
                    self.pubsub.seen_messages.stop()
        finally:
            if self.mdns:
                peerDiscovery.unregister_peer_discovered_handler(discovered)
