"""Read-only routes for the operator's view (`clade tui`): knowledge statistics and backups.

`GET /v1/knowledge/stats` gives the confidence histogram and the op count that a sibling's
completion % is measured against (a peer's `behind`/`ahead` in `GET /v1/peers` are op counts);
`GET /v1/backups` lists what `$DATA/backups` holds and when the scheduler runs next.
"""

from __future__ import annotations

from typing import Any

import trio
from fastapi import FastAPI

from daemon.contract.responses import BackupsOut, KnowledgeStatsOut, errors
from daemon.grimoire import Grimoire
from daemon.service.backup import backup_files
from daemon.service.state import DaemonState

__all__ = ["register"]


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the operator routes to `app`."""

    @app.get("/v1/knowledge/stats", response_model=KnowledgeStatsOut, responses=errors())
    async def knowledge_stats() -> dict[str, Any]:
        def read(store: Grimoire) -> dict[str, Any]:
            counts = store.counts()
            return {"live": counts.entries - counts.archived, "by_kind": counts.by_kind,
                    "confidence_histogram": store.confidence_histogram(10), "ops": store.causal_context().size()}

        return await state.on_reader(read)  # a read connection: the TUI polls it, never behind a write

    @app.get("/v1/backups", response_model=BackupsOut, responses=errors())
    async def backups() -> dict[str, Any]:
        files = backup_files(state.data.backups_path)
        cfg = state.config.backup
        due = None
        if state.data.membership_path.exists():  # the scheduler's own deadline: a full interval after the last finished
            due = state.backup_schedule.due_ms(now=trio.current_time(), now_ms=state.now_ms())
        return {"count": len(files), "total_bytes": sum(f["bytes"] for f in files),
                "last": files[-1] if files else None, "interval_hours": cfg.interval_hours, "keep": cfg.keep,
                "next_due_ms": due}
