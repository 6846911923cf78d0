"""Flood publishing (daemon/p2p/flood.py) on the daemon's own router and gated Pubsub: a
golem's own message goes to every connected member subscribed to the topic; a forwarded one
keeps the mesh; a peer the membership gate has not admitted gets neither.

The router and Pubsub are the daemon's (`build_pubsub` over a real host); the peers' side of
the state (their subscriptions, negotiated protocol, open stream, outbound queue) is set as
Pubsub sets it when a peer's stream comes up, so the choice is the real code's."""

from __future__ import annotations

from typing import Any

import trio
from libp2p import new_host
from libp2p.crypto.secp256k1 import create_new_key_pair
from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11
from libp2p.pubsub.rpc_queue import RpcQueue

from daemon.p2p.flood import FloodPublishGossipSub
from daemon.p2p.gate import GatedPubsub, MemberGate
from daemon.p2p.host import build_pubsub

TOPIC = "/clade/test/v1"


def _peer() -> ID:
    return ID.from_pubkey(create_new_key_pair().public_key)


class _World:
    """Our router and Pubsub, and eight connected peers: `mesh` (2, in our mesh), `members`
    (3 more subscribed and admitted), `no_stream` (subscribed, admitted, its stream not up),
    `other_topic` (admitted, not subscribed to TOPIC), `stranger` (subscribed, connected, its
    hello not verified: the gate's)."""

    def __init__(self) -> None:
        self.host = new_host(key_pair=create_new_key_pair())
        self.gate = MemberGate(lambda peer: frozenset({1}))  # every peer's connection is open
        router, pubsub = build_pubsub(self.host, self.gate, wait_s=1.0)
        assert isinstance(router, FloodPublishGossipSub)
        self.router: FloodPublishGossipSub = router
        self.pubsub: GatedPubsub = pubsub
        self.mesh = {_peer(), _peer()}
        self.members = {_peer(), _peer(), _peer()}
        self.no_stream, self.other_topic, self.stranger = _peer(), _peer(), _peer()
        self.queues: dict[ID, RpcQueue] = {}
        connected = self.mesh | self.members | {self.no_stream, self.other_topic, self.stranger}
        pubsub._connected = lambda pid: pid in connected
        subscribed = self.mesh | self.members | {self.no_stream, self.stranger}
        for peer in subscribed | {self.other_topic}:
            router.peer_protocol[peer] = PROTOCOL_ID_V11
            if peer != self.stranger:
                self.gate.admit(peer.to_base58())
            if peer != self.no_stream:
                pubsub.peers[peer] = object()  # type: ignore[assignment]  # an open stream: never written here
                self.queues[peer] = pubsub.peer_queues[peer] = RpcQueue()
        pubsub.peer_topics[TOPIC] = set(subscribed)
        pubsub.peer_topics["/clade/test/other"] = {self.other_topic}
        router.mesh[TOPIC] = set(self.mesh)
        self.me = pubsub.my_id

    def choose(self, forwarder: ID, origin: ID) -> set[ID]:
        return set(self.router._get_peers_to_send([TOPIC], msg_forwarder=forwarder, origin=origin))

    def sent_to(self) -> set[ID]:
        return {peer for peer, queue in self.queues.items() if len(queue)}


def test_own_message_goes_to_every_admitted_subscribed_peer() -> None:
    w = _World()
    assert w.choose(w.me, w.me) == w.mesh | w.members
    assert w.stranger not in w.choose(w.me, w.me)  # the gate holds: not admitted, nothing sent


def test_forwarded_message_keeps_the_mesh() -> None:
    w = _World()
    author = _peer()
    first = next(iter(w.mesh))
    assert w.choose(first, author) == w.mesh - {first}
    assert w.choose(author, author) == w.mesh  # a member's own message, forwarded by the member
    assert w.choose(first, w.me) == w.mesh - {first}  # "from us" but forwarded by another: no flood


def test_a_peer_whose_gate_closes_gets_no_more_floods() -> None:
    w = _World()
    member = next(iter(w.members))
    w.gate.forget(member.to_base58())
    assert w.choose(w.me, w.me) == w.mesh | w.members - {member}


async def test_publish_queues_one_copy_per_flooded_peer() -> None:
    """Through Pubsub's own `publish` (signing, the seen cache, the router): the copies queued
    are exactly the flood's."""
    w = _World()
    await w.pubsub.publish(TOPIC, b"own op")
    assert w.sent_to() == w.mesh | w.members
    for peer in w.mesh | w.members:
        rpc: Any = await w.queues[peer].pop()
        assert [bytes(m.data) for m in rpc.publish] == [b"own op"]
    await trio.lowlevel.checkpoint()


def test_a_restarted_golems_seqnos_are_past_every_earlier_runs() -> None:
    """A message's id is (publisher, seqno), remembered by siblings for the seen cache's ten
    minutes: a run that published 10,000 messages and the run that replaces it a moment later
    (the same identity) must not share an id, or the siblings drop the new run's messages as
    seen. py-libp2p's own start (the time in whole seconds, plus one per message) did."""
    key_pair = create_new_key_pair()
    first = build_pubsub(new_host(key_pair=key_pair), MemberGate(lambda peer: frozenset({1})), wait_s=1.0)[1]
    last = max(int.from_bytes(first._next_seqno(), "big") for _ in range(10_000))
    second = build_pubsub(new_host(key_pair=key_pair), MemberGate(lambda peer: frozenset({1})), wait_s=1.0)[1]
    assert int.from_bytes(second._next_seqno(), "big") > last


def test_delivery_times_do_not_pile_up_with_adaptive_gossip_off() -> None:
    """py-libp2p appends a delivery time per message it routes and trims them only in the adaptive
    health update (off in the daemon): the router's heartbeat cleanup forgets them."""
    world = _World()
    router = world.router
    assert not router.adaptive_gossip_enabled
    router.recent_message_deliveries[TOPIC].extend([1.0] * 5_000)
    router._periodic_security_cleanup()
    assert sum(len(times) for times in router.recent_message_deliveries.values()) == 0


def test_equivocation_check_keeps_a_digest_not_the_message() -> None:
    """The same publisher and seqno with the same content passes, with other content is refused;
    the router keeps 32 bytes per message, not the parsed message."""
    from libp2p.pubsub.pb import rpc_pb2

    router = _World().router
    publisher = _peer()
    first = rpc_pb2.Message(from_id=publisher.to_bytes(), seqno=b"\x00" * 8, data=b"op" * 900, topicIDs=[TOPIC])
    same = rpc_pb2.Message(from_id=publisher.to_bytes(), seqno=b"\x00" * 8, data=b"op" * 900, topicIDs=[TOPIC])
    other = rpc_pb2.Message(from_id=publisher.to_bytes(), seqno=b"\x00" * 8, data=b"po" * 900, topicIDs=[TOPIC])
    moved = rpc_pb2.Message(from_id=publisher.to_bytes(), seqno=b"\x00" * 8, data=b"op" * 900, topicIDs=["/x"])
    assert router._check_equivocation(first)
    assert router._check_equivocation(same)
    assert not router._check_equivocation(other)
    assert not router._check_equivocation(moved)
    kept = router.equivocation_detection[first.from_id + first.seqno]
    assert isinstance(kept, bytes) and len(kept) == 32
