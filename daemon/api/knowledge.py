"""Routes for the knowledge ecology: outcomes on entries and the golem's vitality.

`POST /v1/entries/{id}/outcome` records what happened when this golem acted on an entry (an
external metric; daemon/grimoire/posterior.py): its local confidence moves by a Beta posterior
and its forgetting curve restarts. `GET`/`PUT /v1/vitality` read and report the golem's vitality
state (the phase derived from it by daemon/grimoire/mortality.py), a phase overriding it, and the
Hayflick ratio; from `declining` on (or a ratio over 0.85) the curator pushes its legacy.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from daemon.api.ids import EntryId
from daemon.contract.requests import OutcomeIn, VitalityIn
from daemon.contract.responses import EntryDoc, VitalityOut, errors
from daemon.grimoire.vitality import Vitality
from daemon.service.state import DaemonState

__all__ = ["register"]



def register(app: FastAPI, state: DaemonState) -> None:
    """Add the outcome and vitality routes to `app`."""

    @app.post("/v1/entries/{entry_id}/outcome", response_model=EntryDoc, responses=errors(400, 404))
    async def record_outcome(entry_id: EntryId, body: OutcomeIn) -> dict[str, Any]:
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
        """Report the vitality state (economic, epistemic, age_factor: the phase is derived from
        them), a phase (an override), or both, and the Hayflick ratio; what is left out is no
        longer reported. Persisted; the Styx reserve follows at once, the curator at its next cycle."""
        checked = Vitality.checked(body.phase, body.hayflick_ratio, economic=body.economic,
                                   epistemic=body.epistemic, age_factor=body.age_factor)

        now = state.now_ms()
        stored = await state.on_writer(lambda store: store.set_vitality(checked, now_ms=now))
        if state.styx is not None:
            state.styx.budget.reserve_share = stored.reserve_share
        state.publish("vitality_changed", stored.to_json())
        return stored.to_json()
