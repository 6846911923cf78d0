"""Capacity as a Grimoire limit (daemon/grimoire/curator/prune.py): one budget of live entries,
archived in eviction-class order — strategy outcomes, episode summaries and unevidenced
insights first; rules and warnings last — never deleted, and told to the operator."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from crdt import Kind
from daemon.config import load_config
from daemon.datadir import DataDir
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator import Candidate, capacity_counts, eviction_class, select_prunes
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle, simulate
from daemon.grimoire.store import LocalIdentity
from daemon.service.curation import capacity_event
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner
from tests.helpers.seed import seed_one
from tui.format import feed_item

T0 = 1_700_000_000_000
DAY = 86_400_000
TVL_RULE = "Never LP in pools with less than $100K TVL"


def _c(id_: str, kind: Kind, keep: float = 0.5, created: int = T0, evidence: int = 1) -> Candidate:
    return Candidate(id_, kind, 0.5, keep, created, evidence)


# -- pure ----------------------------------------------------------------------------------


def test_eviction_classes() -> None:
    assert eviction_class(Kind.STRATEGY_OUTCOME, 9) == 0
    assert eviction_class(Kind.EPISODE_SUMMARY, 1) == 0
    assert eviction_class(Kind.INSIGHT, 1) == 0  # never used, confirmed or re-validated
    assert eviction_class(Kind.INSIGHT, 2) == 1
    for kind in (Kind.FACT, Kind.CAUSAL_LINK, Kind.PREFERENCE, Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION):
        assert eviction_class(kind, 1) == 1
    for kind in (Kind.HEURISTIC, Kind.CONSTRAINT, Kind.WARNING, Kind.ANTI_KNOWLEDGE):
        assert eviction_class(kind, 1) == 2


def test_strategy_outcomes_go_before_the_constraint() -> None:
    """The "$100K TVL" case: 105 strategy outcomes + 1 constraint, budget 100."""
    outcomes = [_c(f"s{i:03d}", Kind.STRATEGY_OUTCOME, keep=0.9 - i / 1000) for i in range(105)]
    constraint = _c("c", Kind.CONSTRAINT, keep=0.001)  # the lowest keep score of all: the class decides
    out = select_prunes([constraint, *outcomes], capacity=100)
    assert [(p.id, p.reason) for p in out] == [(f"s{i:03d}", "over_capacity") for i in (104, 103, 102, 101, 100, 99)]
    assert capacity_counts(out) == {"strategy_outcome": 6}


def test_classes_in_order_then_keep_score_then_age_then_id() -> None:
    live = [_c("w", Kind.WARNING, keep=0.0), _c("h", Kind.HEURISTIC, keep=0.01), _c("f", Kind.FACT, keep=0.3),
            _c("i2", Kind.INSIGHT, keep=0.1, evidence=2), _c("i1", Kind.INSIGHT, keep=0.8),
            _c("e", Kind.EPISODE_SUMMARY, keep=0.5), _c("s_b", Kind.STRATEGY_OUTCOME, keep=0.5, created=T0 - 1),
            _c("s_a", Kind.STRATEGY_OUTCOME, keep=0.5, created=T0 - 1)]
    order = [p.id for p in select_prunes(live, capacity=0)]
    assert order == ["s_a", "s_b", "e", "i1", "i2", "f", "w", "h"]
    assert [p.id for p in select_prunes(live, capacity=5)] == ["s_a", "s_b", "e"]
    assert select_prunes(live, capacity=8) == []
    assert select_prunes(list(reversed(live)), capacity=3) == select_prunes(live, capacity=3)


def test_threshold_prunes_count_before_the_budget() -> None:
    faded = Candidate("a", Kind.FACT, 0.01, 0.0, T0, 1)
    live = [faded, _c("s", Kind.STRATEGY_OUTCOME), _c("k", Kind.CONSTRAINT)]
    out = select_prunes(live, capacity=2)
    assert [(p.id, p.reason) for p in out] == [("a", "below_threshold")]  # 2 left: within the budget
    assert capacity_counts(out) == {}


# -- through a real store ------------------------------------------------------------------


def _fill(store: Grimoire, me: LocalIdentity) -> tuple[list[str], str]:
    """105 strategy outcomes (rising importance) and the constraint, the least important entry."""
    outcomes = [seed_one(store, NewEntry(kind=Kind.STRATEGY_OUTCOME, content=f"Rebalanced vault {i} at tick {i * 7}",
                                         importance=0.2 + i / 200, confidence=0.7), identity=me).id
                for i in range(105)]
    rule = seed_one(store, NewEntry(kind=Kind.CONSTRAINT, content=TVL_RULE, importance=0.0, confidence=0.5),
                           identity=me).id
    return outcomes, rule


def test_cycle_archives_outcomes_not_the_constraint_and_deletes_nothing(data_dir: DataDir, cli: CliRunner) -> None:
    identity = data_dir.load_identity()
    with data_dir.open_store(identity=identity) as store:
        outcomes, rule = _fill(store, identity)
        now = store.get(rule).stored_ms
        sim = simulate(store, now_ms=now, days=0, settings=CuratorSettings(capacity=100))
        assert sim["summary"]["over_capacity"] == 6 and sim["summary"]["capacity"] == 100
        report = run_cycle(store, identity=identity, now_ms=now, settings=CuratorSettings(capacity=100))
        assert report.entries_archived_capacity == 6 and report.archived_capacity_by_kind == {"strategy_outcome": 6}
        assert report.archived_capacity_ids == outcomes[:6]  # the lowest importance
        assert report.to_json()["entries_archived_capacity"] == 6 and "archived_capacity_ids" not in report.to_json()
        assert not store.get(rule).archived
        counts = store.counts()
        assert (counts.entries, counts.archived, counts.archived_for_capacity) == (106, 6, 6)
        event = capacity_event(report, capacity=100, live=counts.entries - counts.archived)
        assert event == {"count": 6, "by_kind": {"strategy_outcome": 6}, "ids": outcomes[:6], "capacity": 100,
                         "live": 100}
    assert cli("unarchive", outcomes[0]).code == 0
    assert cli("show", outcomes[0], "--json").json()["archived"] is False
    status = cli("status", "--json").json()
    assert status["archived"] == 5 and status["archived_for_capacity"] == 5
    assert "5 for capacity" in cli("status").out


def test_old_capacity_keys_load_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[curator]\ncapacity_rules = 100\ncapacity_knowledge = 5000\ncapacity_summaries = 50000\n")
    with caplog.at_level(logging.WARNING, logger="clade.config"):
        config = load_config(path, env={})
    assert config.curator.capacity == 50_000
    assert "capacity_rules = 100" in caplog.text and "no longer apply" in caplog.text
    path.write_text("[curator]\ncapacity = 100\n")
    assert load_config(path, env={}).curator.capacity == 100
    assert load_config(path, env={"CLADE_CURATOR__CAPACITY": "250"}).curator.capacity == 250


def test_feed_line_names_the_capacity_archive() -> None:
    item = feed_item("entries_archived_capacity", {"count": 6, "by_kind": {"strategy_outcome": 6}, "ids": [],
                                                   "capacity": 100, "live": 100}, T0)
    assert item is not None and item.kind == "curator" and item.level.name == "WARN"
    assert item.text == ("over budget (100 live entries): archived 6 (6 strategy_outcome); "
                         "clade unarchive ID undoes one")
    cycle = feed_item("curator_cycle_complete", {"entries_pruned": 7, "entries_archived_capacity": 6}, T0)
    assert cycle is not None and "7 pruned (6 over budget)" in cycle.text


# -- through a real daemon -----------------------------------------------------------------


def test_daemon_publishes_the_capacity_archive_and_counts_it(data_dir: DataDir) -> None:
    identity = data_dir.load_identity()
    with data_dir.open_store(identity=identity) as store:
        outcomes, rule = _fill(store, identity)
    daemon = DaemonProc(data_dir, env={"CLADE_CURATOR__CAPACITY": "100"})
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.socket), base_url="http://clade",
                          timeout=60) as events, events.stream("GET", "/v1/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": connected"
            run = daemon.request("POST", "/v1/curator/run")
            assert run.status_code == 200, run.text
            assert run.json()["entries_archived_capacity"] == 6
            assert run.json()["archived_capacity_by_kind"] == {"strategy_outcome": 6}
            event = None
            for line in lines:
                if line == "event: entries_archived_capacity":
                    event = json.loads(next(lines).removeprefix("data:").strip())
                    break
        assert event is not None
        assert event["count"] == 6 and event["ids"] == outcomes[:6] and event["live"] == 100
        status = daemon.request("GET", "/v1/status").json()
        assert status["archived_for_capacity"] == 6 and status["last_curator_cycle"]["entries_archived_capacity"] == 6
        assert daemon.request("GET", f"/v1/entries/{rule}").json()["archived"] is False
        assert daemon.request("POST", f"/v1/entries/{outcomes[0]}/unarchive").json()["changed"] is True
        assert daemon.request("GET", "/v1/status").json()["archived_for_capacity"] == 5
        daemon.wait_for("over its budget of 100 live entries")
    finally:
        assert daemon.stop() == 0


def test_tui_shows_the_capacity_archive(data_dir: DataDir) -> None:
    """The operator's TUI against a real daemon: a feed line and the count in the knowledge panel."""
    import asyncio
    from typing import Any

    from textual.pilot import Pilot

    from tests.helpers.tui_drive import drive, feed, tui_for, until
    from tui.widgets import KnowledgePanel

    identity = data_dir.load_identity()
    with data_dir.open_store(identity=identity) as store:
        for i in range(3):
            seed_one(store, NewEntry(kind=Kind.STRATEGY_OUTCOME, content=f"Closed position {i} at +{i}%"),
                            identity=identity)
        seed_one(store, NewEntry(kind=Kind.CONSTRAINT, content=TVL_RULE), identity=identity)
    daemon = DaemonProc(data_dir, env={"CLADE_CURATOR__CAPACITY": "2"})
    try:
        app = tui_for(data_dir)

        async def body(pilot: Pilot[Any]) -> None:
            await until(pilot, lambda: app.snapshot is not None, "a poll")
            run = await asyncio.to_thread(daemon.request, "POST", "/v1/curator/run")
            assert run.status_code == 200 and run.json()["entries_archived_capacity"] == 2
            await until(pilot, lambda: any(line.startswith("over budget (2 live entries): archived 2 "
                                                           "(2 strategy_outcome)") for line in feed(app)),
                        "the capacity feed line")
            assert any(line.startswith("curator cycle: 2 pruned (2 over budget)") for line in feed(app))
            panel = app._main.query_one(KnowledgePanel)
            await until(pilot, lambda: "2[/b] over budget" in str(panel.render()), "the count in the panel")

        drive(app, body)
    finally:
        assert daemon.stop() == 0
