"""GossipSub exchanges nothing with a connected peer until its hello has proved membership.

py-libp2p's Pubsub opens its stream to a peer the moment it connects, reads whatever that
peer sends on its own stream (subscriptions, GRAFT, IHAVE/IWANT, publishes), and puts it in
the mesh 60–100 ms later (NOTES-libp2p 19): a stranger would learn the topic, the members'
peer ids, and the timing and sizes of the clade's traffic until its hello failed. Here:

- `MemberGate` is the set of peers admitted *on their current connection* (admission adds a
  peer when its hello succeeds; a disconnect removes it, so every connection proves itself);
- `GatedPubsub` treats a connected peer that is not admitted as blacklisted: Pubsub opens no
  stream to it (so it sends it nothing, not even our subscriptions) and drops what it
  forwards; the peer's own inbound pubsub stream is not read at all until the peer is
  admitted, and is reset if it is not admitted within `wait_s` — its publishes and control
  messages are dropped unread. Admission then calls `open_to(peer)` to start gossip.

A peer not connected is judged by the explicit blacklist alone, so a message a member
forwards from another member we are not connected to still passes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import trio
from libp2p.abc import INetStream
from libp2p.peer.id import ID
from libp2p.pubsub.pubsub import Pubsub

__all__ = ["GatedPubsub", "MemberGate"]

log = logging.getLogger("clade.p2p")


class MemberGate:
    """Who has proved membership on its current connection (peer ids as base58)."""

    def __init__(self) -> None:
        self._admitted: set[str] = set()
        self._waiting: dict[str, trio.Event] = {}

    def admit(self, peer_id: str) -> None:
        self._admitted.add(peer_id)
        event = self._waiting.pop(peer_id, None)
        if event is not None:
            event.set()

    def forget(self, peer_id: str) -> None:
        """The peer's connection closed (or it was refused): it proves itself again next time."""
        self._admitted.discard(peer_id)
        event = self._waiting.pop(peer_id, None)
        if event is not None:
            event.set()  # waiters look again and find it not admitted

    def admitted(self, peer_id: str) -> bool:
        return peer_id in self._admitted

    async def wait(self, peer_id: str, timeout_s: float) -> bool:
        """True once `peer_id` is admitted; False if it is forgotten or `timeout_s` passes first."""
        if peer_id in self._admitted:
            return True
        event = self._waiting.setdefault(peer_id, trio.Event())
        with trio.move_on_after(timeout_s):
            await event.wait()
        return peer_id in self._admitted

    def __len__(self) -> int:
        return len(self._admitted)


class GatedPubsub(Pubsub):
    """Pubsub behind a `MemberGate` (see the module docstring)."""

    def __init__(self, *args: Any, gate: MemberGate, wait_s: float, counters: Counter[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = gate
        self.wait_s = wait_s
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._connected: Callable[[ID], bool] = lambda pid: bool(self.host.get_network().get_connections(pid))

    def is_peer_blacklisted(self, peer_id: ID) -> bool:
        if peer_id in self.blacklisted_peers:
            return True
        return self._connected(peer_id) and not self.gate.admitted(peer_id.to_base58())

    async def stream_handler(self, stream: INetStream) -> None:
        """Read a peer's pubsub stream only once the peer is admitted; reset it otherwise."""
        peer_id = stream.muxed_conn.peer_id
        if peer_id in self.blacklisted_peers or not await self.gate.wait(peer_id.to_base58(), self.wait_s):
            self.counters["gossip_streams_refused"] += 1
            try:
                await stream.reset()
            except Exception as exc:  # noqa: BLE001 - a stream already gone is what we wanted
                log.debug("resetting the pubsub stream of %s: %r", peer_id, exc)
            return
        await super().stream_handler(stream)

    async def open_to(self, peer_id: ID) -> bool:
        """Start gossip with a peer just admitted: open our pubsub stream to it (idempotent)."""
        return await self.ensure_peer_stream(peer_id, timeout=10.0)
