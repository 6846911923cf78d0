"""The `Links` port over a real py-libp2p host and its Pubsub, and the transport errors.

`TRANSPORT_ERRORS` names what the network may throw at a dial, a stream or a disconnect:
py-libp2p's own errors (stream reset/EOF/closed, muxer, swarm, multiselect, host — all under
`BaseLibp2pError`), its resource manager's refusals, trio's broken or closed resources and
timeouts, `EOFError` (a stream ended between frames) and `OSError` (sockets). A part that
catches them counts a failure and backs off; anything else is a bug (`ports.internal_error`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio
from libp2p.abc import IHost
from libp2p.custom_types import TProtocol
from libp2p.exceptions import BaseLibp2pError
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.rcmgr.exceptions import ResourceManagerException
from libp2p.tools.anyio_service.exceptions import ServiceException

from .gate import GatedPubsub, MemberGate
from .host import parse_multiaddr
from .neighbourhood import Connection
from .peer_names import id_of
from .ports import Stream

__all__ = ["DIAL_TIMEOUT_S", "TRANSPORT_ERRORS", "HostLinks", "parse_peer_id"]

log = logging.getLogger("clade.p2p")

DIAL_TIMEOUT_S = 10.0

TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    BaseLibp2pError,
    ResourceManagerException,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    EOFError,
    OSError,
)


def parse_peer_id(peer_id: str) -> ID | None:
    """The libp2p ID of a base58 peer id, None if it does not parse (`peer_names.id_of`: remembered)."""
    return id_of(peer_id)


class HostLinks:
    """`ports.Links` over one host and one gated Pubsub."""

    def __init__(self, host: IHost, pubsub: GatedPubsub, gate: MemberGate) -> None:
        self.host = host
        self.pubsub = pubsub
        self.gate = gate

    def listen_addrs(self) -> list[str]:
        return [str(a) for a in self.host.get_addrs()]

    def connected(self, peer_id: str) -> bool:
        pid = parse_peer_id(peer_id)
        return pid is not None and bool(self.host.get_network().get_connections(pid))

    def connection_ids(self, peer_id: str) -> frozenset[int]:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return frozenset()
        return frozenset(id(conn.muxed_conn) for conn in self.host.get_network().get_connections(pid))

    def connections(self, peer_id: str) -> list[Connection]:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return []
        gossip = {str(p) for p in self.pubsub.protocols}
        found = []
        for conn in self.host.get_network().get_connections(pid):
            muxed = conn.muxed_conn
            if getattr(muxed, "is_closed", False):
                continue
            busy = any(str(stream.get_protocol()) not in gossip for stream in conn.get_streams())
            found.append(Connection(key=id(muxed), outbound=bool(getattr(muxed, "is_initiator", False)), busy=busy))
        return found

    async def close_connection(self, peer_id: str, key: int) -> None:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return
        for conn in self.host.get_network().get_connections(pid):
            if id(conn.muxed_conn) != key:
                continue
            try:
                with trio.move_on_after(5):
                    await conn.close()
            except TRANSPORT_ERRORS as exc:  # a half-closed connection may fail to close: it is gone
                log.debug("closing a connection to %s: %r", peer_id, exc)
        self.drop_stale_gossip(peer_id)

    def drop_stale_gossip(self, peer_id: str) -> None:
        pid = parse_peer_id(peer_id)
        if pid is not None:
            self.pubsub.drop_stale_stream(pid)

    async def dial(self, peer_id: str, addrs: list[str]) -> None:
        pid = ID.from_base58(peer_id)
        network = self.host.get_network()
        unblock = getattr(network, "unblock_peer", None)
        if unblock is not None:
            unblock(pid)  # a failed dial is cached for 60 s otherwise (docs/design/libp2p.md, pitfall 11)
        infos = [parse_multiaddr(a) for a in addrs]
        with trio.fail_after(DIAL_TIMEOUT_S):
            await self.host.connect(PeerInfo(pid, infos))

    async def drop(self, peer_id: str) -> None:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return
        try:
            with trio.move_on_after(5):
                await self.host.disconnect(pid)
        except TRANSPORT_ERRORS as exc:  # a half-closed connection may fail to close: it is gone
            log.debug("disconnect %s: %r", peer_id, exc)

    async def open_stream(self, peer_id: str, protocol: str) -> Stream:
        with trio.fail_after(DIAL_TIMEOUT_S):
            stream: Stream = await self.host.new_stream(ID.from_base58(peer_id), [TProtocol(protocol)])
        return stream

    async def open_stream_of(self, peer_id: str, protocols: Sequence[str]) -> tuple[Stream, str]:
        with trio.fail_after(DIAL_TIMEOUT_S):
            stream = await self.host.new_stream(ID.from_base58(peer_id), [TProtocol(p) for p in protocols])
        chosen = stream.get_protocol()
        if chosen is None or chosen not in protocols:  # multistream-select agreed on one of ours, or failed
            await stream.reset()
            raise OSError(f"no protocol of {list(protocols)} was agreed with {peer_id}")
        return stream, str(chosen)

    async def publish(self, topic: str, data: bytes) -> None:
        await self.pubsub.publish(topic, data)

    def subscribed(self, topic: str) -> frozenset[str]:
        return frozenset(peer.to_base58() for peer in self.pubsub.peer_topics.get(topic, ()))

    def shut_out(self, peer_id: str) -> None:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return
        try:
            self.pubsub.add_to_blacklist(pid)  # the set first, then a teardown task on its service
        except (ServiceException, AttributeError, RuntimeError) as exc:  # pubsub not running (yet, or any more)
            log.debug("blacklisting %s: %r", peer_id, exc)

    def let_in(self, peer_id: str) -> None:
        pid = parse_peer_id(peer_id)
        if pid is not None:
            self.pubsub.remove_from_blacklist(pid)

    def admit(self, peer_id: str) -> None:
        self.gate.admit(peer_id)

    def admitted(self, peer_id: str) -> bool:
        return self.gate.admitted(peer_id)

    async def wait_admitted(self, peer_id: str, timeout_s: float) -> bool:
        return await self.gate.wait(peer_id, timeout_s, lambda: self.connected(peer_id))

    def forget(self, peer_id: str) -> None:
        self.gate.forget(peer_id)

    async def open_gossip(self, peer_id: str) -> None:
        pid = parse_peer_id(peer_id)
        if pid is None:
            return
        try:
            if not await self.pubsub.open_to(pid):
                log.debug("no pubsub stream to %s (it went away, or is shut out)", peer_id)
        except TRANSPORT_ERRORS as exc:  # the peer went away meanwhile: a new connection starts over
            log.debug("opening the pubsub stream to %s: %r", peer_id, exc)
