"""Sync v2 (`/clade/sync/2.0.0`): contexts reconciled by their difference (`crdt.summary`),
driven by hand over in-memory replicas as in test_sync_state.py. The same exchanges converge
as on v1, the responder's context is rebuilt exactly on the asker, what crosses is what
differs, and a peer that breaks the reconciliation is refused. Real daemons speak v2 to each
other in every sync test; v1 is still served and pulled (test_p2p_hostile.py: its mallory
speaks v1 only)."""

from __future__ import annotations

import functools

import pytest

from crdt import CausalContext, RemoteProtocolError, apply_delta, decode_delta, encode_delta, extract_deltas
from crdt.summary import ROWS_AT_MOST, Tagged, bucket_count
from crypto import Identity, signature_ok
from daemon.p2p import messages
from daemon.p2p.errors import LocalProtocolError
from daemon.p2p.sync_state import PullPhase, PullState, ServePhase, ServeState, SummaryReceived, WantReceived
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.sync_sim import drive, replica_with


@functools.cache
def writers(n: int) -> tuple[SimReplica, ...]:
    """`n` golems that have each written one warning (cached: keys and signatures are slow)."""
    out = []
    for i in range(n):
        golem = SimReplica(Identity(i.to_bytes(2, "big") * 16))
        golem.create(f"warning {i}: the pool drains at dawn")
        out.append(golem)
    return tuple(out)


def holding(golems: tuple[SimReplica, ...] | list[SimReplica], *, me: int = 200) -> SimReplica:
    """A replica that has joined every op of `golems`."""
    replica = SimReplica(Identity(me.to_bytes(2, "big") * 16))
    for golem in golems:
        for delta in extract_deltas(golem.state, CausalContext()):
            data, _ = decode_delta(encode_delta(delta), signature_ok)
            apply_delta(replica.state, data)
    return replica


@pytest.mark.parametrize("n", [5, 30])
def test_a_small_context_crosses_whole_and_converges_in_one_round(n: int) -> None:
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(n)
    pull_state, serve_state = drive(asker, responder, version=2)
    assert asker.digest() == responder.digest()
    assert (pull_state.phase, pull_state.rounds, serve_state.rounds) == (PullPhase.DONE, 1, 1)
    assert pull_state.remote_context == responder.state.context and not pull_state.more


def test_a_large_backlog_takes_the_same_bounded_rounds_as_v1() -> None:
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(30)
    pull_state, serve_state = drive(asker, responder, max_ops=2, version=2)
    assert asker.digest() == responder.digest()
    assert pull_state.rounds == serve_state.rounds == 8 and pull_state.deltas == 31


def test_many_writers_are_reconciled_by_bucket_and_only_what_differs_crosses() -> None:
    """120 writers (buckets, not rows): the asker lacks three writers' newest ops and has one
    writer the responder lacks. The responder asks for the differing buckets only; the asker
    ends with everything, and knows the responder's context exactly (the writer it lacks, too)."""
    clade = writers(121)
    asker, responder = holding(clade[:117], me=201), holding(clade[:117], me=202)
    for golem in clade[117:120]:  # three writers' ops only the responder has
        for delta in extract_deltas(golem.state, CausalContext()):
            apply_delta(responder.state, delta)
    for delta in extract_deltas(clade[120].state, CausalContext()):  # one only the asker has
        apply_delta(asker.state, delta)
    assert len(asker.state.context.replicas()) > ROWS_AT_MOST
    v2_wire: list[int] = []
    pull_state, serve_state = drive(asker, responder, version=2, wire=v2_wire)
    assert set(responder.state.context.replicas()) <= set(asker.state.context.replicas())
    assert pull_state.remote_context == responder.state.context
    assert serve_state.want is not None and serve_state.want.vv(clade[118].peer_id) == 0

    again = holding(clade[:117], me=201)
    for delta in extract_deltas(clade[120].state, CausalContext()):
        apply_delta(again.state, delta)
    v1_wire: list[int] = []
    drive(again, responder, version=1, wire=v1_wire)
    assert again.digest() == asker.digest()
    # the deltas are the same; what is saved is the contexts: 121 rows each way on v1
    assert sum(v2_wire) < sum(v1_wire) - 10_000, (sum(v2_wire), sum(v1_wire))


def test_a_pull_between_equal_contexts_of_two_hundred_writers_costs_a_twentieth_of_v1() -> None:
    clade = writers(200)
    asker, responder = holding(clade, me=201), holding(clade, me=202)
    sizes = {}
    for version in (1, 2):
        wire: list[int] = []
        pull_state, _ = drive(asker, responder, version=version, wire=wire)
        assert pull_state.deltas == 0 and pull_state.remote_context == responder.state.context
        sizes[version] = sum(wire)
    assert sizes[2] * 20 < sizes[1], sizes
    assert sizes[2] < 10 * bucket_count(200) + 60  # the fingerprints (8 bytes and a 2-byte header each), an empty end


# -- a peer that breaks the reconciliation --------------------------------------------------


def bucket_want(n: int = 100) -> tuple[PullState, messages.WantSummary]:
    pull_state = PullState(version=2, nonces=lambda: b"\x07" * 8)
    pull_state.start(holding(writers(n)).state.context.copy())
    want = pull_state.next_message()
    assert isinstance(want, messages.WantSummary) and want.rows is None
    return pull_state, want


def test_the_asker_answers_one_ask_with_the_asked_buckets_rows_only() -> None:
    pull_state, want = bucket_want()
    assert pull_state.receive(messages.Ask((0, 3))) == []
    rows = pull_state.next_message()
    assert isinstance(rows, messages.Rows) and rows.rows
    buckets = len(want.fingerprints)
    sent = Tagged.of(holding(writers(100)).state.context, b"\x07" * 8)
    assert list(rows.rows) == sent.rows_in((0, 3), buckets)


@pytest.mark.parametrize(("first", "message"), [
    (messages.Ask((0,)), messages.Ask((1,))),  # a second ask in one round
    (None, messages.Ask((1 << 20,))),  # a bucket that does not exist
])
def test_the_asker_refuses_an_ask_out_of_turn(first: messages.Message | None, message: messages.Message) -> None:
    pull_state, _ = bucket_want()
    if first is not None:
        pull_state.receive(first)
    with pytest.raises(RemoteProtocolError) as caught:
        pull_state.receive(message)
    assert caught.value.reason == "malformed" and pull_state.phase is PullPhase.FAILED


def test_the_asker_refuses_an_ask_after_sending_its_rows_whole() -> None:
    pull_state = PullState(version=2)
    pull_state.start(replica_with(2).state.context.copy())
    assert isinstance(pull_state.next_message(), messages.WantSummary)
    with pytest.raises(RemoteProtocolError):
        pull_state.receive(messages.Ask((0,)))


def test_the_responder_refuses_rows_of_a_bucket_it_did_not_ask_for() -> None:
    asker_state, want = bucket_want()
    responder = holding(writers(100)[:90], me=202)
    serve_state = ServeState(version=2)
    assert serve_state.receive(want) == [SummaryReceived()]
    assert serve_state.reconcile(responder.state.context.copy()) == []
    ask = serve_state.next_message()
    assert isinstance(ask, messages.Ask) and ask.buckets
    asked = set(ask.buckets)
    everything = Tagged.of(asker_state.last_want or CausalContext(), b"\x07" * 8)
    extra = [row for row in everything.rows_in(None) if row not in everything.rows_in(asked, len(want.fingerprints))]
    assert extra, "every bucket differs: the test needs one that does not"
    with pytest.raises(RemoteProtocolError) as caught:
        serve_state.receive(messages.Rows((extra[0],)))
    assert caught.value.reason == "malformed" and serve_state.phase is ServePhase.FAILED


def test_the_responder_takes_only_a_v2_want_and_reconciles_only_when_asked() -> None:
    with pytest.raises(RemoteProtocolError):
        ServeState(version=2).receive(messages.Want(CausalContext()))
    with pytest.raises(LocalProtocolError):
        ServeState(version=2).reconcile(CausalContext())
    serve_state = ServeState(version=2)
    serve_state.receive(messages.WantSummary(b"\x01" * 8, rows=()))
    with pytest.raises(LocalProtocolError):  # the host must reconcile before reading more
        serve_state.receive(messages.WantSummary(b"\x01" * 8, rows=()))


def test_equal_buckets_skip_the_ask() -> None:
    _, want = bucket_want()
    serve_state = ServeState(version=2)
    serve_state.receive(want)
    events = serve_state.reconcile(holding(writers(100), me=202).state.context.copy())
    assert len(events) == 1 and isinstance(events[0], WantReceived)
    assert serve_state.next_message() is None  # no ask: the asker has exactly our context


@pytest.mark.parametrize(("body", "reason"), [
    (["clade.want", 1, []], "unknown_version"),  # a v1 want on a v2 stream
    (["clade.want", 2, b"\x00" * 7, "rows", []], "malformed"),  # a nonce of 7 bytes
    (["clade.want", 2, b"\x00" * 8, "buckets", [b"\x00" * 8] * 3], "malformed"),  # 3 buckets
    (["clade.want", 2, b"\x00" * 8, "rows", [[b"\x01" * 8, 1, []], [b"\x01" * 8, 2, []]]], "malformed"),
    (["clade.want", 2, b"\x00" * 8, "rows", [[b"\x01" * 8, 5, [3]]]], "malformed"),  # cloud below vv
    (["clade.want", 2, b"\x00" * 8, "rows", [["12D3KooWnot", 1, []]]], "malformed"),  # a name, not a tag
    (["clade.ask", 2, [1, 1]], "malformed"),
    (["clade.end", 2, False, [["not-a-peer-id", 1, []]]], "malformed"),
    (["clade.rows", 2, [[b"\x01" * 8, 0, list(range(1, 70_000))]]], "malformed"),  # msgpack's own array cap
])
def test_v2_messages_are_decoded_strictly(body: list[object], reason: str) -> None:
    import msgpack

    with pytest.raises(RemoteProtocolError) as caught:
        messages.decode(msgpack.packb(body, use_bin_type=True), messages.SYNC_V2)
    assert caught.value.reason == reason


def test_v2_messages_round_trip() -> None:
    peer = IDENTITIES[0].peer_id
    for message in (messages.WantSummary(b"\x01" * 8, rows=((b"\x02" * 8, 3, (5, 9)),)),
                    messages.WantSummary(b"\x01" * 8, fingerprints=(b"\x03" * 8,) * 4),
                    messages.Ask((0, 2)), messages.Rows(((b"\x02" * 8, 1, ()),)),
                    messages.EndDiff(True, ((peer, 4, ()), (b"\x02" * 8, 0, ()))),
                    messages.Refused("not_a_member", "say hello"), messages.DeltaFrame(b"x")):
        assert messages.decode(messages.encode(message, messages.SYNC_V2), messages.SYNC_V2) == message
