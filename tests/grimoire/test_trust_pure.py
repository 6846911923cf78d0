"""Per-author trust, quarantine verdicts, digest caps and provenance through merges: pure, exact values
(daemon/grimoire/trust.py, curator/compress.py)."""

from __future__ import annotations

import pytest

from crdt import Kind
from daemon.grimoire.trust import (
    AuthorEvidence,
    EntryFacts,
    Release,
    TrustPolicy,
    author_view,
    digest_visible,
    over_budget,
    reporter_reliability,
    trial_chance,
    trial_draw,
    verdict,
)

P = TrustPolicy()
NOW = 1_800_000_000_000
DAY = 86_400_000


def facts(kind: Kind = Kind.INSIGHT, *, foreign: bool = True, age_ms: int = 0, **kw: object) -> EntryFacts:
    return EntryFacts("e" * 32, "x", kind, foreign, NOW - age_ms, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("evidence", "trust", "reasons"), [
    (AuthorEvidence(), 0.5, ()),
    (AuthorEvidence(good=3), 0.714286, ()),  # (4·0.5 + 3) / (4 + 3)
    (AuthorEvidence(bad=1), 0.4, ()),  # 2 / 5
    (AuthorEvidence(bad=2), 0.333333, ()),  # 2 / 6 < 0.35, but on too little evidence (low_trust_evidence 4)
    (AuthorEvidence(good=1, bad=3), 0.375, ()),
    (AuthorEvidence(bad=4), 0.25, ("low_trust",)),  # 2 / 8 on four pieces
    (AuthorEvidence(good=5, distrusted=True), 0.0, ("distrusted",)),
    (AuthorEvidence(fresh_arrivals=100), 0.5, ()),
    (AuthorEvidence(fresh_arrivals=101, arrivals=101), 0.5, ("burst",)),
    (AuthorEvidence(arrivals=5001), 0.5, ("catchup_flood",)),  # a backdated flood passing as catch-up
])
def test_author_trust_is_a_beta_posterior_and_suspicion_names_its_reasons(
        evidence: AuthorEvidence, trust: float, reasons: tuple[str, ...]) -> None:
    view = author_view("x", evidence, P)
    assert (view.trust, view.reasons, view.suspect) == (trust, reasons, bool(reasons))


def test_vouching_takes_two_pieces_of_local_evidence() -> None:
    assert author_view("y", AuthorEvidence(good=1), P).trust < P.vouch_trust <= author_view(
        "y", AuthorEvidence(good=2), P).trust  # 0.6 < 0.65 <= 0.666667


def test_a_reporter_is_judged_by_how_its_evidence_agreed_with_ours() -> None:
    assert reporter_reliability(2, 0, P) is None  # too few entries compared
    assert reporter_reliability(3, 0, P) is True  # 5/7 = 0.714 ≥ 0.6
    assert reporter_reliability(4, 2, P) is True  # 6/10 = 0.6
    assert reporter_reliability(2, 1, P) is None  # 4/7 = 0.571: undecided
    assert reporter_reliability(0, 3, P) is False  # 2/7 = 0.286 ≤ 0.35: it reports what did not happen here
    assert reporter_reliability(1, 6, P) is False


def test_a_week_of_catch_up_is_not_a_burst() -> None:
    assert over_budget(AuthorEvidence(fresh_arrivals=3, arrivals=1500), P) == ()


@pytest.mark.parametrize(("entry", "author", "release"), [
    (facts(foreign=False), None, Release.OWN),
    (facts(), None, Release.UNVERIFIED),  # just arrived, no evidence
    (facts(positive=1), None, Release.CORROBORATED),
    (facts(vouched_confirms=1, vouched_contradicts=1), None, Release.UNVERIFIED),
    (facts(vouched_confirms=1), None, Release.CORROBORATED),
    (facts(age_ms=DAY), None, Release.AGED),
    (facts(age_ms=DAY - 1), None, Release.UNVERIFIED),
    (facts(age_ms=DAY, negative=1), None, Release.UNVERIFIED),  # contradicted: never ages out
    (facts(age_ms=DAY, vouched_contradicts=1), None, Release.UNVERIFIED),
    (facts(positive=1, negative=1), None, Release.UNVERIFIED),  # as much against as for
    (facts(positive=2, negative=1), None, Release.CORROBORATED),
    (facts(age_ms=DAY), author_view("x", AuthorEvidence(fresh_arrivals=999), P), Release.UNVERIFIED),  # suspect
    (facts(positive=3), author_view("x", AuthorEvidence(distrusted=True), P), Release.UNVERIFIED),
    (facts(positive=1), author_view("x", AuthorEvidence(bad=5), P), Release.CORROBORATED),  # this entry held up
    # An author with a good record here: released on arrival (0.6 on 4 pieces; not on 3, not at 0.5)
    (facts(), author_view("x", AuthorEvidence(good=3, bad=1), P), Release.VOUCHED),
    (facts(), author_view("x", AuthorEvidence(good=3), P), Release.UNVERIFIED),
    (facts(), author_view("x", AuthorEvidence(good=2, bad=2), P), Release.UNVERIFIED),
    (facts(negative=1), author_view("x", AuthorEvidence(good=9), P), Release.UNVERIFIED),  # contradicted here
    (facts(), author_view("x", AuthorEvidence(good=9, fresh_arrivals=999), P), Release.UNVERIFIED),  # suspect
])
def test_verdict(entry: EntryFacts, author: object, release: Release) -> None:
    assert verdict(entry, author, now_ms=NOW, policy=P) is release  # type: ignore[arg-type]


def test_unverified_warnings_are_shown_unless_their_author_is_suspect() -> None:
    good = author_view("x", AuthorEvidence(), P)
    bad = author_view("x", AuthorEvidence(bad=4), P)
    no_trial = TrustPolicy(trial=False)
    assert digest_visible(facts(Kind.WARNING), Release.UNVERIFIED, good, no_trial) is True
    assert digest_visible(facts(Kind.ANTI_KNOWLEDGE), Release.UNVERIFIED, None, no_trial) is True
    assert digest_visible(facts(Kind.REGIME_SHIFT), Release.UNVERIFIED, good, no_trial) is False
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, good, no_trial) is False
    assert digest_visible(facts(Kind.WARNING), Release.UNVERIFIED, bad, no_trial) is False
    assert digest_visible(facts(Kind.INSIGHT), Release.AGED, bad, no_trial) is True


def test_a_member_in_good_standing_has_its_new_entries_shown_on_trial() -> None:
    """A clean record is neutral, not zero: a sibling's fresh insight is shown at once; not once
    it was contradicted here, nor for a flooding or distrusted author, nor with trials off."""
    fresh = author_view("x", AuthorEvidence(), P)
    assert fresh.trust == 0.5 and not fresh.suspect
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, fresh, P) is True
    assert digest_visible(facts(Kind.REGIME_SHIFT), Release.UNVERIFIED, None, P) is True  # nothing known: neutral
    assert digest_visible(facts(Kind.INSIGHT, negative=1), Release.UNVERIFIED, fresh, P) is False
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, fresh, TrustPolicy(trial=False)) is False
    flooding = author_view("x", AuthorEvidence(fresh_arrivals=P.budget_entries + 1), P)
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, flooding, P) is False
    distrusted = author_view("x", AuthorEvidence(distrusted=True), P)
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, distrusted, P) is False


@pytest.mark.parametrize(("good", "bad", "chance"), [
    (0, 0, 1.0), (3, 0, 1.0), (1, 1, 1.0),  # clean, good, even: every new entry on trial
    (0, 1, 0.625), (0, 2, 0.375), (0, 3, 0.21875),  # Beta(2, 2 + bad) above 0.5, over the prior's 0.5
])
def test_trial_chance_is_a_thompson_draw_relative_to_a_clean_record(good: int, bad: int, chance: float) -> None:
    assert trial_chance(AuthorEvidence(good=good, bad=bad), P) == pytest.approx(chance, abs=1e-3)


def test_an_unlucky_author_is_tried_again_and_a_bad_one_less_and_less() -> None:
    """Of 2,000 fresh entries, the share on trial follows the author's record; the draw is fixed
    per (entry, record), so the same search does not flicker."""
    def shown(evidence: AuthorEvidence) -> float:
        view = author_view("x", evidence, P)
        ids = [f"{i:032x}" for i in range(2000)]
        return sum(digest_visible(EntryFacts(i, "x", Kind.INSIGHT, True, NOW), Release.UNVERIFIED, view, P)
                   for i in ids) / len(ids)

    unlucky, worse = shown(AuthorEvidence(bad=2)), shown(AuthorEvidence(bad=3))
    assert 0.33 < unlucky < 0.42 and 0.18 < worse < 0.26
    assert not author_view("x", AuthorEvidence(bad=3), P).suspect  # too little evidence to suspect …
    assert author_view("x", AuthorEvidence(bad=4), P).reasons == ("low_trust",)  # … enough: suspect, no trial
    assert shown(AuthorEvidence(bad=4)) == 0.0
    facts_ = EntryFacts("f" * 32, "x", Kind.INSIGHT, True, NOW)
    assert len({trial_draw(facts_.id, AuthorEvidence(bad=2)) for _ in range(3)}) == 1


def test_a_bad_record_on_little_evidence_stops_aging_but_is_not_suspect() -> None:
    """Two failures and nothing else: trust 0.33, below low_trust, yet not suspect (four pieces
    of evidence are needed); its uncontradicted entries no longer age out of quarantine."""
    view = author_view("x", AuthorEvidence(bad=2), P)
    assert not view.suspect and view.trust < P.low_trust
    assert verdict(facts(age_ms=2 * DAY), view, now_ms=NOW, policy=P) is Release.UNVERIFIED
    assert verdict(facts(age_ms=2 * DAY), author_view("x", AuthorEvidence(), P), now_ms=NOW,
                   policy=P) is Release.AGED
