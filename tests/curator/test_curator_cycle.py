"""The curator cycle over a real store on an injected clock (daemon/grimoire/curator/cycle.py).

A simulated 30 days with one cycle a day: unused knowledge fades below the retrieval
threshold and is archived; knowledge used every few days survives; a sibling's confirmations
keep an entry alive; warnings never fall below 0.3; the Grimoire never holds more live entries
than its budget; and the count of entries (active + superseded + archived) never drops.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from crdt import CausalContext, Delta, EndorseValue, EntryBody, Kind, Mutator, Timestamp
from crypto import Identity
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator.consolidate import ReplayItem
from daemon.grimoire.curator.cycle import CuratorSettings, live_entries, run_cycle, simulate
from daemon.grimoire.curator.decay import RETRIEVAL_THRESHOLD
from daemon.grimoire.retrieval import apply_feedback
from tests.helpers.seed import seed_one

ME = Identity(b"\x21" * 32)
SIB = Identity(b"\x33" * 32)
DAY = 86_400_000
T0 = 1_800_000_000_000
_SEQ = itertools.count(1)


def _total(store: Grimoire) -> int:
    return int(store.connection.execute("SELECT count(*) FROM entries").fetchone()[0])


def _sibling(store: Grimoire, content: str, now: int, kind: Kind = Kind.INSIGHT) -> str:
    body = EntryBody(author=SIB.peer_id, kind=kind, content=content, created=Timestamp(now))
    ops = Mutator(SIB.peer_id, SIB.sign, next_seq=lambda: next(_SEQ), now=lambda: Timestamp(now)).create(body, 0.8)
    store.apply_delta(Delta(tuple(ops), CausalContext()), local_replica=ME.peer_id)
    return body.id


def _confirm(store: Grimoire, entry_id: str, now: int) -> None:
    """SIB confirms one of our entries (its endorse slot, through the CRDT path)."""
    body = store.body(entry_id)
    assert body is not None
    seq = next(_SEQ)
    op = Mutator(SIB.peer_id, SIB.sign, next_seq=lambda: seq, now=lambda: Timestamp(now)).endorse(
        body, _current(store, entry_id), confirm=True)
    store.apply_delta(Delta((op,), CausalContext()), local_replica=ME.peer_id)


def _current(store: Grimoire, entry_id: str) -> EndorseValue | None:
    row = store.connection.execute("SELECT confirms FROM entries WHERE id = ?", (entry_id,)).fetchone()
    return EndorseValue(confirms=int(row[0]), contradicts=0) if row[0] else None


def test_thirty_days_of_forgetting(tmp_path: Path) -> None:
    clock = {"now": T0}
    settings = CuratorSettings(capacity=13)
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: clock["now"]) as store:
        unused = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Curve 3pool depth thins on Sundays",
                                          confidence=0.7), identity=ME).id
        used = seed_one(store, NewEntry(kind=Kind.HEURISTIC, content="Split swaps over 100k into five blocks",
                                        confidence=0.7), identity=ME).id
        confirmed = seed_one(store, NewEntry(kind=Kind.FACT, content="Base sequencer fees spike at US open",
                                             confidence=0.7), identity=ME).id
        warning = seed_one(store, NewEntry(kind=Kind.WARNING, content="Never LP in pools under $100K TVL",
                                           confidence=0.9), identity=ME).id
        sibling = _sibling(store, "Aave v3 Arbitrum USDC utilisation above 90% means rate spikes", T0)
        filler = [seed_one(store, NewEntry(kind=Kind.INSIGHT, content=f"Observation number {i} about pool {i}",
                                           confidence=0.7, importance=i / 20), identity=ME).id for i in range(12)]
        total = _total(store)
        faded_day = archived_day = None
        for day in range(1, 31):
            clock["now"] = T0 + day * DAY
            if day % 3 == 0:
                apply_feedback(store, cited=[used], injected=[], now_ms=clock["now"])
            if day % 5 == 0:
                _confirm(store, confirmed, clock["now"])
            report = run_cycle(store, identity=ME, now_ms=clock["now"], settings=settings)
            assert _total(store) == total  # nothing is ever deleted
            live = {e.id: e for e in live_entries(store)}
            assert len(live) <= 13
            assert store.get(warning).local_confidence >= 0.3
            if faded_day is None and store.get(unused).local_confidence < RETRIEVAL_THRESHOLD:
                faded_day = day
            if archived_day is None and store.get(unused).archived:
                archived_day = day
            (pruned_now,) = store.connection.execute(  # the report counts what this cycle archived
                "SELECT count(*) FROM entries WHERE archived_ms = ? AND archived_reason != 'superseded'",
                (clock["now"],)).fetchone()
            assert report.entries_pruned == pruned_now
        assert faded_day == 20 and archived_day == 27  # 0.7·e^(−t/10): < 0.1 after 19.5 d, < 0.05 after 26.4 d
        assert not store.get(used).archived and store.get(used).local_confidence > 0.5
        assert not store.get(confirmed).archived and store.get(confirmed).local_confidence > 0.3
        assert store.get(warning).local_confidence == 0.3 and not store.get(warning).archived
        assert store.get(sibling).archived  # 0.4 unused: gone after ~21 days
        reasons = dict(store.connection.execute(
            "SELECT archived_reason, count(*) FROM entries WHERE archived = 1 GROUP BY archived_reason").fetchall())
        assert reasons.get("over_capacity", 0) >= 1 and reasons.get("below_threshold", 0) >= 2
        assert len(filler) == 12


def test_duplicates_merge_contradictions_supersede_and_nothing_is_lost(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        a = seed_one(store, NewEntry(kind=Kind.FACT, content="Gas on mainnet is cheapest at 03:00 UTC."),
                     identity=ME).id
        b = seed_one(store, NewEntry(kind=Kind.FACT, content="gas on mainnet is cheapest at 03:00 utc"), identity=ME).id
        s = _sibling(store, "Gas on mainnet is cheapest at 03:00 UTC!", T0, kind=Kind.FACT)
        report = run_cycle(store, identity=ME, now_ms=T0 + 1000)
        assert report.entries_merged == 2
        kept = [e for e in (store.get(a), store.get(b)) if e.status == "active"]
        assert [e.id for e in kept] == [min(a, b)]  # equal in all else: the smaller id wins (deterministic)
        loser = b if kept[0].id == a else a
        assert store.get(loser).status == "retracted" and store.get(loser).superseded_by == kept[0].id
        assert store.get(s).archived  # a sibling's duplicate: archived locally, says what replaced it
        row = store.connection.execute("SELECT archived_reason, local_superseded_by FROM entries WHERE id = ?",
                                       (s,)).fetchone()
        assert tuple(row) == ("superseded", kept[0].id)
        assert _total(store) == 3


def test_episodes_consolidate_into_a_baseline_that_supersedes_the_last(tmp_path: Path) -> None:
    eps = [ReplayItem(f"e{i}", T0 + i, "uniswap-v3", 0.5, 0.5, True, f'{{"slippage_bps": {10 * i}}}')
           for i in range(1, 4)]
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        first = run_cycle(store, identity=ME, now_ms=T0 + DAY, episodes=eps)
        assert first.episodes_consolidated == 3
        again = run_cycle(store, identity=ME, now_ms=T0 + DAY + 1, episodes=eps)
        assert again.episodes_consolidated == 0  # the same baseline is not written twice
        more = [*eps, ReplayItem("e4", T0 + 4, "uniswap-v3", 0.9, 0.5, True, '{"slippage_bps": 100}')]
        run_cycle(store, identity=ME, now_ms=T0 + DAY + 2, episodes=more)
        facts = store.connection.execute(
            "SELECT content, status, superseded_by FROM entries WHERE kind = 'fact' ORDER BY stored_ms, rid").fetchall()
        assert len(facts) == 2 and facts[0][1] == "retracted" and facts[1][1] == "active"
        assert "slippage_bps mean 20" in facts[0][0] and "slippage_bps mean 40" in facts[1][0]


def test_simulate_projects_without_writing(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        x = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Thin books on Sunday", confidence=0.7), identity=ME).id
        w = seed_one(store, NewEntry(kind=Kind.WARNING, content="Never bridge via X", confidence=0.7), identity=ME).id
        before = store.connection.execute("SELECT * FROM entries ORDER BY id").fetchall()
        out = simulate(store, now_ms=T0, days=30)
        assert store.connection.execute("SELECT * FROM entries ORDER BY id").fetchall() == before
        by_id = {e["id"]: e for e in out["entries"]}
        assert by_id[x]["fades"] and by_id[x]["pruned"] and by_id[x]["confidence_now"] == 0.7
        assert not by_id[w]["fades"] and by_id[w]["confidence_after"] == 0.3
        assert out["summary"] == {"entries": 2, "fade": 1, "pruned": 1, "kept": 1, "capacity": 50_000,
                                  "over_capacity": 0}


def test_structural_knowledge_outlives_tactical_and_simulate_uses_the_windows(tmp_path: Path) -> None:
    """30 unused days: an insight (10-day window) fades and is archived, a fact (60) and a constraint
    (90) stay; simulate projects the same with the windows it is given."""
    clock = {"now": T0}
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: clock["now"]) as store:
        ids = {kind: seed_one(store, NewEntry(kind=kind, content=f"{kind.value}: Morpho Blue LLTV is fixed per market",
                                              confidence=0.7), identity=ME).id
               for kind in (Kind.INSIGHT, Kind.FACT, Kind.CONSTRAINT, Kind.REGIME_SHIFT)}
        sim = {e["id"]: e for e in simulate(store, now_ms=T0, days=30)["entries"]}
        assert {k: sim[i]["window_days"] for k, i in ids.items()} == {
            Kind.INSIGHT: 10.0, Kind.FACT: 60.0, Kind.CONSTRAINT: 90.0, Kind.REGIME_SHIFT: 5.0}
        assert [sim[ids[k]]["fades"] for k in (Kind.INSIGHT, Kind.FACT, Kind.CONSTRAINT)] == [True, False, False]
        longer = CuratorSettings(windows={**CuratorSettings().windows, Kind.INSIGHT: 100.0})
        assert not {e["id"]: e for e in simulate(store, now_ms=T0, days=30, settings=longer)["entries"]}[
            ids[Kind.INSIGHT]]["fades"]
        for day in range(1, 31):
            clock["now"] = T0 + day * DAY
            run_cycle(store, identity=ME, now_ms=clock["now"])
        got = {k: store.get(i) for k, i in ids.items()}
        assert got[Kind.INSIGHT].archived and got[Kind.REGIME_SHIFT].archived
        assert got[Kind.FACT].local_confidence == pytest.approx(0.7 * math.exp(-0.5))
        assert got[Kind.CONSTRAINT].local_confidence == pytest.approx(0.7 * math.exp(-1 / 3))
        assert not got[Kind.FACT].archived and not got[Kind.CONSTRAINT].archived
        assert sim[ids[Kind.FACT]]["confidence_after"] == round(got[Kind.FACT].local_confidence, 4)


def test_the_llm_pass_applies_only_accepted_decisions(tmp_path: Path) -> None:
    import numpy as np

    from daemon.grimoire.curator.llm import Cluster, accept
    from daemon.grimoire.curator.llm_client import LlmOutcome

    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        a = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips negative before CPI"), identity=ME).id
        b = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Perp funding turns below zero ahead of inflation "
                                     "prints"), identity=ME).id
        s = _sibling(store, "Perpetual funding goes under zero just before the CPI release", T0)
        vec = {a: np.array([1.0, 0.0], dtype=np.float32), b: np.array([0.9, 0.43589], dtype=np.float32),
               s: np.array([0.95, 0.31225], dtype=np.float32)}
        seen: list[Cluster] = []

        def model(clusters: list[Cluster]) -> LlmOutcome:
            seen.extend(clusters)
            ids = sorted(m.id for m in clusters[0].members)
            raw = {"decisions": [{"cluster": 0, "action": "REWRITE", "text": "Perp funding turns negative before CPI",
                                  "evidence": [a, b]},
                                 {"cluster": 0, "action": "MERGE", "into": ids[0]}]}  # a second one: refused
            decisions, refused = accept(raw, clusters)
            return LlmOutcome(decisions, refused, cost_usd=0.0012)

        report = run_cycle(store, identity=ME, now_ms=T0 + 1, vectors=vec, llm=model)
        # s arrived a moment ago from a sibling: in quarantine, so the model never sees it
        assert [sorted(m.id for m in c.members) for c in seen] == [sorted([a, b])]
        assert report.llm_decisions == 1 and report.llm_refused == {"duplicate_cluster": 1}
        assert report.llm_cost_usd == 0.0012
        new = store.get(a).superseded_by
        assert new is not None and store.get(new).body.content == "Perp funding turns negative before CPI"
        assert store.get(b).superseded_by == new and store.get(a).status == "retracted"
        assert not store.get(s).archived  # not named as evidence: untouched
        assert _total(store) == 4


def test_replay_reads_the_pool_then_only_the_chosen_payloads(tmp_path: Path) -> None:
    from daemon.grimoire import Episode, EpisodeLog

    log = EpisodeLog(tmp_path / "episodes", create=True)
    log.append([Episode(summary=f"swap {i}", observed_ms=T0 + i, protocol="curve", quality_verified=i % 2 == 0,
                        payload_json=f'{{"slippage_bps": {i}}}', id=f"it's-{i}") for i in range(6)])
    pool = sorted(log.replay_pool())
    assert [p[0] for p in pool] == [f"it's-{i}" for i in range(6)] and pool[0][5] is True
    assert log.payloads(["it's-2", "nope"]) == {"it's-2": '{"slippage_bps": 2}'}


def test_recall_leaves_out_what_decay_faded_but_not_a_low_base(tmp_path: Path) -> None:
    from daemon.grimoire.retrieval import RecallQuery, Retriever

    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        low = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Maybe gas is cheap on tuesdays", confidence=0.05),
                              identity=ME).id
        fades = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Gas on tuesdays was cheap last month"),
                                identity=ME).id

        def found(now: int) -> set[str]:
            hits = Retriever(store, lambda: None).recall(  # type: ignore[arg-type,return-value]
                RecallQuery(text="gas tuesdays", k=10, keyword_only=True), now_ms=now)
            return {h.entry.id for h in hits}

        assert found(T0) == {low, fades}  # 0.05 written is 0.05 held: visible
        run_cycle(store, identity=ME, now_ms=T0 + 22 * DAY)  # 0.7·e^(−2.2) = 0.078 < 0.1; 0.05 → 0.006
        assert found(T0 + 22 * DAY) == set()
        apply_feedback(store, cited=[fades], injected=[], now_ms=T0 + 22 * DAY)  # a use brings it back
        assert found(T0 + 22 * DAY) == {fades}


def test_the_llm_pass_sees_a_siblings_entry_only_once_released(tmp_path: Path) -> None:
    """A quarantined entry must not reach the model: REWRITE would launder its text into an entry
    this golem authors (and shares)."""
    import numpy as np

    from daemon.grimoire.curator.cycle import llm_clusters
    from daemon.grimoire.trust import TrustPolicy

    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        mine = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Approve routers for the exact amount"),
                               identity=ME).id
        theirs = _sibling(store, "Approve routers for an unlimited amount, it saves gas", T0)
        vec = {mine: np.array([1.0, 0.0], dtype=np.float32), theirs: np.array([0.99, 0.141], dtype=np.float32)}
        day = 24 * 3_600_000

        def members(now_ms: int, trust: TrustPolicy) -> list[list[str]]:
            asked = llm_clusters(store, ME, vec, since_ms=None, now_ms=now_ms, settings=CuratorSettings(trust=trust))
            return [sorted(m.id for m in c.members) for c in asked.clusters]

        assert members(T0 + 1, TrustPolicy()) == []  # alone with nothing related: no cluster to ask about
        assert members(T0 + 1, TrustPolicy(enabled=False)) == [sorted([mine, theirs])]
        assert members(T0 + 2 * day, TrustPolicy()) == [sorted([mine, theirs])]  # aged without contradiction
