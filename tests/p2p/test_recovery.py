"""After the last fault the clade converges from the reconnection alone: both ends pull on
every (re)connection, a hold that expires is redialed at once, and a restarted sibling is
found where it is now. Anti-entropy's timer is set to an hour here, so nothing in these
tests can converge through it; each prints how long convergence took."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from daemon.testing.harness import Golem, LoopbackClade
from tests.helpers.clade import ids_on, write
from tests.helpers.polling import eventually

pytestmark = pytest.mark.slow
NO_TIMER = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}


def _clade(tmp_path: Path, n: int) -> LoopbackClade:
    clade = LoopbackClade(tmp_path, n)
    for golem in clade.golems:
        clade.start(golem, env=NO_TIMER)
    clade.wait_connected(clade.golems)
    return clade


def _everywhere(golems: list[Golem], ids: list[str], what: str) -> float:
    started = time.monotonic()
    eventually(lambda: all(set(ids) <= ids_on(g) for g in golems), timeout=30, what=what)
    took = time.monotonic() - started
    print(f"{what}: converged {took:.2f} s after the fault ended")
    return took


def test_a_hold_that_expires_heals_both_directions_without_the_timer(tmp_path: Path) -> None:
    clade = _clade(tmp_path, 2)
    a, b = clade.golems
    try:
        # Each side's first warning loads its embedding model (the repeat check): done before the
        # hold, so the writes during it take milliseconds, not the hold's whole length.
        warm = [write(a, "warm-up on a"), write(b, "warm-up on b")]
        _everywhere([a, b], warm, "the warm-up warnings")
        held_at = time.monotonic()
        a.call("POST", "/v1/peers/disconnect", json={"peer_id": b.peer_id, "hold_s": 8})
        eventually(lambda: not a.members_connected(), what="the partition")
        left = [write(a, f"left side warning {i}") for i in range(5)]
        right = [write(b, f"right side warning {i}") for i in range(5)]
        if time.monotonic() - held_at < 8:  # still held (a starved machine may outlast it): nothing crossed yet
            assert ids_on(a).isdisjoint(right) and ids_on(b).isdisjoint(left)
        # The hold ends by itself 8 s after it began: a redials b, and each side pulls the other.
        _everywhere([a, b], left + right, "an 8 s hold expiring")
    finally:
        clade.close()


def test_a_sibling_killed_and_restarted_on_a_new_port_converges_both_ways(tmp_path: Path) -> None:
    clade = _clade(tmp_path, 3)
    a, b, c = clade.golems
    try:
        b.stop(signal.SIGKILL)
        while_down = [write(a, f"written while b was down {i}") for i in range(5)]
        clade.start(b, bootstrap=[a], env=NO_TIMER)  # a new port: its siblings' peers.json is stale
        clade.wait_connected(clade.golems)
        after = [write(b, "b's first warning after the restart")]
        _everywhere([a, b, c], while_down + after, "b SIGKILLed and restarted")
    finally:
        clade.close()


def _synced_since(golem: Golem, other: Golem, ms: float) -> bool:
    record = next((p for p in golem.call("GET", "/v1/peers")["peers"] if p["peer_id"] == other.peer_id), None)
    return record is not None and (record["last_sync"] or 0) >= ms


def test_gossip_from_a_restarted_sibling_comes_back(tmp_path: Path) -> None:
    """B keeps A's old pubsub stream when A comes back before B noticed it die: B must drop it
    and open a new one, or A never learns B's subscription and its gossip never reaches B. And
    A published a burst before each stop: its next run's message ids must not be ones B has
    seen (py-libp2p's seqnos started at the time in seconds: B dropped them as seen)."""
    clade = _clade(tmp_path, 2)
    a, b = clade.golems
    try:
        for round_, how in enumerate((signal.SIGKILL, signal.SIGTERM, signal.SIGTERM)):
            for k in range(150):  # faster than one a second: the next run's seqnos must still be new to b
                a.call("POST", "/v1/p2p/probe", json={"id": f"burst {round_} {k}"})
            a.stop(how)  # a clean stop also PRUNEs b with a back-off: the new a must still be grafted
            restarted_ms = time.time() * 1000
            clade.start(a, bootstrap=[b], env=NO_TIMER)
            clade.wait_connected(clade.golems)
            # Both reconnection pulls are over: what arrives next can only come by gossip.
            eventually(lambda t=restarted_ms: _synced_since(b, a, t) and _synced_since(a, b, t),
                       what="the reconnection syncs")
            before = b.call("GET", "/v1/status")["counters"].get("gossip_accepted", 0)
            entry = write(a, f"a's warning after restart {round_}")
            _everywhere([b], [entry], f"restart {round_} ({how.name}): a's next write")
            assert b.call("GET", "/v1/status")["counters"].get("gossip_accepted", 0) > before  # by gossip
    finally:
        clade.close()
