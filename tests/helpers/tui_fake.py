"""A fixed daemon for the TUI's snapshot tests: `httpx.MockTransport` answering with the real
response models (validated here, so a shape change in `daemon.contract.responses` breaks these
fixtures loudly), a fixed clock, and a canned event stream that then stays open (until an
`Outage` takes the fixed daemon away).

Only the snapshots use it (their pictures must not depend on peer ids or time); every
behaviour test drives the TUI against a real daemon.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from daemon.contract.responses import (
    BackupsOut,
    EntryDoc,
    KnowledgeStatsOut,
    PeersOut,
    SearchOut,
    StatusOut,
)
from tui.client import PeerView
from tui.format import RateTracker

NOW_MS = 1_790_000_000_000  # fixed "now" for every snapshot
ME = "12D3KooWFakeGolemZeroAAAAAAAAAAAAAAAAAAAAAAAAAAAAGolem0"
SIB1 = "12D3KooWFakeSiblingOneBBBBBBBBBBBBBBBBBBBBBBBBBBBSibOne1"
SIB2 = "12D3KooWFakeSiblingTwoCCCCCCCCCCCCCCCCCCCCCCCCCCCSibTwo2"
SIB3 = "12D3KooWFakeSiblingThrDDDDDDDDDDDDDDDDDDDDDDDDDDDSibThr3"
ENTRY = "01JD0000000000000000000WARN"


def entry_doc(entry_id: str = ENTRY, content: str = "funding rates flip negative before liquidation cascades",
              kind: str = "warning") -> dict[str, Any]:
    doc = {
        "id": entry_id, "author": SIB1, "kind": kind, "category": None, "content": content,
        "metadata": {"tags": ["perps", "risk"], "protocols": [], "tokens": [], "chains": [], "strategy_id": None},
        "confidence": 0.8, "importance": 0.7, "quality": 0.5, "sensitivity": "clade", "pad": None,
        "origin": "direct", "generation": 0, "bloodstain": False, "created_hlc": "0001790000000000-0000",
        "created_at": "2026-09-21T11:33:20Z", "status": "active", "superseded_by": None,
        "provenance": "sibling", "local_confidence": 0.74, "access_count": 3, "last_accessed_at": None,
        "archived": False, "confirms": 2, "contradicts": 0, "cite_weight": 1.0}
    return EntryDoc.model_validate(doc).model_dump()


def status_doc(counters: dict[str, int] | None = None) -> dict[str, Any]:
    doc = {
        "peer_id": ME, "data_dir": "/var/lib/clade", "uptime_s": 13_530.0, "entries": 412, "archived": 37,
        "by_kind": {"insight": 160, "warning": 41, "heuristic": 88, "fact": 101, "constraint": 22},
        "clade": {"name": "demo", "id": "c-demo"}, "peers": 3,
        "p2p": {"listen": ["/ip4/10.0.0.1/tcp/4001"], "topic": "clade/demo", "members_connected": 2,
                "revocations_version": None},
        "last_curator_cycle": {
            "entries_decayed": 12, "entries_pruned": 3, "entries_merged": 1, "entries_superseded": 0,
            "episodes_consolidated": 4, "entries_promoted": 2, "heuristics_proposed": 0, "entries_validated": 5,
            "since_ms": NOW_MS - 1_200_000, "llm_decisions": 0, "llm_refused": {}, "llm_cost_usd": 0.0,
            "llm_error": None, "duration_ms": 850, "entries_embedded": 412, "at_ms": NOW_MS - 420_000,
            "seconds": 0.85},
        "counters": counters or {},
        "styx": {"queue_depth": 17, "oldest_age_s": 42.0, "parked": 1,
                 "parked_items": [{"idempotency_key": f"{ME}:9", "kind": "clade", "reason": "413 too large",
                                   "parked_at_ms": NOW_MS - 60_000}],
                 "last_success_ms": NOW_MS - 5_000, "last_success_at": "2026-11-23T06:59:55.000Z",
                 "failures": 0, "delivered": 1234, "last_error": None,
                 "url": "https://styx.example/", "spend_month_usd": 0.0421,
                 "spend": {"month": "2026-11", "usd": 0.0421, "calls": 42, "items": 1234, "queries": 0},
                 "paused_by_budget": False,
                 "outbox_warning": False},
        "vitality": {"phase": "stable", "source": "reported", "reported": "stable", "derived": None,
                     "composite": None, "economic": None, "epistemic": None, "age_factor": None,
                     "hayflick_ratio": 0.3, "legacy": False, "legacy_confidence": 0.4, "reserve_share": 0.0,
                     "curator_period_factor": 1.0, "updated_ms": NOW_MS - 60_000},
    }
    return StatusOut.model_validate(doc).model_dump(mode="json")


def peers_doc() -> dict[str, Any]:
    peers = [
        {"peer_id": SIB1, "addrs": ["/ip4/10.0.0.2/tcp/4001"], "connected": True, "member": True,
         "last_seen": NOW_MS - 2_000, "behind": 0, "ahead": 0, "rtt_ms": 1.8, "msgs_in": 1520, "msgs_out": 1498,
         "bytes_in": 2_400_000, "bytes_out": 2_310_000, "refused": None, "last_sync": NOW_MS - 20_000},
        {"peer_id": SIB2, "addrs": ["/ip4/10.0.0.3/tcp/4001"], "connected": True, "member": True,
         "last_seen": NOW_MS - 1_000, "behind": 3, "ahead": 1, "rtt_ms": 23.4, "msgs_in": 880, "msgs_out": 901,
         "bytes_in": 1_100_000, "bytes_out": 1_250_000, "refused": None, "last_sync": NOW_MS - 9_000},
        {"peer_id": SIB3, "addrs": ["/ip4/10.0.0.4/tcp/4001"], "connected": False, "member": True,
         "last_seen": NOW_MS - 3_900_000, "behind": None, "ahead": None, "rtt_ms": None, "msgs_in": 12,
         "msgs_out": 15, "bytes_in": 9_000, "bytes_out": 11_000, "refused": None, "last_sync": None},
    ]
    for p in peers:
        PeerView.model_validate(p)
    return PeersOut.model_validate({"peers": peers}).model_dump()


def stats_doc() -> dict[str, Any]:
    return KnowledgeStatsOut.model_validate({
        "live": 412, "by_kind": status_doc()["by_kind"], "confidence_histogram": [2, 5, 9, 14, 30, 61, 88, 97, 70, 36],
        "ops": 5230}).model_dump()


def backups_doc() -> dict[str, Any]:
    return BackupsOut.model_validate({
        "count": 5, "total_bytes": 48_000_000, "keep": 7, "interval_hours": 24.0,
        "last": {"name": "backup-Golem0-20260921-1.clade-vault", "bytes": 9_600_000, "at_ms": NOW_MS - 10_800_000},
        "next_due_ms": NOW_MS + 75_600_000}).model_dump()


def search_doc(query: str) -> dict[str, Any]:
    hits = [{**entry_doc(), "score": 0.913, "via": "both"},
            {**entry_doc("01JD000000000000000000INSGT", "basis trades unwind when funding normalises", "insight"),
             "score": 0.702, "via": "vector"}]
    return SearchOut.model_validate({"query": query, "results": hits}).model_dump()


EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("peer_up", {"peer_id": SIB1}),
    ("peer_up", {"peer_id": SIB2}),
    ("entries_received", {"from": SIB1, "via": "gossip", "ops": 2, "entries": 1, "ids": [ENTRY],
                          "committed_ms": NOW_MS}),
    ("entry_written", {"id": "01JD000000000000000000INSGT", "kind": "insight", "category": None,
                       "confidence": 0.7, "source": "self", "author": SIB1,
                       "preview": "Curve 3pool depth thins on Sundays"}),
    ("entry_written", {"id": "01JD000000000000000000WARN2", "kind": "warning", "category": "risk_events",
                       "confidence": 0.9, "source": "self", "author": SIB1,
                       "preview": "Never LP in pools under $100K TVL"}),
    ("sync_complete", {"peer_id": SIB2, "rounds": 2, "deltas": 1, "applied": 4}),
    ("peer_down", {"peer_id": SIB3}),
    ("curator_cycle_complete", {"entries_pruned": 3, "entries_merged": 1, "entries_promoted": 2}),
    ("backup_written", {"path": "/var/lib/clade/backups/b.clade-vault", "bytes": 9_600_000}),
    ("styx_outbox_warning", {"queue_depth": 17}),
    ("error", {"service": "styx", "error": "HTTP 503 from https://styx.example/"}),
]


class _Stream(httpx.AsyncByteStream):
    """The canned events, then an open stream that sends nothing until `ended` is set (or the
    app stops)."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]], ended: asyncio.Event | None) -> None:
        self.events = events
        self.ended = ended or asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b": connected\n\n"
        for name, data in self.events:
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        await self.ended.wait()


def fake_transport(*, events: list[tuple[str, dict[str, Any]]] | None = None,
                   status: dict[str, Any] | None = None, outage: Outage | None = None) -> httpx.MockTransport:
    """A MockTransport serving the fixed daemon (unknown paths: the API's 404 document); with
    `outage`, it stops answering once `outage.stop()` was called."""
    canned = EVENTS if events is None else events

    async def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if outage is not None and outage.stopped.is_set():
            raise httpx.ConnectError("connection refused", request=request)
        if path == "/v1/events":
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  stream=_Stream(canned, None if outage is None else outage.stopped))
        if path == "/v1/status":
            return httpx.Response(200, json=status or status_doc())
        if path == "/v1/peers":
            return httpx.Response(200, json=peers_doc())
        if path == "/v1/knowledge/stats":
            return httpx.Response(200, json=stats_doc())
        if path == "/v1/backups":
            return httpx.Response(200, json=backups_doc())
        if path.startswith("/v1/entries/"):
            return httpx.Response(200, json=entry_doc(path.rsplit("/", 1)[1]))
        if path == "/v1/memory/search":
            return httpx.Response(200, json=search_doc(json.loads(request.content)["query"]))
        return httpx.Response(404, json={"error": "not_found", "detail": f"no route {path}"})

    return httpx.MockTransport(handle)


class Outage:
    """The fixed daemon going away: after `stop()` every request fails as a refused connection
    does, the open event stream ends, and the fixed clock moves on `after_s` (so the stale age
    on screen is a fixed figure). Create it inside the app's event loop (it holds an
    `asyncio.Event`), or before, on Python ≥ 3.10 where events bind lazily."""

    def __init__(self, after_s: float = 12.0) -> None:
        self.stopped = asyncio.Event()
        self.after_ms = int(after_s * 1000)

    def now_ms(self) -> int:
        return NOW_MS + (self.after_ms if self.stopped.is_set() else 0)

    def stop(self) -> None:
        self.stopped.set()


def transport_factory(transport: httpx.AsyncBaseTransport) -> Any:
    return lambda: (transport, "http://clade", {})


class _FixedRates(RateTracker):
    """A history the app's polls leave alone: each poll would add a point at a real time, and
    how many polls land before a picture is taken is a race."""

    fixed = False

    def sample(self, t: float, counters: Mapping[str, Any]) -> None:
        if not self.fixed:
            super().sample(t, counters)


def seeded_rates() -> RateTracker:
    """Fixed traffic history: 30 one-second samples shaped like a gossip burst and a catch-up,
    then no more (see `_FixedRates`)."""
    rates = _FixedRates()
    totals = dict.fromkeys(("gossip_msgs_in", "gossip_bytes_in", "sync_msgs_in", "sync_bytes_in"), 0)
    for t in range(31):
        rates.sample(float(t), dict(totals))
        wave = (t * 7) % 11
        totals["gossip_msgs_in"] += 2 + wave
        totals["gossip_bytes_in"] += (2 + wave) * 900
        totals["sync_msgs_in"] += 6 if 10 <= t < 16 else 0
        totals["sync_bytes_in"] += 48_000 if 10 <= t < 16 else 0
    rates.fixed = True
    return rates
