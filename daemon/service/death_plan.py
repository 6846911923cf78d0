"""A golem's death, pure: the steps, the persisted record, what to resume, what to push.

`POST /v1/death` (daemon/service/death.py runs it) goes through `STEPS` in order:

    Phase II   reflection      store the bloodstained death_reflection (once: same entry on resume)
               gossip          hand it to the p2p publisher (a death_reflection crosses at once)
               styx            queue it for Styx: the vault layer (the archive), and clade when opted in
               insights        promote a handful of the golem's best insights past their tick rule
    Phase III  testament       the testament file (germline only) under <data>/testament/
               backup          a vault backup (the backup service) under <data>/backups/
               backup_push     that backup and the testament archive pushed to Styx's vault layer
    then       event           a `death` event on the daemon's event hub
               webhook         a JSON notice POSTed to `[death] webhook`, retried, then failed

Every step ends `done`, `failed` or `skipped` (with why). The record is persisted after each
step; a later call runs only the steps not `done` (a failed or skipped one is tried again),
so nothing that succeeded is repeated: the same reflection entry, the same testament file,
one webhook notice once one was taken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crdt import Kind

__all__ = [
    "DEATH_INSIGHTS",
    "INSIGHT_KINDS",
    "MAX_CAUSE_CHARS",
    "STEPS",
    "DeathRecord",
    "DeathStateError",
    "InsightCandidate",
    "Step",
    "pick_insights",
    "webhook_delays",
    "webhook_payload",
]

STEPS = ("reflection", "gossip", "styx", "insights", "testament", "backup", "backup_push", "event", "webhook")
STATUSES = ("done", "failed", "skipped")
DEATH_INSIGHTS = 5  # "a handful of insights pushed to the Clade"
INSIGHT_KINDS = frozenset({Kind.INSIGHT, Kind.HEURISTIC, Kind.CAUSAL_LINK, Kind.FACT})
MAX_CAUSE_CHARS = 500
VERSION = 1


class DeathStateError(ValueError):
    """The persisted death record cannot be read: says what was wrong."""


@dataclass(frozen=True, slots=True)
class Step:
    status: str  # done | failed | skipped
    detail: str
    at_ms: int


@dataclass(slots=True)
class DeathRecord:
    """What a death has done so far (persisted as JSON after every step)."""

    started_ms: int
    cause: str | None
    reflection_id: str | None = None
    testament_path: str | None = None
    backup_path: str | None = None
    promoted: list[str] = field(default_factory=list)
    steps: dict[str, Step] = field(default_factory=dict)

    def pending(self) -> list[str]:
        """The steps still to run, in order: every one not `done`."""
        return [name for name in STEPS if (s := self.steps.get(name)) is None or s.status != "done"]

    def record(self, name: str, status: str, detail: str, *, now_ms: int) -> None:
        if name not in STEPS or status not in STATUSES:
            raise ValueError(f"unknown step {name!r} or status {status!r}")
        self.steps[name] = Step(status, detail, now_ms)

    @property
    def complete(self) -> bool:
        """Every step ran and none failed."""
        return all(name in self.steps and self.steps[name].status != "failed" for name in STEPS)

    def answer(self) -> dict[str, Any]:
        """The body of `POST /v1/death`: every step's outcome, in order, and where things are."""
        return {
            "steps": [{"name": n, "status": self.steps[n].status, "detail": self.steps[n].detail}
                      for n in STEPS if n in self.steps],
            "reflection_id": self.reflection_id,
            "testament_path": self.testament_path,
            "backup_path": self.backup_path,
            "promoted": list(self.promoted),
            "cause": self.cause,
            "started_ms": self.started_ms,
            "complete": self.complete,
        }

    def status(self) -> dict[str, Any]:
        """The `death` field of `/v1/status`."""
        return {"dead": True, "started_ms": self.started_ms, "complete": self.complete,
                "failed": [n for n in STEPS if n in self.steps and self.steps[n].status == "failed"],
                "reflection_id": self.reflection_id, "testament_path": self.testament_path}

    def to_bytes(self) -> bytes:
        doc = {"version": VERSION, "started_ms": self.started_ms, "cause": self.cause,
               "reflection_id": self.reflection_id, "testament_path": self.testament_path,
               "backup_path": self.backup_path, "promoted": self.promoted,
               "steps": {n: [s.status, s.detail, s.at_ms] for n, s in self.steps.items()}}
        return json.dumps(doc, ensure_ascii=False, sort_keys=True, indent=1).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> DeathRecord:
        """Raises `DeathStateError` (only) for anything that is not a record this code wrote."""
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DeathStateError(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise DeathStateError(f"not a version {VERSION} death record")
        started, cause, steps, promoted = doc.get("started_ms"), doc.get("cause"), doc.get("steps"), doc.get("promoted")
        texts = [doc.get(k) for k in ("reflection_id", "testament_path", "backup_path")]
        if (type(started) is not int or not (cause is None or isinstance(cause, str))
                or not all(t is None or isinstance(t, str) for t in texts)
                or not isinstance(promoted, list) or not all(isinstance(p, str) for p in promoted)
                or not isinstance(steps, dict)):
            raise DeathStateError("malformed death record")
        out = cls(started, cause, texts[0], texts[1], texts[2], list(promoted))
        for name, raw_step in steps.items():
            if (name not in STEPS or not isinstance(raw_step, list) or len(raw_step) != 3
                    or raw_step[0] not in STATUSES or not isinstance(raw_step[1], str) or type(raw_step[2]) is not int):
                raise DeathStateError(f"malformed step {name!r} in the death record")
            out.steps[name] = Step(raw_step[0], raw_step[1], raw_step[2])
        return out


@dataclass(frozen=True, slots=True)
class InsightCandidate:
    """One of the golem's own live entries, as the death's insight push sees it."""

    id: str
    kind: Kind
    confidence: float
    keep_score: float
    may_cross: bool  # public, of a kind that may cross
    promoted: bool
    positive: int = 0  # outcomes and siblings' confirmations
    negative: int = 0  # outcomes and siblings' contradictions


def pick_insights(candidates: Sequence[InsightCandidate], *, n: int = DEATH_INSIGHTS) -> list[str]:
    """The handful pushed to the clade at death: the top `n` not yet promoted insights,
    heuristics, causal links and facts that may cross, by confidence, then keep score, then id.
    Death waives the tick rule, as legacy does (promotion.crossing_reason), never the evidence:
    an entry whose negative outcomes and contradictions outweigh the positive ones stays home."""
    eligible = [c for c in candidates if c.kind in INSIGHT_KINDS and c.may_cross and not c.promoted
                and c.positive >= c.negative]
    eligible.sort(key=lambda c: (-c.confidence, -c.keep_score, c.id))
    return [c.id for c in eligible[:max(0, n)]]


def webhook_delays(attempts: int, base_s: float) -> list[float]:
    """Waits between webhook attempts: base·2^(n−1) before attempt n+1 (attempts−1 of them)."""
    return [base_s * 2.0 ** i for i in range(max(0, attempts - 1))]


def webhook_payload(record: DeathRecord, *, golem: str, clade: Mapping[str, str] | None,
                    now_ms: int) -> dict[str, Any]:
    """The JSON notice POSTed to `[death] webhook` (the outcomes of the steps before it)."""
    return {
        "event": "death",
        "golem": golem,
        "clade": dict(clade) if clade is not None else None,
        "cause": record.cause,
        "started_ms": record.started_ms,
        "sent_ms": now_ms,
        "reflection_id": record.reflection_id,
        "testament_path": record.testament_path,
        "backup_path": record.backup_path,
        "promoted": list(record.promoted),
        "steps": {n: s.status for n, s in record.steps.items() if n != "webhook"},
    }
