"""Episode routes beyond the append (`POST /v1/episodes`, in app.py).

`POST /v1/episodes/{id}/verify` marks an episode quality-verified: the curator's consolidation
replays verified episodes only (docs/design/forgetting.md). Idempotent; 404 for an
unknown id. The update is one LanceDB commit, made on the store's writer thread like appends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from daemon.contract.responses import EpisodeVerifyOut, errors
from daemon.service.state import DaemonState

__all__ = ["register"]


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the episode routes to `app`."""

    @app.post("/v1/episodes/{episode_id}/verify", response_model=EpisodeVerifyOut, responses=errors(404))
    async def verify_episode(episode_id: str) -> dict[str, Any]:
        """Mark an episode quality-verified (consolidation replays only those). Idempotent."""
        episode, changed = await state.on_writer(lambda s: state.data.open_episodes().verify(episode_id))
        if changed:
            state.publish("episode_verified", {"id": episode.id})
        return {"id": episode.id, "changed": changed, "episode": episode.to_json()}
