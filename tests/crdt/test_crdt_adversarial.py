"""Forged, replayed and malformed input: rejected with its reason, state unchanged."""

from __future__ import annotations

import msgpack
import pytest

from crdt import (
    AuthorValue,
    CausalContext,
    Delta,
    EndorseValue,
    EntryBody,
    Kind,
    RemoteProtocolError,
    Sensitivity,
    SlotKind,
    Timestamp,
    decode_delta,
    encode_delta,
    extract_deltas,
    make_op,
    open_op,
)
from crdt.ops import DOMAIN
from crypto import signature_ok
from tests.helpers.crdt_sim import IDENTITIES, SimReplica, gossip, sync

A, B, C = IDENTITIES[0], IDENTITIES[1], IDENTITIES[2]


@pytest.fixture
def pair() -> tuple[SimReplica, SimReplica, str]:
    """Replica a with one warning, replica b in sync with it."""
    a, b = SimReplica(A), SimReplica(B)
    entry = a.create("Curve pool imbalance above 70% precedes depegs", Kind.WARNING)[0].entry_id
    sync(a, b)
    return a, b, entry


def raw_message(ops: list[tuple[str, bytes, bytes]], context: list | None = None) -> bytes:
    return msgpack.packb([1, [[w, [[s, sig]]] for w, s, sig in ops], context or []], use_bin_type=True)


def refused(replica: SimReplica, message: bytes) -> dict[str, int]:
    before = replica.digest()
    report = replica.receive(message)
    assert replica.digest() == before, "a refused op changed the state"
    assert report.applied == 0
    return dict(report.rejected)


def test_op_signed_by_someone_else_is_rejected(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, entry = pair
    body = b.body(entry)
    forged = make_op(writer=a.peer_id, seq=99, hlc=Timestamp(2_000_000), entry_id=entry, slot=SlotKind.AUTHOR,
                     value=AuthorValue(confidence=0.01), sign=C.sign)  # C signs, claims to be A
    assert refused(b, raw_message([(forged.writer, forged.signed, forged.signature)])) == {"bad_signature": 1}
    assert body.author == a.peer_id


def test_author_slot_written_by_non_author_is_rejected(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, entry = pair
    c = SimReplica(C)
    sync(a, c)
    forged = make_op(writer=c.peer_id, seq=1, hlc=Timestamp(2_000_000), entry_id=entry, slot=SlotKind.AUTHOR,
                     value=AuthorValue(confidence=0.0), sign=C.sign)  # validly signed by C, not the author
    assert refused(b, gossip([forged])) == {"forbidden_slot": 1}
    assert b.author_value(entry).confidence == 0.7


def test_self_endorsement_is_rejected(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, entry = pair
    forged = make_op(writer=a.peer_id, seq=50, hlc=Timestamp(2_000_000), entry_id=entry, slot=SlotKind.ENDORSE,
                     value=EndorseValue(confirms=100), sign=A.sign)
    assert refused(b, gossip([forged])) == {"forbidden_slot": 1}


def test_tampered_value_fails_signature(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, entry = pair
    op = a.set_confidence(entry, 0.9)[0]
    tampered = op.signed.replace(msgpack.packb(0.9), msgpack.packb(0.1))
    assert tampered != op.signed
    assert refused(b, raw_message([(op.writer, tampered, op.signature)])) == {"bad_signature": 1}
    flipped = bytes([op.signature[0] ^ 1]) + op.signature[1:]
    assert refused(b, raw_message([(op.writer, op.signed, flipped)])) == {"bad_signature": 1}


def test_body_that_does_not_hash_to_its_id_is_rejected(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, _ = pair
    body = EntryBody(author=a.peer_id, kind=Kind.WARNING, content="real", created=Timestamp(5))
    other = EntryBody(author=a.peer_id, kind=Kind.WARNING, content="swapped", created=Timestamp(5))
    # validly signed by the author, but the id names another body
    signed = msgpack.packb([1, 77, Timestamp(5).pack(), bytes.fromhex(body.id), 0, other.to_wire()],
                           use_bin_type=True)
    message = raw_message([(a.peer_id, signed, A.sign(DOMAIN + signed))])
    assert refused(b, message) == {"invalid": 1}
    with pytest.raises(RemoteProtocolError, match="hashes to"):
        open_op(a.peer_id, signed, A.sign(DOMAIN + signed), signature_ok)


def test_body_written_by_non_author_is_rejected(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, _ = pair
    body = EntryBody(author=a.peer_id, kind=Kind.WARNING, content="mine", created=Timestamp(5))
    signed = msgpack.packb([1, 3, Timestamp(5).pack(), bytes.fromhex(body.id), 0, body.to_wire()],
                           use_bin_type=True)
    assert refused(b, raw_message([(C.peer_id, signed, C.sign(DOMAIN + signed))])) == {"invalid": 1}


def test_replayed_ops_change_nothing(pair: tuple[SimReplica, SimReplica, str]) -> None:
    a, b, entry = pair
    message = gossip(a.set_confidence(entry, 0.2))
    assert b.receive(message).applied == 1
    before = b.digest()
    for _ in range(3):
        report = b.receive(message)
        assert (report.applied, report.duplicate) == (0, 1)
    assert b.digest() == before
    # an old op replayed after a newer one: its dot is known, the slot keeps the newer value
    old = gossip(a.set_confidence(entry, 0.3))
    b.receive(gossip(a.set_confidence(entry, 0.4)))
    b.receive(old)
    b.receive(old)
    assert b.author_value(entry).confidence == 0.4


def test_equivocation_is_detected() -> None:
    a, b = SimReplica(A), SimReplica(B)
    ops = a.create("first", Kind.WARNING)
    b.receive(gossip(ops))
    twin = make_op(writer=a.peer_id, seq=ops[1].seq, hlc=ops[1].hlc, entry_id=ops[1].entry_id,
                   slot=SlotKind.AUTHOR, value=AuthorValue(confidence=0.0), sign=A.sign)
    assert refused(b, gossip([twin])) == {"equivocation": 1}


def test_orphan_op_is_refused_until_its_body_arrives() -> None:
    a, b = SimReplica(A), SimReplica(B)
    create = a.create("orphan test", Kind.WARNING)
    update = a.set_confidence(create[0].entry_id, 0.95)
    assert refused(b, gossip(update)) == {"orphan": 1}
    assert b.state.context.size() == 0  # the orphan's dot was not marked as seen
    sync(a, b)
    assert b.digest() == a.digest() and b.author_value(create[0].entry_id).confidence == 0.95


def test_peer_cannot_claim_dots_nobody_signed() -> None:
    """A lying context (vv far beyond any signed op) is clamped to what was shown."""
    a, b = SimReplica(A), SimReplica(B)
    a.create("one", Kind.WARNING)
    lie = Delta((), CausalContext({a.peer_id: 10**9, C.peer_id: 500}))
    b.receive(encode_delta(lie))
    assert b.state.context.vv(a.peer_id) == 0 and b.state.context.vv(C.peer_id) == 0
    sync(a, b)
    assert b.digest() == a.digest()


def test_cut_short_sync_never_claims_missing_ops() -> None:
    """Deliver only the first delta of a multi-delta sync: whatever b claims, it holds."""
    a, b = SimReplica(A), SimReplica(B)
    for i in range(20):
        a.create(f"entry {i}", Kind.INSIGHT)
    c = SimReplica(C)
    for i in range(5):
        c.create(f"c entry {i}", Kind.FACT)
    sync(c, a)
    first = next(extract_deltas(a.state, b.state.context.copy(), max_ops=7))
    b.receive(encode_delta(first))
    held = {op.dot for op in b.state.ops()}
    for writer in b.state.context.replicas():
        for seq in b.state.context.dots(writer):
            from crdt import Dot
            assert Dot(writer, seq) in held
    sync(a, b)
    assert b.digest() == a.digest()


def test_private_entries_never_leave_but_dots_are_covered() -> None:
    a, b = SimReplica(A), SimReplica(B)
    a.create("my private position sizing", Kind.INSIGHT, sensitivity=Sensitivity.PRIVATE)
    a.create("sensitive", Kind.FACT, sensitivity=Sensitivity.SENSITIVE)
    a.create("never crosses", Kind.STRATEGY_OUTCOME)
    public = a.create("public warning", Kind.WARNING)
    sync(a, b)
    contents = {b.body(op.entry_id).content for op in b.state.ops()}
    assert contents == {"public warning"}
    assert b.state.context.vv(a.peer_id) == a.seq  # private seqs covered: nothing to wait for
    assert public[0].entry_id in {op.entry_id for op in b.state.ops()}
    assert sync(a, b) == (0, 0)


def test_gossiped_private_op_is_not_relayed() -> None:
    """Even if a private op reaches a sibling (a bug elsewhere), anti-entropy will not relay it."""
    a, b, c = SimReplica(A), SimReplica(B), SimReplica(C)
    b.receive(gossip(a.create("leaked", Kind.INSIGHT, sensitivity=Sensitivity.PRIVATE)))
    sync(b, c)
    assert c.state.ops() == []


def test_decode_unknown_version_and_caps() -> None:
    with pytest.raises(RemoteProtocolError, match="unknown_version"):
        decode_delta(msgpack.packb([2, [], []]), signature_ok)
    with pytest.raises(RemoteProtocolError, match="oversized"):
        decode_delta(b"\x00" * (1024 * 1024 + 1), signature_ok)
    big = msgpack.packb([1, [[A.peer_id, [[b"x", b"y"]] * 4097]], []], use_bin_type=True)
    with pytest.raises(RemoteProtocolError, match="oversized"):
        decode_delta(big, signature_ok)
    huge_op = msgpack.packb([1, [[A.peer_id, [[b"x" * 9000, b"y" * 64]]]], []], use_bin_type=True)
    _, rejected = decode_delta(huge_op, signature_ok)
    assert rejected == {"oversized": 1}
    with pytest.raises(RemoteProtocolError, match="malformed"):
        decode_delta(msgpack.packb({"a": 1}), signature_ok)
    with pytest.raises(RemoteProtocolError, match="malformed"):
        decode_delta(msgpack.packb([1, [], [[A.peer_id, 3, [2]]]]), signature_ok)
    with pytest.raises(RemoteProtocolError, match="malformed"):
        decode_delta(msgpack.packb([1, [], []]) + b"\x00", signature_ok)
