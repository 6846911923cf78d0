"""The evidence slot (crdt.EvidenceValue): one per (entry, writer), counts only grow, and the
join of replicas that saw the slot's versions in any order, any number of times, is the same
and covers every version any of them saw (commutative, idempotent, grows only)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crdt import (
    EvidenceValue,
    InvalidValue,
    Kind,
    MemoryBackend,
    RemoteProtocolError,
    SlotKind,
    apply_op,
    join,
    open_op,
)
from crypto import signature_ok
from tests.helpers.crdt_sim import IDENTITIES, SimReplica


def _tally(state: MemoryBackend, entry_id: str, writer: str) -> EvidenceValue | None:
    op = state.slot((entry_id, int(SlotKind.EVIDENCE), writer))
    return None if op is None else op.value  # type: ignore[return-value]


def test_any_writer_the_author_included_keeps_one_growing_tally_per_entry() -> None:
    author, other = SimReplica(IDENTITIES[0]), SimReplica(IDENTITIES[1])
    (body_op, _) = author.create("Curve's 3pool slippage doubles after large liquidations", Kind.INSIGHT, 0.7)
    entry = body_op.entry_id
    author.evidence(entry, True)  # an author may report outcomes on its own entry (unlike endorsing it)
    other.state = join(other.state, author.state)
    other.evidence(entry, False)
    other.evidence(entry, False)
    (op,) = other.evidence(entry, True)
    assert _tally(other.state, entry, other.peer_id) == EvidenceValue(positive=1, negative=2)
    assert _tally(other.state, entry, author.peer_id) == EvidenceValue(positive=1, negative=0)
    opened = open_op(op.writer, op.signed, op.signature, signature_ok)  # the wire form: counts only
    assert opened.slot is SlotKind.EVIDENCE and opened.value == EvidenceValue(positive=1, negative=2)


def test_a_malformed_tally_is_refused_on_the_wire() -> None:
    with pytest.raises(InvalidValue):
        EvidenceValue(positive=-1, negative=0)
    with pytest.raises(InvalidValue):
        EvidenceValue(positive=True, negative=0)  # type: ignore[arg-type]
    replica = SimReplica(IDENTITIES[0])
    (body_op, _) = replica.create("x" * 10, Kind.INSIGHT, 0.5)
    (op,) = replica.evidence(body_op.entry_id, True)
    forged = op.signed.replace(b"\x92\x01\x00", b"\x93\x01\x00\x00")  # [1, 0] -> [1, 0, 0]: no longer signed
    with pytest.raises(RemoteProtocolError):
        open_op(op.writer, forged, op.signature, signature_ok)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), outcomes=st.lists(st.booleans(), min_size=1, max_size=12),
       copies=st.integers(1, 3))
def test_versions_merge_commutatively_idempotently_and_only_grow(seed: int, outcomes: list[bool],
                                                                  copies: int) -> None:
    rng = random.Random(seed)
    writer = SimReplica(IDENTITIES[2])
    (body_op, author_op) = writer.create("Aave v3 utilisation leads borrow rate spikes", Kind.INSIGHT, 0.6)
    versions = [writer.evidence(body_op.entry_id, o)[0] for o in outcomes]
    for a, b in itertools.pairwise(versions):
        assert b.value.covers(a.value)  # type: ignore[union-attr]  # each version grows on the last
    finals = []
    for _ in range(3):  # three receivers, each sees the versions in its own order, some more than once
        state = MemoryBackend()
        apply_op(state, body_op)
        apply_op(state, author_op)
        arrivals = versions * copies
        rng.shuffle(arrivals)
        for op in arrivals:
            apply_op(state, op)
        tally = _tally(state, body_op.entry_id, writer.peer_id)
        assert tally is not None and all(tally.covers(v.value) for v in versions)  # type: ignore[arg-type]
        finals.append(tally)
    last = versions[-1].value
    assert finals == [last] * 3
    assert last == EvidenceValue(positive=sum(outcomes), negative=len(outcomes) - sum(outcomes))


def test_an_evidence_op_carries_the_day_not_the_moment() -> None:
    """The time of an outcome is soma: the op says on which UTC day the tally moved, no finer;
    the slot still merges by seq (a later op of the same day supersedes an earlier one)."""
    day = 86_400_000
    replica = SimReplica(IDENTITIES[0], wall=20_000 * day + 13 * 3_600_000 + 4_321)  # 13:00:04.321 on a day
    (body_op, _) = replica.create("Aave borrow rates double after governance votes", Kind.INSIGHT, 0.7)
    (first,) = replica.evidence(body_op.entry_id, False)
    replica.wall += 5 * 3_600_000
    (second,) = replica.evidence(body_op.entry_id, True)
    assert body_op.hlc.ms % day != 0  # the body keeps its time …
    for op in (first, second):
        opened = open_op(op.writer, op.signed, op.signature, signature_ok)
        assert opened.hlc.ms == 20_000 * day and opened.hlc.counter == 0  # … the evidence only its day
    assert second.seq > first.seq
    other = SimReplica(IDENTITIES[1])
    other.state = join(other.state, replica.state)
    assert _tally(other.state, body_op.entry_id, replica.peer_id) == EvidenceValue(positive=1, negative=1)
