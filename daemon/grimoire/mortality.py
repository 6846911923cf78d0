"""The golem's behavioural phase from its vitality state, by the mortality architecture's rules.
Pure: numbers in, a phase and what follows from it out; the store and the API live elsewhere
(vitality.py keeps the state, the API and the CLI set it).

The vitality state is two of the three clocks, each in 0..1, plus the golem's age:

- `economic`: the balance left over the initial funding (0: at the death reserve, 1: fully funded);
- `epistemic`: its predictive fitness (0: no better than chance, 1: perfect);
- `age_factor`: ticks lived over the reference lifespan (0 at birth, 1 at ~92 days, may pass 1).

The third clock, the stochastic one, is a death roll, not a score: it does not enter the composite
(its `hayflick_ratio` is kept beside the phase and makes legacy due on its own past 0.85).

    composite = clamp(σ(economic; 0.3, 10) · σ(epistemic; 0.4, 8) · max(0, 1 − 0.3 · age_factor), 0, 1)
    σ(x; c, k) = 1 / (1 + e^(−k (x − c)))

Multiplicative: a golem cannot buy its way out of being wrong, nor out-think an empty wallet.
The phase is read off the composite top down — ≥ 0.7 thriving, ≥ 0.5 stable, ≥ 0.3 conservation,
≥ 0.1 declining, else terminal — with hysteresis upward only: a move to a higher phase needs the
composite 0.05 past that phase's threshold (from conservation, stable needs 0.55); a move down
is immediate. No single clock decides the phase.

What follows the phase here:

- legacy (promotion.legacy_due): from declining on the curator pushes what the golem half-believes
  (confidence ≥ 0.4); in terminal "everything is shared" — the bar is 0.1 — still never what its
  own evidence contradicts on balance, nor what the clade refuted;
- the Styx budget (`reserve_share`): the death reserve grows as vitality falls, by the
  architecture's dynamic reserve — none down to composite 0.3, then linearly to half the month's
  cap at 0.1, and all of it below 0.1 (terminal): ordinary pushes and queries stop so the death
  protocol's uploads are paid;
- the curator (`curator_period_factor`): a conserving golem curates half as often, a declining or
  terminal one twice as often (its legacy leaves sooner).
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["HYSTERESIS", "PHASES", "PHASE_FLOORS", "composite", "curator_period_factor", "legacy_confidence",
           "phase_for", "reserve_share"]

PHASES: Final = ("thriving", "stable", "conservation", "declining", "terminal")
PHASE_FLOORS: Final = {"thriving": 0.7, "stable": 0.5, "conservation": 0.3, "declining": 0.1, "terminal": 0.0}
HYSTERESIS: Final = 0.05
ECONOMIC_CENTER, ECONOMIC_STEEPNESS = 0.3, 10.0
EPISTEMIC_CENTER, EPISTEMIC_STEEPNESS = 0.4, 8.0
AGE_DRAG = 0.3
LEGACY_CONFIDENCE: Final = {"declining": 0.4, "terminal": 0.1}
DEFAULT_LEGACY_CONFIDENCE = 0.4  # legacy due by the Hayflick ratio alone
_CURATOR_FACTOR: Final = {"thriving": 1.0, "stable": 1.0, "conservation": 2.0, "declining": 0.5, "terminal": 0.5}
_PHASE_RESERVE: Final = {"declining": 0.5, "terminal": 1.0}  # a phase reported without clocks


def _sigmoid(x: float, center: float, steepness: float) -> float:
    return 1.0 / (1.0 + math.exp(-steepness * (x - center)))


def composite(economic: float, epistemic: float, age_factor: float) -> float:
    """The composite vitality score in 0..1 (the module docstring's formula)."""
    score = (_sigmoid(economic, ECONOMIC_CENTER, ECONOMIC_STEEPNESS)
             * _sigmoid(epistemic, EPISTEMIC_CENTER, EPISTEMIC_STEEPNESS)
             * max(0.0, 1.0 - AGE_DRAG * age_factor))
    return min(1.0, max(0.0, score))


def _raw_phase(score: float) -> str:
    for phase in PHASES:
        if score >= PHASE_FLOORS[phase]:
            return phase
    return "terminal"  # pragma: no cover - the terminal floor is 0


def phase_for(score: float, previous: str | None = None) -> str:
    """The phase for composite `score`, moving up from `previous` only when the score clears the
    target phase's threshold by `HYSTERESIS` (down at once). `previous` None: no hysteresis."""
    target = _raw_phase(score)
    if previous not in PHASE_FLOORS or PHASES.index(target) >= PHASES.index(previous):
        return target
    # Upward: the highest phase whose threshold the score clears with the margin, never below previous.
    for phase in PHASES[:PHASES.index(previous)]:
        if score >= PHASE_FLOORS[phase] + HYSTERESIS - 1e-9:  # 0.1 + 0.05 is 0.15000000000000002
            return phase
    return previous


def legacy_confidence(phase: str) -> float:
    """The confidence from which the curator pushes legacy in `phase` (when legacy is due)."""
    return LEGACY_CONFIDENCE.get(phase, DEFAULT_LEGACY_CONFIDENCE)


def reserve_share(phase: str, score: float | None) -> float:
    """The share of the month's Styx cap ring-fenced for the death protocol (beside the configured
    `death_reserve`): 0 at composite ≥ 0.3, 0.5 · (1 − (score − 0.1) / 0.2) between 0.1 and 0.3,
    1 below 0.1. A reported phase (an override, or no clocks: `score` None) by its name: declining
    0.5, terminal 1, else 0."""
    if score is None:
        return _PHASE_RESERVE.get(phase, 0.0)
    if score < 0.1:
        return 1.0
    return 0.0 if score >= 0.3 else 0.5 * (1.0 - (score - 0.1) / 0.2)


def curator_period_factor(phase: str) -> float:
    """The curator's cycle period in `phase`, as a multiple of the configured one."""
    return _CURATOR_FACTOR.get(phase, 1.0)
