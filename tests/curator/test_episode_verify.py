"""Episodes that can be verified, and consolidation that replays only those.

`EpisodeLog.verify` / `count_replays` (one LanceDB commit each), the curator cycle's replay
(verified only; `replay_count` persisted after the store's writes), `POST /v1/episodes/{id}/verify`,
`verified` and `pad` on `POST /v1/episodes`, and `clade episode verify` / `add --verified --pad`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdt.body import Pad
from daemon.datadir import DataDir
from daemon.errors import NotFound
from daemon.grimoire import Episode, EpisodeLog, Grimoire, wall_clock_ms
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.service.curation import record_replays, replay_items
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner

DAY = 86_400_000
T0 = wall_clock_ms() - DAY  # the store stamps writes with the wall clock: cycles run near it


def _episodes(protocol: str, *, verified: bool, n: int = 3) -> list[Episode]:
    return [Episode(summary=f"{protocol} swap {i}", observed_ms=T0 + i, protocol=protocol, quality_verified=verified,
                    payload_json=json.dumps({"slippage_bps": 10 * (i + 1)})) for i in range(n)]


def _baselines(store: Grimoire) -> list[tuple[str, str]]:
    rows = store.connection.execute("SELECT protocols, content FROM entries WHERE kind = 'fact' AND status = 'active' "
                                    "AND tags LIKE '%\"baseline\"%' ORDER BY protocols").fetchall()
    return [(r[0], r[1]) for r in rows]


def test_verify_is_one_commit_idempotent_and_refuses_unknown_ids(tmp_path: Path) -> None:
    log = EpisodeLog(tmp_path / "episodes", create=True)
    ep = _episodes("aave-v3", verified=False, n=1)[0]
    log.append([ep])
    version = log.version
    got, changed = log.verify(ep.id)
    assert changed and got.quality_verified and log.version == version + 1
    again, changed = log.verify(ep.id)
    assert not changed and again == got and log.version == version + 1  # nothing written the second time
    stored = log.get(ep.id)
    assert stored is not None and stored.quality_verified and stored.summary == ep.summary
    with pytest.raises(NotFound):
        log.verify("f" * 32)
    with pytest.raises(NotFound):
        log.verify("x' OR '1'='1")  # a filter literal, never SQL
    assert log.count_replays([ep.id, ep.id, "nope"]) == 1 and log.get(ep.id).replay_count == 1  # type: ignore[union-attr]
    assert log.count_replays([]) == 0


def test_verified_episodes_consolidate_and_count_their_replays(tmp_path: Path, data_dir: DataDir) -> None:
    identity = data_dir.load_identity()
    log = data_dir.open_episodes()
    verified, unverified = _episodes("uniswap-v3", verified=True), _episodes("curve", verified=False)
    log.append([*verified, *unverified])
    settings = CuratorSettings()
    with data_dir.open_store(identity=identity) as store:
        for cycle in (1, 2):
            now = T0 + DAY + cycle
            chosen = replay_items(log, now_ms=now, settings=settings)
            assert sorted(e.id for e in chosen) == sorted(e.id for e in verified)  # unverified never replayed
            report = run_cycle(store, identity=identity, now_ms=now, settings=settings, episodes=chosen)
            assert record_replays(log, report) == 3 and report.episodes_replayed == 3
            assert report.episodes_consolidated == (3 if cycle == 1 else 0)  # the same baseline is not rewritten
        facts = _baselines(store)
    assert len(facts) == 1 and facts[0][0] == '["uniswap-v3"]'
    assert "from 3 verified episodes" in facts[0][1] and "slippage_bps mean 20" in facts[0][1]
    counts = {e.id: e.replay_count for e in log.scan(limit=None)}
    assert all(counts[e.id] == 2 for e in verified) and all(counts[e.id] == 0 for e in unverified)


def test_unverified_episodes_never_consolidate(data_dir: DataDir) -> None:
    identity = data_dir.load_identity()
    log = data_dir.open_episodes()
    log.append(_episodes("curve", verified=False, n=5))
    unverified_items = replay_items(log, now_ms=T0 + DAY, settings=CuratorSettings())
    assert unverified_items == []
    from daemon.grimoire.curator.consolidate import ReplayItem

    # Even handed to the cycle directly, an unverified episode is neither replayed nor consolidated.
    raw = [ReplayItem(e.id, e.observed_ms, e.protocol, 0.5, 0.5, False, e.payload_json) for e in log.scan(limit=None)]
    with data_dir.open_store(identity=identity) as store:
        report = run_cycle(store, identity=identity, now_ms=T0 + DAY, episodes=raw)
        assert (report.episodes_replayed, report.episodes_consolidated, report.replayed) == (0, 0, [])
        assert _baselines(store) == []
    assert all(e.replay_count == 0 for e in log.scan(limit=None))


def test_cli_adds_verifies_and_consolidates(cli: CliRunner, data_dir: DataDir) -> None:
    ids = []
    for i in range(3):
        args = ["episode", "add", "--summary", f"Borrowed on aave {i}", "--protocol", "aave-v3",
                "--payload-json", json.dumps({"rate_bps": 300 + i}), "--json"]
        if i == 0:
            args += ["--verified", "--pad=-0.5,0.25,1"]
        added = cli(*args)
        assert added.code == 0, added.err
        ids.append(added.json()["id"])
    first = cli("episode", "list", "--json").json()["episodes"]
    by_id = {e["id"]: e for e in first}
    assert by_id[ids[0]]["quality_verified"] is True and by_id[ids[0]]["pad"] == [-0.5, 0.25, 1.0]
    assert by_id[ids[1]]["quality_verified"] is False and by_id[ids[1]]["pad"] is None
    assert cli("curator", "run", "--json").json()["episodes_consolidated"] == 0  # one verified: no baseline
    done = cli("episode", "verify", ids[1], "--json")
    assert done.code == 0, done.err
    assert done.json()["changed"] is True and done.json()["episode"]["quality_verified"] is True
    assert cli("episode", "verify", ids[1]).out.strip() == f"{ids[1]} verified (already)"
    assert cli("episode", "verify", ids[2]).code == 0
    unknown = cli("episode", "verify", "f" * 32)
    assert unknown.code == 2 and "no episode" in unknown.err
    assert cli("episode", "add", "--summary", "x", "--pad", "2,0,0").code == 2
    run = cli("curator", "run", "--json").json()
    assert run["episodes_consolidated"] == 3 and run["episodes_replayed"] == 3
    replays = {e["id"]: e["replay_count"] for e in cli("episode", "list", "--json").json()["episodes"]}
    assert replays == {ids[0]: 2, ids[1]: 1, ids[2]: 1}  # ids[0] was replayed by the first cycle too
    facts = cli("list", "--kind", "fact", "--json").json()["entries"]
    assert len(facts) == 1 and "rate_bps mean 301" in facts[0]["content"]


@pytest.mark.parametrize("pad", [
    {"pleasure": 1.5, "arousal": 0, "dominance": 0},
    {"pleasure": 0, "arousal": 0},
    {"pleasure": 0, "arousal": 0, "dominance": 0, "valence": 0},
    {"pleasure": "high", "arousal": 0, "dominance": 0},
    [0.1, 0.2, 0.3],
])
def test_api_refuses_a_bad_pad(shared: DaemonProc, pad: object) -> None:
    answer = shared.request("POST", "/v1/episodes", json={"summary": "bad pad", "pad": pad})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_request"


def test_api_verify_and_consolidation_through_a_daemon(data_dir: DataDir) -> None:
    daemon = DaemonProc(data_dir)
    try:
        ids = []
        for i in range(4):
            body = {"summary": f"LP on balancer {i}", "protocol": "balancer", "payload": {"fee_bps": 5 + i},
                    "verified": i == 0, "pad": {"pleasure": 0.5, "arousal": -0.25, "dominance": 0}}
            answer = daemon.request("POST", "/v1/episodes", json=body)
            assert answer.status_code == 201, answer.text
            assert answer.json()["episode"]["pad"] == [0.5, -0.25, 0.0]
            assert answer.json()["episode"]["quality_verified"] is (i == 0)
            ids.append(answer.json()["id"])
        assert daemon.request("POST", "/v1/episodes", json={"summary": "x", "verified": 1}).status_code == 422
        missing = daemon.request("POST", f"/v1/episodes/{'f' * 32}/verify")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        first = daemon.request("POST", f"/v1/episodes/{ids[1]}/verify").json()
        assert first["changed"] is True and first["episode"]["quality_verified"] is True
        assert daemon.request("POST", f"/v1/episodes/{ids[1]}/verify").json()["changed"] is False
        assert daemon.request("POST", f"/v1/episodes/{ids[2]}/verify").status_code == 200
        cycle = daemon.request("POST", "/v1/curator/run").json()
        assert cycle["episodes_consolidated"] == 3 and cycle["episodes_replayed"] == 3
        facts = daemon.request("GET", "/v1/entries", params={"kind": "fact"}).json()["entries"]
        assert [f["metadata"]["protocols"] for f in facts] == [["balancer"]]
        assert "fee_bps mean 6" in facts[0]["content"]  # ids 0..2 verified: 5, 6, 7
    finally:
        assert daemon.stop() == 0
    counts = {e.id: (e.replay_count, e.pad) for e in data_dir.open_episodes().scan(limit=None)}
    pad = Pad(pleasure=0.5, arousal=-0.25, dominance=0.0)
    assert counts == {ids[0]: (1, pad), ids[1]: (1, pad), ids[2]: (1, pad), ids[3]: (0, pad)}
