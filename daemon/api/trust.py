"""The operator's path against a compromised sibling (docs/design/security.md).

`GET /v1/trust`: every sibling author this golem holds entries of, with its trust, evidence,
budget counts and whether it is suspect (daemon/grimoire/trust.py). `POST /v1/peers/distrust`
{peer_id}: quarantine every entry of that author at once (withheld from digests and default
searches, still readable; nothing deleted), locally, until `POST /v1/peers/trust` {peer_id}
lifts it (and clears the remembered burst and the alert). Both take effect on the next read.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from daemon.contract.requests import DistrustIn
from daemon.contract.responses import DistrustOut, TrustOut, errors
from daemon.errors import Conflict
from daemon.service.state import DaemonState
from daemon.service.trust_watch import suspect_doc

__all__ = ["register"]


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the trust routes to `app`."""

    @app.get("/v1/trust", response_model=TrustOut, responses=errors())
    async def trust() -> dict[str, Any]:
        cfg = state.config.trust
        now = state.now_ms()
        view = await state.on_reader(lambda r: r.author_trust(cfg.policy(), now_ms=now))
        return {"enabled": cfg.enabled, "budget_entries": cfg.budget_entries, "budget_window_s": cfg.budget_window_s,
                "authors": [{**suspect_doc(v), "suspect": v.suspect} for v in view.authors.values()]}

    async def mark(peer_id: str, distrusted: bool) -> dict[str, Any]:
        if peer_id == state.identity.peer_id:
            # A schema-valid request the daemon's state refuses: 409 (schemathesis' positive-data check
            # rightly flagged the 400 this was: the schema cannot know the golem's own id).
            raise Conflict("that is this golem's own peer id: its own entries are never quarantined")
        now = state.now_ms()

        doc = await state.on_writer(lambda store: store.set_distrust(peer_id, distrusted=distrusted, now_ms=now))
        state.counters["peers_distrusted" if distrusted else "peers_trusted"] += 1
        state.publish("author_trust", doc)
        return doc

    @app.post("/v1/peers/distrust", response_model=DistrustOut, responses=errors(409))
    async def distrust(body: DistrustIn) -> dict[str, Any]:
        """Quarantine every entry of `peer_id` here at once (reversible: `/v1/peers/trust`)."""
        return await mark(body.peer_id, True)

    @app.post("/v1/peers/trust", response_model=DistrustOut, responses=errors(409))
    async def trust_again(body: DistrustIn) -> dict[str, Any]:
        """Lift a distrust, and forget the author's remembered burst and alert."""
        return await mark(body.peer_id, False)
