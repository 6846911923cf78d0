"""The Prometheus view of one `Snapshot`: prometheus_client's custom-collector pattern.

`SnapshotCollector(snapshot).collect()` yields every family from the snapshot alone; a scrape
builds a fresh `CollectorRegistry` holding just that collector and renders it (`render`), so
no global registry is mutated anywhere in the daemon. Names follow Prometheus conventions:
`clade_` prefix, `_total` for counters, base units (seconds, bytes), timestamps as
`_timestamp_seconds`; the only per-peer label (`peer`) is for admitted siblings. The scrape's
registry also holds prometheus_client's `ProcessCollector` (its own, not the global one): the
standard `process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`…
read from /proc at the scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from crdt import Kind
from daemon.metrics.names import PREFIX, CounterName, counter_family
from daemon.metrics.snapshot import ENTRY_STATES, VITALITY_PHASES, Snapshot

__all__ = ["HISTOGRAMS", "SnapshotCollector", "always_exposed", "render"]

# The histogram families of `Observations` (name without prefix → help).
HISTOGRAMS = {
    "gossip_delivery_seconds": "Commit time minus author time of ops that arrived by gossip.",
    "antientropy_pull_seconds": "Duration of one anti-entropy pull from a sibling.",
    "antientropy_pull_bytes": "Bytes received in one anti-entropy pull from a sibling.",
    "curator_cycle_seconds": "Duration of one curator cycle.",
}
# Counters exposed (0) before anything has counted them, so alert rules and dashboards see a series.
_ALWAYS_COUNTED = ("api_errors", "internal_errors", "events_dropped", "entries_embedded", "sync_failed",
                   "sync_pulls", "gossip_accepted", "gossip_published", "gossip_apply_failed", "dials_failed",
                   "gossip_bytes_in", "gossip_bytes_out", "sync_bytes_in", "sync_bytes_out",
                   "searches_keyword_only", "embedding_model_loads", "embedding_model_failed_loads",
                   "embedding_host_crashes")


def _name(short: str) -> str:
    return f"{PREFIX}{short}"


def _counters(counters: dict[str, int]) -> Iterator[Metric]:
    """Every `DaemonState.counters` key, grouped into families (labelled ones summed per value:
    two reasons outside the known set are both `other`)."""
    families: dict[str, tuple[CounterName, dict[tuple[str, ...], float]]] = {}
    for key in _ALWAYS_COUNTED:
        counters.setdefault(key, 0)
    for key, value in sorted(counters.items()):
        name = counter_family(key)
        _, values = families.setdefault(name.family, (name, {}))
        labels: tuple[str, ...] = () if name.value is None else (name.value,)
        values[labels] = values.get(labels, 0.0) + value
    for family, (name, values) in sorted(families.items()):
        doc = f"The daemon's counter {family}" + (f" by {name.label}." if name.label else ".")
        metric = CounterMetricFamily(_name(family), doc, labels=[name.label] if name.label else None)
        for labels, total in sorted(values.items()):
            metric.add_metric(list(labels), total)
        yield metric


def _gauge(short: str, doc: str, value: float | None, unit: str = "") -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(_name(short), doc, value=value, unit=unit)


class SnapshotCollector(Collector):
    """Yields the families of one snapshot (see the module docstring)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield InfoMetricFamily(_name("build"), "This daemon: its peer id.", value={"peer_id": s.peer_id})
        yield GaugeMetricFamily(_name("start_time_seconds"), "When the daemon started (Unix time).",
                                value=s.started_at_s)
        yield from _counters(dict(s.counters))
        yield GaugeMetricFamily(_name("embedding_model_loaded"),
                                "1 while the embedding model is in memory (loaded on first need, unloaded after "
                                "[embedding] unload_after_s unused).", value=int(s.model_loaded))
        yield GaugeMetricFamily(_name("process_peak_resident_memory_bytes"),
                                "The daemon's highest resident memory since it started (VmHWM); "
                                "process_resident_memory_bytes is the current one.", value=s.peak_rss_bytes)
        yield GaugeMetricFamily(_name("embedding_process_resident_memory_bytes"),
                                "The embedding process's resident memory (the model and its runtime run there; "
                                "0 while it is not running): the golem's memory is this plus "
                                "process_resident_memory_bytes.", value=s.model_rss_bytes)
        yield GaugeMetricFamily(_name("malloc_in_use_bytes"), "Bytes glibc's malloc has handed out in the daemon "
                                "and not had back (0 where the C library does not say).", value=s.heap.in_use)
        yield GaugeMetricFamily(_name("malloc_free_bytes"), "Freed bytes malloc keeps inside the daemon's heap "
                                "(fragmentation; trimmed after curator cycles and backups).", value=s.heap.free)
        yield GaugeMetricFamily(_name("malloc_mapped_bytes"), "Large blocks malloc maps on their own in the "
                                "daemon.", value=s.heap.mmapped)
        yield GaugeMetricFamily(_name("sqlite_memory_bytes"), "What SQLite has allocated in the daemon (page "
                                "caches, statements; part of clade_malloc_in_use_bytes).", value=s.heap.sqlite)
        yield GaugeMetricFamily(_name("sqlite_page_cache_bytes"), "The page caches' part of "
                                "clade_sqlite_memory_bytes.", value=s.heap.sqlite_page_cache)
        yield from self._store()
        yield from self._peers()
        yield from self._styx()
        yield from self._backups()
        yield from self._observed()

    def _store(self) -> Iterator[Metric]:
        store = self.snapshot.store
        entries = GaugeMetricFamily(_name("entries"), "Knowledge entries by kind and state.", labels=["kind", "state"])
        kinds = sorted({k.value for k in Kind} | {kind for kind, _ in store.entries})
        for kind in kinds:
            for st in sorted({*ENTRY_STATES, *(st for k, st in store.entries if k == kind)}):
                entries.add_metric([kind, st], store.entries.get((kind, st), 0))
        yield entries
        yield GaugeMetricFamily(_name("embedding_backlog_entries"), "Entries still without a vector.",
                                value=store.embedding_backlog)
        yield GaugeMetricFamily(_name("suspect_authors"),
                                "Siblings whose entries trip the trust checks (low trust or over budget) and that the "
                                "operator has not yet distrusted (`clade peers trust-status`).",
                                value=store.suspect_authors)
        yield GaugeMetricFamily(_name("distrusted_authors"), "Siblings the operator distrusted (entries quarantined).",
                                value=store.distrusted_authors)
        phase = GaugeMetricFamily(_name("vitality_phase"),
                                  "1 for the golem's current vitality phase, 0 for the others (none: not set).",
                                  labels=["phase"])
        for name in VITALITY_PHASES:
            phase.add_metric([name], 1 if store.vitality_phase == name else 0)
        yield phase
        yield GaugeMetricFamily(_name("embedding_vector_writes_paused"), "1 while vector writes wait on a critical "
                                "embedding drift (restore the model, or `clade embeddings rebuild`).",
                                value=1 if store.drift_paused else 0)
        if store.drift_mean_distance is not None:
            yield GaugeMetricFamily(_name("embedding_drift_distance"), "Mean cosine distance of the reference "
                                    "documents from their baseline at the last drift check (warning 0.02, "
                                    "critical 0.05).", value=store.drift_mean_distance)
        if store.vitality_composite is not None:
            yield GaugeMetricFamily(_name("vitality_composite"), "The composite vitality score of the reported "
                                    "vitality state, 0..1 (absent: no clocks reported).",
                                    value=store.vitality_composite)

    def _peers(self) -> Iterator[Metric]:
        peers = self.snapshot.peers
        count = GaugeMetricFamily(_name("peers"), "Peers known, connected, and admitted (connected siblings).",
                                  labels=["state"])
        count.add_metric(["known"], len(peers))
        count.add_metric(["connected"], sum(p.connected for p in peers))
        count.add_metric(["admitted"], sum(p.connected and p.member for p in peers))
        yield count
        yield GaugeMetricFamily(_name("p2p_running"), "1 while sync runs (joined a clade, p2p enabled).",
                                value=int(self.snapshot.p2p_running))
        siblings = sorted((p for p in peers if p.member), key=lambda p: p.peer_id)
        connected = GaugeMetricFamily(_name("sibling_connected"), "1 while the sibling is connected.",
                                      labels=["peer"])
        behind = GaugeMetricFamily(_name("sibling_ops_behind"),
                                   "Ops the sibling has that this golem lacks (at the last sync).", labels=["peer"])
        ahead = GaugeMetricFamily(_name("sibling_ops_ahead"),
                                  "Ops this golem has that the sibling lacks (at the last sync).", labels=["peer"])
        withheld = GaugeMetricFamily(_name("sibling_dots_withheld"),
                                     "Dots seen on one side only whose ops never cross (at the last sync): not lag.",
                                     labels=["peer"])
        seen = GaugeMetricFamily(_name("sibling_last_seen_timestamp_seconds"),
                                 "When the sibling was last heard from (Unix time).", labels=["peer"])
        rtt = GaugeMetricFamily(_name("sibling_rtt_seconds"), "Smoothed round-trip time to the sibling.",
                                labels=["peer"])
        for p in siblings:
            connected.add_metric([p.peer_id], int(p.connected))
            if p.behind is not None:
                behind.add_metric([p.peer_id], p.behind)
            if p.ahead is not None:
                ahead.add_metric([p.peer_id], p.ahead)
            if p.withheld is not None:
                withheld.add_metric([p.peer_id], p.withheld)
            if p.last_seen_ms is not None:
                seen.add_metric([p.peer_id], p.last_seen_ms / 1000)
            if p.rtt_ms is not None:
                rtt.add_metric([p.peer_id], p.rtt_ms / 1000)
        yield from (connected, behind, ahead, withheld, seen, rtt)

    def _styx(self) -> Iterator[Metric]:
        s, store = self.snapshot.styx, self.snapshot.store
        yield GaugeMetricFamily(_name("styx_enabled"), "1 when the Styx outbox is drained by this daemon.",
                                value=int(s is not None))
        if s is None:
            return
        yield from _gauge("styx_outbox_items", "Styx outbox items waiting to be pushed.", store.styx_depth)
        yield from _gauge("styx_outbox_parked_items", "Styx outbox items parked after permanent failures.",
                          store.styx_parked)
        yield from _gauge("styx_outbox_oldest_age_seconds", "Age of the oldest waiting Styx item.",
                          store.styx_oldest_age_s)
        yield from _gauge("styx_spend_month_usd", "Styx spend this calendar month (USD).", store.styx_spend_usd)
        yield GaugeMetricFamily(_name("styx_paused_by_budget"), "1 while the budget pauses pushes.",
                                value=int(s.paused_by_budget))
        yield CounterMetricFamily(_name("styx_delivered"), "Styx items delivered.", value=s.delivered)
        yield CounterMetricFamily(_name("styx_push_failures"), "Styx pushes that failed.", value=s.failures)
        if s.last_success_ms is not None:
            yield GaugeMetricFamily(_name("styx_last_success_timestamp_seconds"),
                                    "When a Styx push last succeeded (Unix time).", value=s.last_success_ms / 1000)

    def _backups(self) -> Iterator[Metric]:
        files = self.snapshot.backups
        yield GaugeMetricFamily(_name("backups"), "Backup files kept in the data dir.", value=len(files))
        yield GaugeMetricFamily(_name("backups_bytes"), "Bytes of the backup files kept.",
                                value=sum(f["bytes"] for f in files))
        if files:
            yield GaugeMetricFamily(_name("backup_last_timestamp_seconds"),
                                    "When the newest backup was written (Unix time; its file's mtime).",
                                    value=files[-1]["at_ms"] / 1000)

    def _observed(self) -> Iterator[Metric]:
        seen = self.snapshot.observations
        for short, doc in HISTOGRAMS.items():
            hist = seen.histograms[short]
            buckets = [("+Inf" if le == float("inf") else _le(le), n) for le, n in hist.cumulative()]
            yield HistogramMetricFamily(_name(short), doc, buckets=buckets, sum_value=hist.total)
        outcomes = CounterMetricFamily(_name("curator_outcomes"), "What curator cycles did, summed, by outcome.",
                                       labels=["outcome"])
        for outcome, n in sorted(seen.curator_outcomes.items()):
            outcomes.add_metric([outcome], n)
        yield outcomes
        yield CounterMetricFamily(_name("curator_cycles"), "Curator cycles completed.", value=seen.curator_cycles)
        if seen.last_curator_ms is not None:
            yield GaugeMetricFamily(_name("curator_last_cycle_timestamp_seconds"),
                                    "When the last curator cycle completed (Unix time).",
                                    value=seen.last_curator_ms / 1000)
        yield CounterMetricFamily(_name("metrics_events_skipped"), "Events the metrics could not read.",
                                  value=seen.skipped)


def _le(bound: float) -> str:
    return repr(float(bound))


def always_exposed() -> frozenset[str]:
    """Metric names a scrape exposes whatever the daemon's state (for tests of docs/)."""
    names = {counter_family(k).metric for k in _ALWAYS_COUNTED}
    names |= {_name(h) for h in HISTOGRAMS}
    return frozenset(names)


def render(snapshot: Snapshot, accept: str) -> tuple[bytes, str]:
    """(body, content type): OpenMetrics text when `accept` asks for it (Prometheus does),
    else the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    ProcessCollector(registry=registry)  # process_resident_memory_bytes and the rest, of this process
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
