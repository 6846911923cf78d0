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
