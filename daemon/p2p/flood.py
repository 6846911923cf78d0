"""GossipSub that floods a golem's own messages to every topic peer it is connected to.

GossipSub v1.1 specifies *flood publishing*: a peer publishing its own message sends it to
every peer it knows in the topic (whose score is above the publish threshold), not just to
its mesh of D; forwarded messages still travel the mesh only. go-libp2p has it on by
default. py-libp2p 0.8.1 lacks it: `GossipSub._get_peers_to_send` sends a message the golem
wrote itself to its mesh (D = 6) like any other. In a clade each golem holds at most 16
connections (the bounded neighbourhood, `neighbourhood.cap_for`), so flooding reaches up to
16 siblings on the first hop instead of 6: one hop fewer for most of a 200-golem clade
(bench/bench_scale.py, docs/design/sync.md "How it scales"), at the price of up to 10 more
copies sent by the publisher per op (bytes and CPU on the writer only: each receiver still
takes one copy from the writer, and fewer from the mesh later).

Contract of `FloodPublishGossipSub._get_peers_to_send`:
- a message that originates here (its `from` and the forwarder are both this peer: Pubsub
  drops a message claiming our id that someone else forwards before it reaches the router)
  goes to the mesh (or fanout) py-libp2p picks, plus every peer subscribed to one of its
  topics that speaks GossipSub, has a pubsub stream open, passes Pubsub's blacklist check —
  for `gate.GatedPubsub` that includes the membership gate, so a connected peer whose hello
  has not proved it a member gets nothing — and passes the scorer's publish gate;
- any other message: exactly what py-libp2p picks (the mesh).

Every topic takes the same path (the clade topic, the vector topic, the probe topic), so the
probes bench_clade times against warnings travel as warnings do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import GossipSub

__all__ = ["FloodPublishGossipSub"]


class FloodPublishGossipSub(GossipSub):
    """py-libp2p's GossipSub with v1.1 flood publishing of own messages (see the module docstring)."""

    def _get_peers_to_send(self, topic_ids: Iterable[str], msg_forwarder: ID, origin: ID,
                           msg_id: bytes | None = None) -> Iterator[ID]:
        topics = list(topic_ids)
        chosen = set(super()._get_peers_to_send(topics, msg_forwarder, origin, msg_id))
        if self.pubsub is not None and origin == msg_forwarder == self.pubsub.my_id:
            chosen |= self.flood_peers(topics) - {origin}
        yield from chosen

    def flood_peers(self, topic_ids: Iterable[str]) -> set[ID]:
        """Every peer an own message on `topic_ids` is flooded to (the module's contract)."""
        pubsub = self.pubsub
        if pubsub is None:
            return set()
        gossipsub = set(self.protocols)
        out: set[ID] = set()
        for topic in topic_ids:
            for peer in pubsub.peer_topics.get(topic, ()):
                if (self.peer_protocol.get(peer) in gossipsub and peer in pubsub.peers
                        and not pubsub.is_peer_blacklisted(peer)
                        and (self.scorer is None or self.scorer.allow_publish(peer, [topic]))):
                    out.add(peer)
        return out
