"""Strangers learn nothing and refused peers stay refused (daemon/p2p/gate.py, admission.py).

Real daemons on 127.0.0.1; each stranger is a py-libp2p host of its own in this process, with
py-libp2p's own (ungated) GossipSub subscribed to the clade's topic — the worst case: it
knows the topic name. Every "nothing arrived" is checked after a marker that came later.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import multiaddr
import pytest
import trio
from libp2p.abc import INetConn, INetStream, INetwork
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr

from crypto import Identity
from daemon.p2p import messages
from daemon.p2p.frames import close_quietly, encode_frame, read_frame
from daemon.p2p.host import build_host
from daemon.p2p.node import HELLO_PROTOCOL, ConnectionNotifee, topic_of
from daemon.p2p.peers import PeerBook, PeerRecord
from daemon.testing.harness import Golem, LoopbackClade
from tests.helpers.stranger import call, counters, hosting, plain_pubsub, wait_until

WAIT_S = 15.0
DEAD_DIALS = 4  # failed dials of an address where nothing listens: ≥ 0.5 + 1 + 2 s of the dialer's passes
ENV = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}


class Connections(ConnectionNotifee):
    """Counts the connections a stranger's host sees open, and which of them it dialed."""

    def __init__(self) -> None:
        self.inbound = 0
        self.outbound = 0
        self.closed = 0

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        if conn.muxed_conn.is_initiator:
            self.outbound += 1
        else:
            self.inbound += 1

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self.closed += 1


class Stranger:
    """A libp2p peer with no membership: it listens, may answer hellos with garbage, and
    collects every hello and every gossip message that reaches it."""

    def __init__(self, clade_id: str, *, answer: bytes | None = b"\x93garbage") -> None:
        self.identity = Identity.generate()
        self.peer_id = self.identity.peer_id
        self.host = build_host(self.identity, mdns=False)
        self.router, self.pubsub = plain_pubsub(self.host)
        self.topic = topic_of(clade_id)
        self.answer = answer
        self.hellos: list[messages.Message] = []
        self.gossip: list[Any] = []
        self.conns = Connections()
        self.host.get_network().register_notifee(self.conns)

    @property
    def addr(self) -> str:
        """Where it listens, `/ip4/…/tcp/…/p2p/ID`."""
        addr = str(self.host.get_addrs()[0])
        return addr if "/p2p/" in addr else f"{addr}/p2p/{self.peer_id}"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Stranger]:
        async with hosting(self.host, self.router, self.pubsub, self.topic, {HELLO_PROTOCOL: self._hello},
                           self._drain):
            yield self

    async def _drain(self, subscription: Any) -> None:
        me = ID.from_base58(self.peer_id)
        while True:
            msg = await subscription.get()
            if ID(msg.from_id) != me:  # Pubsub hands a publisher its own messages back
                self.gossip.append(msg)

    async def _hello(self, stream: INetStream) -> None:
        try:
            with trio.fail_after(WAIT_S):
                self.hellos.append(messages.decode(await read_frame(stream)))
                if self.answer is not None:
                    await stream.write(encode_frame(self.answer))
        except Exception:  # whatever the daemon does, the stranger's host stays up
            pass
        finally:
            await close_quietly(stream)

    async def connect(self, golem: Golem) -> ID:
        info = info_from_p2p_addr(multiaddr.Multiaddr(golem.p2p_addrs[0]))
        with trio.fail_after(WAIT_S):
            await self.host.connect(info)
        return info.peer_id

    def connected_to(self, peer: ID) -> bool:
        return bool(self.host.get_network().get_connections(peer))


@asynccontextmanager
async def two_siblings(tmp_path: Path) -> AsyncIterator[tuple[LoopbackClade, Golem, Golem]]:
    clade = LoopbackClade(tmp_path, 2)
    a, b = clade.golems
    try:
        await trio.to_thread.run_sync(lambda: clade.start(a, bootstrap=[], env=ENV))
        await trio.to_thread.run_sync(lambda: clade.start(b, bootstrap=[a], env=ENV))
        await trio.to_thread.run_sync(lambda: clade.wait_connected([a, b]))
        yield clade, a, b
    finally:
        await trio.to_thread.run_sync(clade.close)


def clade_id(golem: Golem) -> str:
    joined = golem.data.load_membership()
    assert joined is not None
    return joined[0].clade_id


@pytest.mark.slow
async def test_a_silent_stranger_gets_no_gossip_is_dropped_and_its_own_publishes_are_not_read(
        tmp_path: Path) -> None:
    async with two_siblings(tmp_path) as (_clade, a, b):
        stranger = Stranger(clade_id(a))
        async with stranger.running():
            before = await counters(a)
            peer_a = await stranger.connect(a)  # and then says nothing
            await stranger.pubsub.publish(stranger.topic, b"\x01 a stranger's envelope")  # queued to a
            for i in range(3):  # the clade talks while the stranger is connected
                await call(a, "POST", "/v1/memory", json={"content": f"Warning {i}: pool {i} oracle lags",
                                                          "memory_type": "warning"})
            await wait_until("a drops the silent stranger", lambda: _dropped(stranger, peer_a))
            # The marker: b received a's three warnings (gossip ran while the stranger was connected).
            await wait_until("b has a's warnings", lambda: _has_entries(b, 3))
            await wait_until("a resets the stranger's pubsub stream, unread",
                             lambda: _counter_above(a, "gossip_streams_refused", before))
            after = await counters(a)
        assert stranger.gossip == [], stranger.gossip
        assert stranger.hellos == []  # a never spoke first
        assert after["hello_not_sent"] - before["hello_not_sent"] == 1
        assert after["gossip_streams_refused"] - before["gossip_streams_refused"] >= 1  # its stream: never read
        for name in ("gossip_accepted", "gossip_rejected_malformed", "gossip_rejected_unsealed"):
            assert after[name] == before[name], name  # its publish was not even looked at
        # a's own record of the stranger: never a member, and disconnected once a has seen the close
        await wait_until("a's record shows the stranger gone, never a member",
                         lambda: _gone_never_member(a, stranger.peer_id))


async def _gone_never_member(golem: Golem, peer_id: str) -> bool:
    record = next(p for p in (await call(golem, "GET", "/v1/peers"))["peers"] if p["peer_id"] == peer_id)
    assert not record["member"], record
    return not record["connected"]


async def _counter_above(golem: Golem, name: str, before: Any) -> bool:
    return bool((await counters(golem))[name] > before[name])


async def _dropped(stranger: Stranger, peer: ID) -> bool:
    return not stranger.connected_to(peer)


async def _await_drop(golem: Golem, stranger: Stranger, peer: ID, what: str) -> int:
    """Wait for `golem` to drop the stranger's connection: 0 when the stranger saw the close; 1 when
    only `golem` did (its record says the connection is gone, and /v1/peers is the daemon's own
    view) and the stranger's py-libp2p client, on a loaded machine, missed it: then the stranger
    closes its end. Fails if `golem` itself still holds the connection."""
    try:
        await wait_until(f"a drops {what}", lambda: _dropped(stranger, peer))
        return 0
    except AssertionError:
        pass
    me = stranger.host.get_id().to_base58()

    async def golem_let_go() -> bool:
        peers = (await call(golem, "GET", "/v1/peers"))["peers"]
        return not any(p["peer_id"] == me and p.get("connected") for p in peers)

    await wait_until(f"a drops {what} (a's own view; the stranger still sees it open)", golem_let_go)
    with trio.fail_after(WAIT_S):
        await stranger.host.disconnect(peer)
    return 1


async def _has_entries(golem: Golem, n: int) -> bool:
    return len((await call(golem, "GET", "/v1/entries", params={"kind": "warning"}))["entries"]) >= n


@pytest.mark.slow
async def test_a_refused_peer_that_keeps_listening_is_not_dialed_during_its_hold(tmp_path: Path) -> None:
    """The daemon dials a stranger (an operator named it, so it is pinned), which answers the
    hello with garbage: refused and held for 5 minutes. It is dialed 0 times over the window
    that follows, which the dialer itself marks: a pinned address where nothing listens, named
    after the refusal, is dialed again after each failure with backoff (0.5–1 s, 1–2 s, 2–4 s),
    so its fourth failed dial comes at least 3.5 s later, and every one of those dialer passes
    went over the held stranger's record too. The last marker is a second stranger, named after
    that, which the daemon does dial and greet."""
    async with two_siblings(tmp_path) as (_clade, a, _b):
        first, second = Stranger(clade_id(a)), Stranger(clade_id(a))
        async with first.running(), second.running():
            await call(a, "POST", "/v1/peers/connect", json={"addr": first.addr})
            await wait_until("a refuses the first stranger", lambda: _refused(a, first.peer_id))
            assert first.conns.inbound == 1 and len(first.hellos) == 1
            (hello,) = first.hellos
            assert isinstance(hello, messages.Hello)
            assert hello.addrs == () and hello.siblings == ()  # a bare hello: no address of a's or b's
            with socket.socket() as dead:  # bound, never listening: a dial to it is refused at once
                dead.bind(("127.0.0.1", 0))
                before = await counters(a)
                dead_addr = f"/ip4/127.0.0.1/tcp/{dead.getsockname()[1]}/p2p/{Identity.generate().peer_id}"
                await call(a, "POST", "/v1/peers/connect", json={"addr": dead_addr})
                await wait_until(f"a's dialer fails {DEAD_DIALS} times on the dead address (the window)",
                                 lambda: _counter_grew(a, "dials_failed", before, DEAD_DIALS))
            await call(a, "POST", "/v1/peers/connect", json={"addr": second.addr})
            await wait_until("a greets the second stranger", lambda: _hello_count(second, 1))
            assert first.conns.inbound == 1, f"the held stranger was dialed {first.conns.inbound - 1} more times"
            status = await counters(a)
            assert status["hello_refused_malformed"] == 2


async def _counter_grew(golem: Golem, name: str, before: Any, by: int) -> bool:
    return bool((await counters(golem))[name] - before[name] >= by)


async def _refused(golem: Golem, peer_id: str) -> bool:
    peers = (await call(golem, "GET", "/v1/peers"))["peers"]
    return any(p["peer_id"] == peer_id and p["refused"] and not p["connected"] for p in peers)


async def _hello_count(stranger: Stranger, n: int) -> bool:
    return len(stranger.hellos) >= n


@pytest.mark.slow
async def test_a_strangers_hello_gets_a_refusal_and_no_sibling_address(tmp_path: Path) -> None:
    async with two_siblings(tmp_path) as (_clade, a, b):
        stranger = Stranger(clade_id(a))
        async with stranger.running():
            peer_a = await stranger.connect(a)
            own = messages.Hello(clade_id(a), b"not a certificate", b"", (stranger.addr,), ())
            with trio.fail_after(WAIT_S):
                stream = await stranger.host.new_stream(peer_a, [HELLO_PROTOCOL])
                await stream.write(encode_frame(messages.encode(own)))
                answer = messages.decode(await read_frame(stream))
                await close_quietly(stream)
            assert isinstance(answer, messages.Refused) and answer.reason == "malformed", answer
            await wait_until("a drops the stranger", lambda: _dropped(stranger, peer_a))
        # A member, by contrast, is told where its siblings are (b's hello named a's other sibling).
        peers_of_b = {p["peer_id"]: p for p in (await call(b, "GET", "/v1/peers"))["peers"]}
        assert peers_of_b[a.peer_id]["member"] and peers_of_b[a.peer_id]["addrs"]


def test_ten_thousand_stranger_ids_leave_the_peer_book_bounded() -> None:
    evicted: list[PeerRecord] = []
    book = PeerBook(on_evict=evicted.append)
    member = book.get("member")
    member.member = member.connected = True
    sibling = book.add_addr("bootstrap", "/ip4/10.0.0.1/tcp/4001")
    sibling.dial = True
    held = book.get("held-stranger")
    held.hold_until = float("inf")
    held.connected = True  # a connected stranger is not evicted under it
    for i in range(10_000):
        record = book.get(f"stranger-{i}")
        record.refused = "malformed"
    assert len(book.all()) <= PeerBook.MAX_STRANGERS + 2 + 1
    assert book.strangers() <= PeerBook.MAX_STRANGERS + 1
    assert {"member", "bootstrap", "held-stranger"} <= {r.peer_id for r in book.all()}
    assert f"stranger-{9_999}" in {r.peer_id for r in book.all()}  # the most recent stay
    assert "stranger-0" not in {r.peer_id for r in book.all()} and evicted[0].peer_id == "stranger-0"
    assert len(evicted) == 10_000 - (PeerBook.MAX_STRANGERS - 1)


@pytest.mark.slow
async def test_inbound_connections_give_back_their_slots(tmp_path: Path) -> None:
    """py-libp2p holds each inbound connection's slot (of 300) until the swarm stops: after 300
    connections in a daemon's life it refused everyone, siblings included. 320 short stranger
    connections later, a sibling that dials in is still admitted."""
    clade = LoopbackClade(tmp_path, 2)
    a, b = clade.golems
    try:
        await trio.to_thread.run_sync(lambda: clade.start(a, bootstrap=[], env=ENV))
        peer_a = info_from_p2p_addr(multiaddr.Multiaddr(a.p2p_addrs[0])).peer_id
        stalls = 0
        for n in range(4):  # 4 strangers x (1 refused + 80 held) connections: the client side stays light
            stranger = Stranger(clade_id(a))
            async with stranger.running():
                await stranger.connect(a)  # a garbage hello first: refused, held off 5 minutes
                with trio.fail_after(WAIT_S):
                    stream = await stranger.host.new_stream(peer_a, [HELLO_PROTOCOL])
                    await stream.write(encode_frame(b"\x93garbage"))
                    await close_quietly(stream)
                for i in range(80):  # then connections during the hold, each dropped at once
                    stalls += await _await_drop(a, stranger, peer_a, f"stranger {n}'s connection {i}")
                    await stranger.connect(a)
                stalls += await _await_drop(a, stranger, peer_a, f"stranger {n}'s last connection")
        shed = await counters(a)
        assert shed["connections_refused_held"] >= 300 and shed["hello_refused_malformed"] == 4
        assert stalls <= 3, f"the test's own client missed {stalls} of a's closes"
        await trio.to_thread.run_sync(lambda: clade.start(b, bootstrap=[a], env=ENV))
        await trio.to_thread.run_sync(lambda: clade.wait_connected([a, b], timeout=WAIT_S))
    finally:
        await trio.to_thread.run_sync(clade.close)
