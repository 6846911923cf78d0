"""What a scrape reads from the running daemon, in one `Snapshot` (I/O: a read connection,
the data dir, the p2p node's peer book, the Styx pusher). The collector renders it; nothing
here keeps state between scrapes.

Store figures come from one read connection (never behind the writer): entries by kind and
state, the embedding backlog, the Styx outbox and the month's spend, the vitality phase.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from daemon.grimoire.mortality import PHASES
from daemon.metrics.observations import Observations
from daemon.native_memory import Heap, heap, resident
from daemon.service.backup import BackupFile, backup_files
from daemon.styx import ledger

if TYPE_CHECKING:
    from daemon.grimoire import Grimoire
    from daemon.service.state import DaemonState

__all__ = ["ENTRY_STATES", "VITALITY_PHASES", "PeerFigures", "Snapshot", "StoreFigures",
           "StyxFigures", "entry_state", "gather", "read_store"]

# The `state` label of `clade_entries`: every value is exposed (0 when none), so a dashboard's
# series exist from the start. A quarantined state will be one more value here (and in
# `entry_state`) when the store has it.
ENTRY_STATES = ("live", "archived")

# The phases of `clade_vitality_phase{phase}` (what `PUT /v1/vitality` stores: daemon/grimoire/vitality.py).
VITALITY_PHASES = PHASES


def entry_state(archived: int) -> str:
    """The `state` label of an entry row (its `archived` column)."""
    return "archived" if archived else "live"


@dataclass(frozen=True, slots=True)
class StoreFigures:
    entries: dict[tuple[str, str], int]  # (kind, state) → count
    embedding_backlog: int  # entries (archived too: they may return) with no vector yet
    vitality_phase: str | None  # None until a phase is stored (or an unknown one is)
    vitality_composite: float | None = None  # the composite score of the reported clocks (none reported: None)
    drift_mean_distance: float | None = None  # the last embedding drift check's (none yet, or a baseline: None)
    drift_paused: bool = False  # the last drift check was critical: vector writes wait
    suspect_authors: int = 0  # siblings whose alert stands (daemon/service/trust_watch.py), not yet distrusted
    distrusted_authors: int = 0  # siblings the operator distrusted (`clade peers distrust`)
    styx_depth: int | None = None
    styx_parked: int | None = None
    styx_oldest_age_s: float | None = None
    styx_spend_usd: float | None = None


@dataclass(frozen=True, slots=True)
class PeerFigures:
    peer_id: str
    connected: bool
    member: bool
    behind: int | None
    ahead: int | None
    last_seen_ms: int | None
    rtt_ms: float | None
    withheld: int | None = None  # dots seen on one side only whose ops never cross (not lag)


@dataclass(frozen=True, slots=True)
class StyxFigures:
    delivered: int
    failures: int
    paused_by_budget: bool
    last_success_ms: int | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    peer_id: str
    started_at_s: float  # Unix seconds
    counters: dict[str, int]
    store: StoreFigures
    peers: list[PeerFigures]
    p2p_running: bool
    styx: StyxFigures | None
    backups: list[BackupFile]
    observations: Observations
    extra: dict[str, Any] = field(default_factory=dict)
    model_loaded: bool = False  # the embedding model is in memory (daemon/service/embedding.py)
    peak_rss_bytes: int = 0  # VmHWM (VmRSS is prometheus_client's process_resident_memory_bytes)
    model_rss_bytes: int = 0  # the embedding process's VmRSS (0: not running; daemon/embedding/remote.py)
    heap: Heap = field(default_factory=lambda: Heap(0, 0, 0, 0))  # malloc's and SQLite's (native_memory)


def read_store(store: Grimoire, *, styx: bool, now_ms: int) -> StoreFigures:
    """The store's figures, on one read snapshot (`Grimoire.on_snapshot`) of a read connection."""
    return store.on_snapshot(lambda snap: _store_figures(snap, styx=styx, now_ms=now_ms))


def _store_figures(store: Grimoire, *, styx: bool, now_ms: int) -> StoreFigures:
    """The figures `read_store` returns, by the store's named reads (inside its snapshot)."""
    counts, backlog = store.entry_figures()
    entries: Counter[tuple[str, str]] = Counter()
    for (kind, archived), n in counts.items():
        entries[(kind, entry_state(int(archived)))] += n
    alerts = store.trust_alerts()
    vitality = store.vitality()
    drift = store.drift_state()
    figures = StoreFigures(entries=dict(entries), embedding_backlog=backlog,
                           vitality_phase=vitality.phase, vitality_composite=vitality.composite,
                           drift_mean_distance=None if drift is None else drift.figures.get("mean_distance"),
                           drift_paused=drift is not None and drift.paused,
                           suspect_authors=len(alerts.suspect),
                           distrusted_authors=len(alerts.distrusted))
    if not styx:
        return figures
    outbox = store.outbox_status(now_ms=now_ms)
    spend = store.styx_spend_summary(ledger.month_of(now_ms))
    oldest = outbox["oldest_age_s"]
    return replace(figures, styx_depth=int(outbox["queue_depth"]), styx_parked=int(outbox["parked"]),
                   styx_oldest_age_s=None if oldest is None else max(0.0, float(oldest)),
                   styx_spend_usd=float(spend["usd"]))


def _peer(doc: dict[str, Any]) -> PeerFigures:
    def opt_int(key: str) -> int | None:
        value = doc.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    rtt = doc.get("rtt_ms")
    return PeerFigures(peer_id=str(doc["peer_id"]), connected=bool(doc.get("connected")),
                       member=bool(doc.get("member")), behind=opt_int("behind"), ahead=opt_int("ahead"),
                       last_seen_ms=opt_int("last_seen"), rtt_ms=float(rtt) if isinstance(rtt, int | float) else None,
                       withheld=opt_int("withheld"))


async def gather(state: DaemonState, observations: Observations) -> Snapshot:
    """Everything one scrape exposes, read now."""
    now = state.now_ms()
    styx = state.styx
    store = await state.on_reader(lambda r: read_store(r, styx=styx is not None, now_ms=now))
    return Snapshot(
        peer_id=state.identity.peer_id,
        started_at_s=state.clock.started_ms / 1000,
        counters=dict(state.counters),
        store=store,
        peers=[_peer(p) for p in state.peers()],
        p2p_running=state.p2p is not None,
        styx=None if styx is None else StyxFigures(delivered=styx.stats.delivered, failures=styx.stats.failures,
                                                   paused_by_budget=styx.paused_by_budget,
                                                   last_success_ms=styx.stats.last_success_ms),
        backups=backup_files(state.data.backups_path),
        observations=observations,
        model_loaded=state.embedding.loaded,
        peak_rss_bytes=resident().peak_bytes,
        model_rss_bytes=state.embedding.host_rss_bytes(),
        heap=heap(),
    )
