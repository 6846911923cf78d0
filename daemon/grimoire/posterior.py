"""Outcomes as evidence, pure: the checked outcome and the local confidence it leads to.

An outcome is what happened when this golem acted on an entry, measured by an external
metric (P&L of a trade the heuristic shaped, slippage against the quote the fact predicted…):
positive, negative or neutral. Outcomes move the entry's LOCAL confidence through a Beta
posterior over "acting on it goes well":

    prior      Beta(K · m₀, K · (1 − m₀)),   K = PRIOR_STRENGTH = 4,
               m₀ = the entry's base local confidence when its first outcome arrived
    posterior  mean = (K · m₀ + positive) / (K + positive + negative)

Neutral outcomes are recorded and counted but carry no evidence either way. The prior mean is
fixed at the first outcome (stored as `outcome_prior`), so the posterior depends on the tallies
alone and not on the order outcomes arrive in or on decay in between. K = 4 means four
outcomes weigh as much as what the golem believed before: an entry held at 0.7 goes to 0.76
after one positive outcome, 0.8 after two, 0.56 after one negative (exact values in the tests).

Outcome tallies are local: they never cross (a sibling's copy of the entry starts from its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from crdt import InvalidValue
from crdt.body import check_text_size

__all__ = ["MAX_METRIC_CHARS", "MAX_NOTE_BYTES", "PRIOR_STRENGTH", "Effect", "OutcomeInput", "posterior_mean"]

PRIOR_STRENGTH = 4.0
MAX_METRIC_CHARS = 48
MAX_NOTE_BYTES = 4096
MAX_EPISODE_ID_CHARS = 128


class Effect(StrEnum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"


def posterior_mean(prior: float, positive: int, negative: int, *, strength: float = PRIOR_STRENGTH) -> float:
    """The Beta posterior's mean (see the module docstring); `prior` in 0..1, tallies ≥ 0."""
    if not 0.0 <= prior <= 1.0 or positive < 0 or negative < 0:
        raise ValueError(f"posterior_mean: prior {prior} must be in 0..1 and the tallies ≥ 0")
    return (strength * prior + positive) / (strength + positive + negative)


@dataclass(frozen=True, slots=True)
class OutcomeInput:
    """A checked outcome: `OutcomeInput.checked` raises `InvalidValue` (a `ValueError`) naming
    the first bad field."""

    effect: Effect
    metric: str
    value: float | None
    episode_id: str | None
    note: str | None

    @classmethod
    def checked(cls, effect: object, *, metric: object, value: object = None, episode_id: object = None,
                note: object = None) -> OutcomeInput:
        if not isinstance(effect, str) or effect not in Effect.__members__.values():
            raise InvalidValue("effect", f"must be one of positive, negative, neutral; got {effect!r}")
        if not isinstance(metric, str) or not metric.strip():
            raise InvalidValue("metric", "must be non-empty text (what was measured, e.g. pnl_usd)")
        metric = metric.strip()
        if len(metric) > MAX_METRIC_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in metric):
            raise InvalidValue("metric", f"must be 1..{MAX_METRIC_CHARS} characters without control characters")
        number: float | None = None
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
                raise InvalidValue("value", f"must be a finite number, got {value!r}")
            number = float(value) + 0.0
        for name, text in (("episode_id", episode_id), ("note", note)):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidValue(name, "is not valid UTF-8 (a lone surrogate)") from None
        if episode_id is not None and (not isinstance(episode_id, str)
                                       or not 0 < len(episode_id) <= MAX_EPISODE_ID_CHARS
                                       or any(ord(c) < 32 for c in episode_id)):
            raise InvalidValue("episode_id", f"must be 1..{MAX_EPISODE_ID_CHARS} characters of text")
        if note is not None:
            if not isinstance(note, str):
                raise InvalidValue("note", "must be text")
            check_text_size("note", note, MAX_NOTE_BYTES)
        return cls(Effect(effect), metric, number, episode_id, note)
