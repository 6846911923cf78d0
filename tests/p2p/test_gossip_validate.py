"""The gossip validator under Pubsub's validation timeout: a message whose first validation
Pubsub gave up on (a loaded machine) is accepted when a copy comes again, and is never
counted as a replay (the issue's stray `gossip_rejected_replayed` with nobody replaying).

The validator is driven directly with a real codec and real sealed messages; the daemon
port is the three things the validator reads of it (counters, the clock). The last test
drives the daemon's own Pubsub subclass with a validator that outlasts the timeout."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
import trio.testing
from libp2p import new_host
from libp2p.crypto.secp256k1 import create_new_key_pair
from libp2p.exceptions import ValidationError
from libp2p.peer.id import ID
from libp2p.pubsub.pb import rpc_pb2

from crdt import CausalContext, Delta, Kind
from crdt.codec import encode_delta
from crypto import seal_envelope
from daemon.p2p.broadcast import Broadcast
from daemon.p2p.gate import MemberGate
from daemon.p2p.gossip import GossipCodec
from daemon.p2p.host import build_pubsub
from daemon.p2p.peers import PeerBook
from tests.helpers.crdt_sim import SimReplica
from tests.helpers.fuzzing import GOLEM, MEMBERSHIP, NOW_MS, OWNER, REVOCATIONS, STRANGER


class _Clock:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()

    def now_ms(self) -> int:
        return NOW_MS

    def publish(self, event: str, data: dict[str, Any]) -> None:
        raise AssertionError("the validator publishes nothing")

    async def on_writer(self, fn: Any) -> Any:
        raise AssertionError("the validator does not touch the store")

    async def on_writer_short(self, fn: Any) -> Any:
        raise AssertionError("the validator does not touch the store")

    async def on_reader(self, fn: Any) -> Any:
        raise AssertionError("the validator does not touch the store")

    def ingesting(self) -> Any:
        raise AssertionError("the validator joins no catch-up round")


def _broadcast() -> tuple[Broadcast, _Clock]:
    daemon = _Clock()
    codec = GossipCodec(identity=GOLEM, membership=MEMBERSHIP, clade_key=OWNER.clade_key,
                        revocations=lambda: REVOCATIONS, max_skew_ms=60_000)
    # `me` is another member: the message is not our own.
    return Broadcast(daemon, links=None, book=PeerBook(), me=STRANGER.peer_id, codec=codec,  # type: ignore[arg-type]
                     topic="t", probe_topic="p", max_skew_ms=60_000), daemon


def _message(seqno: int, text: str = "Aave utilisation above 90% stalls withdrawals") -> rpc_pb2.Message:
    ops = SimReplica(GOLEM, wall=NOW_MS).create(text, Kind.WARNING)
    data = seal_envelope(encode_delta(Delta(tuple(ops), CausalContext())), sender=GOLEM, membership=MEMBERSHIP,
                         clade_key=OWNER.clade_key, now_ms=NOW_MS)
    return rpc_pb2.Message(from_id=ID.from_base58(GOLEM.peer_id).to_bytes(), seqno=seqno.to_bytes(8, "big"),
                           data=data, topicIDs=["t"])


async def test_a_copy_after_a_timed_out_validation_is_accepted_not_replayed() -> None:
    broadcast, daemon = _broadcast()
    msg = _message(1)
    forwarder = _peer_id()
    with trio.CancelScope() as scope:
        scope.cancel()  # Pubsub's validation timeout fired while the envelope was being opened
        await broadcast.validate(forwarder, msg)
    assert broadcast._accepted, "the open finished although its caller gave up"
    assert await broadcast.validate(forwarder, msg) is True  # the retransmission
    assert daemon.counters["gossip_rejected_replayed"] == 0
    assert daemon.counters["gossip_duplicates"] == 1


async def test_the_same_envelope_under_a_new_seqno_is_still_a_replay() -> None:
    """What the replay guard is for stays refused: one sealed envelope published twice."""
    broadcast, daemon = _broadcast()
    first = _message(1)
    again = rpc_pb2.Message(from_id=first.from_id, seqno=(2).to_bytes(8, "big"), data=first.data, topicIDs=["t"])
    forwarder = _peer_id()
    assert await broadcast.validate(forwarder, first) is True
    assert await broadcast.validate(forwarder, again) is False
    assert daemon.counters["gossip_rejected_replayed"] == 1


class _Subscription:
    """Pubsub's queue for our topic: hands out the given messages, then waits forever."""

    def __init__(self, *messages: rpc_pb2.Message) -> None:
        self.messages = list(messages)

    async def get(self) -> rpc_pb2.Message:
        if self.messages:
            return self.messages.pop(0)
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_copy_validated_after_the_first_was_delivered_is_a_duplicate_not_a_replay() -> None:
    """py-libp2p checks "seen" before verifying the libp2p signature, so a second copy can reach
    the validator just after the first was delivered (measured in bench_clade: 1.5–5.5 ms
    after). It is the same message (same publisher and seqno): a duplicate, not a replay."""
    broadcast, daemon = _broadcast()
    msg = _message(1)
    assert await broadcast.validate(_peer_id(), msg) is True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broadcast._drain, _Subscription(msg))
        await trio.testing.wait_all_tasks_blocked()
        assert not broadcast._accepted, "the first copy was delivered"
        assert await broadcast.validate(_peer_id(), msg) is False  # not delivered twice
        nursery.cancel_scope.cancel()
    assert daemon.counters["gossip_rejected_replayed"] == 0
    assert daemon.counters["gossip_duplicates"] == 1


def _peer_id() -> ID:
    return ID.from_base58(GOLEM.peer_id)


async def test_pubsub_forgets_a_validation_timeout(autojump_clock: trio.testing.MockClock) -> None:
    """py-libp2p caches a timed-out validation as invalid for five minutes, which would refuse
    every later copy of a good message; the daemon's Pubsub forgets the timeout instead."""
    host = new_host(key_pair=create_new_key_pair())
    _, pubsub = build_pubsub(host, MemberGate(lambda peer: frozenset()), wait_s=1.0)
    calls: list[int] = []

    async def slow_then_done(forwarder: ID, msg: rpc_pb2.Message) -> bool:
        calls.append(len(calls))
        if len(calls) == 1:
            await trio.sleep_forever()  # busy past Pubsub's validation timeout
        return True

    pubsub.set_topic_validator("t", slow_then_done, is_async_validator=True)
    msg = _message(7)
    with pytest.raises(ValidationError):
        await pubsub.validate_msg(_peer_id(), msg)
    await pubsub.validate_msg(_peer_id(), msg)  # the next copy is validated again, and passes
    assert calls == [0, 1]
    assert pubsub.counters["gossip_validation_timeouts"] == 1


async def test_blacklisting_a_peer_whose_stream_dies_during_the_reset() -> None:
    """Blacklisting resets the peer's pubsub stream; the reset wakes the peer's reader, which
    removes the peer before the teardown goes on. py-libp2p's teardown then raised KeyError and
    took the p2p service down (the soak's one traceback); the daemon's Pubsub finishes quietly."""
    host = new_host(key_pair=create_new_key_pair())
    _, pubsub = build_pubsub(host, MemberGate(lambda peer: frozenset()), wait_s=1.0)
    peer = _peer_id()

    class _DyingStream:
        resets = 0

        async def reset(self) -> None:
            self.resets += 1
            await trio.lowlevel.checkpoint()
            pubsub.peers.pop(peer, None)  # what the reader's dead-peer handler does meanwhile

    stream = _DyingStream()
    pubsub.peers[peer] = stream  # type: ignore[assignment]
    await pubsub._teardown_if_connected(peer)
    assert stream.resets == 1 and peer not in pubsub.peers
    pubsub.peers[peer] = stream  # type: ignore[assignment]
    pubsub.peers.pop(peer)
    await pubsub._teardown_if_connected(peer)  # nobody there: nothing to do, no error
    assert stream.resets == 1


async def test_opened_gossip_held_in_memory_is_bounded_in_bytes_per_sender() -> None:
    """A member cannot pin memory with a backlog of valid messages: past the per-sender byte
    bound a message is still valid (forwarded) but not kept, counted; delivery releases it."""
    from daemon.p2p.broadcast import PendingBytes

    broadcast, daemon = _broadcast()
    size = len(_message(1, "Warning 1: pool 1 drained").data)
    broadcast.pending = PendingBytes(per_sender=3 * size, total=100 * size)
    forwarder = _peer_id()
    for seqno in range(1, 6):  # five distinct messages of one sender, none delivered yet
        assert await broadcast.validate(forwarder, _message(seqno, f"Warning {seqno}: pool {seqno} drained")) is True
    assert len(broadcast._accepted) == 3 and daemon.counters["gossip_dropped_over_budget"] == 2
    assert broadcast.pending.by_sender == {GOLEM.peer_id: 3 * size}
    key = next(iter(broadcast._accepted))
    opened = broadcast._accepted.pop(key)  # what delivery and the applier do, then release
    broadcast.pending.release(opened.sender, opened.size)
    assert await broadcast.validate(forwarder, _message(6, "Warning 6: pool 6 drained")) is True
    assert len(broadcast._accepted) == 3 and daemon.counters["gossip_dropped_over_budget"] == 2


def test_pending_bytes_hold_both_bounds() -> None:
    from daemon.p2p.broadcast import PendingBytes

    pending = PendingBytes(per_sender=10, total=15)
    assert pending.take("a", 10) and not pending.take("a", 1)  # a's bound
    assert pending.take("b", 5) and not pending.take("c", 1)  # the total
    pending.release("a", 10)
    assert pending.take("c", 1) and pending.by_sender == {"b": 5, "c": 1} and pending.total == 6


async def test_an_inline_verdict_is_pubsubs_verdict_without_a_checkpoint() -> None:
    """GatedPubsub's fast path: a topic's inline validator answers without a checkpoint (so no
    other copy of the message reaches validation meanwhile), its verdict cached as Pubsub caches
    one; None leaves the message to the async validator; a new topic validator drops it."""
    host = new_host(key_pair=create_new_key_pair())
    _, pubsub = build_pubsub(host, MemberGate(lambda peer: frozenset()), wait_s=1.0)
    verdicts: dict[int, bool | None] = {1: True, 2: False, 3: None}
    inline_calls: list[int] = []
    async_calls: list[int] = []

    def inline(forwarder: ID, msg: rpc_pb2.Message) -> bool | None:
        inline_calls.append(int.from_bytes(msg.seqno, "big"))
        return verdicts[int.from_bytes(msg.seqno, "big")]

    async def slow(forwarder: ID, msg: rpc_pb2.Message) -> bool:
        async_calls.append(int.from_bytes(msg.seqno, "big"))
        await trio.lowlevel.checkpoint()
        return True

    pubsub.set_topic_validator("t", slow, is_async_validator=True)
    pubsub.set_inline_validator("t", inline)
    with trio.testing.assert_no_checkpoints():
        await pubsub.validate_msg(_peer_id(), _message(1))
        with pytest.raises(ValidationError):
            await pubsub.validate_msg(_peer_id(), _message(2))
    assert inline_calls == [1, 2] and async_calls == []
    await pubsub.validate_msg(_peer_id(), _message(1))  # cached: judged once
    with pytest.raises(ValidationError):
        await pubsub.validate_msg(_peer_id(), _message(2))
    assert inline_calls == [1, 2]
    await pubsub.validate_msg(_peer_id(), _message(3))  # left to the async validator
    assert inline_calls == [1, 2, 3] and async_calls == [3]
    pubsub.set_topic_validator("t", slow, is_async_validator=True)
    await pubsub.validate_msg(_peer_id(), _message(4))
    assert inline_calls == [1, 2, 3] and async_calls == [3, 4]


async def test_validate_inline_leaves_thread_opens_to_validate_untouched() -> None:
    """Broadcast.validate_inline gives `validate`'s verdict and counts for a small message with
    none other being opened; with another being opened (on a worker thread) it answers None
    and notes nothing, and `validate` then does the whole check."""
    broadcast, daemon = _broadcast()
    assert broadcast.validate_inline(_peer_id(), _message(1)) is True
    assert daemon.counters["gossip_msgs_in"] == 1 and len(broadcast._accepted) == 1
    assert broadcast.validate_inline(_peer_id(), _message(1)) is True  # a copy: counted a duplicate
    assert daemon.counters["gossip_duplicates"] == 1 and daemon.counters["gossip_msgs_in"] == 2
    broadcast._validating.add(b"another message being opened")
    second = _message(2, "Compound oracle lags 40 s behind Chainlink")
    assert broadcast.validate_inline(_peer_id(), second) is None
    assert daemon.counters["gossip_msgs_in"] == 2 and len(broadcast._accepted) == 1
    assert await broadcast.validate(_peer_id(), second) is True
    assert daemon.counters["gossip_msgs_in"] == 3 and len(broadcast._accepted) == 2
    assert daemon.counters["gossip_duplicates"] == 1
