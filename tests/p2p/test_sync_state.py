"""The anti-entropy protocol without a network: `PullState` / `ServeState` driven by hand over
two in-memory replicas (`MemoryBackend`), hostile and out-of-order messages. The trio loops of
`daemon.p2p.sync` over in-memory streams: test_sync_loops.py.

Every test that expects a refusal first shows the same exchange working, or checks that the
refusal left the state unusable and the asker's store untouched: a refusal cannot pass
because nothing arrived.
"""

from __future__ import annotations

import doctest
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import daemon.p2p.sync_state
from crdt import CausalContext, RemoteProtocolError, encode_delta, extract_deltas
from daemon.p2p import messages
from daemon.p2p.errors import LocalProtocolError
from daemon.p2p.sync_state import (
    ROUND_DELTAS,
    STALL_ROUNDS,
    Closed,
    DeltaArrived,
    PeerRefused,
    PullPhase,
    PullState,
    RoundEnded,
    ServePhase,
    ServeState,
    WantReceived,
)
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.sync_sim import END, HELLO, MORE, REFUSED, WANT, drive, fails_for_good, replica_with


def test_the_module_docstring_example_runs() -> None:
    result = doctest.testmod(daemon.p2p.sync_state)
    assert result.attempted >= 10 and result.failed == 0, result


def test_two_replicas_converge_in_one_round_when_everything_fits() -> None:
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(5)
    pull_state, serve_state = drive(asker, responder)
    assert asker.digest() == responder.digest()
    assert (pull_state.phase, pull_state.rounds, serve_state.rounds) == (PullPhase.DONE, 1, 1)
    assert pull_state.remote_context == responder.state.context and not pull_state.more


def test_a_large_backlog_takes_several_bounded_rounds() -> None:
    # 30 entries = 60 ops, 2 per delta, plus the writer's context row alone: 31 deltas, 4 per round -> 8 rounds.
    asker, responder = SimReplica(IDENTITIES[1]), replica_with(30)
    pull_state, serve_state = drive(asker, responder, max_ops=2)
    assert asker.digest() == responder.digest()
    assert pull_state.rounds == serve_state.rounds == 8
    assert pull_state.deltas == serve_state.deltas == 31


def test_up_to_date_replicas_exchange_one_empty_round() -> None:
    asker, responder = replica_with(3), replica_with(3)
    assert asker.digest() == responder.digest()
    pull_state, serve_state = drive(asker, responder)
    assert (pull_state.rounds, pull_state.deltas, serve_state.deltas) == (1, 0, 0)


def test_a_refusal_ends_the_pull_with_an_event() -> None:
    state = PullState()
    state.start(CausalContext())
    assert state.next_message() == messages.Want(CausalContext())
    assert state.receive(REFUSED) == [PeerRefused(reason="not_a_member", detail="say hello first")]
    assert state.done and state.phase is PullPhase.REFUSED and state.next_message() is None


# -- the asker facing a hostile responder ------------------------------------------------------


@pytest.mark.parametrize("message", [WANT, HELLO], ids=["want", "hello"])
def test_pull_refuses_a_message_that_is_not_a_reply(message: messages.Message) -> None:
    state = PullState()
    state.start(CausalContext())
    state.receive(messages.DeltaFrame(b"first"))  # a delta is a fine start of a round
    with pytest.raises(RemoteProtocolError) as caught:
        state.receive(message)
    assert caught.value.reason == "malformed"
    fails_for_good(state)


def test_pull_refuses_a_round_of_more_than_round_deltas() -> None:
    state = PullState()
    state.start(CausalContext())
    for i in range(ROUND_DELTAS):  # the most a round may bring: accepted
        assert state.receive(messages.DeltaFrame(bytes([i]))) == [DeltaArrived(bytes([i]))]
    with pytest.raises(RemoteProtocolError) as caught:
        state.receive(messages.DeltaFrame(b"one too many"))
    assert caught.value.reason == "oversized"
    fails_for_good(state)


def test_pull_gives_up_on_a_responder_that_says_more_and_brings_nothing() -> None:
    state = PullState()
    context = CausalContext()
    state.start(context)
    wants = 0
    with pytest.raises(RemoteProtocolError) as caught:
        while True:
            assert isinstance(state.next_message(), messages.Want)
            wants += 1
            assert state.receive(MORE) == [RoundEnded(deltas=0, more=True, context=CausalContext())]
            state.round_applied(context)
    assert caught.value.reason == "stalled"
    assert wants == STALL_ROUNDS == state.rounds
    fails_for_good(state)


def test_pull_keeps_going_while_the_rounds_bring_something() -> None:
    responder = replica_with(STALL_ROUNDS + 2)
    asker = SimReplica(IDENTITIES[1])
    state = PullState()
    state.start(asker.state.context.copy())
    deltas = [d for d in extract_deltas(responder.state, CausalContext(), max_ops=2) if d.ops]
    for delta in deltas:  # two ops per round, each round says "more"
        assert isinstance(state.next_message(), messages.Want)
        arrived, ended = state.receive(messages.DeltaFrame(encode_delta(delta))) + state.receive(MORE)
        assert isinstance(arrived, DeltaArrived) and ended == RoundEnded(deltas=1, more=True, context=CausalContext())
        asker.receive(arrived.delta)
        state.round_applied(asker.state.context.copy())
    assert state.stalled == 0 and state.rounds == STALL_ROUNDS + 2 and not state.done


def test_each_delta_is_handed_over_as_it_arrives_and_the_end_counts_them() -> None:
    responder = replica_with(2)
    state = PullState()
    state.start(CausalContext())
    (delta,) = extract_deltas(responder.state, CausalContext())
    data = encode_delta(delta)
    assert state.receive(messages.DeltaFrame(data)) == [DeltaArrived(data)]  # join it now, before the end
    assert state.phase is PullPhase.AWAITING and state.round_deltas == 1
    assert state.receive(END) == [RoundEnded(deltas=1, more=False, context=CausalContext())]
    assert state.phase is PullPhase.APPLYING and state.deltas == 1


def _applying() -> PullState:
    state = PullState()
    state.start(CausalContext())
    state.receive(MORE)
    return state


def _awaiting() -> PullState:
    state = PullState()
    state.start(CausalContext())
    return state


@pytest.mark.parametrize(("make", "misuse"), [
    (PullState, lambda s: s.receive(END)),  # nothing was asked yet
    (PullState, lambda s: s.round_applied(CausalContext())),  # no round to apply
    (_awaiting, lambda s: s.start(CausalContext())),  # started twice
    (_applying, lambda s: s.receive(END)),  # the round is being applied: no reply is due
], ids=["receive-before-start", "applied-before-a-round", "start-twice", "receive-while-applying"])
def test_pull_calls_out_of_turn_are_local_errors_and_fail_the_state(
        make: Callable[[], PullState], misuse: Callable[[PullState], object]) -> None:
    """h11's contract: a LocalProtocolError moves the state to FAILED, like a remote one."""
    state = make()
    with pytest.raises(LocalProtocolError):
        misuse(state)
    assert state.done
    fails_for_good(state)
    with pytest.raises(LocalProtocolError):
        state.round_applied(CausalContext())


# -- the responder facing a hostile asker -----------------------------------------------------


@pytest.mark.parametrize("message", [END, messages.DeltaFrame(b"x"), REFUSED, HELLO],
                         ids=["end", "delta", "refused", "hello"])
def test_serve_refuses_anything_but_a_want(message: messages.Message) -> None:
    state = ServeState()
    assert state.receive(WANT) == [WantReceived(context=CausalContext())]
    state.answer([], more=False, context=CausalContext())
    with pytest.raises(RemoteProtocolError) as caught:
        state.receive(message)
    assert caught.value.reason == "malformed"
    assert state.next_message() is None  # the answer to the good want was dropped with the stream
    fails_for_good(state)


def _extracting() -> ServeState:
    state = ServeState()
    state.receive(WANT)
    return state


def _closed() -> ServeState:
    state = ServeState()
    state.receive_eof()
    return state


@pytest.mark.parametrize(("make", "misuse"), [
    (ServeState, lambda s: s.answer([], more=False, context=CausalContext())),  # no want yet
    (ServeState, lambda s: s.send_delta(b"d")),  # no want yet
    (_extracting, lambda s: s.receive(WANT)),  # the pending want is not answered yet
    (_extracting, lambda s: s.answer([b"d"] * (ROUND_DELTAS + 1), more=True, context=CausalContext())),
    (_closed, lambda s: s.receive(WANT)),  # the asker already closed its end
], ids=["answer-before-a-want", "delta-before-a-want", "want-while-extracting", "oversized-answer",
        "want-after-eof"])
def test_serve_calls_out_of_turn_are_local_errors_and_fail_the_state(
        make: Callable[[], ServeState], misuse: Callable[[ServeState], object]) -> None:
    state = make()
    with pytest.raises(LocalProtocolError):
        misuse(state)
    assert state.closed
    fails_for_good(state)
    with pytest.raises(LocalProtocolError):
        state.answer([], more=False, context=CausalContext())


def test_serve_answers_a_full_round_then_closes() -> None:
    state = _extracting()
    state.answer([b"d"] * ROUND_DELTAS, more=True, context=CausalContext())
    assert [type(m) for m in iter(state.next_message, None)] == [messages.DeltaFrame] * ROUND_DELTAS + [messages.End]
    assert state.receive_eof() == [Closed()]
    assert state.phase is ServePhase.CLOSED


ANY_MESSAGE = st.sampled_from([END, MORE, WANT, HELLO, REFUSED, messages.DeltaFrame(b"d"),
                               messages.Want(CausalContext({IDENTITIES[0].peer_id: 3}))])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ANY_MESSAGE, st.sampled_from(["receive", "applied", "answer", "eof"])), max_size=30))
def test_only_the_two_protocol_errors_ever_escape(steps: list[tuple[messages.Message, str]]) -> None:
    """Any sequence of messages and host calls, in any order: the states raise only
    `RemoteProtocolError` or `LocalProtocolError`, and once failed they stay failed."""
    pull_state, serve_state = PullState(), ServeState()
    pull_state.start(CausalContext())
    for message, call in steps:
        for state in (pull_state, serve_state):
            was_failed = state.phase in (PullPhase.FAILED, ServePhase.FAILED)
            try:
                if call == "receive":
                    state.receive(message)
                elif call == "applied" and isinstance(state, PullState):
                    state.round_applied(CausalContext())
                elif call == "answer" and isinstance(state, ServeState):
                    state.answer([b"d"], more=True, context=CausalContext())
                elif call == "eof" and isinstance(state, ServeState):
                    state.receive_eof()
            except (RemoteProtocolError, LocalProtocolError):
                assert state.phase in (PullPhase.FAILED, ServePhase.FAILED)  # either error fails it
            if was_failed:
                assert state.phase in (PullPhase.FAILED, ServePhase.FAILED)
