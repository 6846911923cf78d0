"""The curator's pure steps with hand-made inputs and exact outputs (daemon/grimoire/curator/)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from crdt import Kind
from daemon.grimoire.curator import (
    Candidate,
    Merge,
    ReplayItem,
    Retention,
    Similar,
    Supersede,
    baselines,
    decayed,
    find_contradictions,
    find_merges,
    select_prunes,
    select_replay,
    stability_days,
)
from daemon.grimoire.curator.compress import normalised_text, numbers_in, polarity
from daemon.grimoire.curator.decay import DEFAULT_WINDOW_DAYS, windows_with

DAY = 86_400_000
T0 = 1_700_000_000_000


# -- decay ---------------------------------------------------------------------------------


def test_stability_grows_with_ln_evidence_and_never_below_the_window() -> None:
    assert stability_days(1, 10) == 10
    assert stability_days(2, 10) == 10  # ln 2 < 1
    assert stability_days(20, 10) == pytest.approx(10 * math.log(20))
    assert stability_days(0, 10) == 10  # nonsense evidence is one


def test_decay_is_the_ebbinghaus_curve_of_the_time_since_the_last_evidence() -> None:
    r = Retention(Kind.INSIGHT, base=0.7, anchor_ms=T0, evidence=1)
    assert decayed(r, T0) == 0.7
    assert decayed(r, T0 + 10 * DAY, window_days=10) == pytest.approx(0.7 / math.e)
    strong = Retention(Kind.INSIGHT, base=0.7, anchor_ms=T0, evidence=20)
    assert decayed(strong, T0 + 10 * DAY, window_days=10) == pytest.approx(0.7 * math.exp(-1 / math.log(20)))
    assert decayed(r, T0 - DAY) == 0.7  # a clock that went backwards does not raise it


def test_warnings_and_anti_knowledge_floor_at_0_3_but_never_rise_to_it() -> None:
    for kind in (Kind.WARNING, Kind.ANTI_KNOWLEDGE):
        assert decayed(Retention(kind, 0.9, T0, 1), T0 + 1000 * DAY) == 0.3
        assert decayed(Retention(kind, 0.2, T0, 1), T0 + 1000 * DAY) == 0.2
    assert decayed(Retention(Kind.FACT, 0.9, T0, 1), T0 + 1000 * DAY) < 1e-4


def test_structural_kinds_decay_slower_than_tactical_ones() -> None:
    w = DEFAULT_WINDOW_DAYS
    assert set(w) == set(Kind)
    structural = (Kind.CONSTRAINT, Kind.PREFERENCE, Kind.FACT, Kind.CAUSAL_LINK, Kind.ANTI_KNOWLEDGE)
    tactical = (Kind.INSIGHT, Kind.REGIME_SHIFT, Kind.WARNING, Kind.STRATEGY_OUTCOME, Kind.EPISODE_SUMMARY)
    assert min(w[k] for k in structural) > w[Kind.HEURISTIC] > max(w[k] for k in tactical)
    assert (w[Kind.CONSTRAINT], w[Kind.FACT], w[Kind.HEURISTIC], w[Kind.INSIGHT], w[Kind.REGIME_SHIFT]) == (
        90.0, 60.0, 30.0, 10.0, 5.0)
    # The default window is the kind's: 30 unused days fade an insight (0.7·e⁻³ < 0.1) but not a fact.
    assert decayed(Retention(Kind.INSIGHT, 0.7, T0, 1), T0 + 30 * DAY) == pytest.approx(0.7 * math.exp(-3))
    assert decayed(Retention(Kind.FACT, 0.7, T0, 1), T0 + 30 * DAY) == pytest.approx(0.7 * math.exp(-0.5))
    assert decayed(Retention(Kind.FACT, 0.7, T0, 1), T0 + 30 * DAY, window_days=10) == pytest.approx(
        0.7 * math.exp(-3))


def test_windows_with_overrides_and_refuses_unknown_kinds() -> None:
    assert windows_with() == dict(DEFAULT_WINDOW_DAYS)
    assert set(windows_with(every=7.0).values()) == {7.0}
    mixed = windows_with({"fact": 120, "insight": 3.5}, every=20.0)
    assert mixed[Kind.FACT] == 120.0 and mixed[Kind.INSIGHT] == 3.5 and mixed[Kind.CONSTRAINT] == 20.0
    with pytest.raises(ValueError, match="'facts' is not a kind"):
        windows_with({"facts": 1.0})
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="more than 0 days"):
            windows_with({"fact": bad})


# -- prune ---------------------------------------------------------------------------------


def _c(id_: str, kind: Kind = Kind.INSIGHT, conf: float = 0.5, keep: float = 0.5, created: int = T0,
       evidence: int = 2) -> Candidate:
    return Candidate(id_, kind, conf, keep, created, evidence)


def test_prune_archives_below_the_threshold_and_never_a_floored_warning() -> None:
    live = [_c("a", conf=0.04), _c("b", conf=0.06), _c("w", Kind.WARNING, conf=0.3), _c("z", conf=0.0)]
    out = select_prunes(live, eviction_threshold=0.05)
    assert [(p.id, p.reason, p.kind) for p in out] == [("a", "below_threshold", Kind.INSIGHT),
                                                       ("z", "below_threshold", Kind.INSIGHT)]


# -- compress ------------------------------------------------------------------------------


def _s(id_: str, content: str, kind: Kind = Kind.FACT, own: bool = True, conf: float = 0.7, evidence: int = 1,
       created: int = T0) -> Similar:
    return Similar(id_, kind, content, own, conf, evidence, created)


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_text_helpers() -> None:
    assert normalised_text("  Gas is CHEAP, at 9 a.m.!  ") == normalised_text("gas is cheap at 9 a m")
    assert numbers_in("TVL $100,000 and 5 % fee, 30bps") == ("100000", "30bps", "5%")
    assert polarity("Never LP in thin pools") and not polarity("Always LP in deep pools")
    assert not polarity("do not never do it")


def test_exact_duplicates_merge_into_the_strongest_with_evidence_summed() -> None:
    live = [_s("a", "Gas on mainnet is cheapest at 03:00 UTC.", evidence=2),
            _s("b", "gas on Mainnet is cheapest at 03:00 UTC", conf=0.9),
            _s("c", "Gas on mainnet is cheapest at 03:00 UTC!", own=False, conf=1.0, evidence=5),
            _s("d", "Gas on mainnet is cheapest at 03:00 UTC.", kind=Kind.INSIGHT)]
    assert find_merges(live, {}) == [Merge("b", "a", "exact", 8), Merge("b", "c", "exact", 8)]


def test_near_duplicates_need_the_cosine_and_the_token_guard() -> None:
    live = [_s("a", "Aave v3 USDC supply APY on Arbitrum is about 5% this week", created=T0),
            _s("b", "This week Aave v3 USDC supply APY on Arbitrum is roughly 5%", created=T0 + 1),
            _s("c", "Aave v3 USDC supply APY on Arbitrum is about 50% this week", created=T0 + 2),
            _s("d", "Compound USDT borrow rate spiked", created=T0 + 3)]
    v = {"a": _unit(1, 0.05, 0), "b": _unit(1, 0.0, 0.05), "c": _unit(1, 0.04, 0.04), "d": _unit(1, 0.03, 0.0)}
    # all four are within cosine 0.92; c differs in its number, d shares too few words
    assert find_merges(live, v) == [Merge("a", "b", "near", 2)]
    assert find_merges(live, v, near=0.9999) == []


def test_exact_duplicates_always_merge_vectors_only_with_a_fresh_entry() -> None:
    live = [_s("a", "Same words here."), _s("b", "same words here"), _s("c", "Same words here")]
    assert find_merges(live, {}, fresh={"c"}) == [Merge("a", "b", "exact", 3), Merge("a", "c", "exact", 3)]
    near = [_s("x", "Curve 3pool depth is thin at night"), _s("y", "At night Curve 3pool depth is thin")]
    v = {"x": _unit(1, 0, 0), "y": _unit(1, 0.01, 0)}
    assert find_merges(near, v, fresh=set()) == []  # neither changed since the last cycle
    assert find_merges(near, v, fresh={"y"}) == [Merge("x", "y", "near", 2)]


def test_a_newer_own_entry_supersedes_the_older_it_contradicts() -> None:
    live = [_s("old", "Uniswap v3 ETH/USDC best fee tier on Base is 0.05%", created=T0),
            _s("mid", "Uniswap v3 ETH/USDC best fee tier on Base is 0.3%", created=T0 + DAY),
            _s("new", "Uniswap v3 ETH/USDC best fee tier on Base is 1%", created=T0 + 2 * DAY),
            _s("sib", "Uniswap v3 ETH/USDC best fee tier on Base is 0.01%", own=False, created=T0 + 3 * DAY),
            _s("neg", "Do not use Uniswap v3 ETH/USDC on Base at 1% fee tier", created=T0 + 4 * DAY,
               kind=Kind.HEURISTIC)]
    v = {k: _unit(1, i * 0.01, 0) for i, k in enumerate(["old", "mid", "new", "sib", "neg"])}
    assert find_contradictions(live, v) == [Supersede("new", "mid", "numbers"), Supersede("new", "old", "numbers")]


def test_polarity_flip_is_a_contradiction_and_warnings_never_contradict() -> None:
    live = [_s("a", "Rebalance the ETH range when volatility spikes", Kind.HEURISTIC, created=T0),
            _s("b", "Never rebalance the ETH range when volatility spikes", Kind.HEURISTIC, created=T0 + 1),
            _s("w1", "Never LP in pools under $100K TVL", Kind.WARNING, created=T0),
            _s("w2", "LP in pools under $100K TVL", Kind.WARNING, created=T0 + 1)]
    v = {k: _unit(1, 0, 0) for k in ("a", "b", "w1", "w2")}
    assert find_contradictions(live, v) == [Supersede("b", "a", "polarity")]


# -- consolidate ---------------------------------------------------------------------------


def _e(id_: str, ms: int, protocol: str | None = "uniswap-v3", curiosity: float = 0.5, importance: float = 0.5,
       verified: bool = True, **payload: object) -> ReplayItem:
    return ReplayItem(id_, ms, protocol, curiosity, importance, verified, json.dumps(payload))


def test_replay_mixes_70_percent_recent_and_30_percent_old_by_priority() -> None:
    now = T0 + 100 * DAY
    recent = [_e(f"r{i}", now - i * 1000, curiosity=i / 10) for i in range(10)]
    old = [_e(f"o{i}", T0 + i, importance=i / 10) for i in range(10)]
    picked = select_replay(recent + old, now_ms=now, budget=10, recent_ms=DAY)
    assert sorted(e.id for e in picked) == sorted([f"r{i}" for i in range(3, 10)] + ["o7", "o8", "o9"])
    only_old = select_replay(old, now_ms=now, budget=4, recent_ms=DAY)
    assert [e.id for e in only_old] == ["o9", "o8", "o7", "o6"]
    assert select_replay(recent, now_ms=now, budget=0, recent_ms=DAY) == []


def test_baselines_need_three_verified_episodes_per_protocol() -> None:
    eps = [_e("e1", T0, slippage_bps=10, gas=1.5, ok=True), _e("e2", T0 + DAY, slippage_bps=20, gas="x"),
           _e("e3", T0 + 2 * DAY, slippage_bps=30, gas=2.5), _e("e4", T0, verified=False, slippage_bps=1000),
           _e("p1", T0, protocol="aave-v3", rate=1), _e("p2", T0, protocol="aave-v3", rate=2)]
    out = baselines(eps)
    assert len(out) == 1
    b = out[0]
    assert b.protocol == "uniswap-v3" and b.episodes == ("e1", "e2", "e3")
    assert b.fields == (("slippage_bps", 20.0, 10.0, 3),)  # gas has two numbers, ok is a bool
    assert b.content == ("Baseline for uniswap-v3 from 3 verified episodes (2023-11-14 to 2023-11-16): "
                         "slippage_bps mean 20 (sd 10, n 3).")
    assert baselines(list(reversed(eps))) == out


def test_playbook_snapshots_keep_the_last_versions(tmp_path: Path) -> None:
    from daemon.grimoire.playbook import read_playbook, snapshot_playbook

    book = tmp_path / "PLAYBOOK.md"
    assert snapshot_playbook(book, "v1", now_ms=1) is None  # nothing to keep yet
    assert snapshot_playbook(book, "v1", now_ms=2) is None  # unchanged: no snapshot
    for n in range(2, 6):
        snapshot_playbook(book, f"v{n}", now_ms=n, keep=3)
    kept = sorted(p.read_text() for p in (tmp_path / "playbook").iterdir())
    assert kept == ["v2", "v3", "v4"] and read_playbook(book) == "v5"


def test_a_bloodstained_entry_pays_a_third_of_the_demurrage() -> None:
    plain = Retention(Kind.INSIGHT, 0.7, T0, 1)
    stained = Retention(Kind.INSIGHT, 0.7, T0, 1, bloodstain=True)
    assert decayed(stained, T0 + 30 * DAY, window_days=10) == pytest.approx(0.7 * math.exp(-1))
    assert decayed(plain, T0 + 30 * DAY, window_days=10) == pytest.approx(0.7 * math.exp(-3))
