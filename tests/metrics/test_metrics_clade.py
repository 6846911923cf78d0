"""`GET /metrics` of a golem in a real two-golem clade on loopback: sibling gauges under a
`peer` label, the gossip delivery histogram counting exactly the ops that arrived by gossip,
anti-entropy pulls, and a sibling that goes away shown as disconnected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.testing.harness import EventLog, Golem, LoopbackClade
from tests.helpers.clade import running_clade

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def clade2(tmp_path: Path) -> Iterator[LoopbackClade]:
    with running_clade(tmp_path, 2) as clade:
        yield clade


def scrape(golem: Golem) -> Samples:
    with httpx.Client(transport=httpx.HTTPTransport(uds=golem.socket), base_url="http://clade", timeout=30) as c:
        res = c.get("/metrics")
    assert res.status_code == 200, res.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(res.text) for s in family.samples}


def test_a_golems_metrics_in_a_clade(clade2: LoopbackClade) -> None:
    a, b = clade2.golems
    log = EventLog(b.socket).start()
    try:
        ids = [a.call("POST", "/v1/memory", json={"content": f"Pool {i} drains at the epoch turn",
                                                   "memory_type": "warning"})["id"] for i in range(3)]
        for entry_id in ids:
            log.wait_for(lambda n, d, i=entry_id: n == "entries_received" and i in d["ids"], timeout=30)
        b.call("POST", "/v1/sync", json={})  # one anti-entropy pull, answered before it returns
        got = scrape(b)
        gossiped = sum(len(d["op_ms"]) for _, n, d in list(log.events) if n == "entries_received"
                       and d["via"] == "gossip")
        assert gossiped > 0  # written while connected: gossip carried at least one
        assert got[("clade_gossip_delivery_seconds_count", ())] == gossiped
        assert got[("clade_antientropy_pull_seconds_count", ())] >= 1
        assert got[("clade_sync_pulls_total", ())] >= 1
        assert got[("clade_entries", (("kind", "warning"), ("state", "live")))] == 3
        assert got[("clade_peers", (("state", "admitted"),))] == 1
        assert got[("clade_sibling_connected", (("peer", a.peer_id),))] == 1
        assert got[("clade_sibling_ops_behind", (("peer", a.peer_id),))] == 0  # caught up at that pull
        assert got[("clade_p2p_running", ())] == 1
        assert {dict(labels).get("peer") for _, labels in got} - {None} == {a.peer_id}

        a.stop()
        log.wait_for(lambda n, d: n == "peer_down" and d["peer_id"] == a.peer_id, timeout=30)
        after = scrape(b)
        assert after[("clade_sibling_connected", (("peer", a.peer_id),))] == 0
        assert after[("clade_peers", (("state", "admitted"),))] == 0
        assert after[("clade_events_total", (("event", "peer_down"),))] == 1
    finally:
        log.close()
