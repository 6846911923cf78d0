"""Two in-memory replicas syncing by hand (`PullState` / `ServeState`), for the anti-entropy
protocol's tests (tests/p2p/test_sync_state.py, test_sync_loops.py)."""

from __future__ import annotations

import itertools

import pytest

from crdt import CausalContext, Kind, encode_delta, extract_deltas
from daemon.p2p import messages
from daemon.p2p.errors import LocalProtocolError
from daemon.p2p.sync_state import (
    ROUND_DELTAS,
    Closed,
    DeltaArrived,
    PullPhase,
    PullState,
    RoundEnded,
    ServePhase,
    ServeState,
    SummaryReceived,
    WantReceived,
)
from tests.helpers.crdt_sim import IDENTITIES, SimReplica


def replica_with(n_entries: int, index: int = 0) -> SimReplica:
    replica = SimReplica(IDENTITIES[index])
    for i in range(n_entries):
        replica.create(f"warning {i} of replica {index}: the oracle lags", Kind.WARNING)
    return replica


def extract_round(responder: SimReplica, context: CausalContext, *, max_ops: int) -> tuple[list[bytes], bool]:
    """At most ROUND_DELTAS deltas for `context`, and whether there are more (as the daemon does)."""
    deltas = extract_deltas(responder.state, context, max_ops=max_ops)
    out = [encode_delta(d) for d in itertools.islice(deltas, ROUND_DELTAS + 1)]
    return out[:ROUND_DELTAS], len(out) > ROUND_DELTAS


def drive(asker: SimReplica, responder: SimReplica, *, max_ops: int = 4096, version: int = 1,
          wire: list[int] | None = None) -> tuple[PullState, ServeState]:
    """The whole exchange by hand, message by message, the way the docstring example does;
    `wire` collects each message's encoded size."""
    pull_state, serve_state = PullState(version=version), ServeState(version=version)
    pull_state.start(asker.state.context.copy())

    def sent(message: messages.Message) -> messages.Message:
        data = messages.encode(message, version)
        if wire is not None:
            wire.append(len(data))
        return messages.decode(data, version)  # what crosses is what the peer reads

    while not pull_state.done:
        while (message := pull_state.next_message()) is not None:
            events = serve_state.receive(sent(message))
            if any(isinstance(event, SummaryReceived) for event in events):
                events = serve_state.reconcile(responder.state.context.copy())
            for served in events:
                assert isinstance(served, WantReceived)
                deltas, more = extract_round(responder, served.context, max_ops=max_ops)
                serve_state.answer(deltas, more=more, context=responder.state.context.copy())
        while (message := serve_state.next_message()) is not None:
            for event in pull_state.receive(sent(message)):
                if isinstance(event, DeltaArrived):
                    assert not asker.receive(event.delta).rejected
                else:
                    assert isinstance(event, RoundEnded)
                    pull_state.round_applied(asker.state.context.copy())
    assert serve_state.receive_eof() == [Closed()]
    return pull_state, serve_state


def fails_for_good(state: PullState | ServeState) -> None:
    """After a protocol error the state is dead: any further input is a local misuse."""
    assert state.phase in (PullPhase.FAILED, ServePhase.FAILED)
    with pytest.raises(LocalProtocolError):
        state.receive(messages.End(False, CausalContext()))
    assert state.next_message() is None


END = messages.End(False, CausalContext())
MORE = messages.End(True, CausalContext())
WANT = messages.Want(CausalContext())
HELLO = messages.Hello("00" * 16, b"cert", b"", ())
REFUSED = messages.Refused("not_a_member", "say hello first")


# -- the documented example and honest exchanges ---------------------------------------------
