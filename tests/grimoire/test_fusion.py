"""Fusion's pure parts, with hand-made inputs and exact outputs: stems, IDF, coverage, relevance."""

from __future__ import annotations

import math

import pytest

from daemon.grimoire import fusion, lexical


def test_stems_drop_function_words_and_meet_at_the_stem() -> None:
    assert lexical.stems("What did Melanie paint? She painted, and is painting!") == ["did", "melani", "paint", "she"]
    assert lexical.stems("the of and") == []
    assert lexical.stems("Studies: the study_group") == ["studi", "group"]  # underscore splits, as in FTS5
    text = "Caroline: I went to the LGBTQ support group, researching adoption agencies [image: a poster]"
    assert lexical.stem_sets({"a": text, "b": "the"}) == {"a": set(lexical.stems(text)), "b": set()}
    assert lexical.stem_sets({}) == {}


def test_idf_is_bm25s_and_falls_with_frequency() -> None:
    assert lexical.idf(0, 100) == pytest.approx(math.log(1 + 100.5 / 0.5))
    assert lexical.idf(50, 100) == pytest.approx(math.log(2))
    assert lexical.idf(1, 100) > lexical.idf(10, 100) > lexical.idf(100, 100) > 0


def test_coverage_is_the_share_of_the_querys_idf_mass_held() -> None:
    query = {"paint": 3.0, "sunris": 1.0}
    assert lexical.coverage(query, {"paint", "sunris", "lake"}) == 1.0
    assert lexical.coverage(query, {"paint"}) == 0.75
    assert lexical.coverage(query, ["sunris"]) == 0.25
    assert lexical.coverage(query, set()) == 0.0
    assert lexical.coverage({}, {"paint"}) == 0.0


def test_relevance_adds_weighted_coverage_to_the_power_to_clipped_cosine() -> None:
    assert (fusion.LEXICAL_WEIGHT, fusion.COVERAGE_POWER) == (0.45, 1.5)
    assert fusion.relevance(0.5, 0.0) == 0.5
    assert fusion.relevance(0.5, 1.0) == pytest.approx(0.95)  # full coverage: the whole weight
    assert fusion.relevance(0.5, 0.25) == pytest.approx(0.5 + 0.45 * 0.125)  # a quarter: an eighth of it
    assert fusion.relevance(0.5, 0.5, weight=0.2, power=1.0) == pytest.approx(0.6)  # step 15's linear form
    assert fusion.relevance(-0.3, 0.5) == pytest.approx(0.45 * 0.5 ** 1.5)  # negative cosine counts 0
    assert fusion.relevance(None, 1.0) == pytest.approx(0.45)  # no vector yet: words alone
    assert fusion.relevance(0.2, 7.0) == pytest.approx(0.65)  # coverage is clamped to 0..1
    assert fusion.relevance(0.2, -1.0) == pytest.approx(0.2)
    assert fusion.relevance(0.7, 1.0, weight=0.0) == 0.7  # weight 0: cosine alone (the ranking before fusion)


def test_a_partial_match_no_longer_outranks_a_closer_meaning_but_a_full_one_still_does() -> None:
    """The decoy shape of the keyword-disjoint corpora: the answer shares no word with the
    question (coverage 0) and a same-topic neighbour shares part of it. With step 15's linear
    weight the neighbour's 0.3 of the query's IDF mass (+0.12) beat a 0.1 lead in cosine; now
    it adds 0.074 and the closer meaning stays first. An entry holding all the query's words
    (the conversational case) still overtakes a 0.4 lead."""
    answer = fusion.relevance(0.50, 0.0)
    decoy = fusion.relevance(0.40, 0.3)
    assert answer > decoy
    assert fusion.relevance(0.40, 0.3, weight=0.4, power=1.0) > answer  # what step 15 did
    assert fusion.relevance(0.15, 1.0) > fusion.relevance(0.55, 0.0)


def test_relevance_is_monotone_in_cosine_and_coverage() -> None:
    grid = [i / 10 for i in range(11)]
    for c in grid:
        for v in grid[:-1]:
            assert fusion.relevance(c, v + 0.1) > fusion.relevance(c, v)
            assert fusion.relevance(c + 0.1, v) > fusion.relevance(c, v)


def test_a_common_word_moves_a_candidate_less_than_a_rare_one() -> None:
    n = 700
    query = {"caroline": lexical.idf(350, n), "adopt": lexical.idf(3, n)}
    name_only = fusion.relevance(0.40, lexical.coverage(query, {"caroline", "hike"}))
    rare = fusion.relevance(0.35, lexical.coverage(query, {"adopt", "agenc"}))
    assert rare > name_only
    assert name_only - 0.40 < 0.05  # a speaker's name everywhere is nearly no evidence
