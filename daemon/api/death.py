"""`POST /v1/death`: a running golem dies, and the clade hears it (daemon/service/death.py).

Body `{"reflection": TEXT, "cause": TEXT?}`: the reflection non-blank UTF-8 of at most 4 KiB
(it is stored as one entry: an entry's content limit), the cause at most 500 characters;
anything else is a 422 naming the field, and a body over 1 MiB a 413 (the app's limit). The
answer lists every step's outcome; a second call resumes what failed and repeats nothing done.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from daemon.contract.responses import errors
from daemon.grimoire.fields import LABEL_PATTERN, Content
from daemon.service.death import Death
from daemon.service.death_plan import MAX_CAUSE_CHARS
from daemon.service.state import DaemonState

__all__ = ["DeathIn", "DeathOut", "register"]


# One line of text: no control character, at least one non-space.
Cause = Annotated[str, Field(min_length=1, max_length=MAX_CAUSE_CHARS, pattern=LABEL_PATTERN, strict=True)]


class DeathIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="rust-regex")

    reflection: Content = Field(description="the death reflection, stored as one bloodstained entry")
    cause: Cause | None = Field(None, description="why the golem dies (kept from the first call)")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeathStepOut(_Out):
    name: Literal["reflection", "gossip", "styx", "insights", "testament", "backup", "backup_push", "event",
                  "webhook"]
    status: Literal["done", "failed", "skipped"]
    detail: str


class DeathOut(_Out):
    steps: list[DeathStepOut]
    reflection_id: str | None
    testament_path: str | None
    backup_path: str | None
    promoted: list[str] = Field(description="the insights pushed to the clade at death")
    cause: str | None
    started_ms: int
    complete: bool = Field(description="every step ran and none failed (else call again to resume)")


def register(app: FastAPI, state: DaemonState) -> None:
    """Add `POST /v1/death` to `app` (one death flow, serialised, per daemon)."""
    death = Death(state)

    @app.post("/v1/death", response_model=DeathOut, responses=errors())
    async def die(body: DeathIn) -> dict[str, Any]:
        return await death.die(body.reflection, body.cause)
