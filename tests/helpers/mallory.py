"""Mallory, a valid member of a victim daemon's clade whose libp2p host runs in the test's process
and attacks on every channel a member has, and the referee that reads the victim's counters
(tests/p2p/test_p2p_hostile.py says what each attack must do)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import multiaddr
import trio
from libp2p.abc import INetStream
from libp2p.custom_types import TProtocol
from libp2p.network.stream.exceptions import StreamEOF, StreamError, StreamReset
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.validators import PUBSUB_SIGNING_PREFIX

from crdt import (
    AuthorValue,
    CausalContext,
    Delta,
    EntryBody,
    Kind,
    Op,
    RemoteProtocolError,
    SlotKind,
    Timestamp,
)
from crdt.codec import decode_delta
from crdt.ops import make_op
from crypto import seal_envelope, signature_ok
from daemon.p2p import messages
from daemon.p2p.frames import close_quietly, encode_frame, read_frame
from daemon.p2p.gossip import GossipCodec
from daemon.p2p.host import GOSSIP_MAX_BYTES, build_host
from daemon.p2p.node import HELLO_PROTOCOL, SYNC_PROTOCOL, topic_of
from daemon.testing.harness import Golem
from tests.helpers.polling import eventually_async
from tests.helpers.stranger import WAIT_S, Reply, call, counters, hosting, plain_pubsub, wait_until

HOUR_MS = 3_600_000
# No anti-entropy tick of the victim's own during the test: every sync it runs is one we trigger,
# so the counters can be compared exactly.
VICTIM_ENV = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}
# Counters that say a peer's input was refused, failed, or was accepted (not the `event_*` tallies
# of published events): each attack must change exactly the ones it expects.
WATCHED = re.compile(r"^(?!event_).*(rejected|refused|failed|incomplete|accepted|applied|dropped)")



def now_ms() -> int:
    return int(time.time() * 1000)


def frame(message: messages.Message) -> bytes:
    return encode_frame(messages.encode(message))


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def raw_delta(ops: list[tuple[str, bytes, bytes]], context: list[Any] | None = None) -> bytes:
    """A delta in the wire format (crdt.codec) from raw (writer, signed, signature) triples."""
    groups: dict[str, list[list[bytes]]] = {}
    for writer, signed, signature in ops:
        groups.setdefault(writer, []).append([signed, signature])
    return bytes(msgpack.packb([1, [[w, g] for w, g in groups.items()], context or []], use_bin_type=True))


class Mallory:
    """A valid member with a libp2p host in this process, lying on every channel."""

    def __init__(self, golem: Golem, victim: Golem) -> None:
        self.identity = golem.data.load_identity()
        joined = golem.data.load_membership()
        assert joined is not None
        self.membership, self.clade_key = joined
        self.me = self.identity.peer_id
        self.victim = victim
        self.victim_info = info_from_p2p_addr(multiaddr.Multiaddr(victim.p2p_addrs[0]))
        self.topic = topic_of(self.membership.clade_id)
        self.codec = GossipCodec(identity=self.identity, membership=self.membership, clade_key=self.clade_key,
                                 revocations=lambda: None, max_skew_ms=60_000)
        self.host = build_host(self.identity, mdns=False)
        self.router, self.pubsub = plain_pubsub(self.host)  # a hostile peer gates nothing
        self.seq = 0
        self.victim_hello: messages.Hello | None = None
        self.sync_reply: Reply = self.honest
        self.from_victim: list[Any] = []  # GossipSub messages the victim published
        self.errors: list[str] = []  # anything unexpected in mallory's own handlers

    # -- running -----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Mallory]:
        handlers = {HELLO_PROTOCOL: self._hello_handler, SYNC_PROTOCOL: self._sync_handler}
        async with hosting(self.host, self.router, self.pubsub, self.topic, handlers, self._drain):
            yield self

    async def _drain(self, subscription: Any) -> None:
        while True:
            msg = await subscription.get()
            if ID(msg.from_id) == self.victim_info.peer_id:
                self.from_victim.append(msg)

    def hello(self, certificate: bytes | None = None, siblings: tuple[str, ...] = ()) -> messages.Hello:
        return messages.Hello(self.membership.clade_id, certificate or self.membership.certificate.to_bytes(), b"",
                              tuple(str(a) for a in self.host.get_addrs()), siblings)

    async def say_hello(self, hello: messages.Hello, to: ID | None = None) -> messages.Message | None:
        """A hello of her own on a fresh stream: the victim's (or `to`'s) answer, or None if the connection
        went first (after a refusal the victim drops the connection at once: the frame may not get through)."""
        with trio.fail_after(WAIT_S):
            stream = await self.host.new_stream(to or self.victim_info.peer_id, [HELLO_PROTOCOL])
            try:
                await stream.write(frame(hello))
                return messages.decode(await read_frame(stream))
            except (StreamError, EOFError, RemoteProtocolError):
                return None
            finally:
                await close_quietly(stream)

    async def _hello_handler(self, stream: INetStream) -> None:
        """The victim's hello at connect: answered honestly (mallory is a member)."""
        try:
            with trio.fail_after(WAIT_S):
                hello = messages.decode(await read_frame(stream))
                assert isinstance(hello, messages.Hello), hello
                if stream.muxed_conn.peer_id == self.victim_info.peer_id:
                    self.victim_hello = hello
                await stream.write(frame(self.hello()))
        except Exception as exc:  # an exception escaping a handler takes the host down
            self.errors.append(f"hello handler: {exc!r}")
        finally:
            await close_quietly(stream)

    async def _sync_handler(self, stream: INetStream) -> None:
        try:
            with trio.fail_after(WAIT_S):
                await self.sync_reply(stream)
        except Exception as exc:
            self.errors.append(f"sync handler: {exc!r}")
        finally:
            await close_quietly(stream)

    async def connect(self, golem: Golem | None = None) -> None:
        """Connect to `golem` (the victim by default): until it counts her as a member, and she
        has it in her GossipSub mesh."""
        golem = golem or self.victim
        info = info_from_p2p_addr(multiaddr.Multiaddr(golem.p2p_addrs[0]))
        with trio.fail_after(WAIT_S):
            await self.host.connect(info)
            reply = await self.say_hello(self.hello(), info.peer_id)  # the dialer proves membership first
            if golem is self.victim and isinstance(reply, messages.Hello):
                self.victim_hello = reply

            async def admitted() -> bool:
                return any(p["peer_id"] == self.me and p["member"] and p["connected"]
                           for p in (await call(golem, "GET", "/v1/peers"))["peers"])

            await wait_until(f"{golem.name} admitting mallory", admitted)
            await self.pubsub.wait_for_subscription(info.peer_id, self.topic, timeout=WAIT_S)
            await self.pubsub.wait_for_mesh(info.peer_id, self.topic, timeout=WAIT_S)

    # -- what mallory answers when the victim pulls from her ----------------------------------

    async def honest(self, stream: INetStream) -> None:
        """Nothing to offer: `end` to every want, until the victim closes."""
        while True:
            try:
                want = messages.decode(await read_frame(stream))
            except EOFError:
                return
            assert isinstance(want, messages.Want), want
            await stream.write(frame(messages.End(False, CausalContext())))

    @staticmethod
    def answer(*chunks: bytes) -> Reply:
        """Read the victim's want, answer with these raw bytes, hang up."""
        async def reply(stream: INetStream) -> None:
            assert isinstance(messages.decode(await read_frame(stream)), messages.Want)
            for chunk in chunks:
                await stream.write(chunk)
        return reply

    @staticmethod
    async def stall(stream: INetStream) -> None:
        """'There is more' forever, bringing nothing."""
        while True:
            try:
                await read_frame(stream)
            except EOFError:
                return
            await stream.write(frame(messages.End(True, CausalContext())))

    # -- mallory as the asker (the victim serves) ---------------------------------------------

    async def sync_raw(self, data: bytes, protocol: str = SYNC_PROTOCOL) -> None:
        """Open a sync stream (v1 unless told), send `data`, half-close, read whatever comes back."""
        with trio.fail_after(WAIT_S):
            stream = await self.host.new_stream(self.victim_info.peer_id, [TProtocol(protocol)])
            try:
                await stream.write(data)
                await stream.close()
                while True:
                    try:
                        await read_frame(stream)
                    except Exception:  # the victim closes or resets: either is fine here
                        return
            finally:
                await close_quietly(stream)

    async def want(self, golem: Golem | None = None) -> tuple[list[Op], messages.End]:
        """A good want (empty context) on a fresh stream: every op `golem` (the victim by default)
        serves, and its `end`."""
        ops: list[Op] = []
        peer = ID.from_base58((golem or self.victim).peer_id)
        with trio.fail_after(WAIT_S):
            stream = await self.host.new_stream(peer, [SYNC_PROTOCOL])
            try:
                await stream.write(frame(messages.Want(CausalContext())))
                while True:
                    reply = messages.decode(await read_frame(stream))
                    if isinstance(reply, messages.End):
                        return ops, reply
                    assert isinstance(reply, messages.DeltaFrame), reply
                    delta, dropped = decode_delta(reply.delta, signature_ok)
                    assert not dropped
                    ops.extend(delta.ops)
            finally:
                await close_quietly(stream)

    # -- ops and envelopes ----------------------------------------------------------------------

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def op(self, entry_id: str, slot: SlotKind, value: Any, *, seq: int | None = None, hlc_ms: int | None = None,
           writer: str | None = None) -> Op:
        """An op signed by mallory (`writer` defaults to her; anyone else's makes a bad signature)."""
        return make_op(writer=writer or self.me, seq=seq or self.next_seq(), hlc=Timestamp(hlc_ms or now_ms()),
                       entry_id=entry_id, slot=slot, value=value, sign=self.identity.sign)

    def body(self, content: str, *, author: str | None = None) -> EntryBody:
        return EntryBody(author=author or self.me, kind=Kind.WARNING, content=content, created=Timestamp(now_ms()))

    def entry(self, content: str, confidence: float = 0.7) -> tuple[EntryBody, list[Op]]:
        body = self.body(content)
        return body, [self.op(body.id, SlotKind.BODY, body, hlc_ms=body.created.ms),
                      self.op(body.id, SlotKind.AUTHOR, AuthorValue(confidence=confidence))]

    def seal(self, ops: list[Op], *, sent_ms: int | None = None) -> bytes:
        return self.codec.seal(Delta(tuple(ops), CausalContext()), now_ms=sent_ms or now_ms())

    def seal_raw(self, batch: bytes, *, membership: Any = None, clade_key: bytes | None = None) -> bytes:
        return seal_envelope(batch, sender=self.identity, membership=membership or self.membership,
                             clade_key=clade_key or self.clade_key, now_ms=now_ms())

    async def publish(self, data: bytes) -> None:
        await self.pubsub.publish(self.topic, data)

    def signed_message(self, data: bytes) -> rpc_pb2.Message:
        """A GossipSub message on the clade topic signed by mallory's host key (as `Pubsub.publish` does)."""
        msg = rpc_pb2.Message(data=data, topicIDs=[self.topic], from_id=self.host.get_id().to_bytes(),
                              seqno=os.urandom(8))
        msg.signature = self.host.get_private_key().sign(PUBSUB_SIGNING_PREFIX.encode() + msg.SerializeToString())
        msg.key = self.host.get_public_key().serialize()
        return msg

    async def publish_raw(self, data: bytes) -> bool:
        """Publish on a GossipSub stream of her own, bypassing her router (py-libp2p silently drops
        its own outbound RPCs over 1 MiB; a hostile peer need not). True if the victim ended the
        stream (its libp2p refusing the RPC resets it; on a loaded machine the reset has been seen
        to arrive as an end of stream — either way only the victim ends it, as it never writes
        here); otherwise it reads quietly and answers nothing."""
        rpc = rpc_pb2.RPC(publish=[self.signed_message(data)]).SerializeToString()
        with trio.fail_after(WAIT_S):
            stream = await self.host.new_stream(self.victim_info.peer_id, [PROTOCOL_ID_V11])
            try:
                await stream.write(varint(len(rpc)) + rpc)
                if len(rpc) <= GOSSIP_MAX_BYTES:
                    return False
                await stream.read(1)  # the victim never writes on this stream: only a reset ends the read
            except (StreamReset, StreamEOF):
                return True
            finally:
                await close_quietly(stream)
        return False


class Referee:
    """Runs one attack, then insists the victim's counters moved exactly as expected."""

    def __init__(self, victim: Golem) -> None:
        self.victim = victim
        self.seen: dict[str, dict[str, int]] = {}

    async def expect(self, what: str, expected: dict[str, int], action: Callable[[], Awaitable[Any]]) -> Any:
        before = await counters(self.victim)
        result = await action()
        changed: dict[str, int] = {}

        async def reached() -> bool:
            nonlocal changed
            after = await counters(self.victim)
            changed = {k: after[k] - before[k] for k in after if WATCHED.search(k) and after[k] != before[k]}
            return all(changed.get(k, 0) >= n for k, n in expected.items())

        await eventually_async(reached, what=f"{what}: counters reaching {expected}", timeout=WAIT_S, interval=0.02,
                               state=lambda: f"changed {changed}")
        assert changed == expected, f"{what}: counters changed {changed}, expected exactly {expected}"
        assert self.victim.running, f"the victim died after: {what}"
        self.seen[what] = changed
        return result


def projection(entries: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {e["id"]: (e["author"], e["kind"], e["content"], e["confidence"], e["status"], e["superseded_by"])
            for e in entries}


async def entries(golem: Golem) -> dict[str, tuple[Any, ...]]:
    return projection((await call(golem, "GET", "/v1/entries", params={"limit": 1000}))["entries"])
