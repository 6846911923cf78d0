"""Read-only routes for the operator's view (`clade tui`): knowledge statistics and backups.

`GET /v1/knowledge/stats` gives the confidence histogram and the op count that a sibling's
completion % is measured against (a peer's `behind`/`ahead` in `GET /v1/peers` are op counts);
`GET /v1/backups` lists what `$DATA/backups` holds and when the scheduler runs next.
"""

from __future__ import annotations

import math
import time
from typing import Any

from fastapi import FastAPI

from daemon.api.responses import BackupsOut, KnowledgeStatsOut, errors
from daemon.grimoire import Grimoire
from daemon.service.backup import backup_files
from daemon.service.state import DaemonState

__all__ = ["next_backup_ms", "register"]


def next_backup_ms(*, started_ms: int, now_ms: int, interval_ms: int) -> int:
    """The backup scheduler's next run: it backs up every `interval_ms` from the daemon's start
    (`Runtime.backup_service`), whatever manual backups happen in between."""
    periods = max(1, math.ceil((now_ms - started_ms) / interval_ms))
    return started_ms + periods * interval_ms


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the operator routes to `app`."""

    @app.get("/v1/knowledge/stats", response_model=KnowledgeStatsOut, responses=errors())
    async def knowledge_stats() -> dict[str, Any]:
        def read(store: Grimoire) -> dict[str, Any]:
            counts = store.counts()
            return {"live": counts.entries - counts.archived, "by_kind": counts.by_kind,
                    "confidence_histogram": store.confidence_histogram(10), "ops": store.causal_context().size()}

        return await state.read(read)  # a read connection: the TUI polls it, never behind a write

    @app.get("/v1/backups", response_model=BackupsOut, responses=errors())
    async def backups() -> dict[str, Any]:
        files = backup_files(state.data.backups_path)
        cfg = state.config.backup
        now = state.now_ms()
        started = now - round((time.monotonic() - state.started_monotonic) * 1000)
        due = None
        if state.data.membership_path.exists():
            due = next_backup_ms(started_ms=started, now_ms=now, interval_ms=round(cfg.interval_hours * 3_600_000))
        return {"count": len(files), "total_bytes": sum(f["bytes"] for f in files),
                "last": files[-1] if files else None, "interval_hours": cfg.interval_hours, "keep": cfg.keep,
                "next_due_ms": due}
