"""Routes for the knowledge ecology: outcomes on entries and the golem's vitality.

`POST /v1/entries/{id}/outcome` records what happened when this golem acted on an entry (an
external metric; daemon/grimoire/posterior.py): its local confidence moves by a Beta posterior
and its forgetting curve restarts. `GET`/`PUT /v1/vitality` read and set the golem's phase and
Hayflick ratio; from `declining` on (or a ratio over 0.85) the curator pushes its legacy.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.api.responses import EntryDoc, VitalityOut, errors
from daemon.grimoire import Grimoire
from daemon.grimoire.fields import Label
from daemon.grimoire.posterior import MAX_METRIC_CHARS, MAX_NOTE_BYTES
from daemon.grimoire.promotion import PHASES
from daemon.grimoire.vitality import Vitality, read_vitality, write_vitality
from daemon.service.state import DaemonState

__all__ = ["OutcomeIn", "VitalityIn", "register"]

Phase = Literal["thriving", "stable", "conservation", "declining", "terminal"]
assert PHASES == ("thriving", "stable", "conservation", "declining", "terminal")


class OutcomeIn(BaseModel):
    """POST /v1/entries/{id}/outcome."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")

    effect: Literal["positive", "negative", "neutral"] = Field(
        description="what acting on the entry led to, by the metric")
    metric: Annotated[Label, Field(description=f"what was measured, e.g. pnl_usd or slippage_bps "
                                               f"(1..{MAX_METRIC_CHARS} characters)")] = "outcome"
    value: Annotated[float | None, Field(allow_inf_nan=False, description="the measured value (finite)")] = None
    episode_id: Annotated[str | None, Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$",
                                            description="the episode it was observed in")] = None
    note: Annotated[str | None, Field(max_length=MAX_NOTE_BYTES, pattern=r"^[^\x00]*$",
                                      description=f"free text, at most {MAX_NOTE_BYTES} bytes of UTF-8")] = None

    @field_validator("note", "episode_id")
    @classmethod
    def _utf8_text(cls, text: str | None) -> str | None:
        if text is None:
            return None
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("is not valid UTF-8 (a lone surrogate)") from None
        if size > MAX_NOTE_BYTES:
            raise ValueError(f"must be at most {MAX_NOTE_BYTES} bytes of UTF-8, got {size}")
        return text


class VitalityIn(BaseModel):
    """PUT /v1/vitality."""

    model_config = ConfigDict(extra="forbid", strict=True)

    phase: Phase
    hayflick_ratio: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False)] = None


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the outcome and vitality routes to `app`."""

    @app.post("/v1/entries/{entry_id}/outcome", response_model=EntryDoc, responses=errors(404))
    async def record_outcome(entry_id: str, body: OutcomeIn) -> dict[str, Any]:
        """Record an outcome (local: never crosses). 404 for an unknown id; 422 for a bad field."""
        entry = await state.on_writer(lambda s: s.record_outcome(
            entry_id, body.effect, metric=body.metric, value=body.value, episode_id=body.episode_id,
            note=body.note, now_ms=state.now_ms()))
        state.publish("outcome_recorded", {"id": entry.id, "effect": body.effect, "metric": body.metric.strip(),
                                           "local_confidence": entry.local_confidence})
        return entry.to_json()

    @app.get("/v1/vitality", response_model=VitalityOut, responses=errors())
    async def get_vitality() -> dict[str, Any]:
        return await state.on_reader(lambda r: read_vitality(r.connection).to_json())

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
