"""The bounded neighbourhood with real daemons: six `clade run` on 127.0.0.1, each keeping 2
siblings connected (cap 4) and swapping one every 5 s, all bootstrapped from the first (which
trims its inbound to the cap): every golem stays within the cap, rotation happens, and every
warning reaches every golem. And two golems that dial each other at once settle on one
connection, with gossip flowing both ways over it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from daemon.testing.harness import Golem, LoopbackClade
from tests.helpers.clade import ids_on, write
from tests.helpers.polling import eventually

pytestmark = pytest.mark.slow

ENV = {"CLADE_P2P__NEIGHBOURS": "2", "CLADE_P2P__ROTATE_S": "5", "CLADE_P2P__SYNC_INTERVAL_S": "2"}


def counters(golem: Golem) -> dict[str, int]:
    return dict(golem.call("GET", "/v1/status")["counters"])


def test_six_daemons_with_two_neighbours_stay_within_the_cap_rotate_and_converge(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 6)
    try:
        first = clade.start(clade.golems[0], env=ENV)
        for golem in clade.golems[1:]:
            clade.start(golem, bootstrap=[first], env=ENV)
        eventually(lambda: all(g.members_connected() for g in clade.golems), what="every golem has a neighbour",
                   timeout=60, state=lambda: {g.name: len(g.members_connected()) for g in clade.golems})
        ids = {write(golem, f"gas above {80 + i} gwei on chain {i}: delay swaps") for i, golem in
               enumerate(clade.golems)}
        sizes: list[int] = []

        def everywhere() -> bool:
            sizes.extend(len(g.members_connected()) for g in clade.golems)
            return all(ids <= ids_on(g) for g in clade.golems)

        eventually(everywhere, what="every warning on every golem", timeout=90,
                   state=lambda: {g.name: len(ids & ids_on(g)) for g in clade.golems})
        eventually(lambda: sum(counters(g).get("neighbours_rotated", 0) for g in clade.golems) >= 3,
                   what="rotations", timeout=60)
        # The cap, 4 (not the 5 siblings each): an inbound connection beyond it lives only until the
        # dialer's next pass, so a poll seldom sees it.
        assert max(sizes) <= 5 and sum(s > 4 for s in sizes) <= len(sizes) // 10, sizes
        assert sum(counters(g).get("neighbours_trimmed", 0) for g in clade.golems) >= 1  # the first: 5 inbound
    finally:
        clade.close()


def peer_row(golem: Golem, other: Golem) -> dict[str, Any]:
    return next((p for p in golem.call("GET", "/v1/peers")["peers"] if p["peer_id"] == other.peer_id), {})


def connect_at_once(pair: list[Golem]) -> None:
    """Each golem of `pair` told to dial the other at the same moment (two threads at a barrier)."""
    barrier = threading.Barrier(2)

    def connect(golem: Golem, other: Golem) -> None:
        barrier.wait()
        golem.call("POST", "/v1/peers/connect", json={"addr": other.p2p_addrs[0]})

    threads = [threading.Thread(target=connect, args=(g, o)) for g, o in (pair, pair[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_two_golems_that_dial_each_other_at_once_keep_one_connection_and_gossip_both_ways_over_it(
        tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 2)
    env = {"CLADE_P2P__SYNC_INTERVAL_S": "600"}  # what arrives below came by gossip, or by a pull we count
    try:
        first = clade.start(clade.golems[0], env=env)
        clade.start(clade.golems[1], bootstrap=[first], env=env)
        pair = sorted(clade.golems, key=lambda g: g.peer_id)  # the first closes the duplicate
        eventually(lambda: all(peer_row(g, o).get("member") for g, o in (pair, pair[::-1])), what="members")
        for _attempt in range(3):  # a simultaneous dial makes two connections nearly always; not by rule
            for golem, other in (pair, pair[::-1]):
                golem.call("POST", "/v1/peers/disconnect", json={"peer_id": other.peer_id, "hold_s": 600})
            eventually(lambda: not any(peer_row(g, o).get("connected") for g, o in (pair, pair[::-1])),
                       what="held apart")
            closed = counters(pair[0]).get("duplicate_connections_closed", 0)
            connect_at_once(pair)
            try:  # closed after 10 s (dialing.FRESH_S)
                eventually(lambda closed=closed: counters(pair[0]).get("duplicate_connections_closed", 0) > closed,
                           what="the duplicate closed", timeout=25)
                break
            except AssertionError:
                continue
        else:
            raise AssertionError("three simultaneous dials made no duplicate connection")
        eventually(lambda: [peer_row(g, o).get("connections") for g, o in (pair, pair[::-1])] == [1, 1],
                   what="one connection each end", state=lambda: [peer_row(g, o) for g, o in (pair, pair[::-1])])
        assert counters(pair[1]).get("duplicate_connections_closed", 0) == 0  # the other end never closes one
        # After the regreet's pulls (at once, 2 s and 6 s: admission.SETTLE_PULLS_S), a write on
        # each side arrives by gossip: neither stream was left on the closed connection.
        pulls = counters(pair[0]).get("sync_pulls", 0)
        eventually(lambda: counters(pair[0]).get("sync_pulls", 0) >= pulls + 2, what="the regreet's pulls", timeout=20)
        before = [counters(g).get("gossip_ops_applied", 0) for g in pair]
        ids = [write(g, f"regime shift seen by {g.name}: funding on venue {i} flips", kind="regime_shift")
               for i, g in enumerate(pair)]
        eventually(lambda: ids[0] in ids_on(pair[1]) and ids[1] in ids_on(pair[0]), what="both writes crossed",
                   timeout=20, state=lambda: {"crossed": [ids[0] in ids_on(pair[1]), ids[1] in ids_on(pair[0])],
                                              **{g.name: {k: v for k, v in counters(g).items() if "gossip" in k}
                                                 for g in pair}})
        assert [counters(g).get("gossip_ops_applied", 0) > b for g, b in zip(pair, before, strict=True)] == [True, True]
        assert [peer_row(g, o)["connections"] for g, o in (pair, pair[::-1])] == [1, 1]
    finally:
        clade.close()
