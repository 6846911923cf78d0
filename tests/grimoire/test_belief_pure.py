"""The pooled belief (daemon/grimoire/belief.py), pure: exact values of the formula, the
weights, the per-writer cap, and what refutes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.grimoire.belief import BeliefPolicy, SiblingEvidence, pooled_belief, track_record, writer_weight

P = BeliefPolicy()


def test_no_evidence_is_the_stated_confidence_clipped() -> None:
    assert pooled_belief(0.7, 0, 0, ()).belief == pytest.approx(0.7)
    assert pooled_belief(1.0, 0, 0, ()).belief == pytest.approx(0.9)  # nobody's word is certain
    assert pooled_belief(0.0, 0, 0, ()).belief == pytest.approx(0.05)


def test_own_outcomes_count_in_full_and_siblings_by_their_weight() -> None:
    # (4·0.7 + 1) / (4 + 1 + 0) = 0.76
    assert pooled_belief(0.7, 1, 0, ()).belief == pytest.approx(0.76)
    voucher = SiblingEvidence("v", 0, 2, writer_weight(voucher=True, suspect=False))
    member = SiblingEvidence("m", 0, 2, writer_weight(voucher=False, suspect=False))
    suspect = SiblingEvidence("s", 0, 2, writer_weight(voucher=True, suspect=True))
    # (2.8) / (4 + 2) = 0.4667 for a voucher; (2.8) / (4 + 0.5) = 0.6222 for a member; nothing for a suspect
    assert pooled_belief(0.7, 0, 0, [voucher]).belief == pytest.approx(2.8 / 6)
    assert pooled_belief(0.7, 0, 0, [member]).belief == pytest.approx(2.8 / 4.5)
    assert pooled_belief(0.7, 0, 0, [suspect]).belief == pytest.approx(0.7)
    b = pooled_belief(0.7, 1, 0, [voucher, member, suspect])
    assert (b.own_positive, b.clade_negative, b.siblings) == (1, pytest.approx(2.5), 2)


def test_one_writer_cannot_outvote_the_clade_with_big_numbers() -> None:
    flood = SiblingEvidence("x", 0, 1_000_000, writer_weight(voucher=False, suspect=False))
    b = pooled_belief(0.8, 0, 0, [flood])
    assert b.clade_negative == pytest.approx(P.per_writer_cap * P.member_weight)  # 4 × 0.25 = 1 outcome
    assert not b.refuted and b.belief == pytest.approx(3.2 / 5)


def test_two_voucher_failures_refute_an_attackers_contradictions_do_not() -> None:
    v1 = SiblingEvidence("v1", 0, 1, 1.0)
    v2 = SiblingEvidence("v2", 0, 1, 1.0)
    assert pooled_belief(0.8, 0, 0, [v1]).refuted is False  # one failure is not enough
    assert pooled_belief(0.8, 0, 0, [v1, v2]).refuted is False  # 3.2/6 = 0.53: the prior still holds
    assert pooled_belief(0.7, 0, 0, [v1, v2]).refuted is True  # 2.8/6 = 0.47 on 2 weighted negatives
    assert pooled_belief(0.7, 0, 2, []).refuted is True  # this golem's own two failures
    attackers = [SiblingEvidence(f"x{i}", 0, 50, 0.25) for i in range(8)]  # eight members, none a voucher
    flooded = pooled_belief(0.6, 1, 0, attackers)
    assert flooded.belief < 0.5 and not flooded.refuted  # they move the belief; they never refute
    assert pooled_belief(0.6, 0, 1, [*attackers, SiblingEvidence("v", 0, 1, 1.0)]).refuted  # own + a voucher's do
    lifted = pooled_belief(0.7, 2, 0, [v1, v2])
    assert not lifted.refuted  # more positive evidence lifts it again


@given(stated=st.floats(0, 1), own_p=st.integers(0, 50), own_n=st.integers(0, 50),
       sib=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from([0.0, 0.25, 1.0])),
                    max_size=8))
def test_belief_is_a_probability_and_monotone_in_evidence(stated: float, own_p: int, own_n: int,
                                                          sib: list[tuple[int, int, float]]) -> None:
    siblings = [SiblingEvidence(f"w{i}", p, n, w) for i, (p, n, w) in enumerate(sib)]
    b = pooled_belief(stated, own_p, own_n, siblings)
    assert 0.0 <= b.belief <= 1.0
    assert pooled_belief(stated, own_p + 1, own_n, siblings).belief >= b.belief - 1e-12
    assert pooled_belief(stated, own_p, own_n + 1, siblings).belief <= b.belief + 1e-12
    assert pooled_belief(stated, own_p, own_n, list(reversed(siblings))).belief == pytest.approx(b.belief)


def test_track_record() -> None:
    assert track_record(0, 0) == pytest.approx(0.5)
    assert track_record(0, 4) == pytest.approx(0.25)
    assert track_record(4, 0) == pytest.approx(0.75)
