"""Routes for the knowledge ecology: outcomes on entries and the golem's vitality.

`POST /v1/entries/{id}/outcome` records what happened when this golem acted on an entry (an
external metric; daemon/grimoire/posterior.py): its local confidence moves by a Beta posterior
and its forgetting curve restarts. `GET`/`PUT /v1/vitality` read and set the golem's phase and
Hayflick ratio; from `declining` on (or a ratio over 0.85) the curator pushes its legacy.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from daemon.contract.requests import OutcomeIn, VitalityIn
from daemon.contract.responses import EntryDoc, VitalityOut, errors
from daemon.grimoire import Grimoire
from daemon.grimoire.vitality import Vitality, write_vitality
from daemon.service.state import DaemonState

__all__ = ["register"]



def register(app: FastAPI, state: DaemonState) -> None:
    """Add the outcome and vitality routes to `app`."""

    @app.post("/v1/entries/{entry_id}/outcome", response_model=EntryDoc, responses=errors(404))
    async def record_outcome(entry_id: str, body: OutcomeIn) -> dict[str, Any]:
        """Record an outcome: the row stays on this golem (soma); on an entry that may cross, this
        golem's evidence tally for it (counts only) crosses to siblings. 404 for an unknown id;
        422 for a bad field."""
        entry = await state.outcome(entry_id, body.effect, metric=body.metric, value=body.value,
                                    episode_id=body.episode_id, note=body.note)
        return await state.entry_doc(entry)

    @app.get("/v1/vitality", response_model=VitalityOut, responses=errors())
    async def get_vitality() -> dict[str, Any]:
        return await state.on_reader(lambda r: r.vitality().to_json())

    @app.put("/v1/vitality", response_model=VitalityOut, responses=errors())
    async def put_vitality(body: VitalityIn) -> dict[str, Any]:
        """Set the phase (and Hayflick ratio; omitted: none). Persisted; the next curator cycle acts on it."""
        checked = Vitality.checked(body.phase, body.hayflick_ratio)

        def write(store: Grimoire) -> Vitality:
            with store.transaction() as conn:
                return write_vitality(conn, checked, now_ms=state.now_ms())

        stored = await state.on_writer(write)
        state.publish("vitality_changed", stored.to_json())
        return stored.to_json()
