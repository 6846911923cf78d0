"""Outcomes, promotion and crossing holds on a real store (daemon/grimoire/outcomes.py,
crossing.py, Grimoire.promote / record_outcome / sync_gate), and the curator cycle's gates."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from crdt import CausalContext, Delta, EntryBody, InvalidValue, Kind, Mutator, Origin, Sensitivity, Timestamp
from crypto import Identity
from daemon.embedding.embedder import EmbeddingInfo
from daemon.errors import NotFound
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.crossing import promote_ready
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.grimoire.promotion import WARNING_REPEAT, figures
from daemon.grimoire.repeat_hold import Near, own_recent_near
from daemon.grimoire.retrieval import apply_feedback
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.vectors import write_vectors
from tests.helpers.seed import raw_write, seed_one, seed_warning

ME = Identity(b"\x21" * 32)
SIB = Identity(b"\x33" * 32)
DEAD = Identity(b"\x44" * 32)
T0 = 1_800_000_000_000
TICK_S = 10.0
_SEQ = itertools.count(1)
INFO = EmbeddingInfo(model="test", model_version="1", preprocess_hash="h", dim=3)


@pytest.fixture
def store(tmp_path: Path) -> Grimoire:
    clock = {"now": T0}
    s = Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: clock["now"])
    return s


def index_of(store: Grimoire) -> Callable[[Grimoire], VectorIndex]:
    """The in-memory vector index of INFO's space over `store`, refreshed on each call (the
    daemon passes its retriever's, `Retriever.vector_index`)."""
    index = VectorIndex(INFO)

    def refreshed(s: Grimoire) -> VectorIndex:
        index.refresh(s)
        return index

    return refreshed


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def row(store: Grimoire, entry_id: str, columns: str) -> tuple[object, ...]:
    return tuple(store.connection.execute(f"SELECT {columns} FROM entries WHERE id = ?", (entry_id,)).fetchone())


def outcome_rows(store: Grimoire) -> int:
    return int(store.connection.execute("SELECT count(*) FROM outcomes").fetchone()[0])


def sibling_entry(store: Grimoire, author: Identity, content: str, kind: Kind = Kind.INSIGHT) -> str:
    body = EntryBody(author=author.peer_id, kind=kind, content=content, created=Timestamp(T0))
    ops = Mutator(author.peer_id, author.sign, next_seq=lambda: next(_SEQ), now=lambda: Timestamp(T0)).create(
        body, 0.8)
    store.apply_delta(Delta(tuple(ops), CausalContext()), local_replica=ME.peer_id)
    return body.id


# -- outcomes ---------------------------------------------------------------------------


def test_record_outcome_moves_local_confidence_by_the_posterior_and_restarts_decay(store: Grimoire) -> None:
    e = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Split swaps over 100k", confidence=0.7), identity=ME)
    assert row(store, e.id, "evidence") == (1,)
    first = store.record_outcome(e.id, "positive", metric="pnl_usd", value=120.5, now_ms=T0 + 5)
    assert first.local_confidence == pytest.approx(0.76)
    assert (first.outcomes_positive, first.outcomes_negative, first.outcomes_neutral) == (1, 0, 0)
    assert row(store, e.id, "decay_base, decay_anchor_ms, evidence, outcome_prior") == (
        pytest.approx(0.76), T0 + 5, 2, pytest.approx(0.7))
    second = store.record_outcome(e.id, "positive", metric="pnl_usd", now_ms=T0 + 9)
    assert second.local_confidence == pytest.approx(0.8)
    neutral = store.record_outcome(e.id, "neutral", metric="gas", now_ms=T0 + 10)
    assert neutral.local_confidence == pytest.approx(0.8) and neutral.outcomes_neutral == 1
    bad = store.record_outcome(e.id, "negative", metric="pnl_usd", value=-40, note="rekt", episode_id="ep1",
                               now_ms=T0 + 11)
    assert bad.local_confidence == pytest.approx((2.8 + 2) / 7)
    assert row(store, e.id, "evidence, decay_anchor_ms") == (5, T0 + 11)
    assert bad.confidence == 0.7  # the author's confidence (what crosses) is not touched
    kept = store.connection.execute("SELECT effect, metric, value, episode_id, note, recorded_ms FROM outcomes "
                                    "WHERE entry_id = ? ORDER BY n", (e.id,)).fetchall()
    assert kept[0] == ("positive", "pnl_usd", 120.5, None, None, T0 + 5)
    assert kept[-1] == ("negative", "pnl_usd", -40.0, "ep1", "rekt", T0 + 11)
    doc = store.get(e.id).to_json()
    assert doc["outcomes"] == {"positive": 2, "negative": 1, "neutral": 1}


def test_record_outcome_refuses_bad_input_and_writes_nothing(store: Grimoire) -> None:
    e = seed_one(store, NewEntry(kind=Kind.FACT, content="Base fees spike at US open"), identity=ME)
    with pytest.raises(NotFound):
        store.record_outcome("0" * 32, "positive", metric="pnl", now_ms=T0)
    with pytest.raises(ValueError):
        store.record_outcome(e.id, "great", metric="pnl", now_ms=T0)
    with pytest.raises(InvalidValue):
        store.record_outcome(e.id, "positive", metric="pnl", value=float("nan"), now_ms=T0)
    with pytest.raises(InvalidValue):
        store.record_outcome(e.id, "positive", metric="m" * 49, now_ms=T0)
    assert outcome_rows(store) == 0 and store.get(e.id).outcomes_positive == 0


def test_record_outcome_is_one_transaction(store: Grimoire) -> None:
    e = seed_one(store, NewEntry(kind=Kind.FACT, content="Base fees spike at US open"), identity=ME)
    # Make the tally update fail after the outcome row was inserted: the row must go too.
    store.connection.execute("CREATE TRIGGER refuse BEFORE UPDATE OF outcomes_positive ON entries "
                             "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    with pytest.raises(sqlite3.IntegrityError):
        store.record_outcome(e.id, "positive", metric="pnl", now_ms=T0)
    assert outcome_rows(store) == 0
    assert row(store, e.id, "local_confidence, evidence, outcome_prior") == (pytest.approx(0.7), 1, None)


# -- promote ----------------------------------------------------------------------------


def test_promote_marks_own_crossable_entries_and_re_emits_them(store: Grimoire) -> None:
    mine = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI"), identity=ME).id
    private = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="My own edge", sensitivity=Sensitivity.PRIVATE),
                              identity=ME).id
    theirs = sibling_entry(store, SIB, "Aave utilisation above 90% means rate spikes")
    top = store.local_top(ME.peer_id)
    done = store.promote([mine, private, theirs, mine, "f" * 32], ME, now_ms=T0 + 1, reason="legacy")
    assert done == [mine]
    assert store.local_top(ME.peer_id) == top + 2  # body and author slot under fresh dots
    assert row(store, mine, "promoted_ms, promoted_reason") == (T0 + 1, "legacy")
    assert store.promote([mine], ME, now_ms=T0 + 2, reason="admitted") == []  # not twice
    gate = store.sync_gate(ME.peer_id)
    assert gate(store.get(mine).body) and not gate(store.get(private).body)


# -- the gates in a cycle -----------------------------------------------------------------


def test_an_insight_with_defaults_at_0_8_crosses_and_its_near_duplicate_does_not(store: Grimoire) -> None:
    new = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI", confidence=0.8),
                          identity=ME).id
    sib = sibling_entry(store, SIB, "Curve pools thin out on Sundays")
    dup = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Curve liquidity is thin each Sunday", confidence=0.8),
                          identity=ME).id
    low = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="A hunch about gas", confidence=0.59), identity=ME).id
    vectors = {new: unit(1, 0, 0), sib: unit(0, 1, 0), dup: unit(0, 1, 0.45), low: unit(0, 0, 1)}  # dup·sib ≈ 0.91
    report = run_cycle(store, identity=ME, now_ms=T0 + 1, vectors=vectors,
                       settings=CuratorSettings(near_duplicate=0.99))
    assert report.promoted == [new]
    assert store.get(new).promoted_reason == "admitted"
    assert store.get(dup).promoted_reason is None and store.get(low).promoted_reason is None
    assert report.promotion_refused == {"near_duplicate": 1, "low_confidence": 1}  # each refusal, by reason
    again = run_cycle(store, identity=ME, now_ms=T0 + 2, vectors=vectors, settings=CuratorSettings(near_duplicate=0.99))
    assert again.since_ms == T0 + 1 and again.promotion_refused == {}  # counted on their first look only


def test_two_paraphrases_written_together_do_not_both_cross(store: Grimoire) -> None:
    a = seed_one(store, NewEntry(kind=Kind.FACT, content="Arbitrum blocks are 250 ms", confidence=0.8), identity=ME).id
    b = seed_one(store, NewEntry(kind=Kind.FACT, content="Arbitrum makes a block every 0.25 s", confidence=0.8),
                        identity=ME).id
    promoted = promote_ready(store, ME, now_ms=T0 + 1, tick_seconds=TICK_S,
                             vectors={a: unit(1, 0.01, 0), b: unit(1, 0.02, 0)})
    assert promoted == [a]


def test_a_heuristic_crosses_with_positive_outcomes_once_its_ticks_passed(store: Grimoire) -> None:
    good = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Split swaps over 100k into five", confidence=0.8),
                           identity=ME)
    bad = seed_one(store, NewEntry(kind=Kind.CONSTRAINT, content="Never bridge on Fridays", confidence=0.8),
                          identity=ME)
    created = good.body.created.ms
    for effect in ("positive", "positive"):
        store.record_outcome(good.id, effect, metric="pnl_usd", now_ms=T0)
    for effect in ("positive", "negative", "negative"):
        store.record_outcome(bad.id, effect, metric="pnl_usd", now_ms=T0)
    early = created + int(9 * TICK_S * 1000)
    assert promote_ready(store, ME, now_ms=early, tick_seconds=TICK_S) == []
    later = created + int(10 * TICK_S * 1000)
    assert promote_ready(store, ME, now_ms=later, tick_seconds=TICK_S) == [good.id]
    assert store.get(good.id).promoted_reason == "validated"
    assert promote_ready(store, ME, now_ms=later + 10**9, tick_seconds=TICK_S) == []  # never, however old


def test_legacy_pushes_young_rules_when_the_golem_declines(store: Grimoire) -> None:
    young = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Rebalance at 2% drift", confidence=0.8),
                            identity=ME).id
    half = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Maybe rebalance weekly", confidence=0.6),
                           identity=ME).id
    unsure = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Perhaps rebalance monthly", confidence=0.35),
                             identity=ME).id
    assert promote_ready(store, ME, now_ms=T0, tick_seconds=TICK_S) == []
    from daemon.grimoire.vitality import Vitality, write_vitality

    with raw_write(store) as conn:
        write_vitality(conn, Vitality.checked("declining"), now_ms=T0)
    # Near death the bar is 0.4, not the rules' 0.7: what the golem half-believes is passed on.
    assert sorted(promote_ready(store, ME, now_ms=T0, tick_seconds=TICK_S)) == sorted([young, half])
    assert store.get(young).to_json()["promoted_reason"] == "legacy"
    assert store.get(unsure).promoted_reason is None


# -- holds --------------------------------------------------------------------------------


def test_a_repeated_warning_within_a_day_is_held_but_kept(store: Grimoire) -> None:
    first, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X is being drained"), ME,
                                  vector=unit(1, 0, 0), info=INFO, now_ms=T0, index=index_of(store))
    assert sim is None and first.crossing_hold is None
    again, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X drained right now"), ME,
                                  vector=unit(1, 0.1, 0), info=INFO, now_ms=T0 + 1000, index=index_of(store))
    assert sim == pytest.approx(float(unit(1, 0.1, 0)[0])) and again.crossing_hold == "near_duplicate"
    other, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Oracle Y is stale"), ME,
                                  vector=unit(0, 1, 0), info=INFO, now_ms=T0 + 2000, index=index_of(store))
    assert sim is None and other.crossing_hold is None
    # As close in meaning, but its figures changed: an update, not a repeat (nothing held).
    gas = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Gas above 80 gwei at 14:00"), ME,
                           vector=unit(0, 0, 1), info=INFO, now_ms=T0 + 2500, index=index_of(store))[0]
    update, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Gas above 200 gwei at 14:00"), ME,
                                   vector=unit(0, 0.1, 1), info=INFO, now_ms=T0 + 2600, index=index_of(store))
    assert gas.crossing_hold is None and sim is None and update.crossing_hold is None
    gate = store.sync_gate(ME.peer_id)
    assert gate(first.body) and not gate(again.body) and gate(other.body)
    assert {h.entry.id for h in store.keyword_search("drained")} >= {again.id}  # still stored and searchable
    store.connection.execute("UPDATE entries SET created_hlc = ? WHERE id = ?", (Timestamp(T0).pack(), first.id))
    later, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X drained again"), ME,
                                  vector=unit(1, 0, 0), info=INFO, now_ms=T0 + 25 * 3_600_000, index=index_of(store))
    assert sim is None and later.crossing_hold is None  # a day later it is news again


def _repeat_by_scan(store: Grimoire, content: str, vector: np.ndarray, now_ms: int) -> float | None:
    """The repeat rule as it was written before the vector index (step 22): every own unheld
    warning of the last 24 h with the same figures, read and compared; the cosine if held."""
    since = Timestamp(max(0, now_ms - WARNING_REPEAT.window_ms)).pack()
    rows = store.connection.execute(
        "SELECT embedding, content FROM entries WHERE author = ? AND kind IN ('warning', 'anti_knowledge') "
        "AND crossing_hold IS NULL AND created_hlc >= ? AND embedding IS NOT NULL AND embedding_model = ?",
        (ME.peer_id, since, INFO.model)).fetchall()
    cosines = [float(np.frombuffer(blob, dtype=np.float32) @ vector) for blob, text in rows
               if figures(text) == figures(content)]
    best = max(cosines, default=None)
    return best if best is not None and best >= WARNING_REPEAT.similarity else None


@pytest.mark.parametrize("near", ["whole_index", "own_of_the_window"])
def test_the_repeat_check_through_the_index_holds_what_the_scan_held(tmp_path: Path, near: str) -> None:
    """300 seeded warnings on a few topics (some near, some not, figures changing, a sibling's
    warnings and own insights among them, the clock crossing the 24 h window): each is held
    exactly when the old scan of the day's warnings would have held it, at the same cosine —
    whether the close entries come from the whole index or, as the daemon now looks, from this
    golem's own warnings of the window in the index's snapshot (`own_recent_near`)."""
    rng = np.random.default_rng(22)
    clock = {"now": T0}
    store = Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: clock["now"])
    index = index_of(store)
    if near == "own_of_the_window":
        kept = VectorIndex(INFO)
        own_near = own_recent_near(lambda: kept.refresh(store), ME.peer_id, lambda: clock["now"])
        index = _as_index(own_near)
    topics = [unit(*rng.normal(size=3)) for _ in range(4)]
    held = 0
    for i in range(300):
        clock["now"] += int(rng.integers(0, 3 * 3_600_000))
        topic = int(rng.integers(0, len(topics)))
        vector = unit(*(topics[topic] + rng.normal(scale=0.2, size=3)))
        suffix = rng.choice(["", " at 80 gwei", " at 200 gwei"])
        content = f"{('gas', 'oracle', 'bridge', 'pool')[topic]} warning{suffix}"
        who = rng.random()
        if who < 0.1:  # a sibling's warning: never a reference for this golem's
            entry_id = sibling_entry(store, SIB, content, kind=Kind.WARNING)
            write_vectors(store, INFO, [entry_id], np.asarray([vector]))
            continue
        if who < 0.15:  # an own insight: not a warning kind
            entry_id = seed_one(store, NewEntry(kind=Kind.INSIGHT, content=content), identity=ME).id
            write_vectors(store, INFO, [entry_id], np.asarray([vector]))
            continue
        kind = Kind.ANTI_KNOWLEDGE if who > 0.9 else Kind.WARNING
        expected = _repeat_by_scan(store, content, vector, clock["now"])
        entry, similarity = seed_warning(store, NewEntry(kind=kind, content=content), ME, vector=vector,
                                             info=INFO, now_ms=clock["now"], index=index)
        assert (similarity is None) == (expected is None), (i, similarity, expected)
        assert similarity == pytest.approx(expected, abs=1e-6) if expected is not None else True
        assert entry.crossing_hold == ("near_duplicate" if expected is not None else None)
        held += expected is not None
    assert 30 < held < 200  # both decisions were taken many times


def _as_index(near: Near) -> Callable[[Grimoire], VectorIndex]:
    """`seed_warning`'s `index=` whose `within` answers with `near` (the same contract)."""
    class Within:
        def __init__(self, store: Grimoire) -> None:
            self.store = store

        def within(self, vector: np.ndarray, threshold: float) -> list[tuple[str, float]]:
            assert threshold == WARNING_REPEAT.similarity
            return near(self.store, vector)

    return lambda store: Within(store)  # type: ignore[return-value]


def _inherit(store: Grimoire, content: str) -> str:
    entry_id = sibling_entry(store, DEAD, content)
    store.connection.execute("UPDATE entries SET provenance = 'inherited', inherited_generation = 1, "
                             "crossing_hold = 'inherited' WHERE id = ?", (entry_id,))
    return entry_id


def test_an_inherited_entry_is_held_until_validated_then_reissued(store: Grimoire) -> None:
    held = _inherit(store, "Avoid pools under 100k TVL after 2 am")
    cited = _inherit(store, "GMX funding resets every hour")
    idle = _inherit(store, "Unvalidated prior")
    gate = store.sync_gate(ME.peer_id)
    assert not any(gate(store.get(i).body) for i in (held, cited, idle))
    store.record_outcome(held, "positive", metric="pnl_usd", now_ms=T0)
    apply_feedback(store, cited=[cited], injected=[], now_ms=T0)
    promoted = promote_ready(store, ME, now_ms=T0 + 5, tick_seconds=TICK_S)
    assert len(promoted) == 2
    for new_id, old_id in zip(promoted, (held, cited), strict=True):
        new, old = store.get(new_id), store.get(old_id)
        assert new.body.author == ME.peer_id and new.body.content == old.body.content
        assert new.body.origin is Origin.INHERITED and new.body.generation == 1
        assert new.promoted_reason == "inherited" and store.sync_gate(ME.peer_id)(new.body)
        assert old.archived and old.crossing_hold == "reissued"
        assert row(store, old_id, "local_superseded_by") == (new_id,)
    assert store.get(promoted[0]).outcomes_positive == 1
    assert not store.sync_gate(ME.peer_id)(store.get(idle).body)
    assert promote_ready(store, ME, now_ms=T0 + 6, tick_seconds=TICK_S) == []  # once


def test_a_held_warning_never_reaches_the_styx_outbox(store: Grimoire) -> None:
    """A warning held as a repeat of one gossiped within a day stays home from Styx too: the
    outbox hook enqueues what crosses, and a held entry does not (step 21, finding 5)."""
    from daemon.styx.outbox import OutboxWriter

    store.outbox = OutboxWriter(layers=("clade",))
    first, _ = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X is being drained"), ME,
                                vector=unit(1, 0, 0), info=INFO, now_ms=T0, index=index_of(store))
    again, sim = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X drained right now"), ME,
                                  vector=unit(1, 0.1, 0), info=INFO, now_ms=T0 + 1000, index=index_of(store))
    assert sim is not None and again.crossing_hold == "near_duplicate"
    queued = [i.item for i in store.outbox_due(now_ms=T0 + 10_000, limit=10)]
    assert len(queued) == 1 and first.id in queued[0] and again.id not in queued[0]


def test_the_playbook_leaves_out_refuted_and_held_rules(store: Grimoire, tmp_path: Path) -> None:
    """PLAYBOOK.md (the agent's rules, and the vault snapshot) holds neither a rule the evidence
    refuted nor a warning held as a repeat: "not refuted" and "may cross" are what it promises."""
    from daemon.grimoire.belief import BeliefPolicy
    from daemon.grimoire.playbook import read_playbook
    from daemon.grimoire.trust import TrustPolicy
    from daemon.service.curation import render_playbook

    kept = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Split swaps over 100k into five"), identity=ME)
    refuted = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Always bridge on Fridays"), identity=ME)
    for _ in range(3):
        store.record_outcome(refuted.id, "negative", metric="pnl_usd", now_ms=T0)
    assert store.beliefs([refuted.id], TrustPolicy(), now_ms=T0)[refuted.id].refuted  # with BeliefPolicy()'s rule
    assert BeliefPolicy().refute_min_negative <= 3
    seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X is being drained"), ME,
                     vector=unit(1, 0, 0), info=INFO, now_ms=T0, index=index_of(store))
    held, _ = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X drained right now, again"), ME,
                               vector=unit(1, 0.1, 0), info=INFO, now_ms=T0 + 1000, index=index_of(store))
    assert held.crossing_hold == "near_duplicate"
    book = tmp_path / "PLAYBOOK.md"
    render_playbook(store, book, now_ms=T0 + 2000, keep=3, trust=TrustPolicy())
    text = read_playbook(book)
    assert kept.body.content in text and "Pool X is being drained" in text  # what may cross is there …
    assert refuted.body.content not in text and "drained right now, again" not in text  # … and nothing else
