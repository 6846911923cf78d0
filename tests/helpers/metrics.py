"""A metrics snapshot with every field set, for the collector and Prometheus tests."""

from __future__ import annotations

from daemon.metrics.observations import Observations
from daemon.metrics.snapshot import PeerFigures, Snapshot, StoreFigures, StyxFigures


def full_snapshot() -> Snapshot:
    """A snapshot with every part present (Styx on, siblings, backups, a curator cycle)."""
    seen = Observations()
    seen.record("sync_complete", {"seconds": 0.2, "bytes_in": 2048})
    seen.record("curator_cycle_complete", {"seconds": 1.0, "at_ms": 7_000, "entries_pruned": 1})
    return Snapshot(
        peer_id="12D3KooWme", started_at_s=1000.0,
        counters={"gossip_rejected_replayed": 2, "gossip_rejected_bad_signature": 1, "hello_refused_by_peer_x1": 4,
                  "hello_refused_by_peer_x2": 1, "event_entry_written": 7},
        store=StoreFigures(entries={("fact", "live"): 3, ("fact", "archived"): 1, ("warning", "live"): 2},
                           embedding_backlog=5, vitality_phase="declining", vitality_composite=0.2,
                           drift_mean_distance=0.03, drift_paused=True,
                           suspect_authors=1,
                           distrusted_authors=2, styx_depth=4, styx_parked=1,
                           styx_oldest_age_s=12.5, styx_spend_usd=0.25),
        peers=[PeerFigures("sib-a", True, True, 3, 0, 2_000_000, 12.0, withheld=7),
               PeerFigures("sib-b", False, True, None, None, 1_000_000, None),
               PeerFigures("stranger", True, False, None, None, None, None)],
        p2p_running=True,
        styx=StyxFigures(delivered=9, failures=2, paused_by_budget=False, last_success_ms=3_000_000),
        backups=[{"name": "backup-a.clade-vault", "bytes": 100, "at_ms": 5_000},
                 {"name": "backup-b.clade-vault", "bytes": 50, "at_ms": 9_000}],
        observations=seen)
