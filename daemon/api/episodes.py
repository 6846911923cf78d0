"""Episode routes beyond the append (`POST /v1/episodes`, in app.py).

`POST /v1/episodes/search` finds this golem's own episodes by meaning (episode_recall.py:
memory search's query shape, PAD and time bounds included). Episodes are soma: the route reads
the local LanceDB log only; no sibling's episode exists here and Styx is never asked.

`POST /v1/episodes/{id}/verify` marks an episode quality-verified: the curator's consolidation
replays verified episodes only (docs/design/forgetting.md). Idempotent; the id may be a
unique prefix (404 for an unknown one). The update is one LanceDB commit, made on the store's
writer thread like appends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from daemon.api.ids import EpisodeId
from daemon.contract.requests import EpisodeSearchIn
from daemon.contract.responses import EpisodeSearchOut, EpisodeVerifyOut, errors
from daemon.grimoire.episode_recall import EpisodeQuery
from daemon.service.state import DaemonState

__all__ = ["register"]


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the episode routes to `app`."""

    @app.post("/v1/episodes/search", response_model=EpisodeSearchOut, responses=errors(503))
    async def search_episodes(body: EpisodeSearchIn) -> dict[str, Any]:
        """This golem's own episodes most like the query, best first (soma: never a sibling's,
        never Styx). `since`/`until` bound when each was observed. 503 if the model cannot load."""
        since_ms, until_ms = body.bounds_ms()
        query = EpisodeQuery(k=body.top_k, pad=None if body.pad is None else body.pad.as_tuple(),
                             since_ms=since_ms, until_ms=until_ms, min_importance=body.min_importance)
        hits = await state.search_episodes(body.query, query)
        return {"query": body.query, "results": [
            {"similarity": round(h.similarity, 6), "score": round(h.score, 6), **h.episode.to_json()} for h in hits]}

    @app.post("/v1/episodes/{episode_id}/verify", response_model=EpisodeVerifyOut, responses=errors(400, 404))
    async def verify_episode(episode_id: EpisodeId) -> dict[str, Any]:
        """Mark an episode quality-verified (consolidation replays only those). Idempotent.
        Answers with the full id."""
        episode, changed = await state.on_writer(lambda s: state.data.open_episodes().verify(episode_id))
        if changed:
            state.publish("episode_verified", {"id": episode.id})
        return {"id": episode.id, "changed": changed, "episode": episode.to_json()}
