"""daemon/metrics without a daemon: counter names, event-fed histograms and the collector's
output for a hand-made snapshot, parsed back with prometheus_client's own parser."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.metrics.collector import render
from daemon.metrics.names import CounterName, counter_family
from daemon.metrics.observations import Histogram, Observations
from tests.helpers.metrics import full_snapshot


@pytest.mark.parametrize(("key", "expected"), [
    ("api_errors", CounterName("api_errors")),
    ("gossip_bytes_in", CounterName("gossip_received_bytes")),
    ("sync_msgs_out", CounterName("sync_sent_messages")),
    ("gossip_rejected_bad_signature", CounterName("gossip_rejected", "reason", "bad_signature")),
    ("sync_rejected_clock_skew", CounterName("sync_rejected", "reason", "clock_skew")),
    ("hello_refused_by_peer_revoked", CounterName("hello_refused_by_peer", "reason", "revoked")),
    # a peer names its own refusal reason: bounded to the ones this code can produce
    ("hello_refused_by_peer_<script>x", CounterName("hello_refused_by_peer", "reason", "other")),
    ("hello_refused_by_peer_made_up_reason", CounterName("hello_refused_by_peer", "reason", "other")),
    ("hello_refused_other_clade", CounterName("hello_refused", "reason", "other_clade")),
    ("revocations_rejected_stale", CounterName("revocations_rejected", "reason", "stale")),
    ("promotion_refused_low_score", CounterName("promotion_refused", "reason", "low_score")),
    ("event_entry_written", CounterName("events", "event", "entry_written")),
    ("event_Bad-Name", CounterName("events", "event", "other")),
    ("service_curator_crashes", CounterName("service_crashes", "service", "curator")),
    ("9lives-x", CounterName("_9lives_x")),
])
def test_counter_keys_map_to_conventional_families(key: str, expected: CounterName) -> None:
    assert counter_family(key) == expected


def test_counter_metric_name_has_prefix_and_total() -> None:
    assert counter_family("gossip_bytes_out").metric == "clade_gossip_sent_bytes_total"


def test_histogram_buckets_are_cumulative_and_a_bound_holds_its_value() -> None:
    hist = Histogram((1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 3.0):
        hist.observe(value)
    assert hist.cumulative() == [(1.0, 2), (2.0, 3), (math.inf, 4)]
    assert (hist.count, hist.total) == (4, 6.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        Histogram((2.0, 1.0))


def test_observations_from_events() -> None:
    seen = Observations()
    seen.record("entries_received", {"via": "gossip", "committed_ms": 10_000, "op_ms": [9_990, 9_700, 10_500]})
    seen.record("entries_received", {"via": "sync", "committed_ms": 10_000, "op_ms": [0]})  # not gossip: ignored
    seen.record("sync_complete", {"seconds": 0.2, "bytes_in": 5000})
    seen.record("curator_cycle_complete", {"seconds": 1.5, "at_ms": 42_000, "entries_pruned": 3,
                                           "entries_merged": 0, "episodes_consolidated": 2, "entries_embedded": 9,
                                           "llm_cost_usd": 0.5, "duration_ms": 1500})
    seen.record("curator_cycle_complete", {"seconds": 0.5, "entries_pruned": 1})
    gossip = seen.histograms["gossip_delivery_seconds"]
    assert gossip.count == 3 and gossip.total == pytest.approx(0.01 + 0.3 + 0.0)  # a future op counts as 0
    assert gossip.cumulative()[0] == (0.01, 2)  # 10 ms and 0 ms are within the first bucket
    assert seen.histograms["antientropy_pull_seconds"].count == 1
    assert seen.histograms["antientropy_pull_bytes"].cumulative()[1] == (1e4, 1)
    assert seen.histograms["curator_cycle_seconds"].total == 2.0
    assert dict(seen.curator_outcomes) == {"pruned": 4, "merged": 0, "consolidated": 2}
    assert seen.curator_cycles == 2 and seen.last_curator_ms is None and seen.skipped == 0


@pytest.mark.parametrize(("event", "data"), [
    ("entries_received", {"via": "gossip", "committed_ms": "soon", "op_ms": [1]}),
    ("entries_received", {"via": "gossip", "committed_ms": 5, "op_ms": "12"}),
    ("entries_received", {"via": "gossip", "committed_ms": 5, "op_ms": [float("nan")]}),
    ("sync_complete", {"seconds": -1, "bytes_in": 3}),
    ("sync_complete", {"seconds": True, "bytes_in": 3}),
    ("curator_cycle_complete", {}),
])
def test_malformed_events_are_skipped_and_counted(event: str, data: dict[str, object]) -> None:
    seen = Observations()
    seen.record(event, data)
    assert seen.skipped == 1
    assert all(h.count == 0 for h in seen.histograms.values())


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_collector_renders_a_snapshot() -> None:
    body, content_type = render(full_snapshot(), "")
    assert content_type.startswith("text/plain")
    got = _samples(body.decode())
    assert got[("clade_gossip_rejected_total", (("reason", "replayed"),))] == 2
    assert got[("clade_gossip_rejected_total", (("reason", "bad_signature"),))] == 1
    assert got[("clade_hello_refused_by_peer_total", (("reason", "other"),))] == 5  # two unknown reasons summed
    assert got[("clade_events_total", (("event", "entry_written"),))] == 7
    assert got[("clade_api_errors_total", ())] == 0  # always exposed
    assert got[("clade_entries", (("kind", "fact"), ("state", "live")))] == 3
    assert got[("clade_entries", (("kind", "fact"), ("state", "archived")))] == 1
    assert got[("clade_entries", (("kind", "heuristic"), ("state", "live")))] == 0
    assert got[("clade_embedding_backlog_entries", ())] == 5
    assert got[("clade_suspect_authors", ())] == 1
    assert got[("clade_distrusted_authors", ())] == 2
    assert got[("clade_vitality_phase", (("phase", "declining"),))] == 1
    assert got[("clade_vitality_phase", (("phase", "stable"),))] == 0
    assert got[("clade_vitality_composite", ())] == 0.2
    assert got[("clade_embedding_drift_distance", ())] == 0.03
    assert got[("clade_embedding_vector_writes_paused", ())] == 1
    assert got[("clade_peers", (("state", "known"),))] == 3
    assert got[("clade_peers", (("state", "connected"),))] == 2
    assert got[("clade_peers", (("state", "admitted"),))] == 1
    assert got[("clade_sibling_connected", (("peer", "sib-b"),))] == 0
    assert got[("clade_sibling_ops_behind", (("peer", "sib-a"),))] == 3
    assert got[("clade_sibling_dots_withheld", (("peer", "sib-a"),))] == 7
    assert got[("clade_sibling_rtt_seconds", (("peer", "sib-a"),))] == 0.012
    assert not any(dict(labels).get("peer") == "stranger" for _, labels in got)  # only siblings get a label
    assert got[("clade_styx_outbox_items", ())] == 4
    assert got[("clade_styx_outbox_parked_items", ())] == 1
    assert got[("clade_styx_spend_month_usd", ())] == 0.25
    assert got[("clade_backups", ())] == 2
    assert got[("clade_backups_bytes", ())] == 150
    assert got[("clade_backup_last_timestamp_seconds", ())] == 9.0
    assert got[("clade_antientropy_pull_bytes_bucket", (("le", "10000.0"),))] == 1
    assert got[("clade_antientropy_pull_bytes_bucket", (("le", "1000.0"),))] == 0
    assert got[("clade_antientropy_pull_seconds_count", ())] == 1


def test_openmetrics_when_asked() -> None:
    body, content_type = render(full_snapshot(), "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b"clade_gossip_rejected_total{reason=\"replayed\"} 2.0" in body
