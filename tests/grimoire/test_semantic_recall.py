"""Semantic recall on a small DeFi corpus, against the real bundled embedding model (offline).

A regression test with each bundled model fixed: on `tests/helpers/semantic_corpus.py` (≥ 110
entries, ≥ 64 queries whose right answers share no keywords with the query, many with
near-miss neighbours) hybrid recall@5 stays within 95% of raw cosine with the same model
(lexical evidence points the wrong way here: fusion must not follow it) and hybrid recall@5
and recall@1 stay at what was measured (MiniLM, the default: 0.636 and 0.130 with step 20's
fusion, 0.610 and 0.143 with step 15's, 0.675 and 0.208 before it — bench/bench_fusion_cv.py and
bench/bench_locomo.py; MiniLM+MPNet: 0.792
and 0.351 before fusion, bench/bench_recall_options.py), and keyword-only recall@5 is
measurably lower (by at least 0.3). Run with `pytest -s` to see the numbers, mean reciprocal
ranks included.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from crdt import Kind
from crdt.body import Category
from crypto.identity import Identity
from daemon.embedding.catalogue import FUSED, MINILM
from daemon.embedding.embedder import DEFAULT_MODEL, DIM, ONNX_SHA256, expected_info, get_embedder
from daemon.errors import UsageError
from daemon.grimoire.retrieval import RecallQuery, Retriever
from daemon.grimoire.store import Grimoire
from tests.helpers.seed import seed
from tests.helpers.semantic_corpus import ENTRIES, QUERIES, content_words, shared_words

K = 5
MRR_DEPTH = 10
# Per bundled model: the minimum hybrid (recall@5, recall@1), about two queries under what was
# measured with fusion (MiniLM 0.610 / 0.143 with step 15's, 0.636 / 0.130 with step 20's:
# bench/bench_fusion_cv.py, bench/bench_locomo.py; MiniLM+MPNet 0.766 / 0.234
# against raw cosine's 0.805 / 0.338, this test on 2026-11-26). Fusion costs recall@1 on this
# keyword-disjoint corpus by design (it lifts LoCoMo's any@5 by 0.18): COSINE_SHARE guards @5.
MINIMUM = {MINILM: (0.58, 0.12), FUSED: (0.74, 0.21)}
COSINE_SHARE = 0.95  # hybrid recall@5 at least this share of raw cosine's
MIN_KEYWORD_GAP = 0.3


# --- the corpus itself ------------------------------------------------------------------


def test_corpus_is_big_enough_and_well_formed() -> None:
    keys = [e.key for e in ENTRIES]
    assert len(ENTRIES) >= 110, len(ENTRIES)
    assert len(QUERIES) >= 64, len(QUERIES)
    assert len(set(keys)) == len(keys), "entry keys must be unique"
    assert len({e.content for e in ENTRIES}) == len(ENTRIES), "entry contents must be unique"
    assert len({q.text for q in QUERIES}) == len(QUERIES), "queries must be unique"
    for q in QUERIES:
        assert 1 <= len(q.relevant) <= 2, q.text
        assert q.relevant <= set(keys), f"{q.text!r} names unknown entries {sorted(q.relevant - set(keys))}"
    # Varied DeFi knowledge: every category, and the kinds a trading golem writes most.
    assert {e.category for e in ENTRIES} == set(Category)
    assert {e.kind for e in ENTRIES} >= {
        Kind.WARNING, Kind.INSIGHT, Kind.HEURISTIC, Kind.FACT, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT,
        Kind.CAUSAL_LINK,
    }


def test_queries_share_no_keywords_with_their_answers() -> None:
    by_key = {e.key: e for e in ENTRIES}
    violations = [
        f"{q.text!r} ~ {key}: {sorted(shared)}"
        for q in QUERIES
        for key in sorted(q.relevant)
        if (shared := shared_words(q.text, by_key[key].searchable))
    ]
    assert not violations, "queries share keywords with their answers:\n" + "\n".join(violations)
    # Every query still has words of its own for keyword search to try.
    assert all(content_words(q.text) for q in QUERIES)


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("liquidation", "liquidated"),  # shared 5-letter prefix
        ("stakers", "staking"),  # same stem
        ("fee", "fees"),  # plural
        ("swap", "swapping"),  # a stem starting the other word
        ("Arbitrum", "arbitrum"),  # case
        ("reverting", "reverted"),
    ],
)
def test_the_keyword_check_catches_shared_stems(query: str, text: str) -> None:
    assert shared_words(query, text)


def test_the_keyword_check_ignores_function_words() -> None:
    assert not shared_words("how should I do it when the pool is thin?", "what is it that the bot does when")
    assert not shared_words("gas", "glass")


def test_importance_does_not_favour_the_answers() -> None:
    """Explicit importance is part of the rank; the corpus must not smuggle relevance in through it."""
    relevant = {key for q in QUERIES for key in q.relevant}
    answers = statistics.fmean(e.importance for e in ENTRIES if e.key in relevant)
    others = statistics.fmean(e.importance for e in ENTRIES if e.key not in relevant)
    assert abs(answers - others) <= 0.05, (answers, others)


# --- recall ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    recall: float  # fraction of queries with a relevant entry in the top K
    recall_at_1: float  # fraction of queries whose first result is relevant
    mrr: float  # mean reciprocal rank of the first relevant entry within the top MRR_DEPTH (0 if none)
    misses: tuple[str, ...]

    def line(self, name: str) -> str:
        return (f"{name}: recall@{K} = {self.recall:.3f}, recall@1 = {self.recall_at_1:.3f}, "
                f"MRR@{MRR_DEPTH} = {self.mrr:.3f}")


@dataclass(frozen=True)
class Corpus:
    model: str
    store: Grimoire
    retriever: Retriever
    key_of: dict[str, str]  # entry id -> corpus key


# The fused space converts MPNet to ONNX on first use (~80 s of setup): `make test-slow`.
@pytest.fixture(scope="module", params=[MINILM, pytest.param(FUSED, marks=pytest.mark.slow)], ids=["minilm", "fused"])
def corpus(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Corpus]:
    model: str = request.param
    root = tmp_path_factory.mktemp("semantic")
    store = Grimoire.open(root / "grimoire.db", create=True)
    written = seed(store, [e.new_entry() for e in ENTRIES], identity=Identity(b"\x05" * 32))
    key_of = {w.id: e.key for w, e in zip(written, ENTRIES, strict=True)}
    retriever = Retriever(store, lambda: get_embedder(root / "embedder", model))
    try:
        yield Corpus(model, store, retriever, key_of)
    finally:
        store.close()


def _measure(ranked: Callable[[str, int], list[str]]) -> Measured:
    """`ranked(text, k)` returns the keys of the top-k entries, best first."""
    hits = first = 0
    reciprocal = 0.0
    misses: list[str] = []
    for q in QUERIES:
        top = ranked(q.text, K)
        if q.relevant & set(top):
            hits += 1
        else:
            misses.append(q.text)
        deeper = ranked(q.text, MRR_DEPTH)
        rank = next((i for i, key in enumerate(deeper, 1) if key in q.relevant), None)
        reciprocal += 0.0 if rank is None else 1 / rank
        first += rank == 1
    return Measured(hits / len(QUERIES), first / len(QUERIES), reciprocal / len(QUERIES), tuple(misses))


def _retriever_ranking(corpus: Corpus, *, keyword_only: bool) -> Callable[[str, int], list[str]]:
    def ranked(text: str, k: int) -> list[str]:
        try:
            # Recall counts no access (only a use does), so no query shifts the next one's ranking.
            hits = corpus.retriever.recall(RecallQuery(text=text, k=k, keyword_only=keyword_only))
        except UsageError:  # no searchable word: a miss
            return []
        return [corpus.key_of[h.entry.id] for h in hits]

    return ranked


def _bm25_ranking(corpus: Corpus) -> Callable[[str, int], list[str]]:
    def ranked(text: str, k: int) -> list[str]:
        try:
            return [corpus.key_of[h.entry.id] for h in corpus.store.keyword_search(text, k=k)]
        except UsageError:
            return []

    return ranked


def _cosine_ranking(corpus: Corpus) -> Callable[[str, int], list[str]]:
    """Raw cosine with the same model over the entries' contents: no keywords, no other factor."""
    embedder = corpus.retriever.embedder
    keys = [e.key for e in ENTRIES]
    matrix = embedder.embed([e.content for e in ENTRIES])

    def ranked(text: str, k: int) -> list[str]:
        scores = matrix @ embedder.embed([text])[0]
        return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (-float(scores[i]), keys[i]))[:k]]

    return ranked


@pytest.fixture(scope="module")
def measured(corpus: Corpus) -> dict[str, Measured]:
    results = {
        "hybrid": _measure(_retriever_ranking(corpus, keyword_only=False)),
        "cosine": _measure(_cosine_ranking(corpus)),
        "keyword-only": _measure(_retriever_ranking(corpus, keyword_only=True)),
        "FTS5 BM25": _measure(_bm25_ranking(corpus)),
    }
    print(f"\nsemantic recall: {len(ENTRIES)} entries, {len(QUERIES)} queries")
    for name, m in results.items():
        print("  " + m.line(name))
    for text in results["hybrid"].misses:
        print(f"  hybrid miss: {text!r}")
    return results


def test_hybrid_recall_at_5(corpus: Corpus, measured: dict[str, Measured]) -> None:
    hybrid = measured["hybrid"]
    at_5, at_1 = MINIMUM[corpus.model]
    assert hybrid.recall >= at_5, f"{hybrid.line('hybrid')} < {at_5}; missed: {list(hybrid.misses)}"
    assert hybrid.recall_at_1 >= at_1, hybrid.line("hybrid")


def test_hybrid_keeps_recall_of_raw_cosine(measured: dict[str, Measured]) -> None:
    hybrid, cosine = measured["hybrid"], measured["cosine"]
    assert hybrid.recall >= COSINE_SHARE * cosine.recall, (hybrid.line("hybrid"), cosine.line("cosine"))


def test_keyword_only_recall_is_measurably_lower(measured: dict[str, Measured]) -> None:
    hybrid, keyword, bm25 = measured["hybrid"], measured["keyword-only"], measured["FTS5 BM25"]
    for name, m in (("keyword-only", keyword), ("FTS5 BM25", bm25)):
        assert m.recall <= hybrid.recall - MIN_KEYWORD_GAP, (
            f"{m.line(name)} is not {MIN_KEYWORD_GAP} below {hybrid.line('hybrid')}"
        )
    assert keyword.mrr < hybrid.mrr, (keyword.line("keyword-only"), hybrid.line("hybrid"))


def test_measuring_did_not_touch_the_entries(corpus: Corpus, measured: dict[str, Measured]) -> None:
    """Recall counted no access, so no ranking depended on an earlier query."""
    assert measured
    entries = corpus.store.get_many(list(corpus.key_of))
    assert len(entries) == len(ENTRIES)
    assert all(e.access_count == 0 for e in entries)


def test_the_model_is_the_bundled_one(corpus: Corpus) -> None:
    info = corpus.retriever.embedder.info
    assert info == expected_info(corpus.model)
    assert ONNX_SHA256[:16] in info.model_version and info.dim == {MINILM: DIM, FUSED: 384 + 768}[corpus.model]
    assert DEFAULT_MODEL == MINILM
