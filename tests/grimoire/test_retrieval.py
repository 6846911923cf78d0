"""Ranking (each factor moves the rank the way docs/design/retrieval.md says), filters, access bumps,
citation feedback, model integrity and vectors of another model."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from crdt import EntryBody, Kind, Pad, Sensitivity, Timestamp
from crdt.body import Origin
from crypto import Identity
from daemon.embedding.embedder import EmbeddingInfo, ModelIntegrityError, get_embedder
from daemon.errors import UsageError
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.records import Entry
from daemon.grimoire.retrieval import RecallQuery, Retriever, apply_feedback
from daemon.grimoire.scoring import (
    Factors,
    importance,
    last_touched,
    normalise,
    pad_similarity,
    rank,
    source_factor,
    temporal,
)
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.vectors import missing_vectors, vector_report, write_vectors
from tests.helpers.seed import raw_write, seed_one

ME = Identity(b"\x21" * 32)
DAY = 86_400_000
NOW = 1_800_000_000_000


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embedder")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: NOW) as s:
        yield s


def retriever(store: Grimoire, model_dir: Path) -> Retriever:
    return Retriever(store, lambda: get_embedder(model_dir))


# -- the formulas, factor by factor ---------------------------------------------------------

BASE = Factors(semantic=0.5, temporal=0.5, importance=0.5, pad=0.5, source=1.0)


@pytest.mark.parametrize("field", ["semantic", "temporal", "importance", "pad", "source"])
def test_each_factor_raises_the_rank(field: str) -> None:
    higher = Factors(**{**{f: getattr(BASE, f) for f in BASE.__slots__}, field: getattr(BASE, field) + 0.2})
    assert rank(higher) > rank(BASE)


def test_weights_are_designs() -> None:
    f = Factors(semantic=1, temporal=0, importance=0, pad=0, source=1)
    assert rank(f) == pytest.approx(0.40)
    assert rank(Factors(0, 1, 0, 0, 1)) == pytest.approx(0.20)
    assert rank(Factors(0, 0, 1, 0, 1)) == pytest.approx(0.25)
    assert rank(Factors(0, 0, 0, 1, 1)) == pytest.approx(0.15)


def test_relevance_is_normalised_over_the_candidates_with_a_floor() -> None:
    wide = normalise([Factors(0.55, 0.5, 0.5, 0.5, 1), Factors(0.30, 0.5, 0.5, 0.5, 1),
                      Factors(0.05, 0.5, 0.5, 0.5, 1)])
    assert [f.semantic for f in wide] == pytest.approx([1.0, 0.5, 0.0])  # spread 0.5: min-max
    near = normalise([Factors(0.612, 0.9, 0.2, 0.5, 1), Factors(0.607, 0.1, 0.8, 0.5, 0.8)])
    assert [f.semantic for f in near] == pytest.approx([1.0, 1 - 0.005 / 0.2])  # not stretched past the floor
    assert [(f.temporal, f.importance, f.source) for f in near] == [(0.9, 0.2, 1), (0.1, 0.8, 0.8)]  # absolute
    assert normalise([]) == []


def test_importance_composite() -> None:
    assert importance(explicit=1.0, access_count=10, days=0) == pytest.approx(1.0)
    assert importance(explicit=0.0, access_count=0, days=30) == pytest.approx(0.3 * np.exp(-1))
    assert importance(explicit=0.5, access_count=20, days=0) == pytest.approx(0.3 + 0.3 + 0.2)
    assert importance(explicit=0.5, access_count=3, days=0) > importance(explicit=0.5, access_count=2, days=0)


def test_recency_and_pad() -> None:
    assert temporal(0) == 1.0 and temporal(7) == pytest.approx(np.exp(-1)) and temporal(1) > temporal(2)
    assert pad_similarity((1, 0, 0), (1, 0, 0)) == pytest.approx(1.0)
    assert pad_similarity((1, 0, 0), (-1, 0, 0)) == pytest.approx(0.0)
    assert pad_similarity(None, (1, 0, 0)) == 0.5 == pad_similarity((0, 0, 0), (1, 0, 0))


def test_recency_counts_from_the_last_sign_of_life() -> None:
    assert last_touched(100, None, None) == 100
    assert last_touched(100, 250, None) == 250
    assert last_touched(100, None, 300) == 300
    assert last_touched(100, 250, 200) == 250
    assert last_touched(100, 50, 60) == 100  # a clock that went backwards never makes it older


def test_source_discounts_and_bloodstain() -> None:
    def sf(provenance: str, origin: str = "self", generation: int = 0, bloodstain: bool = False) -> float:
        return source_factor(provenance=provenance, origin=origin, generation=generation, bloodstain=bloodstain)

    assert sf("self") == sf("vault") == 1.0
    assert sf("clade") == pytest.approx(0.80)
    assert sf("lethe") == pytest.approx(0.50) and sf("marketplace") == pytest.approx(0.60)
    assert sf("clade", "lethe") == pytest.approx(0.40)  # a sibling passing on lethe knowledge
    assert sf("self", "inherited", generation=2) == pytest.approx(0.85**2)
    assert sf("clade", bloodstain=True) == pytest.approx(0.96)


# -- the same, through a real store and the real model ----------------------------------------


def write(store: Grimoire, content: str, **kw: object) -> str:
    return seed_one(store, NewEntry(kind=Kind.INSIGHT, content=content, **kw), identity=ME).id  # type: ignore[arg-type]


def ranks(store: Grimoire, model_dir: Path, text: str, **kw: object) -> list[str]:
    return [h.entry.id for h in retriever(store, model_dir).recall(RecallQuery(text=text, k=10, **kw),  # type: ignore[arg-type]
                                                                   now_ms=NOW)]


def test_semantic_similarity_orders_results(store: Grimoire, model_dir: Path) -> None:
    near = write(store, "Gas fees on Arbitrum spike every weekday afternoon")
    far = write(store, "Curve gauge votes are bribed through Votium every two weeks")
    assert ranks(store, model_dir, "transaction costs rise on the L2 after lunch") == [near, far]


def test_explicit_importance_orders_equal_matches(store: Grimoire, model_dir: Path) -> None:
    low = write(store, "Lido withdrawal queue grows during stETH depegs", importance=0.1)
    high = write(store, "Lido withdrawal queue grows during stETH depegs.", importance=0.9)
    assert ranks(store, model_dir, "stETH redemption delays") == [high, low]


def test_access_count_raises_rank_but_only_a_use_counts(store: Grimoire, model_dir: Path) -> None:
    a = write(store, "Balancer boosted pools route through Aave for yield")
    b = write(store, "Balancer boosted pools route through Aave for yield!")
    before = ranks(store, model_dir, "balancer boosted pool yield source")
    r = retriever(store, model_dir)
    for _ in range(20):  # appearing in result lists is not a use: nothing changes
        r.recall(RecallQuery(text="balancer boosted pool yield source", k=2), now_ms=NOW)
    assert {e.access_count for e in store.get_many([a, b])} == {0}
    assert ranks(store, model_dir, "balancer boosted pool yield source") == before
    for _ in range(6):  # cited: a use
        apply_feedback(store, cited=[before[1]], injected=[before[1]], now_ms=NOW + 5)
    assert store.get(before[1]).access_count == 6 and store.get(before[1]).last_accessed_ms == NOW + 5
    assert store.get(before[0]).access_count == 0
    after = ranks(store, model_dir, "balancer boosted pool yield source")
    assert after[0] == before[1] and set(after) == {a, b}


def test_older_entries_rank_lower(tmp_path: Path, model_dir: Path) -> None:
    clock = {"now": NOW - 20 * DAY}
    with Grimoire.open(tmp_path / "t.db", create=True, wall_ms=lambda: clock["now"]) as store:
        old = write(store, "GMX funding flips negative before big liquidations")
        clock["now"] = NOW
        new = write(store, "GMX funding flips negative before big liquidations.")
        assert ranks(store, model_dir, "perp funding rate turns before liquidation cascades") == [new, old]


def test_recency_counts_from_the_last_use_or_validation_not_creation(tmp_path: Path, model_dir: Path) -> None:
    """Three entries written 10 days ago, a fourth today: a citation today (a use) and a sibling's
    confirmation today (a validation, the curator's anchor) make the old ones as recent as the new
    one; the untouched one stays 10 days old. (Distinct texts: the cycle would merge duplicates.)"""
    from crdt import CausalContext, Delta, Mutator
    from daemon.grimoire.curator.cycle import run_cycle

    clock = {"now": NOW - 10 * DAY}
    with Grimoire.open(tmp_path / "t.db", create=True, wall_ms=lambda: clock["now"]) as store:
        untouched = write(store, "Morpho vault curators rebalance after a market's utilisation passes 95%")
        used = write(store, "Morpho curators move deposits when a market's utilisation exceeds 95%")
        validated = write(store, "Morpho allocators shift liquidity once utilisation in a market is above 95%")
        clock["now"] = NOW
        fresh = write(store, "Morpho vaults reallocate when a market's utilisation goes past 95%")
        query = "when do Morpho curators move liquidity"

        def temporal_of() -> dict[str, float]:
            hits = retriever(store, model_dir).recall(RecallQuery(text=query, k=10), now_ms=NOW)
            return {h.entry.id: h.factors.temporal for h in hits}

        before = temporal_of()
        assert before[fresh] == 1.0 and before[used] == before[validated] == before[untouched] == pytest.approx(
            temporal(10))
        apply_feedback(store, cited=[used], injected=[], now_ms=NOW)
        sib = Identity(b"\x33" * 32)
        body = store.body(validated)
        assert body is not None
        confirm = Mutator(sib.peer_id, sib.sign, next_seq=lambda: 1, now=lambda: Timestamp(NOW)).endorse(
            body, None, confirm=True)
        store.apply_delta(Delta((confirm,), CausalContext()), local_replica=ME.peer_id)
        assert run_cycle(store, identity=ME, now_ms=NOW).entries_validated == 1  # the anchor moves to now
        after = temporal_of()
        assert after[used] == after[validated] == after[fresh] == 1.0
        assert after[untouched] == pytest.approx(temporal(10))


def test_pad_similarity_orders_results(store: Grimoire, model_dir: Path) -> None:
    calm = write(store, "Pendle PT yields compress as maturity nears",
                 pad=Pad(pleasure=0.8, arousal=-0.6, dominance=0.5))
    tense = write(store, "Pendle PT yields compress as maturity nears.",
                  pad=Pad(pleasure=-0.8, arousal=0.9, dominance=-0.5))
    assert ranks(store, model_dir, "fixed yield convergence", pad=(-0.7, 0.8, -0.4)) == [tense, calm]
    assert ranks(store, model_dir, "fixed yield convergence", pad=(0.7, -0.5, 0.4)) == [calm, tense]


_SIBLING_SEQ = iter(range(1, 1_000_000))


def _sibling_entry(store: Grimoire, content: str, *, origin: Origin = Origin.SELF, bloodstain: bool = False,
                   kind: Kind = Kind.INSIGHT) -> str:
    """An entry received from a sibling (provenance clade), through the real CRDT path."""
    from crdt import CausalContext, Delta, Mutator

    sib = Identity(b"\x33" * 32)
    body = EntryBody(author=sib.peer_id, kind=kind, content=content, created=Timestamp(NOW), origin=origin,
                     bloodstain=bloodstain)
    ops = Mutator(sib.peer_id, sib.sign, next_seq=lambda: next(_SIBLING_SEQ), now=lambda: Timestamp(NOW)
                  ).create(body, 0.7)
    store.apply_delta(Delta(tuple(ops), CausalContext()), local_replica=ME.peer_id)
    return body.id


def test_source_discount_and_bloodstain_through_the_store(store: Grimoire, model_dir: Path) -> None:
    mine = write(store, "Uniswap v3 range orders fill slowly in chop")
    theirs = _sibling_entry(store, "Uniswap v3 range orders fill slowly in chop.")
    assert store.get(theirs).provenance == "clade" and store.get(theirs).local_confidence == 0.4
    # ranking alone: the sibling's entries are still in quarantine here (test_trust_store.py), so ask for them
    assert ranks(store, model_dir, "concentrated liquidity limit orders in sideways markets",
                 include_unverified=True) == [mine, theirs]
    dying = _sibling_entry(store, "Uniswap v3 range orders fill slowly in chop!", bloodstain=True,
                           kind=Kind.DEATH_REFLECTION)
    order = ranks(store, model_dir, "concentrated liquidity limit orders in sideways markets", include_unverified=True)
    assert order.index(dying) < order.index(theirs)  # ×0.8×1.2 beats ×0.8


def test_filters(store: Grimoire, model_dir: Path) -> None:
    warn = seed_one(store, NewEntry(kind=Kind.WARNING, content="Oracle manipulation on thin Base pools",
                                    confidence=0.9), identity=ME).id
    secret = write(store, "Oracle manipulation on thin Base pools (our exposure)", sensitivity=Sensitivity.SENSITIVE)
    shaky = write(store, "Oracle manipulation on thin Base pools, maybe", confidence=0.1)
    gone = write(store, "Oracle manipulation on thin Base pools, again")
    store.forget(gone)
    retracted = write(store, "Oracle manipulation on thin Base pools, wrong")
    store.retract(retracted, identity=ME)
    got = set(ranks(store, model_dir, "price feed attack"))
    assert got == {warn, shaky}
    assert set(ranks(store, model_dir, "price feed attack", include_sensitive=True)) == {warn, shaky, secret}
    assert ranks(store, model_dir, "price feed attack", kinds=(Kind.WARNING,)) == [warn]
    assert ranks(store, model_dir, "price feed attack", min_confidence=0.5) == [warn]


def test_citation_feedback_is_bounded_counts_a_use_and_is_all_or_nothing(store: Grimoire, model_dir: Path) -> None:
    a = write(store, "1inch splits large swaps across many venues")
    b = write(store, "1inch splits large swaps across many venues.")
    first, second = ranks(store, model_dir, "aggregator routing of big trades")
    for _ in range(10):
        apply_feedback(store, cited=[second], injected=[first, second], now_ms=NOW)
    # Ten uses raise importance by 0.3: the near-identical twin now ranks first.
    assert ranks(store, model_dir, "aggregator routing of big trades") == [second, first]
    assert (store.get(second).access_count, store.get(first).access_count) == (10, 0)
    for _ in range(100):
        apply_feedback(store, cited=[second], injected=[first])
    assert store.get(second).cite_weight == pytest.approx(1.5)
    assert store.get(first).cite_weight == pytest.approx(0.5)
    assert {a, b} == {first, second}
    with pytest.raises(UsageError, match="no entry"):
        apply_feedback(store, cited=[first], injected=["f" * 32])
    assert store.get(first).access_count == 0  # the whole call was refused


def test_corrupted_model_is_refused(tmp_path: Path, model_dir: Path) -> None:
    get_embedder(model_dir)  # assemble the real files
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    data = bytearray((broken / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (broken / "model.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError, match="sha256"):
        get_embedder(broken)


def test_vectors_of_another_model_are_detected_and_rebuilt(store: Grimoire, model_dir: Path) -> None:
    a = write(store, "Optimism sequencer downtime halts liquidations")
    r = retriever(store, model_dir)
    r.recall(RecallQuery(text="x", k=1), now_ms=NOW)
    info = r.embedder.info
    assert vector_report(store, info) == {"current": 1, "other_model": 0, "missing": 0}
    other = EmbeddingInfo(model="nomic-ai/nomic-embed-text-v1.5", model_version="x", preprocess_hash="y", dim=384)
    write_vectors(store, other, [a], np.ones((1, 384), dtype=np.float32) / np.sqrt(384))
    assert vector_report(store, info) == {"current": 0, "other_model": 1, "missing": 0}
    assert r.index_missing() == 1  # re-embedded with the current model, never mixed
    assert vector_report(store, info)["current"] == 1


def test_vector_index_catches_up_with_new_entries(store: Grimoire, model_dir: Path) -> None:
    r = retriever(store, model_dir)
    write(store, "first")
    r.recall(RecallQuery(text="first", k=5), now_ms=NOW)
    later = write(store, "Morpho vaults rebalance toward the best lending rate")
    assert r.recall(RecallQuery(text="lending optimizer", k=1), now_ms=NOW)[0].entry.id == later


def test_vector_index_rows_survive_growth_updates_and_other_models(store: Grimoire) -> None:
    """VectorIndex against a plain dict of what was written: new rows across several buffer
    growths, a re-embedded entry updated in place, another model's vectors ignored, and a
    matrix taken before a refresh still holding its rows after it."""
    info = EmbeddingInfo(model="test/space", model_version="1", preprocess_hash="h", dim=8)
    other = EmbeddingInfo(model="test/other", model_version="1", preprocess_hash="h", dim=8)
    rng = np.random.default_rng(3)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    index, expected = VectorIndex(info), {}
    taken = None
    for batch in (1, 2, 70, 5, 130):
        ids = [write(store, f"entry {len(expected) + i}") for i in range(batch)]
        vecs = unit(batch)
        write_vectors(store, info, ids, vecs)
        expected.update(zip(ids, vecs, strict=True))
        write_vectors(store, other, [write(store, "another model's")], unit(1))
        if taken is None and len(expected) > 50:
            taken = (index.current.matrix.copy(), index.current,
                     {i: expected[i].copy() for i in index.current.row_of})
        index.refresh(store)
        assert len(index) == len(expected)
    again = next(iter(expected))
    expected[again] = unit(1)[0]
    write_vectors(store, info, [again], expected[again][None, :])
    index.refresh(store)
    assert len(index) == len(expected)
    for entry_id, vec in expected.items():
        got = index.vector(entry_id)
        assert got is not None and np.array_equal(got, vec)
    assert set(index.as_mapping()) == set(expected)
    query = unit(1)[0]
    best = sorted(expected, key=lambda i: -float(expected[i] @ query))[:5]
    assert [i for i, _ in index.nearest(query, 5)] == best
    assert taken is not None and np.array_equal(taken[0], taken[1].matrix)  # an older snapshot kept its rows
    assert taken[2] and {i: v.tolist() for i, v in taken[1].as_mapping().items()} == {
        i: v.tolist() for i, v in taken[2].items()}
    assert not index.current.matrix.flags.writeable  # readers cannot write a snapshot


def test_the_index_drops_cleared_vectors_and_compacts_without_touching_published_snapshots(store: Grimoire) -> None:
    """A cleared vector (schema v18 stamps it) leaves the index at the next refresh; re-embedding
    rows many times compacts the buffer; every snapshot published before keeps what it had."""
    info = EmbeddingInfo(model="test/space", model_version="1", preprocess_hash="h", dim=4)
    ids = [write(store, f"entry {i}") for i in range(40)]
    eye = np.eye(4, dtype=np.float32)
    write_vectors(store, info, ids, np.stack([eye[i % 4] for i in range(len(ids))]))
    index = VectorIndex(info)
    first = index.refresh(store)
    assert len(first) == 40
    with raw_write(store) as conn:
        conn.execute("UPDATE entries SET embedding = NULL WHERE id = ?", (ids[0],))
    second = index.refresh(store)
    assert ids[0] not in second.row_of and len(second) == 39
    assert {i for i, _ in second.nearest(eye[0], 9)} == {i for n, i in enumerate(ids) if n % 4 == 0 and n}
    assert ids[0] in first.row_of and len(first) == 40  # the older snapshot is unchanged
    for round_ in range(60):  # 60 × 39 re-embeddings: dead rows pile up and are compacted
        write_vectors(store, info, ids[1:], np.stack([eye[(i + round_) % 4] for i in range(1, len(ids))]))
        index.refresh(store)
    last = index.current
    assert len(last) == 39 and last.matrix.shape[0] < 60 * 39  # compacted, not grown without end
    assert all(np.array_equal(last.matrix[last.row_of[i]], eye[(n + 59) % 4]) for n, i in enumerate(ids) if n)
    assert len(second) == 39 and np.array_equal(second.matrix[second.row_of[ids[1]]], eye[1])


def test_a_snapshot_never_sees_what_was_added_or_moved_after_it(store: Grimoire) -> None:
    """Snapshots share the writer's ids and id map (no copy per write): one published before
    new entries, a re-embedding and a cleared vector still answers as of its publish — by
    lookup, membership, length and iteration."""
    info = EmbeddingInfo(model="test/space", model_version="1", preprocess_hash="h", dim=4)
    eye = np.eye(4, dtype=np.float32)
    ids = [write(store, f"entry {i}") for i in range(6)]
    write_vectors(store, info, ids, np.stack([eye[i % 4] for i in range(6)]))
    index = VectorIndex(info)
    before = index.refresh(store)
    rows_before = {i: before.row_of[i] for i in ids}
    later = [write(store, f"later {i}") for i in range(3)]
    write_vectors(store, info, later, np.stack([eye[3]] * 3))  # appended past `before`'s rows
    write_vectors(store, info, [ids[0]], eye[1][None, :])  # re-embedded: a new row
    with raw_write(store) as conn:
        conn.execute("UPDATE entries SET embedding = NULL WHERE id = ?", (ids[1],))  # cleared
    after = index.refresh(store)
    assert all(i not in before.row_of and before.row_of.get(i) is None for i in later)
    with pytest.raises(KeyError):
        before.row_of[later[0]]
    assert len(before) == 6 and sorted(before.row_of) == sorted(ids) and len(list(before.row_of)) == 6
    assert {i: before.row_of[i] for i in ids} == rows_before
    assert np.array_equal(before.vector(ids[0]), eye[0]) and np.array_equal(after.vector(ids[0]), eye[1])
    assert before.vector(ids[1]) is not None and after.vector(ids[1]) is None
    assert len(after) == 8 and set(after.row_of) == (set(ids) - {ids[1]}) | set(later)
    ranked_before = [i for i, _ in before.nearest(eye[3], 9)]
    assert ranked_before[0] == ids[3] and set(ranked_before) == set(ids)  # none of `later`
    assert {i for i, _ in after.nearest(eye[3], 4)} == {ids[3], *later}
    assert list(before.ids) == ids and len(after.ids) == 10  # rows: 6 + 3 + the re-embedding's


def test_entry_factory_for_typing() -> None:
    assert Entry is not None


def test_keyword_only_ranks_by_bm25_not_just_importance(store: Grimoire, model_dir: Path) -> None:
    """Regression: keyword-only mode dropped the FTS score and ordered hits by importance."""
    match = write(store, "Tenderly simulation of the multicall before sending", importance=0.1)
    write(store, "Health factor simulation rules for Aave collateral top-ups", importance=0.9)
    got = ranks(store, model_dir, "tenderly multicall simulation", keyword_only=True)
    assert got[0] == match


def test_recall_embeds_at_most_embed_limit_inline(store: Grimoire, model_dir: Path) -> None:
    """The daemon bounds inline embedding; entries still without vectors are found by keyword."""
    for i in range(12):
        write(store, f"Backlog entry {i} about bridge withdrawal delays")
    r = retriever(store, model_dir)
    hits = r.recall(RecallQuery(text="bridge withdrawal", k=12), now_ms=NOW, embed_limit=5)
    assert vector_report(store, r.embedder.info) == {"current": 5, "other_model": 0, "missing": 7}
    assert len(hits) == 12  # the 7 without vectors came in through FTS5
    # The tail embedded is the newest five: read-your-writes for the latest writes first.
    newest = {e.id for e in store.list_entries(limit=5)}
    assert {i for i, _ in missing_vectors(store, r.embedder.info)}.isdisjoint(newest)
