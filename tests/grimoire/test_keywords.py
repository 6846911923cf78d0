"""Keyword search leaves out words too common to rank by (daemon/grimoire/keywords.py), on a
real SQLite store: the rarest words are kept while the entries they match fit the budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdt import Kind
from daemon.errors import UsageError
from daemon.grimoire import Grimoire, NewEntry, keywords
from daemon.grimoire.keywords import affordable, query_words
from tests.helpers.crdt_sim import IDENTITIES
from tests.helpers.seed import seed


@pytest.fixture
def store(tmp_path: Path) -> Grimoire:
    """Six entries about gas (one also about a bridge), and one about a rare oracle."""
    s = Grimoire.open(tmp_path / "g.db", create=True)
    seed(s, [NewEntry(kind=Kind.WARNING, content=f"gas spikes at block {i}") for i in range(5)]
           + [NewEntry(kind=Kind.WARNING, content="gas spikes while the bridge is congested"),
              NewEntry(kind=Kind.FACT, content="the chainlink oracle lags by one heartbeat")],
           identity=IDENTITIES[0])
    return s


def test_query_words_are_plain_distinct_words_without_function_words() -> None:
    assert query_words('The "gas" OR gas* NEAR(bridge)') == ["gas", "near", "bridge"]
    assert query_words("the of") == ["the", "of"]  # nothing else to search by
    # The words that frame a question are not searched by: "did" and "ago" matched turns sharing only them.
    assert query_words("How many weeks ago did I start using Ibotta?") == ["weeks", "start", "using", "ibotta"]
    assert query_words("how much did") == ["how", "much", "did"]  # nothing else to search by
    with pytest.raises(UsageError):
        query_words("  -- ")


def test_the_rarest_words_are_kept_within_the_budget(store: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    assert affordable(store.connection, ["gas", "bridge", "oracle"]) == ["bridge", "oracle", "gas"]  # all fit
    monkeypatch.setattr(keywords, "MAX_POSTINGS", 5)
    # gas is in 6 entries: more than the budget on its own, so it goes; unknown words count as rare.
    assert affordable(store.connection, ["gas", "bridge", "oracle", "zzz"]) == ["zzz", "bridge", "oracle"]
    assert [store.get(i).body.content for i, _ in store.keyword_scores("gas bridge", k=5)] == [
        "gas spikes while the bridge is congested"]
    assert store.keyword_scores("gas spikes", k=5) == []  # every word too common: vector search answers


def test_below_the_budget_ranking_is_unchanged(store: Grimoire) -> None:
    hits = store.keyword_scores("gas bridge", k=10)
    assert len(hits) == 6 and store.get(hits[0][0]).body.content == "gas spikes while the bridge is congested"


def test_a_word_finds_the_other_forms_of_its_stem(tmp_path: Path) -> None:
    s = Grimoire.open(tmp_path / "stems.db", create=True)
    seed(s, [NewEntry(kind=Kind.FACT, content="Melanie painted a sunrise by the lake"),
            NewEntry(kind=Kind.FACT, content="happiness is a painter's studio"),
            NewEntry(kind=Kind.FACT, content="the bridge was congested")], identity=IDENTITIES[0])
    postings = keywords.stem_postings(s.connection, ["painting", "happy", "zzz"])
    assert [(p.stem, p.terms, p.entries) for p in postings] == [
        ("paint", ("painted",), 1), ("happi", ("happiness",), 1), ("zzz", ("zzz",), 0)]
    found = [s.get(i).body.content for i, _ in s.keyword_scores("painting", k=5)]
    assert found == ["Melanie painted a sunrise by the lake"]  # "painter's" is another stem ("painter")
    weights = keywords.stem_weights(s.connection, "When did Melanie paint the lost bridge?")
    assert list(weights) == ["melani", "paint", "lost", "bridg"]  # "did" frames the question: dropped
    assert weights["lost"] > weights["paint"]  # held by no entry: rarer than a word one entry holds
    assert keywords.stem_weights(s.connection, "!!!") == {}
    s.close()


def test_query_terms_are_affordable_and_stem_weights_from_one_lookup(store: Grimoire) -> None:
    for query in ("gas bridge", "the oracle lags", "the of", "gas zzz spikes"):
        terms = keywords.query_terms(store.connection, query)
        assert list(terms.match) == affordable(store.connection, query_words(query))
        assert terms.weights == keywords.stem_weights(store.connection, query)
        assert store.keyword_scores(query, k=5, terms=terms) == store.keyword_scores(query, k=5)
    with pytest.raises(UsageError):
        keywords.query_terms(store.connection, "!!!")


def test_rank_rows_are_rank_fields_with_the_searchable_text(store: Grimoire) -> None:
    ids = [i for i, _ in store.keyword_scores("gas oracle", k=10)]
    assert len(ids) == 7
    rows = {c.id: (c, text) for c, text in store.rank_rows([*ids, "missing"])}
    assert rows.keys() == set(ids)
    assert {c.id: c for c, _ in rows.values()} == {c.id: c for c in store.rank_fields(ids)}
    assert {i: text for i, (_, text) in rows.items()} == keywords.searchable_texts(store.connection, ids)


def test_underscores_split_words_as_the_index_and_coverage_do(store: Grimoire) -> None:
    """One tokenizer (lexical.words): "gas_price" is "gas" and "price" for the query's words and
    weights, as for FTS5 and coverage, so no query word weighs what no entry can hold."""
    from daemon.grimoire import lexical

    assert query_words("gas_price bridge__fee") == ["gas", "price", "bridge", "fee"]
    weights = keywords.query_terms(store.connection, "gas_price").weights
    covered = lexical.coverage(weights, lexical.stem_sets({"e": "gas_price spikes"})["e"])
    assert set(weights) == {"gas", "price"} and covered == pytest.approx(1.0)
    with pytest.raises(UsageError):
        query_words("___")
