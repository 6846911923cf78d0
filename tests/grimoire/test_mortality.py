"""The behavioural phase from the vitality state (daemon/grimoire/mortality.py), what follows from
it (legacy's bar, the Styx reserve, the curator's pace), and the stored report (vitality.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from crdt import InvalidValue, Kind
from daemon.grimoire import Grimoire
from daemon.grimoire.mortality import composite, curator_period_factor, legacy_confidence, phase_for, reserve_share
from daemon.grimoire.promotion import Candidate, crossing_reason
from daemon.grimoire.vitality import Clocks, Vitality, read_vitality, write_vitality
from daemon.styx.policy import Budget
from tests.helpers.seed import raw_write


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: 1_000) as s:
        yield s


def _sigmoid(x: float, c: float, k: float) -> float:
    return 1 / (1 + math.exp(-k * (x - c)))


def test_composite_is_the_architectures_product() -> None:
    for econ, epist, age in ((1, 1, 0), (0.3, 0.4, 0), (0.5, 0.6, 1.0), (0.05, 0.9, 0.2), (1, 1, 4)):
        want = _sigmoid(econ, 0.3, 10) * _sigmoid(epist, 0.4, 8) * max(0.0, 1 - 0.3 * age)
        assert composite(econ, epist, age) == pytest.approx(want)
    assert composite(0.3, 0.4, 0) == pytest.approx(0.25)  # both clocks at their centre: a quarter
    assert composite(1, 1, 4) == 0  # past 3.3 lifespans the age drag alone ends it
    # multiplicative: a full wallet does not buy back a golem that is always wrong
    assert composite(1.0, 0.0, 0) < 0.1 and composite(0.0, 1.0, 0) < 0.1


@pytest.mark.parametrize(("score", "phase"), [(0.95, "thriving"), (0.7, "thriving"), (0.69, "stable"),
                                              (0.5, "stable"), (0.49, "conservation"), (0.3, "conservation"),
                                              (0.29, "declining"), (0.1, "declining"), (0.09, "terminal"),
                                              (0.0, "terminal")])
def test_phase_thresholds(score: float, phase: str) -> None:
    assert phase_for(score) == phase


def test_hysteresis_is_upward_only() -> None:
    assert phase_for(0.52, "conservation") == "conservation"  # past 0.5, but not by 0.05
    assert phase_for(0.55, "conservation") == "stable"  # the spec's example: stable needs 0.55
    assert phase_for(0.80, "conservation") == "thriving"  # two phases up at once when clear of both
    assert phase_for(0.72, "conservation") == "stable"  # thriving not yet cleared by the margin
    assert phase_for(0.12, "terminal") == "terminal" and phase_for(0.15, "terminal") == "declining"
    assert phase_for(0.49, "thriving") == "conservation"  # down at once, however far
    assert phase_for(0.69, "thriving") == "stable"


def test_what_follows_the_phase() -> None:
    assert legacy_confidence("declining") == 0.4 and legacy_confidence("terminal") == 0.1
    assert legacy_confidence("stable") == 0.4  # legacy due by the Hayflick ratio alone
    assert reserve_share("stable", 0.6) == 0 and reserve_share("conservation", 0.3) == 0
    assert reserve_share("declining", 0.2) == pytest.approx(0.25)  # 0.5 · (1 − (0.2 − 0.1) / 0.2)
    assert reserve_share("declining", 0.1) == pytest.approx(0.5) and reserve_share("terminal", 0.05) == 1
    assert reserve_share("terminal", None) == 1 and reserve_share("declining", None) == 0.5  # reported, no clocks
    assert reserve_share("thriving", None) == 0
    assert [curator_period_factor(p) for p in ("thriving", "stable", "conservation", "declining", "terminal")] \
        == [1, 1, 2, 0.5, 0.5]


def test_terminal_shares_what_declining_keeps() -> None:
    weak = Candidate(Kind.INSIGHT, 0.2, 0)
    assert crossing_reason(weak, now_ms=1, tick_seconds=10, legacy=True, legacy_confidence=0.4) is None
    assert crossing_reason(weak, now_ms=1, tick_seconds=10, legacy=True, legacy_confidence=0.1) == "legacy"
    contradicted = Candidate(Kind.INSIGHT, 0.2, 0, negative=2, positive=1)  # never, even in terminal
    assert crossing_reason(contradicted, now_ms=1, tick_seconds=10, legacy=True, legacy_confidence=0.1) is None


def test_a_budget_keeps_the_phases_share_for_the_death_protocol() -> None:
    b = Budget(monthly=5.0, death_reserve=0.5, max_per_tick=None, price_per_call=1.0, price_per_query=0.01)
    assert b.cap() == 4.5
    b.reserve_share = 0.25
    assert b.cap() == pytest.approx(3.75) and b.cap(death=True) == 5.0
    b.reserve_share = 1.0  # terminal: nothing ordinary; the death protocol may spend it all
    assert b.cap() == 0 and not b.allows(1, now_s=0, month="2026-11") and not b.allows_query(month="2026-11")
    assert b.allows(1, now_s=0, month="2026-11", death=True)
    b.reserve_share = 0.05  # below the configured reserve: the configured one holds
    assert b.cap() == 4.5


@pytest.mark.parametrize(("kwargs", "field"), [
    ({}, "phase"), ({"phase": "dying"}, "phase"), ({"economic": 0.5}, "epistemic"),
    ({"epistemic": 0.5}, "economic"), ({"economic": 1.5, "epistemic": 0.5}, "economic"),
    ({"economic": 0.5, "epistemic": math.nan}, "epistemic"), ({"economic": True, "epistemic": 0.5}, "economic"),
    ({"economic": 0.5, "epistemic": 0.5, "age_factor": -1}, "age_factor"),
    ({"phase": "stable", "age_factor": 1}, "economic")])
def test_a_bad_report_names_its_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidValue) as err:
        Vitality.checked(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_the_stored_report_derives_its_phase_from_the_last_one(store: Grimoire) -> None:
    assert read_vitality(store.connection) == Vitality() and Vitality().phase == "stable"
    assert Vitality().source == "default"

    def report(**kwargs: object) -> Vitality:
        with raw_write(store) as conn:
            written = write_vitality(conn, Vitality.checked(**kwargs), now_ms=1_000)  # type: ignore[arg-type]
        assert read_vitality(store.connection) == written
        return written

    low = report(economic=0.25, epistemic=0.8)  # composite ≈ 0.36
    assert (low.phase, low.source, low.reported) == ("conservation", "derived", None)
    assert low.composite == pytest.approx(Clocks(0.25, 0.8).composite) and 0.3 <= (low.composite or 0) < 0.5
    near = report(economic=0.315, epistemic=0.8)  # ≈ 0.52: above 0.5, below 0.55
    assert 0.5 <= (near.composite or 0) < 0.55 and near.phase == "conservation"  # hysteresis: stays
    up = report(economic=0.35, epistemic=0.8)  # ≈ 0.60
    assert up.phase == "stable" and up.reserve_share == 0 and not up.legacy and up.curator_period_factor == 1
    dying = report(economic=0.1, epistemic=0.3, hayflick_ratio=0.5)
    assert dying.phase == "terminal" and dying.legacy and dying.legacy_confidence == 0.1
    assert dying.reserve_share == 1 and dying.curator_period_factor == 0.5
    overridden = report(phase="thriving", economic=0.1, epistemic=0.3)
    assert (overridden.phase, overridden.source, overridden.derived) == ("thriving", "reported", "terminal")
    assert overridden.reserve_share == 0 and not overridden.legacy  # the override decides what follows
    only_phase = report(phase="declining")  # a PUT replaces the report: the clocks are no longer reported
    assert only_phase.clocks is None and only_phase.derived is None and only_phase.reserve_share == 0.5
    doc = only_phase.to_json()
    assert doc["phase"] == "declining" and doc["composite"] is None and doc["legacy"] is True
