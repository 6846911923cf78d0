"""Withheld dots end to end (`crdt.withheld`): real `clade run` daemons on 127.0.0.1.

A golem's private ops take seqs its siblings never get ops for. Its gossip declares them, so
a sibling's context closes over them without pulling from it; and where they still differ
(dots from before the writer's gossip started), `GET /v1/peers` reads them as `withheld`, not
as ops `behind` or `ahead`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crdt import Kind
from daemon.grimoire import Grimoire, NewEntry
from daemon.testing.harness import Golem, LoopbackClade
from tests.helpers.clade import write
from tests.helpers.polling import eventually
from tests.helpers.seed import seed

pytestmark = pytest.mark.slow

NO_TIMER = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}  # no anti-entropy but on connection and when asked


def counter(golem: Golem, name: str) -> int:
    return int(golem.call("GET", "/v1/status")["counters"].get(name, 0))


def context_digest(golem: Golem) -> str:
    return str(golem.call("GET", "/v1/state-digest")["context"])


def record(golem: Golem, peer: Golem) -> dict[str, Any]:
    return next(p for p in golem.peers() if p["peer_id"] == peer.peer_id)


def test_private_writes_close_siblings_contexts_by_gossip_and_read_as_withheld_not_lag(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 3)
    a, b, c = clade.golems
    try:
        # a's private insights from before it ever ran: no gossip of a's declares them.
        with Grimoire.open(a.data.db_path) as store:
            seed(store, [NewEntry(kind=Kind.INSIGHT, content=f"a's private insight {i}") for i in range(3)],
                 identity=a.data.load_identity())
            a_dots = store.local_top(a.peer_id)
        assert a_dots >= 6
        clade.start(a, env=NO_TIMER)
        clade.start(b, bootstrap=[a], env=NO_TIMER)
        clade.wait_connected([a, b])
        # b's pull from a on connecting covers a's row (a serves its own context)
        eventually(lambda: context_digest(a) == context_digest(b), what="b's context covers a's private dots")
        a.stop()
        clade.start(c, bootstrap=[b], env=NO_TIMER)
        clade.wait_connected([b, c])
        # c never met a: a's dots differ between b and c, but no op is missing either way.
        eventually(lambda: record(c, b)["behind"] is not None and record(b, c)["behind"] is not None,
                   what="b and c pulled from each other")
        for mine, theirs in ((c, b), (b, c)):
            position = record(mine, theirs)
            assert (position["behind"], position["ahead"], position["withheld"]) == (0, 0, a_dots), position
        assert b.call("GET", "/v1/state-digest")["shared"] == c.call("GET", "/v1/state-digest")["shared"]
        assert context_digest(b) != context_digest(c)

        # The pulls on connecting are done (one, then one per SETTLE_PULLS_S): from here on,
        # with the timer at an hour, nothing pulls from b unless asked.
        eventually(lambda: counter(c, "sync_pulls") >= 3 and counter(b, "sync_pulls") >= 3,
                   what="the settle pulls", timeout=30)
        served, pulled = counter(b, "sync_rounds_served"), counter(c, "sync_pulls")
        closed_before = counter(c, "gossip_withheld_dots")
        for i in range(3):
            write(b, f"b's private insight {i}", "insight", confidence=0.8)
        marker = write(b, "marker: b's warning after its private insights")
        eventually(lambda: marker in {e["id"] for e in c.call("GET", "/v1/entries")["entries"]},
                   what="b's warning on c")
        # c's context covers b's private dots too, by b's gossip alone: no pull from b was served.
        eventually(lambda: counter(c, "gossip_withheld_dots") - closed_before >= 6, what="b's declaration on c")
        assert counter(b, "sync_rounds_served") == served and counter(c, "sync_pulls") == pulled
        assert b.call("GET", "/v1/state-digest")["shared"] == c.call("GET", "/v1/state-digest")["shared"]
        c.stop()
        b.stop()
        with Grimoire.open(b.data.db_path) as store:
            b_row = store.causal_context().restricted([b.peer_id])
        with Grimoire.open(c.data.db_path) as store:
            c_row = store.causal_context().restricted([b.peer_id])
        assert c_row == b_row and not c_row.cloud(b.peer_id), (c_row, b_row)
    finally:
        clade.close()
