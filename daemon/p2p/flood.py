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

It also forgets py-libp2p's per-message delivery times (`recent_message_deliveries`, a list per
topic gaining a float for every message the router publishes or forwards): 0.8.1 trims them
only in its adaptive-gossip health update, which the daemon turns off (`adaptive_gossip_enabled
=False`, host.build_pubsub), so they grew ~32 bytes per message for the life of the process.
Nothing else reads them; each heartbeat's security cleanup now clears them when adaptive gossip
is off. And its equivocation check (same publisher and seqno, other content) keeps a digest of
each message's content instead of the parsed message: py-libp2p held up to 1,000 whole protobuf
messages (their bytes in protobuf's native arenas, unseen by tracemalloc), ~2 MiB of the
daemon's RSS once full (measured).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import GossipSub

__all__ = ["FloodPublishGossipSub"]

log = logging.getLogger("clade.p2p")


class FloodPublishGossipSub(GossipSub):
    """py-libp2p's GossipSub with v1.1 flood publishing of own messages (see the module docstring)."""

    def _get_peers_to_send(self, topic_ids: Iterable[str], msg_forwarder: ID, origin: ID,
                           msg_id: bytes | None = None) -> Iterator[ID]:
        topics = list(topic_ids)
        chosen = set(super()._get_peers_to_send(topics, msg_forwarder, origin, msg_id))
        if self.pubsub is not None and origin == msg_forwarder == self.pubsub.my_id:
            chosen |= self.flood_peers(topics) - {origin}
        yield from chosen

    def _periodic_security_cleanup(self) -> None:
        """py-libp2p's per-heartbeat cleanup, and the delivery times it never trims with adaptive
        gossip off (the module docstring)."""
        super()._periodic_security_cleanup()
        if not self.adaptive_gossip_enabled:
            self.recent_message_deliveries.clear()

    def _check_equivocation(self, msg: Any) -> bool:
        """py-libp2p's check (a second message with a seen publisher and seqno must carry the same
        data and topics, else it is refused and its publisher penalised), on a digest of the
        content: `equivocation_detection` maps the key to 32 bytes, not to the message."""
        key = msg.from_id + msg.seqno
        digest = hashlib.sha256(len(msg.data).to_bytes(8, "big") + msg.data
                                + "\0".join(msg.topicIDs).encode()).digest()
        seen = self.equivocation_detection.get(key)
        if seen is None:
            self.equivocation_detection[key] = digest  # type: ignore[assignment]  # a digest, not the message
            return True
        if seen == digest:
            return True
        log.warning("peer %s sent two messages with one seqno and different content (equivocation): refused",
                    ID(msg.from_id))
        if self.scorer is not None:
            self.scorer.penalize_equivocation(ID(msg.from_id), 100.0)
        return False

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
