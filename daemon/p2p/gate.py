"""GossipSub exchanges nothing with a connected peer until its hello has proved membership.

py-libp2p's Pubsub opens its stream to a peer the moment it connects, reads whatever that
peer sends on its own stream (subscriptions, GRAFT, IHAVE/IWANT, publishes), and puts it in
the mesh 60–100 ms later (docs/design/libp2p.md, pitfall 19): a stranger would learn the topic, the members'
peer ids, and the timing and sizes of the clade's traffic until its hello failed. Here:

- `MemberGate` is the set of peers admitted *on a connection still open* (admission adds a
  peer when its hello succeeds; a new connection proves itself again);
- `GatedPubsub` treats a connected peer that is not admitted as blacklisted: Pubsub opens no
  stream to it (so it sends it nothing, not even our subscriptions) and drops what it
  forwards; the peer's own inbound pubsub stream is not read at all until the peer is
  admitted, and is reset if its connection goes first (admission drops a peer that is
  refused or silent) — its publishes and control messages are dropped unread. The stream is
  not reset merely for waiting: a member's hello may be slow under load, and a reset stream
  loses the subscriptions written into it, which Pubsub never sends again. Admission then
  calls `open_to(peer)` to start gossip.

A peer not connected is judged by the explicit blacklist alone, so a message a member
forwards from another member we are not connected to still passes.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import trio
from libp2p.abc import INetStream
from libp2p.exceptions import ValidationError
from libp2p.peer.id import ID
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub, ValidationResult

from .peer_names import name_of

__all__ = ["GatedPubsub", "InlineValidator", "MemberGate"]

log = logging.getLogger("clade.p2p")

InlineValidator = Callable[[ID, Any], "bool | None"]  # GatedPubsub.set_inline_validator


class MemberGate:
    """Who has proved membership on a connection that is still open (peer ids as base58).

    `admit` records the connections open when the proof came (`live(peer)`: identities of the
    peer's open connections); `admitted` holds only while one of them is still open. So a
    peer that reconnects proves itself again even before its old connection's close has been
    noticed, and a late "connected" event cannot undo a proof made on that very connection."""

    def __init__(self, live: Callable[[str], frozenset[int]]) -> None:
        self._live = live
        self._admitted: dict[str, frozenset[int]] = {}
        self._waiting: dict[str, trio.Event] = {}

    def admit(self, peer_id: str) -> None:
        self._admitted[peer_id] = self._live(peer_id)
        event = self._waiting.pop(peer_id, None)
        if event is not None:
            event.set()

    def forget(self, peer_id: str) -> None:
        """The peer must prove itself again (a refusal, a disconnect)."""
        self._admitted.pop(peer_id, None)
        event = self._waiting.pop(peer_id, None)
        if event is not None:
            event.set()  # waiters look again: still connected, they go on waiting

    def admitted(self, peer_id: str) -> bool:
        proved_on = self._admitted.get(peer_id)
        return proved_on is not None and not proved_on.isdisjoint(self._live(peer_id))

    async def wait(self, peer_id: str, timeout_s: float, connected: Callable[[], bool]) -> bool:
        """True once `peer_id` is admitted; False once it is no longer `connected()` (refused,
        silent, gone: admission drops those) or after `timeout_s`, a safety net."""
        with trio.move_on_after(timeout_s):
            while not self.admitted(peer_id):
                if not connected():
                    return False
                event = self._waiting.setdefault(peer_id, trio.Event())
                with trio.move_on_after(1.0):  # a dropped connection wakes nobody: look again
                    await event.wait()
        return self.admitted(peer_id)

    def __len__(self) -> int:
        return sum(1 for peer in self._admitted if self.admitted(peer))


class GatedPubsub(Pubsub):
    """Pubsub behind a `MemberGate` (see the module docstring)."""

    def __init__(self, *args: Any, gate: MemberGate, wait_s: float, counters: Counter[str] | None = None,
                 **kwargs: Any) -> None:
        self.inline_validators: dict[str, InlineValidator] = {}  # before Pubsub's own set-up, which may set validators
        super().__init__(*args, **kwargs)
        # A message's id is its publisher and seqno, and every sibling remembers ids it has seen
        # for `seen_ttl` (600 s). py-libp2p starts the seqno at the time in whole seconds and adds
        # one per message, so a golem that published faster than once a second and restarted
        # reused its own recent ids: its siblings dropped its next messages as already seen,
        # for minutes (a burst of 150 before a restart: no probe through in 90 s). Nanoseconds,
        # as go-libp2p starts it, put each run's seqnos past every earlier run's.
        self.counter = time.time_ns()
        self.gate = gate
        self.wait_s = wait_s
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._connected: Callable[[ID], bool] = lambda pid: bool(self.host.get_network().get_connections(pid))

    def set_topic_validator(self, topic: str, validator: Any, is_async_validator: bool) -> None:
        """Pubsub's, and forget `topic`'s inline validator (it went with the one replaced)."""
        self.inline_validators.pop(topic, None)
        super().set_topic_validator(topic, validator, is_async_validator)

    def remove_topic_validator(self, topic: str) -> None:
        self.inline_validators.pop(topic, None)
        super().remove_topic_validator(topic)

    def set_inline_validator(self, topic: str, inline: InlineValidator) -> None:
        """Give `topic`'s async topic validator a synchronous first try: `inline(forwarder, msg)`
        returns the verdict that validator would give (and does what it would do), or None,
        having done nothing, to leave the message to it. Set it after the topic validator."""
        self.inline_validators[topic] = inline

    async def validate_msg(self, msg_forwarder: ID, msg: Any) -> None:
        """Pubsub's validation, with two changes.

        A message of one validated topic that has an inline validator (`set_inline_validator`)
        is first judged by it, without a checkpoint: when it answers, its verdict is cached as
        Pubsub caches a validator's and no task, nursery or timeout is made for it. So no other
        copy of the message reaches validation meanwhile (Pubsub marks a message seen only once
        it is validated: copies from other mesh peers raced an async validation, and each was
        delivered and forwarded again).

        A timeout (our validator still busy on a loaded machine) is not remembered as a
        verdict: Pubsub would refuse every later copy of the message for five minutes, and
        gossip would lose it to anti-entropy."""
        if self._inline_verdict(msg_forwarder, msg):
            return
        try:
            await super().validate_msg(msg_forwarder, msg)
        except ValidationError:
            msg_id = self._msg_id_constructor(msg)
            cached = self.validation_cache.get(msg_id)
            if cached is not None and cached.error_message == "Validation timeout":
                self.validation_cache._remove(msg_id)
                self.counters["gossip_validation_timeouts"] += 1
            raise

    def _inline_verdict(self, msg_forwarder: ID, msg: Any) -> bool:
        """True if the inline validator judged `msg` valid; raises `ValidationError` if it judged
        it invalid; False if there is none for it, the verdict is cached already (Pubsub answers
        from its cache), or the validator left it to the async one."""
        topics = [topic for topic in msg.topicIDs if topic in self.topic_validators]
        inline = self.inline_validators.get(topics[0]) if len(topics) == 1 else None
        if inline is None:
            return False
        msg_id = self._msg_id_constructor(msg)
        if self.validation_cache.get(msg_id) is not None:
            return False
        verdict = inline(msg_forwarder, msg)
        if verdict is None:
            return False
        self.validation_cache.put(msg_id, ValidationResult(
            is_valid=verdict, timestamp=time.time(), error_message=None if verdict else "Inline validation failed"))
        if not verdict:
            raise ValidationError("Inline validation failed")
        return True

    async def _teardown_if_connected(self, peer_id: ID) -> None:
        """Pubsub's teardown of a peer just blacklisted, except that the peer may be gone by the
        time the stream's reset returns: the reset wakes the peer's reader, whose dead-peer
        handler removes it first, and Pubsub's own `del self.peers[peer_id]` then raised
        KeyError, which took the whole p2p service down (seen in the soak under faults). A
        stream that replaced the one reset in the meantime is left to its own handling."""
        stream = self.peers.get(peer_id)
        if stream is not None:
            try:
                await stream.reset()
            except Exception as exc:  # noqa: BLE001 - a stream already gone is what we wanted
                log.debug("resetting the pubsub stream of %s: %r", peer_id, exc)
            if self.peers.get(peer_id) is stream:
                del self.peers[peer_id]
        self._forget_all_subscriptions(peer_id)

    def is_peer_blacklisted(self, peer_id: ID) -> bool:
        if peer_id in self.blacklisted_peers:
            return True
        return self._connected(peer_id) and not self.gate.admitted(name_of(peer_id))

    async def stream_handler(self, stream: INetStream) -> None:
        """Read a peer's pubsub stream only once the peer is admitted; reset it otherwise."""
        peer_id = stream.muxed_conn.peer_id
        if peer_id in self.blacklisted_peers or not await self.gate.wait(
                peer_id.to_base58(), self.wait_s, lambda: self._connected(peer_id)):
            self.counters["gossip_streams_refused"] += 1
            try:
                await stream.reset()
            except Exception as exc:  # noqa: BLE001 - a stream already gone is what we wanted
                log.debug("resetting the pubsub stream of %s: %r", peer_id, exc)
            return
        await super().stream_handler(stream)

    async def open_to(self, peer_id: ID) -> bool:
        """Start gossip with a peer just admitted on a new connection: open our pubsub stream
        to it. A stream left from its previous connection (it restarted and reconnected before
        Pubsub noticed the old one die) is dropped first: Pubsub would otherwise keep writing
        into it and never send the peer our subscriptions, so the peer would leave us out of
        its mesh and gossip from it would stop until the next restart."""
        self.drop_stale_stream(peer_id)
        return await self.ensure_peer_stream(peer_id, timeout=10.0)

    def drop_stale_stream(self, peer_id: ID) -> bool:
        """Drop our pubsub stream to `peer_id` if the connection it ran on is closed; True if
        it did. Pubsub then opens a new one on a connection still open (its dead-peer handling),
        and meanwhile writes nothing into the dead one. Pubsub itself notices only when a write
        fails (that message is lost) or the peer's last connection closes. The peer's
        subscriptions are kept (`_handle_dead_peer`)."""
        stream = self.peers.get(peer_id)
        if stream is None:
            return False
        live = {id(conn.muxed_conn) for conn in self.host.get_network().get_connections(peer_id)}
        if id(stream.muxed_conn) in live:
            return False
        self.counters["gossip_stale_streams"] += 1
        self._handle_dead_peer(peer_id)
        return True

    def _handle_dead_peer(self, peer_id: ID) -> None:
        """Pubsub's, except that a peer still connected keeps its subscriptions.

        Our stream to a peer dies while the peer stays connected when the connection it ran on
        closes and another is open (a duplicate closed: `drop_stale_stream`, or a write into the
        dead stream failed first, as GossipSub's heartbeat may). Pubsub then opens a new stream,
        but forgets the peer's subscriptions, which came on the peer's *own* stream: if that one
        runs on the connection left, the peer never sends them again, and we would send that
        peer nothing, for good. If the peer's stream died too, its new one sends them again."""
        keep = [topic for topic, peers in self.peer_topics.items() if peer_id in peers] \
            if self._connected(peer_id) else []
        super()._handle_dead_peer(peer_id)
        for topic in keep:
            self.handle_subscription(peer_id, rpc_pb2.RPC.SubOpts(subscribe=True, topicid=topic))
