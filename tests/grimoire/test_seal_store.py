"""Seals on disk (daemon/grimoire/seal_store.py): a golem seals each block of its own ops in the
write that completes it, over the ops it still holds; a sibling keeps the seals that come with
a delta and serves them on; catch-up through `ingest.apply_frames` checks one signature per
sealed block and joins exactly what it joins without seals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crdt import CausalContext, Kind, SlotKind
from crdt.codec import encode_delta
from crdt.seals import BLOCK_OPS, EMPTY_LEAF, LEAF_BYTES, leaf
from crypto import Identity, signature_ok
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.ingest import apply_frames
from daemon.grimoire.seal_store import SEAL_ASKS
from tests.helpers.crdt_sim import IDENTITIES, CountingVerifier
from tests.helpers.seed import seed

WRITER, RELAY, ASKER = IDENTITIES[0], IDENTITIES[1], IDENTITIES[2]


def _news(n: int, start: int = 0) -> list[NewEntry]:
    return [NewEntry(kind=Kind.INSIGHT, content=f"insight {i}: the pool drains at dawn on tuesdays")
            for i in range(start, start + n)]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Grimoire, Grimoire, Grimoire]]:
    opened = [Grimoire.open(tmp_path / f"{name}.db", create=True) for name in ("writer", "relay", "asker")]
    yield opened[0], opened[1], opened[2]
    for store in opened:
        store.close()



def _seals(store: Grimoire, writer: Identity) -> list[int]:
    return [s.block for s in store.seals_after([(writer.peer_id, 0)], limit=100)]


def test_the_write_that_completes_a_block_seals_it_over_the_ops_still_held(stores: tuple[Grimoire, ...]) -> None:
    writer = stores[0]
    first = seed(writer, _news(100), identity=WRITER)  # 200 ops: block 0 not complete
    assert _seals(writer, WRITER) == []
    writer.set_confidence(first[0].id, 0.9, identity=WRITER)  # seq 201; seq 2 (its author slot) is gone
    seed(writer, _news(28, 100), identity=WRITER)  # seqs 202 … 257: block 0 complete
    (seal,) = writer.seals_after([(WRITER.peer_id, 0)], limit=100)
    assert seal.block == 0 and seal.check(signature_ok)
    assert seal.leaves[LEAF_BYTES:2 * LEAF_BYTES] == EMPTY_LEAF  # seq 2 was written again
    held = {op.seq: op for delta in writer.iter_deltas(CausalContext()) for op in delta.ops}
    assert seal.leaves[:LEAF_BYTES] == leaf(held[1].signed, held[1].signature)
    assert sum(seal.leaves[i:i + LEAF_BYTES] != EMPTY_LEAF for i in range(0, len(seal.leaves), LEAF_BYTES)) == 255


def test_catch_up_checks_a_signature_a_sealed_block_and_serves_the_seals_on(stores: tuple[Grimoire, ...]) -> None:
    """The writer's 600 ops (blocks 0 and 1 sealed) reach a relay by catch-up with seals: 88
    checks of their own plus 2 seals instead of 600. The relay keeps the seals and serves them
    with the same ops to a third golem, which ends with what the writer has."""
    writer, relay, asker = stores
    seed(writer, _news(300), identity=WRITER)
    assert _seals(writer, WRITER) == [0, 1]

    def frames(source: Grimoire, to: Grimoire) -> list[bytes]:
        return [encode_delta(d, source.seals_covering(d.ops, limit=32))
                for d in source.iter_deltas(to.causal_context())]

    counting = CountingVerifier()
    reports = apply_frames(relay, frames(writer, relay), counting, local_replica=RELAY.peer_id, sealed=True)
    assert sum(r.report.applied for r in reports) == 600 and not any(r.report.rejected for r in reports)
    assert sum(r.sealed_ops for r in reports) == 2 * BLOCK_OPS
    assert counting.calls == 600 - 2 * BLOCK_OPS + 2
    assert _seals(relay, WRITER) == [0, 1]

    counting = CountingVerifier()
    apply_frames(asker, frames(relay, asker), counting, local_replica=ASKER.peer_id, sealed=True)
    assert counting.calls == 600 - 2 * BLOCK_OPS + 2
    assert asker.state_digest() == writer.state_digest()


def test_a_seal_goes_once_a_round_and_vouches_for_the_rounds_later_deltas(stores: tuple[Grimoire, ...]) -> None:
    """A writer's bodies are extracted before its other ops, so a round brings each block in two
    deltas: the responder sends each seal with the first (as `CatchUp._extract` does) and the
    asker's round keeps it for the second."""
    writer, relay, _ = stores
    seed(writer, _news(300), identity=WRITER)
    sent: set[tuple[str, int]] = set()
    frames: list[bytes] = []
    deltas = list(writer.iter_deltas(relay.causal_context(), max_ops=300))
    assert len(deltas) >= 2
    for delta in deltas:
        seals = writer.seals_covering(delta.ops, limit=32, sent=sent)
        sent.update((s.writer, s.block) for s in seals)
        frames.append(encode_delta(delta, seals))
    counting = CountingVerifier()
    reports = apply_frames(relay, frames, counting, local_replica=RELAY.peer_id, sealed=True)
    assert [r.seals for r in reports][:2] == [2, 0] and sum(r.seals for r in reports) == 2
    assert sum(r.sealed_ops for r in reports) == 2 * BLOCK_OPS
    assert counting.calls == 600 - 2 * BLOCK_OPS + 2
    assert relay.state_digest() == writer.state_digest()


def test_a_forged_op_under_a_seal_is_refused_and_the_rest_joins(stores: tuple[Grimoire, ...]) -> None:
    writer, relay, _ = stores
    seed(writer, _news(130), identity=WRITER)
    (delta,) = list(writer.iter_deltas(relay.causal_context()))
    seals = writer.seals_covering(delta.ops, limit=32)
    data = bytearray(encode_delta(delta, seals))
    victim = next(op for op in delta.ops if op.slot is SlotKind.AUTHOR).signature  # a body's would orphan it
    at = bytes(data).index(victim)
    data[at] ^= 1  # one op's signature changed in flight: its leaf no longer matches
    (report,) = apply_frames(relay, [bytes(data)], signature_ok, local_replica=RELAY.peer_id, sealed=True)
    assert report.report.rejected == {"bad_signature": 1}
    assert report.report.applied == len(delta.ops) - 1


def test_a_bad_seal_is_counted_and_its_ops_are_checked_one_by_one(stores: tuple[Grimoire, ...]) -> None:
    writer, relay, _ = stores
    seed(writer, _news(130), identity=WRITER)
    (delta,) = list(writer.iter_deltas(relay.causal_context()))
    (seal,) = writer.seals_covering(delta.ops, limit=32)
    forged = type(seal)(seal.writer, seal.block, seal.leaves, bytes(64))
    counting = CountingVerifier()
    (report,) = apply_frames(relay, [encode_delta(delta, [forged])], counting, local_replica=RELAY.peer_id,
                             sealed=True)
    assert report.report.rejected == {"bad_seal": 1} and report.report.applied == len(delta.ops)
    assert counting.calls == len(delta.ops) + 1 and report.sealed_ops == 0
    assert _seals(relay, WRITER) == []


def test_seal_asks_name_writers_with_complete_unsealed_blocks_and_are_answered(stores: tuple[Grimoire, ...]
                                                                              ) -> None:
    """A relay that holds the writer's ops without their seals (they came by gossip) asks for
    them; the writer's answer is the seals from the asked block on; a writer asked in vain at
    that many blocks is skipped; our own writes are never asked for."""
    writer, relay, _ = stores
    seed(writer, _news(300), identity=WRITER)
    seed(relay, _news(200), identity=RELAY)  # the relay's own block 0: sealed by itself, never asked
    for delta in writer.iter_deltas(relay.causal_context()):
        relay.apply_delta(delta, local_replica=RELAY.peer_id)  # as gossip brings them: no seal
    assert relay.seal_asks(RELAY.peer_id, lambda *_: False) == [(WRITER.peer_id, 0, 2)]
    assert relay.seal_asks(RELAY.peer_id, lambda w, complete: complete == 2) == []
    answer = writer.seals_after([(WRITER.peer_id, 1)], limit=10)
    assert [s.block for s in answer] == [1]
    relay.join_delta(CausalContext(), [], seals=writer.seals_after([(WRITER.peer_id, 0)], limit=10))
    assert relay.seal_asks(RELAY.peer_id, lambda *_: False) == []
    assert SEAL_ASKS <= 64  # a want carries at most messages.MAX_SEAL_ASKS
