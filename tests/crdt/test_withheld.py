"""Withheld dots (`crdt.withheld`): a writer's gossip declares the seqs it will never send, so
siblings' contexts close over them without a direct pull, while a crossing op lost in gossip
is never covered by any declaration and still comes by anti-entropy, from any sibling.

The writer and the receivers run the same steps as the daemon (`p2p.broadcast`): publish the
ops of `(since, top]` that pass the gate with `withheld_seqs` as the message's context; join
a message's ops plus `declared_withheld` of its sender's row. Every random choice comes from
Hypothesis, so a failing schedule shrinks.
"""

from __future__ import annotations

import random

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crdt import CausalContext, Delta, Dot, Kind, MemoryBackend, Op, Sensitivity, apply_delta, may_cross
from crdt.codec import decode_delta, encode_delta
from crdt.replica import extract_deltas, sendable
from crdt.withheld import declared_withheld, gap, withheld_context, withheld_seqs
from crypto import signature_ok
from tests.helpers.crdt_sim import IDENTITIES, SimReplica

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RANDOMS = st.randoms(use_true_random=False)


class Publisher:
    """The writer's side of `Broadcast._publish_new`, over a `SimReplica`."""

    def __init__(self, writer: SimReplica) -> None:
        self.writer = writer
        self.since = 0

    def publish(self) -> bytes | None:
        state, me = self.writer.state, self.writer.peer_id
        top = state.context.top(me)
        if top <= self.since:
            return None
        ops = [op for op in state.ops() if op.writer == me and op.seq > self.since
               and (body := state.body(op.entry_id)) is not None and may_cross(body)]
        withheld = withheld_seqs(self.since, top, (op.seq for op in ops))
        self.since = top
        return encode_delta(Delta(tuple(ops), withheld_context(me, withheld)))


def receive(state: MemoryBackend, sender: str, data: bytes) -> None:
    """The receiver's side of `Broadcast._applier` for one message."""
    delta, rejected = decode_delta(data, signature_ok)
    assert not rejected
    declared = declared_withheld(delta.context, sender, delta.ops)
    assert declared is not None
    apply_delta(state, Delta(delta.ops, CausalContext()), withheld=declared)


def write(rng: random.Random, writer: SimReplica, n: int) -> None:
    """A random local write: a public or private entry, or a confidence change (supersedes)."""
    own = sorted({op.entry_id for op in writer.state.ops()})
    choice = rng.random()
    if choice < 0.35 or not own:
        writer.create(f"public {n}", Kind.INSIGHT)
    elif choice < 0.55:
        writer.create(f"private {n}", Kind.INSIGHT, sensitivity=Sensitivity.PRIVATE)
    elif choice < 0.65:
        writer.create(f"preference {n}", Kind.PREFERENCE)  # never crosses, whatever its sensitivity
    else:
        writer.set_confidence(rng.choice(own), round(rng.random(), 3))


def crossing(state: MemoryBackend, writer: str) -> list[Op]:
    return [op for op in state.ops() if op.writer == writer
            and (body := state.body(op.entry_id)) is not None and may_cross(body)]


@SETTINGS
@given(rng=RANDOMS, steps=st.integers(1, 60), loss=st.sampled_from([0.0, 0.3, 0.7]))
def test_a_lost_crossing_op_is_never_covered_and_anti_entropy_still_brings_it(
        rng: random.Random, steps: int, loss: float) -> None:
    writer, lossy, relay = (SimReplica(IDENTITIES[i]) for i in range(3))
    me = writer.peer_id
    publisher = Publisher(writer)
    for n in range(steps):
        write(rng, writer, n)
        if rng.random() < 0.5:
            message = publisher.publish()
            if message is not None:
                receive(relay.state, me, message)  # the relay hears everything
                if rng.random() >= loss:
                    receive(lossy.state, me, message)
        # safety, at every step: a crossing op the lossy receiver lacks has its dot uncovered
        held = set(lossy.state.ops())
        for op in crossing(writer.state, me):
            if op.seq <= publisher.since and op not in held:
                assert op.dot not in lossy.state.context, f"lost op {op.dot} marked seen"
    message = publisher.publish()
    if message is not None:
        receive(relay.state, me, message)
    # the relay, which lost nothing, has seen every dot of the writer: no pull from it needed
    assert relay.state.context.restricted([me]) == writer.state.context.restricted([me])
    assert set(relay.state.ops()) == set(crossing(writer.state, me))
    # anti-entropy from the relay (whose row for the writer is not merged: it is not the writer)
    for delta in extract_deltas(relay.state, lossy.state.context.copy()):
        apply_delta(lossy.state, delta, sender=relay.peer_id)
    assert set(crossing(lossy.state, me)) == set(crossing(writer.state, me))


@SETTINGS
@given(rng=RANDOMS, steps=st.integers(1, 40))
def test_without_loss_the_row_closes_and_only_withheld_dots_differ_never_missing_ops(
        rng: random.Random, steps: int) -> None:
    writer, sibling = SimReplica(IDENTITIES[0]), SimReplica(IDENTITIES[1])
    me = writer.peer_id
    publisher = Publisher(writer)
    for n in range(steps):
        write(rng, writer, n)
    # Before the declaration (an old writer's gossip: ops only), the sibling's row has gaps,
    # and `gap` reads them as withheld, not as missing ops: nothing left to send either way.
    message = publisher.publish()
    assert message is not None
    delta, _ = decode_delta(message, signature_ok)
    apply_delta(sibling.state, Delta(delta.ops, CausalContext()))
    figures = gap(sibling.state.context, writer.state.context, complete=True, refused=0,
                  sendable=sendable(sibling.state, writer.state.context))
    private = writer.state.context.size() - len(delta.ops)
    assert (figures.behind, figures.ahead, figures.withheld) == (0, 0, private)
    reverse = gap(writer.state.context, sibling.state.context, complete=True, refused=0,
                  sendable=sendable(writer.state, sibling.state.context, gate=may_cross))
    assert (reverse.behind, reverse.ahead, reverse.withheld) == (0, 0, private)
    # With it, the row closes: contexts equal, no dot withheld any more.
    receive(sibling.state, me, message)
    assert sibling.state.context == writer.state.context
    assert gap(sibling.state.context, writer.state.context, complete=True, refused=0, sendable=0).withheld == 0


def test_a_declaration_is_the_senders_own_row_and_never_covers_its_messages_ops() -> None:
    writer, other = SimReplica(IDENTITIES[0]), SimReplica(IDENTITIES[1])
    ops = writer.create("public", Kind.INSIGHT)  # seqs 1, 2
    assert withheld_seqs(0, 5, (op.seq for op in ops)) == [3, 4, 5]
    row = withheld_context(writer.peer_id, [3, 4, 5])
    assert row.to_rows() == [(writer.peer_id, 0, [3, 4, 5])]
    assert withheld_context(writer.peer_id, [1, 2, 4]).to_rows() == [(writer.peer_id, 2, [4])]
    # another writer's row in the message is ignored: a relay may not speak for it
    mixed = CausalContext(cloud={writer.peer_id: [3], other.peer_id: [1, 2]})
    declared = declared_withheld(mixed, writer.peer_id, ops)
    assert declared is not None and declared.replicas() == [writer.peer_id]
    # a declaration covering an op of the same message is refused whole (the op may be refused)
    assert declared_withheld(withheld_context(writer.peer_id, [2, 3]), writer.peer_id, ops) is None
    # joined: the declared dots are seen, counted; a huge claimed vv costs nothing to merge
    state = MemoryBackend()
    report = apply_delta(state, Delta(tuple(ops), CausalContext()), withheld=row)
    assert report.withheld == 3 and state.context.vv(writer.peer_id) == 5
    big = declared_withheld(CausalContext({writer.peer_id: 1 << 40}), writer.peer_id, ())
    assert big is not None and big.vv(writer.peer_id) == 1 << 40
    assert Dot(writer.peer_id, 1) in big


def test_a_declaration_rides_in_the_delta_context_field_unchanged_version_one() -> None:
    """The wire: `[1, groups, [[sender, vv, [seq, …]]]]`, which any decoder of version 1 reads
    (a golem from before declarations decodes the row and joins the ops alone)."""
    writer = SimReplica(IDENTITIES[0])
    ops = writer.create("public", Kind.INSIGHT)
    data = encode_delta(Delta((), withheld_context(writer.peer_id, [3, 4, 5])))
    assert msgpack.unpackb(data) == [1, [], [[writer.peer_id, 0, [3, 4, 5]]]]
    delta, rejected = decode_delta(encode_delta(Delta(tuple(ops), withheld_context(writer.peer_id, [3]))),
                                   signature_ok)
    assert not rejected and delta.ops == tuple(ops) and delta.context.to_rows() == [(writer.peer_id, 0, [3])]
    old = MemoryBackend()  # the old applier: ops only, the context field ignored
    apply_delta(old, Delta(delta.ops, CausalContext()))
    assert old.context.vv(writer.peer_id) == 2 and not old.context.cloud(writer.peer_id)


def test_gap_counts_refused_ops_as_behind_and_an_incomplete_pull_as_all_behind() -> None:
    remote = CausalContext({"a": 10})
    local = CausalContext({"a": 4})
    assert gap(local, remote, complete=True, refused=2, sendable=0) == gap(local, remote, complete=True, refused=2,
                                                                         sendable=5)
    figures = gap(local, remote, complete=True, refused=2, sendable=0)
    assert (figures.behind, figures.ahead, figures.withheld) == (2, 0, 4)
    cut = gap(local, remote, complete=False, refused=0, sendable=0)
    assert (cut.behind, cut.withheld) == (6, 0)
    ours = gap(remote, local, complete=True, refused=0, sendable=3)
    assert (ours.behind, ours.ahead, ours.withheld) == (0, 3, 3)
