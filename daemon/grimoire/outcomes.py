"""Recording an outcome on an entry (the I/O around posterior.py), in one transaction.

The row goes to `outcomes`; the entry's tallies grow by one; its local confidence becomes the
Beta posterior's mean (posterior.py) and the forgetting curve restarts from it: `decay_base`
= the new value, `decay_anchor_ms` = now, `evidence` + 1 (curator/decay.py). Nothing of it is
replicated. Either all of it happens or nothing does.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from daemon.errors import NotFound

from .posterior import Effect, OutcomeInput, posterior_mean

__all__ = ["apply_outcome", "outcome_history"]

_TALLY = {Effect.POSITIVE: "outcomes_positive", Effect.NEGATIVE: "outcomes_negative",
          Effect.NEUTRAL: "outcomes_neutral"}


def apply_outcome(conn: sqlite3.Connection, entry_id: str, outcome: OutcomeInput, *, now_ms: int) -> float:
    """Record `outcome` inside the caller's write transaction; returns the new local confidence.
    Raises `NotFound` for an unknown id (then nothing was written)."""
    row = conn.execute(
        "SELECT coalesce(outcome_prior, decay_base, local_confidence), outcomes_positive, outcomes_negative "
        "FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None:
        raise NotFound(f"no entry with id {entry_id!r}")
    prior, positive, negative = float(row[0]), int(row[1]), int(row[2])
    positive += outcome.effect is Effect.POSITIVE
    negative += outcome.effect is Effect.NEGATIVE
    value = min(1.0, max(0.0, posterior_mean(prior, positive, negative)))
    conn.execute(
        "INSERT INTO outcomes (entry_id, effect, metric, value, episode_id, note, recorded_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (entry_id, outcome.effect.value, outcome.metric, outcome.value, outcome.episode_id, outcome.note, now_ms))
    column = _TALLY[outcome.effect]
    conn.execute(
        f"UPDATE entries SET {column} = {column} + 1, outcome_prior = ?, local_confidence = ?, decay_base = ?, "
        "decay_anchor_ms = ?, evidence = evidence + 1 WHERE id = ?",
        (prior, value, value, now_ms, entry_id))
    return value


def outcome_history(conn: sqlite3.Connection, entry_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
    """The entry's latest outcomes, newest first (what `GET /v1/entries/{id}` shows)."""
    rows = conn.execute(
        "SELECT effect, metric, value, episode_id, note, recorded_ms FROM outcomes WHERE entry_id = ? "
        "ORDER BY n DESC LIMIT ?", (entry_id, limit)).fetchall()
    return [{"effect": r[0], "metric": r[1], "value": r[2], "episode_id": r[3], "note": r[4], "recorded_ms": r[5]}
            for r in rows]
