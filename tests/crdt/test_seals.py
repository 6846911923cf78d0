"""Seals (crdt/seals.py): a writer's one signature over a block of its ops, and the codec's
version 2 that carries them. A sealed op is taken as signed without its own check; anything a
seal does not vouch for, exactly, is checked as before."""

from __future__ import annotations

import functools

import msgpack
import pytest

from crdt import CausalContext, Op, RemoteProtocolError, extract_deltas
from crdt.codec import MAX_SEALS, SEALED_VERSION, encode_delta, open_ops, unpack_delta
from crdt.replica import Delta
from crdt.seals import (
    BLOCK_OPS,
    EMPTY_LEAF,
    LEAF_BYTES,
    Seal,
    SealedOps,
    SealTally,
    block_of,
    block_seqs,
    decode_seals,
    leaf,
    make_seal,
    sealed_verifier,
)
from crypto import Identity, signature_ok
from tests.helpers.crdt_sim import IDENTITIES, CountingVerifier, SimReplica


@functools.cache
def _writer_ops() -> tuple[SimReplica, tuple[Op, ...]]:
    """A writer that has written 150 entries (300 ops: block 0 complete, block 1 partly)."""
    golem = SimReplica(IDENTITIES[0])
    ops: list[Op] = []
    for i in range(150):
        ops += golem.create(f"warning {i}: the pool drains at dawn")
    return golem, tuple(ops)


def _seal(block: int = 0, *, skip: frozenset[int] = frozenset()) -> Seal:
    golem, ops = _writer_ops()
    leaves = {op.seq: leaf(op.signed, op.signature) for op in ops if op.seq not in skip}
    return make_seal(golem.peer_id, block, leaves, golem.identity.sign)



def test_blocks_are_256_seqs_from_seq_one() -> None:
    assert (block_of(1), block_of(256), block_of(257)) == (0, 0, 1)
    assert list(block_seqs(1))[:2] == [257, 258] and len(block_seqs(1)) == BLOCK_OPS


def test_a_seal_checks_under_its_writer_only_and_not_once_changed() -> None:
    seal = _seal()
    assert seal.check(signature_ok)
    assert len(seal.leaves) == BLOCK_OPS * LEAF_BYTES
    other = IDENTITIES[1].peer_id
    assert not Seal(other, seal.block, seal.leaves, seal.signature).check(signature_ok)
    assert not Seal(seal.writer, 1, seal.leaves, seal.signature).check(signature_ok)
    flipped = bytes([seal.leaves[0] ^ 1]) + seal.leaves[1:]
    assert not Seal(seal.writer, seal.block, flipped, seal.signature).check(signature_ok)


def test_a_seq_the_writer_no_longer_holds_gets_an_empty_leaf_that_vouches_for_nothing() -> None:
    golem, ops = _writer_ops()
    seal = _seal(skip=frozenset({3}))
    assert seal.leaves[2 * LEAF_BYTES:3 * LEAF_BYTES] == EMPTY_LEAF
    sealed = SealedOps([seal])
    op3 = next(op for op in ops if op.seq == 3)
    op4 = next(op for op in ops if op.seq == 4)
    assert not sealed.covers(golem.peer_id, b"clade.op.v1\x00" + op3.signed, op3.signature)
    assert sealed.covers(golem.peer_id, b"clade.op.v1\x00" + op4.signed, op4.signature)


def test_ops_a_seal_covers_skip_their_own_check_and_every_other_op_is_checked() -> None:
    """Block 0 sealed: its 256 ops open with no signature check of their own; the 44 ops of
    block 1 (no seal) are each checked; a sealed op with one signature byte changed is no longer
    covered, is checked, and fails."""
    golem, ops = _writer_ops()
    raw = [(op.writer, op.signed, op.signature) for op in ops]
    counting = CountingVerifier()
    sealed, tally = SealedOps([_seal()]), SealTally()
    opened, refused = open_ops(raw, sealed_verifier(sealed, counting, tally))
    assert len(opened) == 300 and not refused
    assert counting.calls == 300 - BLOCK_OPS and tally.count == BLOCK_OPS
    forged = [(op.writer, op.signed, op.signature[:-1] + bytes([op.signature[-1] ^ 1])) for op in ops[:1]]
    opened, refused = open_ops(forged, sealed_verifier(sealed, counting))
    assert not opened and refused == [(golem.peer_id, "bad_signature")]


def test_another_writers_seal_vouches_for_nothing() -> None:
    _, ops = _writer_ops()
    seal = _seal()
    mallory = Identity(b"\x42" * 32)
    stolen = make_seal(mallory.peer_id, 0, {i + 1: seal.leaves[i * 16:(i + 1) * 16] for i in range(BLOCK_OPS)},
                       mallory.sign)
    assert stolen.check(signature_ok)  # a seal of Mallory's own, over another writer's leaves
    counting = CountingVerifier()
    opened, _ = open_ops([(op.writer, op.signed, op.signature) for op in ops[:10]],
                         sealed_verifier(SealedOps([stolen]), counting))
    assert len(opened) == 10 and counting.calls == 10  # each checked under its real writer


def test_a_sealed_delta_round_trips_and_only_a_v3_reader_takes_it() -> None:
    golem, _ = _writer_ops()
    (delta,) = list(extract_deltas(golem.state, CausalContext()))
    seal = _seal()
    data = encode_delta(delta, [seal])
    packed = unpack_delta(data, sealed=True)
    assert packed.seals == [seal] and len(packed.raw_ops) == len(delta.ops)
    assert packed.context == delta.context
    with pytest.raises(RemoteProtocolError) as refused:
        unpack_delta(data)
    assert refused.value.reason == "unknown_version"
    assert unpack_delta(encode_delta(delta), sealed=True).seals == []  # version 1 still read
    only_seals = unpack_delta(encode_delta(Delta((), CausalContext()), [seal]), sealed=True)
    assert only_seals.seals == [seal] and not only_seals.raw_ops


def _sealed_group(seals: object, writer: object = None) -> bytes:
    golem, _ = _writer_ops()
    return msgpack.packb([SEALED_VERSION, [[writer or golem.peer_id, [], seals]], []], use_bin_type=True)


@pytest.mark.parametrize("seals", [
    "not a list",
    [[0, b"x" * 4096]],  # two fields
    [[-1, b"x" * 4096, b"s" * 64]],
    [[0, b"x" * 4095, b"s" * 64]],
    [[0, b"x" * 4096, b"s" * 63]],
    [[0, b"x" * 4096, b"s" * 64], [0, b"y" * 4096, b"s" * 64]],  # a block twice
    [[i, b"x" * 4096, b"s" * 64] for i in range(MAX_SEALS + 1)],
])
def test_malformed_seals_refuse_the_delta(seals: object) -> None:
    with pytest.raises(RemoteProtocolError) as refused:
        unpack_delta(_sealed_group(seals), sealed=True)
    assert refused.value.reason in ("malformed", "oversized")


def test_a_seal_of_a_writer_that_is_no_peer_id_refuses_the_delta() -> None:
    with pytest.raises(RemoteProtocolError):
        unpack_delta(_sealed_group([], writer="not-a-peer"), sealed=True)
    with pytest.raises(RemoteProtocolError):
        decode_seals("x", [[0, b"x" * 4096, b"s" * 64]] * 2, limit=10)
