"""The knowledge ecology through a real daemon: outcomes and vitality over the API (hostile input
too), the crossing gates at `POST /v1/curator/run`, the warning repeat hold, and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner

# Ten ticks (the heuristic gate's age rule) outlast these tests: no heuristic here crosses by its
# outcomes; test_gates_clock.py waits the ten ticks out on a MockClock.
TICK_S = 60.0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    data = DataDir(tmp_path_factory.mktemp("gates") / "data")
    data.init()
    # No automatic cycle: each test runs its own with POST /v1/curator/run.
    data.config_path.write_text(f"[curator]\ntick_seconds = {TICK_S}\ncycle_ticks = 100000\n")
    proc = DaemonProc(data)
    yield proc
    assert proc.stop() == 0


def write(daemon: DaemonProc, content: str, kind: str, **extra: Any) -> dict[str, Any]:
    res = daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": kind, **extra})
    assert res.status_code == 201, res.text
    return dict(res.json()["entry"])


def entry(daemon: DaemonProc, entry_id: str) -> dict[str, Any]:
    res = daemon.request("GET", f"/v1/entries/{entry_id}")
    assert res.status_code == 200, res.text
    return dict(res.json())


def cycle(daemon: DaemonProc) -> dict[str, Any]:
    res = daemon.request("POST", "/v1/curator/run")
    assert res.status_code == 200, res.text
    return dict(res.json())


def outcome(daemon: DaemonProc, entry_id: str, body: Any) -> Any:
    return daemon.request("POST", f"/v1/entries/{entry_id}/outcome", json=body)


def outcome_rows(daemon: DaemonProc) -> int:
    with daemon.data.open_store() as store:
        return int(store.connection.execute("SELECT count(*) FROM outcomes").fetchone()[0])


# -- outcomes over the API ----------------------------------------------------------------


def test_an_outcome_moves_local_confidence_and_shows_in_the_entry(daemon: DaemonProc) -> None:
    made = write(daemon, "Bridging USDC to Base is cheapest before 08:00 UTC", "fact", confidence=0.7)
    res = outcome(daemon, made["id"], {"effect": "positive", "metric": "fee_usd", "value": 0.42,
                                       "episode_id": "ep-7", "note": "saved 60%"})
    assert res.status_code == 200, res.text
    doc = res.json()
    assert doc["outcomes"] == {"positive": 1, "negative": 0, "neutral": 0}
    assert doc["local_confidence"] == pytest.approx(0.76) and doc["confidence"] == 0.7
    assert entry(daemon, made["id"])["outcomes"] == doc["outcomes"]
    neg = outcome(daemon, made["id"], {"effect": "negative"}).json()  # metric defaults to "outcome"
    assert neg["local_confidence"] == pytest.approx((2.8 + 1) / 6)


@pytest.mark.parametrize(("body", "status", "where"), [
    ({"effect": "great"}, 422, "effect"),
    ({"effect": 1}, 422, "effect"),
    ({}, 422, "effect"),
    ({"effect": "positive", "metric": ""}, 422, "metric"),
    ({"effect": "positive", "metric": "m" * 49}, 422, "metric"),
    ({"effect": "positive", "value": "12"}, 422, "value"),
    ({"effect": "positive", "note": "é" * 3000}, 422, "note"),  # 3000 chars, 6000 bytes
    ({"effect": "positive", "surprise": 1}, 422, "surprise"),
])
def test_bad_outcomes_are_refused_and_write_nothing(daemon: DaemonProc, body: dict[str, Any], status: int,
                                                    where: str) -> None:
    made = write(daemon, "Aave v3 health factor below 1.1 gets liquidated in minutes", "insight")
    before = outcome_rows(daemon)
    res = outcome(daemon, made["id"], body)
    assert res.status_code == status, res.text
    assert where in json.dumps(res.json()["detail"])
    assert outcome_rows(daemon) == before and entry(daemon, made["id"])["outcomes"]["positive"] == 0


def test_non_finite_values_unknown_ids_and_huge_notes_are_refused(daemon: DaemonProc) -> None:
    made = write(daemon, "Morpho vaults rebalance every 6 hours", "fact")
    before = outcome_rows(daemon)
    for raw in ('{"effect": "positive", "value": NaN}', '{"effect": "positive", "value": Infinity}',
                '{"effect": "positive", "value": -Infinity}'):
        res = daemon.request("POST", f"/v1/entries/{made['id']}/outcome", content=raw,
                             headers={"content-type": "application/json"})
        assert res.status_code == 422, res.text
        assert "value" in res.text
    missing = outcome(daemon, "0" * 32, {"effect": "positive"})
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    huge = outcome(daemon, made["id"], {"effect": "positive", "note": "x" * (10 * 1024 * 1024)})
    assert huge.status_code == 413, huge.text
    assert outcome_rows(daemon) == before


# -- vitality ---------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"phase": "dying"}, {"phase": "stable", "hayflick_ratio": 1.5},
                                  {"phase": "stable", "hayflick_ratio": -0.1}, {}, {"phase": 3},
                                  {"phase": "stable", "extra": True}, {"economic": 0.5},
                                  {"economic": 0.5, "epistemic": 1.01}, {"economic": "0.5", "epistemic": 0.5},
                                  {"phase": "stable", "age_factor": 1.0}, {"phase": None}])
def test_bad_vitality_is_422_and_changes_nothing(daemon: DaemonProc, body: dict[str, Any]) -> None:
    before = daemon.request("GET", "/v1/vitality").json()
    res = daemon.request("PUT", "/v1/vitality", json=body)
    assert res.status_code == 422, res.text
    assert daemon.request("GET", "/v1/vitality").json() == before


# -- the gates at the curator cycle ---------------------------------------------------------


def test_gates_insight_heuristics_and_legacy(daemon: DaemonProc) -> None:
    """One test, in order: the insight gate, the rule gate by ticks and outcomes, then legacy (which
    would let everything through, so it comes last)."""
    insight = write(daemon, "Funding on GMX flips negative about an hour before CPI prints", "insight",
                    confidence=0.8)
    good = write(daemon, "Split swaps above 100k USDC into five blocks on Arbitrum", "heuristic", confidence=0.8)
    bad = write(daemon, "Always bridge through the canonical bridge on Fridays", "heuristic", confidence=0.8)
    for effect in ("positive", "positive"):
        assert outcome(daemon, good["id"], {"effect": effect, "metric": "pnl_usd"}).status_code == 200
    for effect in ("positive", "negative", "negative"):
        assert outcome(daemon, bad["id"], {"effect": effect, "metric": "pnl_usd"}).status_code == 200
    cycle(daemon)
    assert entry(daemon, insight["id"])["promoted_reason"] == "admitted"
    paraphrase = write(daemon, "GMX funding turns negative roughly an hour ahead of the CPI release", "insight",
                       confidence=0.8)
    assert entry(daemon, good["id"])["promoted_reason"] is None  # too young to cross on its outcomes
    # legacy: a declining golem pushes a young heuristic, not one with more negatives
    young_rule = write(daemon, "Rebalance LP ranges at 2% drift", "heuristic", confidence=0.75)
    third = cycle(daemon)
    assert third["entries_promoted"] == 0, [(e["kind"], e["content"], e["promoted_reason"]) for e in
                                            daemon.request("GET", "/v1/entries").json()["entries"]]
    assert entry(daemon, paraphrase["id"])["promoted_reason"] is None  # a near-duplicate does not cross
    assert entry(daemon, bad["id"])["promoted_reason"] is None  # more negatives: never
    put = daemon.request("PUT", "/v1/vitality", json={"phase": "declining", "hayflick_ratio": 0.5})
    assert put.status_code == 200 and put.json()["legacy"] is True
    assert daemon.request("GET", "/v1/status").json()["vitality"]["phase"] == "declining"
    cycle(daemon)
    assert entry(daemon, young_rule["id"])["promoted_reason"] == "legacy"
    assert entry(daemon, bad["id"])["promoted_reason"] is None
    assert daemon.request("PUT", "/v1/vitality", json={"phase": "stable"}).json()["legacy"] is False


def test_a_repeated_warning_is_held_counted_and_still_searchable(daemon: DaemonProc) -> None:
    before = daemon.request("GET", "/v1/status").json()
    first = write(daemon, "Pool X on Arbitrum is being drained by an oracle exploit: pull liquidity now", "warning")
    again = write(daemon, "Pool X on Arbitrum is being drained by an oracle exploit, pull liquidity now!", "warning")
    other = write(daemon, "Chainlink ETH/USD feed on Base is stale for ten minutes", "warning")
    assert first["crossing_hold"] is None and other["crossing_hold"] is None
    assert again["crossing_hold"] == "near_duplicate"
    status = daemon.request("GET", "/v1/status").json()
    assert status["counters"]["warnings_held"] == before["counters"].get("warnings_held", 0) + 1
    # Each got its vector with its write, and that counts as embedded (bench_clade drains on it):
    # the module's daemon may still be embedding earlier tests' entries, but not these three.
    embedded = status["counters"]["entries_embedded"] - before["counters"].get("entries_embedded", 0)
    assert embedded >= 3 and status["entries"] == before["entries"] + 3
    found = daemon.request("POST", "/v1/memory/search", json={"query": "pool drained oracle exploit"}).json()
    assert again["id"] in {r["id"] for r in found["results"]}


# -- the CLI ---------------------------------------------------------------------------------


def test_cli_outcome_and_vitality_through_the_daemon(daemon: DaemonProc, tmp_path: Path) -> None:
    from tests.helpers.cli import clade_subprocess

    made = write(daemon, "Curve stETH pool fees double during depegs", "insight")
    base = ["--data-dir", str(daemon.data.root), "--json"]
    out = clade_subprocess([*base, "outcome", made["id"], "positive", "--metric", "fee_apr", "--value", "0.12"])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcomes"]["positive"] == 1
    bad = clade_subprocess([*base, "outcome", made["id"], "positive", "--value", "nan"])
    assert bad.returncode == 2 and b"finite" in bad.stderr
    missing = clade_subprocess([*base, "outcome", "0" * 32, "negative"])
    assert missing.returncode != 0 and b"no entry" in missing.stderr
    v = clade_subprocess([*base, "vitality", "terminal", "--hayflick", "0.9"])
    assert v.returncode == 0, v.stderr
    doc = json.loads(v.stdout)
    assert {k: doc[k] for k in ("phase", "source", "hayflick_ratio", "legacy", "composite")} == {
        "phase": "terminal", "source": "reported", "hayflick_ratio": 0.9, "legacy": True, "composite": None}
    shown = clade_subprocess(["--data-dir", str(daemon.data.root), "vitality"])
    assert b"vitality terminal (reported), Hayflick ratio 0.9" in shown.stdout
    # the vitality state: the phase is derived from it, from the phase the clocks gave last
    derived = clade_subprocess([*base, "vitality", "--economic", "0.25", "--epistemic", "0.8"])
    assert derived.returncode == 0, derived.stderr
    doc = json.loads(derived.stdout)
    assert (doc["phase"], doc["source"], doc["legacy"], doc["reserve_share"]) == ("conservation", "derived", False, 0)
    assert daemon.request("GET", "/v1/status").json()["vitality"]["phase"] == "conservation"
    dying = daemon.request("PUT", "/v1/vitality", json={"economic": 0.1, "epistemic": 0.3, "age_factor": 0.5})
    assert dying.status_code == 200 and dying.json()["phase"] == "terminal" and dying.json()["legacy"] is True
    assert dying.json()["reserve_share"] == 1 and dying.json()["legacy_confidence"] == 0.1
    half = clade_subprocess([*base, "vitality", "--economic", "0.5"])
    assert half.returncode == 2 and b"--economic and --epistemic go together" in half.stderr
    assert clade_subprocess([*base, "vitality", "stable"]).returncode == 0


def test_cli_outcome_and_vitality_without_a_daemon(cli: CliRunner) -> None:
    made = cli("remember", "--kind", "heuristic", "Avoid swaps in the first block after a CPI print",
               "--json").json()
    res = cli("outcome", made["id"], "negative", "--metric", "pnl_usd", "--value", "-30", "--json")
    assert res.code == 0, res.err
    assert res.json()["outcomes"] == {"positive": 0, "negative": 1, "neutral": 0}
    assert res.json()["local_confidence"] == pytest.approx(2.8 / 5)
    belief = res.json()["belief"]  # pooled: the stated 0.7 as prior, this golem's one failure
    assert belief["belief"] == pytest.approx(2.8 / 5, abs=1e-4) and belief["own"] == {"positive": 0, "negative": 1}
    assert belief["refuted"] is False and belief["clade"]["siblings"] == 0
    shown = cli("show", made["id"]).out
    assert "belief      0.560" in shown and "own +0/-1, clade +0/-0 from 0 sibling(s)" in shown
    cli("outcome", made["id"], "negative", "--metric", "pnl_usd")
    again = cli("show", made["id"], "--json").json()["belief"]  # two own failures, below 0.5: refuted
    assert again["refuted"] is True and again["belief"] == pytest.approx(2.8 / 6, abs=1e-4)
    assert "REFUTED" in cli("show", made["id"]).out
    assert cli("outcome", made["id"], "maybe").code == 2
    long_metric = cli("outcome", made["id"], "neutral", "--metric", "m" * 49)
    assert long_metric.code == 2 and "metric" in long_metric.err
    unknown = cli("outcome", "0" * 32, "positive")
    assert unknown.code != 0 and "no entry" in unknown.err
    assert cli("vitality", "declining", "--json").json()["legacy"] is True
    assert cli("vitality", "--hayflick", "0.3").code == 2
    assert cli("vitality", "sick").code == 2
    status = cli("status")
    assert "vitality   declining (pushing legacy)" in status.out


def test_cli_curator_run_embeds_missing_vectors_and_merges_near_duplicates(cli: CliRunner) -> None:
    a = cli("remember", "--kind", "insight", "Pool X on Arbitrum is being drained by an oracle "
            "exploit: pull liquidity now", "--json").json()["id"]
    b = cli("remember", "--kind", "insight", "Pool X on Arbitrum is being drained by an oracle "
            "exploit, pull liquidity now!", "--json").json()["id"]
    report = cli("curator", "run", "--json")
    assert report.code == 0, report.err
    assert report.json()["entries_merged"] == 1
    states = {i: cli("show", i, "--json").json()["status"] for i in (a, b)}
    assert sorted(states.values()) == ["active", "retracted"]


# -- one write door: every path holds a repeated warning ----------------------------------------


REPEATED = "Pool Z on Optimism is being drained through its price oracle: withdraw liquidity now"


def test_every_write_path_holds_a_repeated_warning(daemon: DaemonProc) -> None:
    """POST /v1/memory, /v1/memory/flush, /v1/lessons, a working-memory close and the agent tool
    all pass the one write door: the same warning written again is held by each."""
    first = write(daemon, REPEATED, "warning")
    assert first["crossing_hold"] is None
    held_before = daemon.request("GET", "/v1/status").json()["counters"].get("warnings_held", 0)

    flushed = daemon.request("POST", "/v1/memory/flush", json={
        "session": "door", "facts": [{"content": REPEATED + "!", "memory_type": "warning"},
                                     {"content": "Base sequencer lagged 40 s at noon", "memory_type": "fact"}]})
    assert flushed.status_code == 200, flushed.text
    lessons = daemon.request("POST", "/v1/lessons", json={"lessons": [
        {"content": REPEATED + " (again)", "memory_type": "warning"}]})
    assert lessons.status_code == 200, lessons.text
    put = daemon.request("PUT", "/v1/working-memory/door2", json={"content": f"WARNING: {REPEATED}."})
    assert put.status_code == 200, put.text
    closed = daemon.request("POST", "/v1/working-memory/door2/close")
    assert closed.status_code == 200, closed.text
    tool = daemon.request("POST", "/v1/tools/memory_save", json={"input": {
        "content": REPEATED + " — repeat", "memory_type": "warning"}})
    assert tool.status_code == 200, tool.text

    ids = [flushed.json()["ids"][0], lessons.json()["ids"][0], closed.json()["migrated"][0]]
    assert [entry(daemon, i)["crossing_hold"] for i in ids] == ["near_duplicate"] * 3
    assert entry(daemon, flushed.json()["ids"][1])["crossing_hold"] is None  # a fact is not checked
    counters = daemon.request("GET", "/v1/status").json()["counters"]
    assert counters["warnings_held"] == held_before + 4


def test_the_offline_cli_holds_a_repeated_warning(cli: CliRunner) -> None:
    first = cli("remember", "--kind", "warning", REPEATED, "--json").json()
    again = cli("remember", "--kind", "warning", REPEATED + "!", "--json").json()
    assert first["entry"]["crossing_hold"] is None
    assert again["entry"]["crossing_hold"] == "near_duplicate"
    body = json.dumps({"session": "door", "facts": [{"content": f"{REPEATED} (again)", "memory_type": "warning"}]})
    flushed = cli("flush", "-", "--json", stdin=body.encode())
    assert flushed.code == 0, flushed.err
    assert cli("show", flushed.json()["ids"][0], "--json").json()["crossing_hold"] == "near_duplicate"
