"""Hostile peer: a member that sends malformed frames, oversized frames, forged ops (slot of
another writer), replayed ops and far-future HLCs. Every one is rejected and counted; the
victim stays up and loses nothing.

The victim is a real `clade run` daemon (subprocess, real libp2p on 127.0.0.1). Mallory is a
valid member of its clade (certificate, clade key) whose libp2p host runs in this process:
she answers the victim's hello honestly, then attacks on every channel a member has:

- `/clade/sync/1.0.0` as the asker (the victim serves): broken framing and messages;
- `/clade/sync/1.0.0` as the responder (the victim pulls, `POST /v1/sync`): lying deltas;
- GossipSub on the clade topic: sealed envelopes with forged, replayed, future ops, garbage;
- `/clade/hello/1.0.0`: a hello carrying another member's certificate (last: it gets her dropped).

Each attack must change exactly the expected refusal counters of `GET /v1/status` (and no
other refusal/failure/acceptance counter); a control op from mallory is accepted, so the
refusals are not an artefact of nothing arriving. At the end the victim is still running,
its entries are intact and its state digest is what it was before the attacks.

Two more lies a member can tell, each in its own test: a delta context that makes the victim
count a sibling's ops it never received as seen (it then never fetches them), and peer
exchange naming fake siblings without end (the peer book outgrows its cap).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import socket
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
from libp2p.abc import INetStream
from libp2p.peer.id import ID

from crdt import (
    AuthorValue,
    CausalContext,
    Delta,
    EndorseValue,
    Op,
    SlotKind,
    Status,
)
from crdt.codec import encode_delta
from crdt.ops import DOMAIN
from crypto import Certificate, Identity, OwnerKey
from daemon.p2p import messages
from daemon.p2p.frames import encode_frame, read_frame
from daemon.p2p.node import SYNC_V2_PROTOCOL
from daemon.p2p.peers import PeerBook
from daemon.testing.harness import LoopbackClade
from tests.helpers.mallory import (
    HOUR_MS,
    VICTIM_ENV,
    Mallory,
    Referee,
    entries,
    frame,
    now_ms,
    raw_delta,
    varint,
)
from tests.helpers.stranger import WAIT_S, Reply, call, counters, wait_until


@pytest.mark.slow
async def test_hostile_member_is_refused_and_counted_and_the_victim_loses_nothing(tmp_path: Path) -> None:
    """Every attack changes exactly its refusal counter; the victim serves, gossips and keeps its state."""
    clade = LoopbackClade(tmp_path, 1)
    victim = clade.golems[0]
    mallory_dir = clade.add_golem("mallory")
    try:
        await trio.to_thread.run_sync(lambda: clade.start(victim, bootstrap=[], env=VICTIM_ENV))
        own = [(await call(victim, "POST", "/v1/memory", json={"content": text, "memory_type": "warning"}))["id"]
               for text in ("ETH gas spikes above 80 gwei at 14:00 UTC: delay swaps",
                            "Curve 3pool: USDC share above 60% preceded every depeg")]
        mallory = Mallory(mallory_dir, victim)
        referee = Referee(victim)
        async with mallory.running():
            await mallory.connect()
            assert mallory.victim_hello is not None and mallory.victim_hello.clade_id == mallory.membership.clade_id

            # -- control: a valid entry of mallory's own is accepted (the channel works) ---------
            control_body, control_ops = mallory.entry("Mallory's honest warning: bridge X paused withdrawals")
            control = mallory.seal(control_ops)
            await referee.expect("control: mallory's own entry", {"gossip_accepted": 1, "gossip_ops_applied": 2},
                                 lambda: mallory.publish(control))
            # A write of the victim's own after mallory joined: she receives its sealed envelope.
            third = {"content": "Uniswap v3 0.05% pools beat 0.3% in low-volatility weeks", "memory_type": "warning"}
            own.append((await call(victim, "POST", "/v1/memory", json=third))["id"])

            async def got_victim_gossip() -> bool:
                return bool(mallory.from_victim)

            await wait_until("mallory receives the victim's gossip", got_victim_gossip)
            victim_envelope = bytes(mallory.from_victim[0].data)
            victim_ops = list(mallory.codec.open(victim_envelope, publisher=victim.peer_id, now_ms=now_ms()).delta.ops)

            before = await entries(victim)
            assert set(own) | {control_body.id} == set(before)
            digest = (await call(victim, "GET", "/v1/state-digest"))["all"]
            served, _ = await mallory.want()
            assert {op.entry_id for op in served} == set(own) | {control_body.id}
            target = own[0]  # the victim's entry mallory tries to take over

            async def still_serving() -> None:
                """After each attack on the sync protocol, a good want on a fresh stream is answered."""
                ops, end = await mallory.want()
                assert {op.entry_id for op in ops} == set(own) | {control_body.id}
                assert not end.more

            # -- a) the sync protocol, mallory asking: broken frames and messages ---------------
            sync_attacks: list[tuple[str, str, bytes]] = [
                ("sync: garbage bytes", "truncated", b"GET /clade HTTP/1.1\r\nHost: victim\r\n\r\n"),
                ("sync: frame announcing 2 MiB", "oversized", varint(2 * 1024 * 1024) + b"\x92" * 64),
                ("sync: endless length prefix", "malformed", b"\x80" * 12),
                ("sync: frame of undecodable msgpack", "malformed", encode_frame(b"\xc1\xc1\xc1")),
                ("sync: frame of a msgpack map", "malformed", encode_frame(msgpack.packb({"want": 1}))),
                ("sync: want of an unknown version", "unknown_version",
                 encode_frame(msgpack.packb(["clade.want", 2, []]))),
                ("sync: want with a malformed context", "malformed",
                 encode_frame(msgpack.packb(["clade.want", 1, [["not-a-peer-id", 5, []]]]))),
                ("sync: want with a cloud below its vv", "malformed",
                 encode_frame(msgpack.packb(["clade.want", 1, [[mallory.me, 5, [3]]]]))),
                ("sync: want with an oversized context", "oversized",
                 encode_frame(msgpack.packb(["clade.want", 1, [[mallory.me, 0, list(range(1, 40_001))],
                                                               [victim.peer_id, 0, list(range(1, 40_001))]]]))),
                ("sync: a delta instead of a want", "malformed",
                 frame(messages.DeltaFrame(encode_delta(Delta(tuple(control_ops), CausalContext()))))),
                ("sync: a good want, then garbage", "malformed",
                 frame(messages.Want(CausalContext())) + encode_frame(b"\xc1")),
            ]
            for what, reason, data in sync_attacks:
                await referee.expect(what, {f"sync_rejected_{reason}": 1}, functools.partial(mallory.sync_raw, data))
                await still_serving()
            # sync v2 (contexts reconciled by their difference): its own messages, as hostile
            tag = b"\x01" * 8
            v2_attacks: list[tuple[str, str, list[object]]] = [
                ("sync v2: a v1 want", "unknown_version", ["clade.want", 1, []]),
                ("sync v2: a nonce of 7 bytes", "malformed", ["clade.want", 2, b"\x00" * 7, "rows", []]),
                ("sync v2: three buckets", "malformed", ["clade.want", 2, b"\x00" * 8, "buckets", [tag] * 3]),
                ("sync v2: a writer's row twice", "malformed",
                 ["clade.want", 2, b"\x00" * 8, "rows", [[tag, 1, []], [tag, 2, []]]]),
                ("sync v2: rows instead of a want", "malformed", ["clade.rows", 2, [[tag, 1, []]]]),
            ]
            for what, reason, body in v2_attacks:
                await referee.expect(what, {f"sync_rejected_{reason}": 1}, functools.partial(
                    mallory.sync_raw, encode_frame(msgpack.packb(body, use_bin_type=True)), SYNC_V2_PROTOCOL))
                await still_serving()

            # -- the sync protocol, the victim pulling from mallory: lying answers ----------------
            forged = mallory.op(target, SlotKind.AUTHOR, AuthorValue(confidence=0.0, status=Status.RETRACTED))
            impersonated = mallory.op(target, SlotKind.AUTHOR, AuthorValue(confidence=0.0, status=Status.RETRACTED),
                                      writer=victim.peer_id)
            future = mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.1),
                                hlc_ms=now_ms() + HOUR_MS)

            def delta_frame(*ops: Op, context: CausalContext | None = None) -> bytes:
                return frame(messages.DeltaFrame(encode_delta(Delta(ops, context or CausalContext()))))

            end = frame(messages.End(False, CausalContext()))
            # a delta's context may cover seqs of ops it does not carry: not beyond what we have seen signed
            poisoned = CausalContext({victim.peer_id: 1_000_000, Identity.generate().peer_id: 500})
            pull_attacks: list[tuple[str, dict[str, int], Reply]] = [
                ("pull: frame announcing 2 MiB", {"sync_rejected_oversized": 1},
                 Mallory.answer(varint(2 * 1024 * 1024))),
                ("pull: undecodable reply", {"sync_rejected_malformed": 1}, Mallory.answer(encode_frame(b"\xc1"))),
                ("pull: author slot of the victim's entry", {"sync_rejected_forbidden_slot": 1},
                 Mallory.answer(delta_frame(forged), end)),
                ("pull: op in the victim's name, signed by mallory", {"sync_rejected_bad_signature": 1},
                 Mallory.answer(delta_frame(impersonated), end)),
                ("pull: op stamped an hour ahead", {"sync_rejected_clock_skew": 1},
                 Mallory.answer(delta_frame(future), end)),
                ("pull: five deltas in one round", {"sync_rejected_oversized": 1},
                 Mallory.answer(*[delta_frame()] * 5, end)),
                ("pull: 'more' forever, bringing nothing", {"sync_rejected_stalled": 1}, Mallory.stall),
                ("pull: the victim's own ops replayed", {}, Mallory.answer(delta_frame(*victim_ops), end)),
                ("pull: context claiming seqs nobody has shown", {},
                 Mallory.answer(delta_frame(context=poisoned), end)),
                ("pull: a refusal", {"sync_refused_by_peer": 1},
                 Mallory.answer(frame(messages.Refused("not_a_member", "go away")))),
            ]
            for what, expected, reply in pull_attacks:
                mallory.sync_reply = reply
                result = await referee.expect(what, expected, lambda: call(
                    victim, "POST", "/v1/sync", json={"peer_id": mallory.me}))
                if not expected:  # "no counter moved" means something only if the pull ran to its end
                    (pulled,) = result["synced"]
                    assert "error" not in pulled and pulled["applied"] == 0 and pulled["rounds"] >= 1, (what, pulled)
                assert (await call(victim, "GET", "/v1/state-digest"))["all"] == digest, what
            mallory.sync_reply = mallory.honest

            # -- b) gossip: sealed envelopes that lie, and plain garbage ---------------------------
            expired = Certificate.issue(clade.owner, mallory.me, generation=0, not_before=int(time.time()) - 7200,
                                        not_after=int(time.time()) - 3600)
            other_owner = OwnerKey.create(tmp_path / "other-owner", "other")
            foreign = Certificate.issue(other_owner, mallory.me, generation=0, not_before=int(time.time()) - 60,
                                        not_after=int(time.time()) + 3600)
            _, extra_ops = mallory.entry("Mallory's entry riding along with a forged op")
            gossip_attacks: list[tuple[str, dict[str, int], bytes]] = [
                ("gossip: author slot of the victim's entry",
                 {"gossip_accepted": 1, "gossip_rejected_forbidden_slot": 1},
                 mallory.seal([mallory.op(target, SlotKind.AUTHOR,
                                          AuthorValue(confidence=0.0, status=Status.RETRACTED))])),
                ("gossip: endorsing her own entry", {"gossip_accepted": 1, "gossip_rejected_forbidden_slot": 1},
                 mallory.seal([mallory.op(control_body.id, SlotKind.ENDORSE, EndorseValue(confirms=99))])),
                ("gossip: author slot of an unknown entry", {"gossip_accepted": 1, "gossip_rejected_orphan": 1},
                 mallory.seal([mallory.op(os.urandom(16).hex(), SlotKind.AUTHOR, AuthorValue(confidence=1.0))])),
                ("gossip: op in the victim's name, signed by mallory", {"gossip_rejected_bad_signature": 1},
                 mallory.seal([impersonated])),
                ("gossip: good ops plus one with a tampered signature", {"gossip_rejected_bad_signature": 1},
                 mallory.seal([*extra_ops, dataclasses.replace(
                     mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.2)),
                     signature=bytes(64))])),
                ("gossip: a body credited to the victim", {"gossip_rejected_invalid": 1},
                 mallory.seal_raw(raw_delta([forged_body(mallory, victim.peer_id)]))),
                ("gossip: two different ops under one seq", {"gossip_accepted": 1, "gossip_rejected_equivocation": 1},
                 mallory.seal([mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.1),
                                          seq=control_ops[1].seq)])),
                ("gossip: the control envelope replayed", {"gossip_rejected_replayed": 1}, control),
                ("gossip: the victim's envelope republished", {"gossip_rejected_sender_mismatch": 1},
                 victim_envelope),
                ("gossip: the victim's envelope republished again", {"gossip_rejected_replayed": 1}, victim_envelope),
                ("gossip: the victim's ops resealed (duplicates, harmless)", {"gossip_accepted": 1},
                 mallory.seal(victim_ops)),
                ("gossip: op stamped an hour ahead", {"gossip_rejected_clock_skew": 1},
                 mallory.seal([mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.3),
                                          hlc_ms=now_ms() + HOUR_MS)])),
                ("gossip: envelope sent 11 minutes ago", {"gossip_rejected_stale": 1},
                 mallory.seal([mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.4))],
                              sent_ms=now_ms() - 11 * 60_000)),
                ("gossip: envelope sent an hour ahead", {"gossip_rejected_stale": 1},
                 mallory.seal([mallory.op(control_body.id, SlotKind.AUTHOR, AuthorValue(confidence=0.5))],
                              sent_ms=now_ms() + HOUR_MS)),
                ("gossip: expired certificate", {"gossip_rejected_not_a_member": 1},
                 mallory.seal_raw(encode_delta(Delta(tuple(extra_ops), CausalContext())),
                                  membership=dataclasses.replace(mallory.membership, certificate=expired))),
                ("gossip: another clade's certificate", {"gossip_rejected_other_clade": 1},
                 mallory.seal_raw(encode_delta(Delta(tuple(extra_ops), CausalContext())),
                                  membership=dataclasses.replace(mallory.membership, certificate=foreign))),
                ("gossip: sealed with another key", {"gossip_rejected_bad_ciphertext": 1},
                 mallory.seal_raw(encode_delta(Delta(tuple(extra_ops), CausalContext())), clade_key=os.urandom(32))),
                ("gossip: sealed garbage instead of a delta", {"gossip_rejected_malformed": 1},
                 mallory.seal_raw(b"not a delta")),
                ("gossip: sealed delta of an unknown version", {"gossip_rejected_unknown_version": 1},
                 mallory.seal_raw(msgpack.packb([2, [], []]))),
                ("gossip: random bytes", {"gossip_rejected_unknown_version": 1}, b"\x07" + os.urandom(300)),
                ("gossip: random bytes after a valid version byte", {"gossip_rejected_bad_ciphertext": 1},
                 b"\x01" + os.urandom(300)),
                ("gossip: empty message", {"gossip_rejected_unknown_version": 1}, b""),
            ]
            for what, expected, data in gossip_attacks:
                await referee.expect(what, expected, functools.partial(mallory.publish, data))

            # (5) Oversized: an envelope over the envelope cap but within GossipSub's RPC cap reaches
            # our validator; an RPC over GossipSub's own cap (1.1 MiB) is dropped by libp2p, which
            # resets that stream. Either way the victim stays up, and gossip still works after.
            await referee.expect("gossip: envelope of 1.01 MiB", {"gossip_rejected_oversized": 1},
                                 lambda: mallory.publish_raw(b"\x01" + bytes(1_060_000)))
            assert await referee.expect("gossip: RPC of 1.2 MiB (reset by libp2p)", {},
                                        lambda: mallory.publish_raw(b"\x01" + bytes(1_200_000)))
            await referee.expect("gossip after the oversized RPC: the victim's ops resealed",
                                 {"gossip_accepted": 1}, lambda: mallory.publish_raw(mallory.seal(victim_ops)))
            await still_serving()
            assert (await call(victim, "GET", "/v1/state-digest"))["all"] == digest

            # -- hello: another member's certificate (the victim's own) ---------------------------
            assert mallory.victim_hello is not None
            impostor = mallory.hello(mallory.victim_hello.certificate)
            refusal = await referee.expect("hello: the victim's certificate", {"hello_refused_wrong_peer": 1},
                                           lambda: mallory.say_hello(impostor))
            assert refusal in (None, messages.Refused("wrong_peer", "membership check failed")), refusal

            async def dropped() -> bool:
                peers = (await call(victim, "GET", "/v1/peers"))["peers"]
                record = next(p for p in peers if p["peer_id"] == mallory.me)
                assert not record["member"] and record["refused"] == "wrong_peer", record
                return not record["connected"] and not mallory.host.get_network().get_connections(
                    mallory.victim_info.peer_id)

            await wait_until("the victim drops mallory", dropped)

            async def reconnect() -> None:
                with trio.fail_after(WAIT_S):
                    await mallory.host.connect(mallory.victim_info)

            await referee.expect("reconnecting while refused", {"connections_refused_held": 1}, reconnect)
            await wait_until("the victim drops mallory again", dropped)
            assert not mallory.errors, mallory.errors

        # -- the victim is up and lost nothing -------------------------------------------------------
        assert victim.running
        assert await entries(victim) == before
        assert (await call(victim, "GET", "/v1/state-digest"))["all"] == digest
        assert not [line for line in victim.stderr_lines if "Traceback" in line]
        observed = sorted({k for changed in referee.seen.values() for k in changed})
        print("\nattacks:", len(referee.seen), "counters:", ", ".join(observed))
    finally:
        await trio.to_thread.run_sync(clade.close)


def forged_body(mallory: Mallory, author: str) -> tuple[str, bytes, bytes]:
    """A body op written (and validly signed) by mallory whose body names `author`."""
    body = mallory.body("Forged: the victim says to bridge everything to chain Z", author=author)
    signed = bytes(msgpack.packb([1, mallory.next_seq(), body.created.pack(), bytes.fromhex(body.id),
                                  int(SlotKind.BODY), body.to_wire()], use_bin_type=True, use_single_float=False))
    return mallory.me, signed, mallory.identity.sign(DOMAIN + signed)


@pytest.mark.slow
async def test_a_lying_member_cannot_make_the_victim_skip_a_siblings_ops(tmp_path: Path) -> None:
    """Mallory relays a sibling's newest entry (genuine ops, the sibling's signatures) to the
    victim with a delta context claiming the sibling's seqs 1..top: the victim must still get
    the sibling's older entries, at the latest when it syncs with the sibling itself.

    `crdt.apply_delta` caps a relayed context row at the highest seq the victim has seen signed
    by that writer; but the liar just includes that op, so the cap is no protection."""
    clade = LoopbackClade(tmp_path, 2)
    victim, sibling = clade.golems
    mallory_dir = clade.add_golem("mallory")
    try:
        async with trio.open_nursery() as nursery:  # two daemons that do not know each other
            for golem in (victim, sibling):
                nursery.start_soon(trio.to_thread.run_sync,
                                   lambda g=golem: clade.start(g, bootstrap=[], env=VICTIM_ENV))
        written = [(await call(sibling, "POST", "/v1/memory", json={
            "content": f"Sibling's warning {i}: the oracle of pool {i} lags", "memory_type": "warning"}))["id"]
            for i in range(3)]
        mallory = Mallory(mallory_dir, victim)
        async with mallory.running():
            # Mallory relays no gossip (she is free not to): the victim hears of the sibling only from her.
            me = mallory.host.get_id()
            mallory.pubsub.set_topic_validator(mallory.topic, lambda _, msg: ID(msg.from_id) == me, False)
            await mallory.connect()
            await mallory.connect(sibling)
            ops, _ = await mallory.want(sibling)
            assert {op.entry_id for op in ops} == set(written)
            top = max(op.seq for op in ops)
            newest = tuple(op for op in ops if op.entry_id == written[-1])
            assert max(op.seq for op in newest) == top
            mallory.sync_reply = Mallory.answer(
                frame(messages.DeltaFrame(encode_delta(Delta(newest, CausalContext({sibling.peer_id: top}))))),
                frame(messages.End(False, CausalContext())))
            pulled = (await call(victim, "POST", "/v1/sync", json={"peer_id": mallory.me}))["synced"][0]
            assert pulled["applied"] == len(newest), pulled
            mallory.sync_reply = mallory.honest

            # The victim meets the sibling and pulls from it directly.
            await call(victim, "POST", "/v1/peers/connect", json={"addr": sibling.p2p_addrs[0]})

            async def siblings_meet() -> bool:
                return sibling.peer_id in await trio.to_thread.run_sync(victim.members_connected)

            await wait_until("the victim and the sibling connect", siblings_meet)
            synced: dict[str, Any] = {}

            async def pulled_from_sibling() -> bool:  # None while the sync after hello still runs
                nonlocal synced
                synced = (await call(victim, "POST", "/v1/sync", json={"peer_id": sibling.peer_id}))["synced"][0]
                return "error" not in synced

            await wait_until("the victim pulls from the sibling", pulled_from_sibling)
            protocols = {p["peer_id"]: p["sync_protocol"] for p in (await call(victim, "GET", "/v1/peers"))["peers"]}
            # two daemons of this version speak sync v3; mallory (a py-libp2p host that offers v1 only)
            # was pulled from on v1: what a clade mid-upgrade shows
            assert protocols[sibling.peer_id] == "/clade/sync/3.0.0", protocols
            assert protocols[mallory.me] == "/clade/sync/1.0.0", protocols
            have = set(await entries(victim))
        missing = [i for i, entry_id in enumerate(written) if entry_id not in have]
        assert not missing, (
            f"the victim lacks the sibling's entries {missing} even after syncing with the sibling itself "
            f"({synced}): mallory's delta context {{sibling: {top}}}, riding on the sibling's genuine ops "
            f"of seq {sorted(op.seq for op in newest)}, made it count the sibling's seqs 1..{top} as seen")
        assert victim.running and sibling.running
        assert not mallory.errors, mallory.errors
    finally:
        await trio.to_thread.run_sync(clade.close)


@pytest.mark.slow
async def test_a_member_cannot_grow_the_victims_peer_book_without_bound(tmp_path: Path) -> None:
    """Peer exchange: each hello may name 64 siblings, which the victim then dials. Mallory names
    fake ones (a closed port on loopback) in hello after hello: the victim's peer book, capped at
    `PeerBook.MAX_PEERS`, must stay within its cap (and the victim up)."""
    clade = LoopbackClade(tmp_path, 1)
    victim = clade.golems[0]
    mallory_dir = clade.add_golem("mallory")
    closed = socket.socket()  # bound, never listening: every dial to it is refused at once
    try:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        await trio.to_thread.run_sync(lambda: clade.start(victim, bootstrap=[], env=VICTIM_ENV))
        mallory = Mallory(mallory_dir, victim)
        async with mallory.running():
            await mallory.connect()
            hellos = PeerBook.MAX_PEERS // messages.MAX_SIBLINGS + 2
            for _ in range(hellos):
                fakes = tuple(f"/ip4/127.0.0.1/tcp/{port}/p2p/{Identity.generate().peer_id}"
                              for _ in range(messages.MAX_SIBLINGS))
                reply = await mallory.say_hello(mallory.hello(siblings=fakes))
                assert isinstance(reply, messages.Hello), reply  # she is a member: each hello is accepted
            peers = (await call(victim, "GET", "/v1/peers"))["peers"]
            status = await call(victim, "GET", "/v1/status")
        assert victim.running
        assert len(peers) <= PeerBook.MAX_PEERS, (
            f"{hellos} hellos of mallory's grew the victim's peer book to {len(peers)} records "
            f"(cap {PeerBook.MAX_PEERS}); it dials them all: dials_failed={status['counters'].get('dials_failed')}")
        assert not mallory.errors, mallory.errors
    finally:
        closed.close()
        await trio.to_thread.run_sync(clade.close)


@pytest.mark.slow
async def test_a_member_stalling_mid_round_holds_neither_the_writer_nor_the_deltas_it_sent(tmp_path: Path) -> None:
    """Mallory answers the victim's next pull with one good delta, then neither more nor the
    end. The victim joins that delta at once (its counter moves and the entry is readable
    while the round is still open), and its store's writer stays free meanwhile: a write
    through the API lands. Only then does Mallory end the round."""
    clade = LoopbackClade(tmp_path, 1)
    (victim,) = clade.golems
    mallory_dir = clade.add_golem("mallory")
    release, ended = trio.Event(), trio.Event()
    try:
        await trio.to_thread.run_sync(lambda: clade.start(victim, bootstrap=[], env=VICTIM_ENV))
        mallory = Mallory(mallory_dir, victim)
        body, ops = mallory.entry("Mallory's one honest warning: pool 7 drains at block 9")

        async def one_delta_then_wait(stream: INetStream) -> None:
            mallory.sync_reply = mallory.honest  # once: any later pull meets an honest Mallory
            assert isinstance(messages.decode(await read_frame(stream)), messages.Want)
            await stream.write(frame(messages.DeltaFrame(encode_delta(Delta(tuple(ops), CausalContext())))))
            await release.wait()
            await stream.write(frame(messages.End(False, CausalContext())))
            with contextlib.suppress(EOFError):
                await read_frame(stream)  # the victim closes its end
            ended.set()

        async with mallory.running():
            await mallory.connect()
            mallory.sync_reply = one_delta_then_wait  # the pulls after a new connection (2 s, 6 s) meet it

            async def joined() -> bool:
                return (await counters(victim))["sync_ops_applied"] == len(ops)

            await wait_until("the delta joined while its round is open", joined)
            assert (await call(victim, "GET", f"/v1/entries/{body.id}"))["content"] == body.content
            with trio.fail_after(WAIT_S):  # the writer is not waiting for Mallory's round
                mine = await call(victim, "POST", "/v1/memory", json={
                    "content": "written while a sibling's round is open", "memory_type": "insight"})
            assert not ended.is_set() and not release.is_set()  # the round was open all along
            release.set()
            with trio.fail_after(WAIT_S):
                await ended.wait()
            assert (await call(victim, "GET", f"/v1/entries/{mine['id']}"))["kind"] == "insight"
            assert (await counters(victim))["sync_ops_applied"] == len(ops)
        assert victim.running and not mallory.errors, mallory.errors
    finally:
        await trio.to_thread.run_sync(clade.close)
