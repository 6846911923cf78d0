"""Two connections between the same two hosts (a simultaneous dial), one of them closed: the
GossipSub stream that ran on it is dropped and a new one opens on the other
(`GatedPubsub.drop_stale_stream`, called by the node when a peer's connection closes while
another is open), so the next message crosses. py-libp2p's own Pubsub notices only when a
write fails, and that message is lost. Real hosts (the daemon's `build_host`, Noise, yamux)
and the daemon's gated Pubsub on 127.0.0.1."""

from __future__ import annotations

from contextlib import AsyncExitStack

import trio
from libp2p.peer.peerinfo import PeerInfo
from libp2p.tools.anyio_service import background_trio_service

from crypto import Identity
from daemon.p2p.gate import GatedPubsub, MemberGate
from daemon.p2p.host import build_host, build_pubsub, parse_multiaddr

TOPIC = "/clade/test-duplicates/v1"


async def wait_for(check: object, what: str, timeout: float = 10.0) -> None:
    """Poll `check()` (every 20 ms) until it is true; fail naming `what` after `timeout` s."""
    assert callable(check)
    with trio.move_on_after(timeout):
        while not check():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_gossip_stream_left_on_a_closed_duplicate_connection_is_replaced_and_the_next_message_crosses(
        ) -> None:
    hosts = [build_host(Identity.generate(), mdns=False) for _ in range(2)]
    gates = [MemberGate(lambda peer: frozenset({1})) for _ in hosts]  # admitted while "connection 1" is open: always
    routers_pubsubs = [build_pubsub(host, gate, wait_s=1.0) for host, gate in zip(hosts, gates, strict=True)]
    pubsubs: list[GatedPubsub] = [pubsub for _, pubsub in routers_pubsubs]
    a, b = hosts
    a_id, b_id = a.get_id(), b.get_id()
    with trio.fail_after(60):
        async with AsyncExitStack() as stack:
            for host in hosts:
                await stack.enter_async_context(host.run([parse_multiaddr("/ip4/127.0.0.1/tcp/0")]))
            for router, pubsub in routers_pubsubs:
                await stack.enter_async_context(background_trio_service(pubsub))
                await stack.enter_async_context(background_trio_service(router))
                await pubsub.wait_until_ready()
            gates[0].admit(b_id.to_base58())
            gates[1].admit(a_id.to_base58())
            subscriptions = [await pubsub.subscribe(TOPIC) for pubsub in pubsubs]
            async with trio.open_nursery() as nursery:  # each dials the other at once
                nursery.start_soon(a.connect, PeerInfo(b_id, b.get_addrs()))
                nursery.start_soon(b.connect, PeerInfo(a_id, a.get_addrs()))
            assert len(a.get_network().get_connections(b_id)) == 2  # py-libp2p keeps both
            await wait_for(lambda: a_id in pubsubs[1].peers and b_id in pubsubs[0].peers
                           and a_id in pubsubs[1].peer_topics.get(TOPIC, ())
                           and b_id in pubsubs[0].peer_topics.get(TOPIC, ()), "gossip streams both ways")
            stale = pubsubs[1].peers[a_id]  # b's stream to a: close the connection it runs on
            carrying = next(c for c in b.get_network().get_connections(a_id) if c.muxed_conn is stale.muxed_conn)
            await carrying.close()
            assert len(b.get_network().get_connections(a_id)) == 1 and pubsubs[1].peers.get(a_id) is stale
            assert pubsubs[1].drop_stale_stream(a_id) is True  # what the node does on the "disconnected"
            assert pubsubs[1].drop_stale_stream(a_id) is False  # nothing left to drop
            live = b.get_network().get_connections(a_id)[0].muxed_conn
            await wait_for(lambda: getattr(pubsubs[1].peers.get(a_id), "muxed_conn", None) is live,
                           "b's new stream to a, on the connection left")
            await pubsubs[1].publish(TOPIC, b"after the duplicate closed")
            with trio.fail_after(10):
                message = await subscriptions[0].get()
            assert message.data == b"after the duplicate closed"
            for host, other in ((a, b_id), (b, a_id)):  # closed here: py-libp2p's teardown leaves a socket to the GC
                for conn in list(host.get_network().get_connections(other)):
                    await conn.close()
            await wait_for(lambda: not a.get_network().get_connections(b_id)
                           and not b.get_network().get_connections(a_id), "every connection closed")
