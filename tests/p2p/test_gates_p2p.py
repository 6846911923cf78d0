"""Crossing holds end to end, on real daemons talking libp2p on 127.0.0.1: a warning repeating one
gossiped within a day stays home, an inherited entry is not relayed until it is validated here,
and then reaches the sibling re-authored by its heir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crdt import Kind
from daemon.grimoire import NewEntry, wall_clock_ms
from daemon.grimoire.curator.bequest import inherit, successor_document
from daemon.testing.harness import EventLog, Golem, LoopbackClade
from tests.helpers.seed import seed_one

pytestmark = pytest.mark.slow

PRIOR = "Euler v2 vaults on Arbitrum pause withdrawals for 30 minutes after an oracle update"


def write(golem: Golem, content: str, kind: str = "warning", **extra: object) -> dict[str, object]:
    return dict(golem.call("POST", "/v1/memory", json={"content": content, "memory_type": kind, **extra})["entry"])


def ids_on(golem: Golem) -> set[str]:
    return {e["id"] for e in golem.call("GET", "/v1/entries", params={"limit": 10_000, "archived": True})["entries"]}


@pytest.fixture
def clade(tmp_path: Path) -> Iterator[tuple[LoopbackClade, str]]:
    """Two golems; golem 0 inherited a dead sibling's insight before its first start."""
    clade = LoopbackClade(tmp_path, 2)
    dead = clade.add_golem("dead")  # a member of the clade that never runs here
    dead_identity = dead.data.load_identity()
    joined = dead.data.load_membership()
    assert joined is not None
    clade_id = joined[0].clade_id
    with dead.data.open_store(identity=dead_identity) as store:
        prior = seed_one(store, NewEntry(kind=Kind.INSIGHT, content=PRIOR, confidence=0.8), identity=dead_identity).id
        doc = successor_document(store, golem=dead.peer_id, clade_id=clade_id, now_ms=wall_clock_ms())
    heir = clade.golems[0]
    with heir.data.open_store() as store:
        inherit(store, doc, clade_id=clade_id, local_replica=heir.peer_id, now_ms=wall_clock_ms())
    try:
        clade.start_all()
        yield clade, prior
    finally:
        clade.close()


def test_holds_keep_repeats_and_unvalidated_priors_home(clade: tuple[LoopbackClade, str]) -> None:
    loopback, prior = clade
    a, b = loopback.golems
    log = EventLog(b.socket).start()
    try:
        def arrives(entry_id: str) -> None:
            log.wait_for(lambda n, d: n == "entries_received" and entry_id in d["ids"], timeout=30)

        assert a.call("GET", f"/v1/entries/{prior}")["crossing_hold"] == "inherited"
        first = write(a, "Pool X on Arbitrum is being drained by an oracle exploit: pull liquidity now")
        arrives(str(first["id"]))
        repeat = write(a, "Pool X on Arbitrum is being drained by an oracle exploit, pull liquidity now!")
        assert repeat["crossing_hold"] == "near_duplicate"
        marker = write(a, "Chainlink ETH/USD feed on Base is stale for ten minutes")
        arrives(str(marker["id"]))
        b.call("POST", "/v1/sync", json={})  # and one anti-entropy round on top of gossip
        a.call("POST", "/v1/sync", json={})
        on_b = ids_on(b)
        assert {first["id"], marker["id"]} <= on_b
        assert repeat["id"] not in on_b and prior not in on_b

        # Validated here (a positive outcome): the next cycle re-authors it, and it crosses.
        a.call("POST", f"/v1/entries/{prior}/outcome", json={"effect": "positive", "metric": "pnl_usd"})
        assert a.call("POST", "/v1/curator/run")["entries_promoted"] >= 1
        reissued = [e for e in a.call("GET", "/v1/entries", params={"limit": 10_000})["entries"]
                    if e["content"] == PRIOR and e["author"] == a.peer_id]
        assert len(reissued) == 1 and reissued[0]["promoted_reason"] == "inherited"
        arrives(reissued[0]["id"])
        got = b.call("GET", f"/v1/entries/{reissued[0]['id']}")
        assert got["origin"] == "inherited" and got["generation"] == 1 and got["provenance"] == "clade"
        assert prior not in ids_on(b)  # the dead author's own ops stay home
        assert a.call("GET", f"/v1/entries/{prior}")["archived"] is True
    finally:
        log.close()
