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


def test_relevance_adds_weighted_coverage_to_clipped_cosine() -> None:
    assert fusion.LEXICAL_WEIGHT == 0.4
    assert fusion.relevance(0.5, 0.0) == 0.5
    assert fusion.relevance(0.5, 1.0) == pytest.approx(0.9)
    assert fusion.relevance(0.5, 0.5, weight=0.2) == pytest.approx(0.6)
    assert fusion.relevance(-0.3, 0.5) == pytest.approx(0.2)  # negative cosine counts 0
    assert fusion.relevance(None, 1.0) == pytest.approx(0.4)  # no vector yet: words alone
    assert fusion.relevance(0.2, 7.0) == pytest.approx(0.6)  # coverage is clamped to 0..1
    assert fusion.relevance(0.7, 1.0, weight=0.0) == 0.7  # weight 0: cosine alone (the ranking before fusion)


def test_a_common_word_moves_a_candidate_less_than_a_rare_one() -> None:
    n = 700
    query = {"caroline": lexical.idf(350, n), "adopt": lexical.idf(3, n)}
    name_only = fusion.relevance(0.40, lexical.coverage(query, {"caroline", "hike"}))
    rare = fusion.relevance(0.35, lexical.coverage(query, {"adopt", "agenc"}))
    assert rare > name_only
    assert name_only - 0.40 < 0.05  # a speaker's name everywhere is nearly no evidence
