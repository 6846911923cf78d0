"""Sync v3 (`/clade/sync/3.0.0`): v2 whose deltas carry seals (crdt/seals.py) and whose first
want names the writers whose seals the asker lacks. Messages and states driven by hand; real
daemons speak v3 to each other in every sync test (tests/p2p/test_p2p_sync.py counts the
sealed ops of a catch-up), and v1/v2 are still served (test_p2p_hostile.py)."""

from __future__ import annotations

import msgpack
import pytest

from crdt import CausalContext, RemoteProtocolError
from daemon.p2p import messages
from daemon.p2p.errors import LocalProtocolError
from daemon.p2p.sync_state import ROUND_DELTAS, PullState, ServeState, WantReceived
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.sync_sim import drive, replica_with

PEER = IDENTITIES[0].peer_id
OTHER = IDENTITIES[1].peer_id


def test_v3_wants_round_trip_with_their_seal_asks() -> None:
    for message in (messages.WantSummary(b"\x01" * 8, rows=((b"\x02" * 8, 3, (5, 9)),), seal_asks=((PEER, 0),)),
                    messages.WantSummary(b"\x01" * 8, fingerprints=(b"\x03" * 8,) * 4,
                                         seal_asks=((PEER, 2), (OTHER, 7))),
                    messages.WantSummary(b"\x01" * 8, rows=())):
        assert messages.decode(messages.encode(message, messages.SYNC_V3), messages.SYNC_V3) == message
    assert messages.decode(messages.encode(messages.Ask((0,)), messages.SYNC_V3), messages.SYNC_V3) \
        == messages.Ask((0,))


@pytest.mark.parametrize("body", [
    ["clade.want", 3, b"\x00" * 8, "rows", []],  # a v2-shaped want on a v3 stream
    ["clade.want", 3, b"\x00" * 8, "rows", [], "not a list"],
    ["clade.want", 3, b"\x00" * 8, "rows", [], [[PEER, -1]]],
    ["clade.want", 3, b"\x00" * 8, "rows", [], [[PEER, 0, 1]]],
    ["clade.want", 3, b"\x00" * 8, "rows", [], [["not-a-peer-id", 0]]],
    ["clade.want", 3, b"\x00" * 8, "rows", [], [[PEER, 0], [PEER, 3]]],  # a writer twice
    ["clade.want", 3, b"\x00" * 8, "rows", [], [[PEER, i] for i in range(messages.MAX_SEAL_ASKS + 1)]],
])
def test_v3_wants_are_decoded_strictly(body: list[object]) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        messages.decode(msgpack.packb(body, use_bin_type=True), messages.SYNC_V3)
    assert caught.value.reason == "malformed"


def test_a_v2_stream_never_carries_seal_asks() -> None:
    with pytest.raises(LocalProtocolError):
        PullState(version=2, seal_asks=((PEER, 0),))
    v3_want = msgpack.packb(["clade.want", 3, b"\x00" * 8, "rows", [], []], use_bin_type=True)
    with pytest.raises(RemoteProtocolError) as caught:
        messages.decode(v3_want, messages.SYNC_V2)
    assert caught.value.reason == "unknown_version"


def test_the_seal_asks_go_with_the_first_want_only_and_reach_the_host() -> None:
    pull, serve = PullState(version=3, seal_asks=((PEER, 1),)), ServeState(version=3)
    pull.start(CausalContext())
    first = pull.next_message()
    assert isinstance(first, messages.WantSummary) and first.seal_asks == ((PEER, 1),)
    (event,) = serve.reconcile(CausalContext()) if serve.receive(first) else []
    assert isinstance(event, WantReceived) and event.seal_asks == ((PEER, 1),)
    serve.answer([b"d"] * (ROUND_DELTAS + 1), more=True, context=CausalContext())  # the seals' delta too
    while (message := serve.next_message()) is not None:
        pull.receive(message)
    pull.round_applied(CausalContext())
    second = pull.next_message()
    assert isinstance(second, messages.WantSummary) and second.seal_asks == ()


def test_a_round_holds_one_delta_more_on_v3_and_no_more() -> None:
    for version, cap in ((2, ROUND_DELTAS), (3, ROUND_DELTAS + 1)):
        pull = PullState(version=version)
        pull.start(CausalContext())
        pull.next_message()
        for _ in range(cap):
            pull.receive(messages.DeltaFrame(b"d"))
        with pytest.raises(RemoteProtocolError) as caught:
            pull.receive(messages.DeltaFrame(b"d"))
        assert caught.value.reason == "oversized"
        serve = ServeState(version=version)
        serve.receive(messages.WantSummary(b"\x01" * 8, rows=()))
        serve.reconcile(CausalContext())
        with pytest.raises(LocalProtocolError):
            serve.answer([b"d"] * (cap + 1), more=False, context=CausalContext())


@pytest.mark.parametrize("n", [5, 30])
def test_v3_converges_as_v2_does(n: int) -> None:
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(n)
    pull_state, serve_state = drive(asker, responder, version=3)
    assert asker.digest() == responder.digest()
    assert (pull_state.rounds, serve_state.rounds) == (1, 1)
