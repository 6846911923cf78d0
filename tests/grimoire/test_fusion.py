"""Fusion's pure parts, with hand-made inputs and exact outputs: stems, IDF, coverage, relevance."""

from __future__ import annotations

import math

import pytest

from daemon.grimoire import fusion, lexical


def test_stems_drop_function_words_and_meet_at_the_stem() -> None:
    assert lexical.stems("What did Melanie paint? She painted, and is painting!") == ["melani", "paint", "she"]
    assert lexical.stems("the of and") == []
    assert lexical.stems("Studies: the study_group") == ["studi", "group"]  # underscore splits, as in FTS5
    text = "Caroline: I went to the LGBTQ support group, researching adoption agencies [image: a poster]"
    assert lexical.stem_sets({"a": text, "b": "the"}) == {"a": set(lexical.stems(text)), "b": set()}
    assert lexical.stem_sets({}) == {}


def test_the_words_that_frame_a_question_are_not_what_it_asks_about() -> None:
    # The framing ("many", "ago", "did") is dropped; what it asks about stays, "weeks" included.
    assert lexical.stems("How many weeks ago did I start using the cashback app Ibotta?") == [
        "week", "start", "use", "cashback", "app", "ibotta"]
    assert lexical.stems("How much is it worth? Have you ever been? To whom, and whose?") == ["worth"]
    assert lexical.stem_counts("Ibotta, Ibotta and the cashback app") == {"ibotta": 2, "cashback": 1, "app": 1}


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


def test_reach_is_the_share_of_the_querys_idf_mass_some_candidate_holds() -> None:
    query = {"go": 2.0, "camp": 1.0, "did": 1.0}
    assert lexical.reach(query, [{"camp", "rain"}, {"tent"}]) == 0.25
    assert lexical.reach(query, [{"camp"}, {"go"}]) == 0.75
    assert lexical.reach(query, []) == 0.0
    assert lexical.reach({}, [{"camp"}]) == 0.0


def test_held_coverage_is_coverage_of_what_the_candidates_reach() -> None:
    assert fusion.held_coverage(0.25, 0.25) == 1.0
    assert fusion.held_coverage(0.1, 0.4) == pytest.approx(0.25)
    assert fusion.held_coverage(0.3, 0.0) == 0.0  # no candidate holds any query word
    assert fusion.held_coverage(0.5, 0.25) == 1.0  # clamped


def test_relevance_adds_both_coverages_to_their_powers_to_clipped_cosine() -> None:
    constants = (fusion.LEXICAL_WEIGHT, fusion.COVERAGE_POWER, fusion.HELD_WEIGHT, fusion.HELD_POWER)
    assert constants == (0.3, 1.5, 0.45, 3.0)
    assert fusion.relevance(0.5, 0.0, 1.0) == 0.5
    assert fusion.relevance(0.5, 1.0, 1.0) == pytest.approx(1.25)  # every query word: both weights
    assert fusion.relevance(0.5, 0.25, 0.25) == pytest.approx(0.5 + 0.3 * 0.125 + 0.45)  # every word reached
    assert fusion.relevance(0.5, 0.5, 1.0) == pytest.approx(0.5 + 0.3 * 0.5 ** 1.5 + 0.45 * 0.125)
    assert fusion.relevance(-0.3, 0.0, 1.0) == 0.0  # negative cosine counts 0
    assert fusion.relevance(None, 1.0, 1.0) == pytest.approx(0.75)  # no vector yet: words alone
    assert fusion.relevance(0.2, 7.0, 1.0) == pytest.approx(0.95)  # coverage is clamped to 0..1
    assert fusion.relevance(0.2, -1.0, 1.0) == pytest.approx(0.2)
    assert fusion.relevance(0.7, 0.0, 0.0, weight=0.0) == 0.7  # the retriever's weight 0: cosine alone
    assert fusion.relevance(0.5, 1.0, 1.0, weight=0.1) == pytest.approx(1.05)


def test_a_partial_match_no_longer_outranks_a_closer_meaning_but_a_full_one_still_does() -> None:
    """The decoy shape of the keyword-disjoint corpora: the answer shares no word with the
    question (coverage 0) and a same-topic neighbour shares part of it. With step 15's linear
    weight the neighbour's 0.3 of the query's IDF mass (+0.12) beat a 0.1 lead in cosine; now
    it adds 0.061 and the closer meaning stays first. An entry holding all the query's words
    (the conversational case) still overtakes a 0.4 lead."""
    answer = fusion.relevance(0.50, 0.0, 1.0)
    decoy = fusion.relevance(0.40, 0.3, 1.0)
    assert answer > decoy
    assert 0.40 + 0.4 * 0.3 > 0.50  # what step 15's relevance (cosine + 0.4 coverage) did
    assert fusion.relevance(0.15, 1.0, 1.0) > fusion.relevance(0.55, 0.0, 1.0)


def test_a_query_word_no_candidate_holds_does_not_dilute_the_one_that_matters() -> None:
    """"Where did we go camping?" (synthetic chat histories, bench/fusion_cv/chat.py): "did"
    and "go" are in no turn, so their IDF is the highest and the one turn saying "we went
    camping" covered 0.29 of the query; step 15 gave it +0.12 and a same-topic turn 0.13
    closer in cosine stayed first. Its held coverage is 1: it now ranks first."""
    n = 250
    query = {"did": lexical.idf(0, n), "go": lexical.idf(0, n), "camp": lexical.idf(1, n)}
    turns = {"answer": {"went", "camp", "rain"}, "tent": {"bought", "tent", "sleep", "bag"}}
    reach = lexical.reach(query, turns.values())
    covered = {k: lexical.coverage(query, v) for k, v in turns.items()}
    assert covered["answer"] == pytest.approx(0.29, abs=0.01)
    assert 0.34 + 0.4 * covered["answer"] < 0.47  # step 15: the tent turn first
    assert fusion.relevance(0.34, covered["answer"], reach) > fusion.relevance(0.47, covered["tent"], reach)


def test_relevance_is_monotone_in_cosine_and_coverage() -> None:
    grid = [i / 10 for i in range(11)]
    for reach in (0.3, 1.0):
        for c in grid:
            for v in grid[:-1]:
                assert fusion.relevance(c, v + 0.1, reach) > fusion.relevance(c, v, reach)
                assert fusion.relevance(c + 0.1, v, reach) > fusion.relevance(c, v, reach)


def test_a_common_word_moves_a_candidate_less_than_a_rare_one() -> None:
    n = 700
    query = {"caroline": lexical.idf(350, n), "adopt": lexical.idf(3, n)}
    reach = lexical.reach(query, [{"caroline", "hike"}, {"adopt", "agenc"}])
    name_only = fusion.relevance(0.40, lexical.coverage(query, {"caroline", "hike"}), reach)
    rare = fusion.relevance(0.35, lexical.coverage(query, {"adopt", "agenc"}), reach)
    assert rare > name_only
    assert name_only - 0.40 < 0.05  # a speaker's name everywhere is nearly no evidence


def test_the_stem_cache_stays_small_however_many_new_words_come() -> None:
    """Every entry's numbers and names are new words: a cache of 65,536 of them held 13 MiB and
    filled for hours, which read as the daemon's memory growing."""
    import tracemalloc

    from daemon.grimoire.lexical import stem

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert [stem(f"drifted{i}bps") for i in range(3)] == ["drifted0bp", "drifted1bp", "drifted2bp"]
        for i in range(20_000):
            stem(f"word{i}x")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2 * 2**20, grown / 2**20
