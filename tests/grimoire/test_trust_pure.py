"""Per-author trust, quarantine verdicts, digest caps and provenance through merges: pure, exact values
(daemon/grimoire/trust.py, curator/compress.py)."""

from __future__ import annotations

import pytest

from crdt import Kind
from daemon.grimoire.curator.compress import Similar, find_merges
from daemon.grimoire.trust import (
    AuthorEvidence,
    EntryFacts,
    Release,
    TrustPolicy,
    author_view,
    digest_visible,
    diversify,
    over_budget,
    reporter_reliability,
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
    (AuthorEvidence(bad=2), 0.333333, ("low_trust",)),  # 2 / 6 < 0.35
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
    bad = author_view("x", AuthorEvidence(bad=3), P)
    assert digest_visible(facts(Kind.WARNING), Release.UNVERIFIED, good) is True
    assert digest_visible(facts(Kind.ANTI_KNOWLEDGE), Release.UNVERIFIED, None) is True
    assert digest_visible(facts(Kind.REGIME_SHIFT), Release.UNVERIFIED, good) is False
    assert digest_visible(facts(Kind.INSIGHT), Release.UNVERIFIED, good) is False
    assert digest_visible(facts(Kind.WARNING), Release.UNVERIFIED, bad) is False
    assert digest_visible(facts(Kind.INSIGHT), Release.AGED, bad) is True


def test_diversify_caps_each_sibling_never_the_golem_itself() -> None:
    ranked = [("x", True, True), ("x", True, True), ("me", False, False), ("x", True, False), ("x", True, False),
              ("x", True, False), ("g", True, False), ("me", False, False), ("me", False, False),
              ("me", False, False)]
    assert diversify(ranked, k=10, policy=P) == [0, 2, 3, 4, 6, 7, 8, 9]  # x: one unverified, three in all
    assert diversify(ranked, k=2, policy=P) == [0, 2, 6, 7, 8, 9]  # ⌊0.3·2⌋ = 0: at least one each
    assert diversify(ranked, k=10, policy=TrustPolicy(unverified_per_author=0)) == [2, 3, 4, 5, 6, 7, 8, 9]


def sim(id_: str, *, own: bool = False, verified: bool = True, conf: float = 0.4, evidence: int = 0,
        created: int = NOW) -> Similar:
    return Similar(id_ * 32, Kind.INSIGHT, "Keep the Aave health factor above 1.5 on Base", own, conf, evidence,
                   created, verified)


def test_a_quarantined_copy_never_wins_a_merge_nor_passes_its_evidence() -> None:
    honest = sim("a", evidence=1, created=NOW)
    # the attacker's exact copy: backdated (older wins ties), more evidence, higher confidence
    laundered = sim("b", verified=False, conf=0.9, evidence=7, created=NOW - 30 * DAY)
    (merge,) = find_merges([honest, laundered], {})
    assert (merge.winner, merge.loser, merge.evidence) == (honest.id, laundered.id, 1)
    both = find_merges([sim("c", verified=False, evidence=2), sim("d", verified=False, evidence=3)], {})
    assert [(m.winner, m.evidence) for m in both] == [("d" * 32, 3)]  # all quarantined: the winner keeps its own


def test_the_alert_counters_are_prometheus_families() -> None:
    from daemon.metrics.names import CounterName, counter_family

    assert counter_family("suspect_author") == CounterName("suspect_author")  # clade_suspect_author_total
    assert counter_family("event_suspect_author") == CounterName("events", "event", "suspect_author")
