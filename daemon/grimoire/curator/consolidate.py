"""Consolidation, pure: replayed episodes become baseline facts.

Each cycle *replays* a bounded sample of episodes (`select_replay`): priority =
surprise·w + importance·(1−w) (surprise is the episode's curiosity), 70 % of the budget
from recent episodes (observed within `recent_ms`) and 30 % from older ones, so that old
experience keeps informing the baselines without being re-read in full (the
complementary-learning-systems mix of hippocampal replay). Ties break by id.

`baselines` turns the replayed, quality-verified episodes of each protocol (at least
`min_episodes`, 3) into one fact: for every numeric top-level payload field seen in at
least `min_episodes` of them, its mean and standard deviation (sample, n−1). The fact's
text is deterministic for the same episodes; the curator supersedes the protocol's previous
baseline with the new one (never deletes it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["Baseline", "ReplayItem", "baselines", "select_replay"]

MIN_EPISODES = 3
MAX_FIELDS = 12
RECENT_SHARE = 0.7


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """An episode as replay and consolidation see it."""

    id: str
    observed_ms: int
    protocol: str | None
    curiosity: float
    importance: float
    verified: bool
    payload_json: str


@dataclass(frozen=True, slots=True)
class Baseline:
    protocol: str
    content: str
    episodes: tuple[str, ...]  # the ids it summarises, sorted
    fields: tuple[tuple[str, float, float, int], ...]  # (field, mean, sd, n), by field name


def select_replay(
    episodes: Sequence[ReplayItem], *, now_ms: int, budget: int, recent_ms: int, surprise_weight: float = 0.5
) -> list[ReplayItem]:
    """At most `budget` episodes: 70 % recent and 30 % old by priority (unused share goes to the other)."""
    if budget <= 0:
        return []

    def priority(e: ReplayItem) -> tuple[float, str]:
        return (-(e.curiosity * surprise_weight + e.importance * (1 - surprise_weight)), e.id)

    recent = sorted((e for e in episodes if now_ms - e.observed_ms <= recent_ms), key=priority)
    old = sorted((e for e in episodes if now_ms - e.observed_ms > recent_ms), key=priority)
    want_recent = min(len(recent), round(budget * RECENT_SHARE))
    want_old = min(len(old), budget - want_recent)
    want_recent = min(len(recent), budget - want_old)
    return sorted(recent[:want_recent] + old[:want_old], key=priority)


def _numeric_fields(payload_json: str) -> dict[str, float]:
    try:
        payload = json.loads(payload_json)
    except ValueError:
        return {}
    if not isinstance(payload, dict):
        return {}
    return {str(k): float(v) for k, v in payload.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))}


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def baselines(replayed: Sequence[ReplayItem], *, min_episodes: int = MIN_EPISODES) -> list[Baseline]:
    """One baseline fact per protocol with ≥ `min_episodes` verified episodes and a numeric field."""
    by_protocol: dict[str, list[ReplayItem]] = {}
    for e in replayed:
        if e.verified and e.protocol:
            by_protocol.setdefault(e.protocol, []).append(e)
    out: list[Baseline] = []
    for protocol, group in sorted(by_protocol.items()):
        if len(group) < min_episodes:
            continue
        values: dict[str, list[float]] = {}
        for e in group:
            for name, value in _numeric_fields(e.payload_json).items():
                values.setdefault(name, []).append(value)
        stats = []
        for name, xs in sorted(values.items()):
            if len(xs) < min_episodes:
                continue
            mean = math.fsum(xs) / len(xs)
            sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
            stats.append((name, mean, sd, len(xs)))
        if not stats:
            continue
        stats = stats[:MAX_FIELDS]
        first, last = min(e.observed_ms for e in group), max(e.observed_ms for e in group)
        parts = "; ".join(f"{name} mean {mean:.4g} (sd {sd:.3g}, n {n})" for name, mean, sd, n in stats)
        content = (f"Baseline for {protocol} from {len(group)} verified episodes "
                   f"({_day(first)} to {_day(last)}): {parts}.")
        out.append(Baseline(protocol, content, tuple(sorted(e.id for e in group)), tuple(stats)))
    return out
