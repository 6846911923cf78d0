"""The crossing gates, pure: the outcome posterior, the admission score and the gate decisions,
with hand-made inputs and exact outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crdt import InvalidValue, Kind
from daemon.grimoire.admission import (
    AdmissionInput,
    admission,
    evidence_score,
    max_similarity,
    novelty,
    specificity,
)
from daemon.grimoire.posterior import OutcomeInput, posterior_mean
from daemon.grimoire.promotion import Candidate, crossing_reason, legacy_due, refusal_reason, sync_gate
from daemon.grimoire.vitality import Vitality

TICK = 10.0
TEN_TICKS_MS = 100_000


def test_posterior_mean_is_the_beta_posterior_with_prior_strength_four() -> None:
    assert posterior_mean(0.7, 0, 0) == pytest.approx(0.7)
    assert posterior_mean(0.7, 1, 0) == pytest.approx(3.8 / 5)  # 0.76
    assert posterior_mean(0.7, 2, 0) == pytest.approx(4.8 / 6)  # 0.8
    assert posterior_mean(0.7, 0, 1) == pytest.approx(2.8 / 5)  # 0.56
    assert posterior_mean(0.4, 3, 1) == pytest.approx((1.6 + 3) / 8)
    assert posterior_mean(0.5, 1, 1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        posterior_mean(1.5, 0, 0)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"effect": "great"}, "effect"),
    ({"effect": 1}, "effect"),
    ({"metric": ""}, "metric"),
    ({"metric": "m" * 49}, "metric"),
    ({"value": math.nan}, "value"),
    ({"value": math.inf}, "value"),
    ({"value": True}, "value"),
    ({"note": "x" * 4097}, "note"),
    ({"note": "a\x00b"}, "note"),
    ({"episode_id": ""}, "episode_id"),
])
def test_outcome_input_refuses_each_bad_field_by_name(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"effect": "positive", "metric": "pnl_usd", **kwargs}
    effect = args.pop("effect")
    with pytest.raises(InvalidValue) as caught:
        OutcomeInput.checked(effect, **args)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_outcome_input_keeps_good_values() -> None:
    o = OutcomeInput.checked("neutral", metric=" slippage_bps ", value=-3, note="é" * 2048)
    assert (o.effect.value, o.metric, o.value) == ("neutral", "slippage_bps", -3.0)


def plain(confidence: float = 0.8, content: str = "Funding flips before CPI", **kw: object) -> AdmissionInput:
    base: dict[str, object] = {"confidence": confidence, "content": content, "named": False, "categorised": False,
                               "uses": 0, "positive": 0, "negative": 0}
    base.update(kw)
    return AdmissionInput(**base)  # type: ignore[arg-type]


def test_admission_components() -> None:
    assert novelty(None) == 1.0
    assert novelty(0.5) == 1.0 and novelty(0.2) == 1.0 and novelty(0.8) == 1.0  # related claims are news
    assert novelty(0.85) == pytest.approx(0.5)
    assert novelty(0.9) == 0.0 and novelty(0.99) == 0.0
    assert evidence_score(0, 0, 0) == 0.0
    assert evidence_score(2, 1, 0) == 1.0
    assert evidence_score(1, 0, 0) == pytest.approx(1 / 3)
    assert evidence_score(0, 1, 3) == 0.0
    assert specificity("short", named=False, categorised=False) == 0.0
    assert specificity("gas under 5 gwei", named=True, categorised=True) == 0.75
    assert specificity("x" * 79 + "9", named=False, categorised=False) == 0.5


def test_a_new_insight_written_with_defaults_at_0_8_is_admitted() -> None:
    verdict = admission(plain(), similarity=None)
    assert verdict.score == pytest.approx(0.62) and verdict.admitted
    assert admission(plain(), similarity=0.45).score == pytest.approx(0.62)


def test_a_near_duplicate_is_never_admitted_whatever_its_score() -> None:
    rich = plain(content="x" * 100 + " 5 gwei", named=True, categorised=True, uses=5, positive=3)
    verdict = admission(rich, similarity=0.91)
    assert verdict.score == pytest.approx(0.32 + 0.15 + 0.15) and not verdict.admitted and verdict.near_duplicate


def test_admission_at_the_confidence_floor_needs_something_more() -> None:
    assert not admission(plain(confidence=0.6), similarity=None).admitted  # 0.54
    assert admission(plain(confidence=0.6, named=True), similarity=None).score == pytest.approx(0.5775)
    assert admission(plain(confidence=0.6, named=True), similarity=None).admitted


def test_max_similarity() -> None:
    a = np.array([1.0, 0.0], dtype=np.float32)
    b = np.array([0.6, 0.8], dtype=np.float32)
    assert max_similarity(a, []) is None and max_similarity(None, [a]) is None
    assert max_similarity(b, [a]) == pytest.approx(0.6)
    assert max_similarity(a, [b, a]) == pytest.approx(1.0)


def reason(c: Candidate, *, age_ms: int = TEN_TICKS_MS, legacy: bool = False) -> str | None:
    return crossing_reason(c, now_ms=c.created_ms + age_ms, tick_seconds=TICK, legacy=legacy)


def test_evidence_kinds_cross_when_admitted_above_the_confidence_floor() -> None:
    for kind in (Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK):
        assert reason(Candidate(kind, 0.8, 0, admitted=True), age_ms=0) == "admitted"
        assert reason(Candidate(kind, 0.59, 0, admitted=True)) is None
        assert reason(Candidate(kind, 0.8, 0, admitted=False)) is None


@pytest.mark.parametrize(("candidate", "age_ms", "why"), [
    (Candidate(Kind.INSIGHT, 0.8, 0, admitted=False), 0, "low_score"),
    (Candidate(Kind.INSIGHT, 0.59, 0, admitted=True), 0, "low_confidence"),
    (Candidate(Kind.FACT, 0.8, 0, near_duplicate=True), 0, "near_duplicate"),
    (Candidate(Kind.INSIGHT, 0.8, 0, admitted=True, refuted=True), 0, "refuted"),
    (Candidate(Kind.HEURISTIC, 0.8, 0, positive=3), TEN_TICKS_MS - 1, "too_young"),
    (Candidate(Kind.HEURISTIC, 0.8, 0, positive=1), TEN_TICKS_MS, "unproven"),
    (Candidate(Kind.CONSTRAINT, 0.69, 0, positive=5), TEN_TICKS_MS, "low_confidence"),
])
def test_each_refusal_names_its_reason(candidate: Candidate, age_ms: int, why: str) -> None:
    assert reason(candidate, age_ms=age_ms) is None
    assert refusal_reason(candidate, now_ms=candidate.created_ms + age_ms, tick_seconds=TICK) == why


def test_rules_need_ticks_and_positive_evidence_outnumbering_negative() -> None:
    h = Candidate(Kind.HEURISTIC, 0.8, 1_000, positive=2)
    assert reason(h, age_ms=TEN_TICKS_MS - 1) is None
    assert reason(h) == "validated"
    assert reason(Candidate(Kind.CONSTRAINT, 0.8, 0, positive=0)) is None  # no positive at all
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=2, negative=2)) is None
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=1, negative=3)) is None
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=1)) is None  # one lucky first positive is not enough
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=1, confirms=1)) == "validated"  # an endorsement counts
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=5, refuted=True)) is None  # the clade refuted it
    assert reason(Candidate(Kind.INSIGHT, 0.8, 0, admitted=True, refuted=True)) is None
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=2, contradicts=2)) is None
    assert reason(Candidate(Kind.HEURISTIC, 0.69, 0, positive=5)) is None


def test_legacy_lets_what_passes_the_confidence_rule_cross_early() -> None:
    young = Candidate(Kind.HEURISTIC, 0.8, 0)
    assert reason(young, age_ms=0) is None
    assert reason(young, age_ms=0, legacy=True) == "legacy"
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, positive=2), legacy=True) == "validated"
    assert reason(Candidate(Kind.HEURISTIC, 0.8, 0, negative=1), age_ms=0, legacy=True) is None
    assert reason(Candidate(Kind.HEURISTIC, 0.6, 0), age_ms=0, legacy=True) == "legacy"  # the bar is 0.4 near death
    assert reason(Candidate(Kind.INSIGHT, 0.45, 0), age_ms=0, legacy=True) == "legacy"
    assert reason(Candidate(Kind.INSIGHT, 0.45, 0, admitted=True), age_ms=0) is None  # not otherwise
    assert reason(Candidate(Kind.HEURISTIC, 0.39, 0), age_ms=0, legacy=True) is None
    assert reason(Candidate(Kind.INSIGHT, 0.7, 0), legacy=True) == "legacy"
    assert reason(Candidate(Kind.INSIGHT, 0.7, 0, near_duplicate=True), legacy=True) is None
    assert reason(Candidate(Kind.WARNING, 0.9, 0), legacy=True) is None  # crosses at once, not promoted


def test_legacy_due_and_vitality() -> None:
    assert not legacy_due("stable", None) and not legacy_due("conservation", 0.85)
    assert legacy_due("declining", None) and legacy_due("terminal", 0.1) and legacy_due("thriving", 0.86)
    assert Vitality.checked("declining").legacy
    for phase, ratio in (("dying", None), ("stable", 1.5), ("stable", math.nan), (3, None), ("stable", True)):
        with pytest.raises(InvalidValue):
            Vitality.checked(phase, ratio)


def test_sync_gate_holds_held_entries_whoever_wrote_them() -> None:
    from crdt import EntryBody, Timestamp

    def body(author: str, kind: Kind) -> EntryBody:
        return EntryBody(author=author, kind=kind, content=f"{author} {kind}", created=Timestamp(1, 0))

    mine, theirs = body("me", Kind.WARNING), body("dead", Kind.INSIGHT)
    insight = body("me", Kind.INSIGHT)
    open_gate = sync_gate("me", promoted={insight.id})
    assert open_gate(mine) and open_gate(theirs) and open_gate(insight)
    gate = sync_gate("me", promoted={insight.id}, held={mine.id, theirs.id})
    assert not gate(mine) and not gate(theirs) and gate(insight)
    assert not sync_gate("me", promoted=())(insight)


def test_figures_are_the_numbers_a_text_states_in_order() -> None:
    from daemon.grimoire.promotion import figures

    assert figures("Gas above 80 gwei at 14:00, 1,250.5 USDC") == ("80", "14", "00", "1,250.5")
    assert figures("Pool X is being drained") == ()
    assert figures("a regime shift 7") != figures("a regime shift 8")
