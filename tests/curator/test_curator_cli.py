"""The curator as an operator meets it: `clade curator`, `unarchive`, `testament`, `inherit`, and
`POST /v1/curator/run` on a real daemon."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner, clade_subprocess


def _join(cli: CliRunner, data: DataDir, owner_dir: Path, tmp_path: Path, name: str) -> None:
    peer = clade_subprocess(["--data-dir", str(data.root), "id"]).stdout.decode().strip()
    bundle = tmp_path / f"{name}.bundle"
    assert cli("owner", "admit", peer, "--owner-dir", str(owner_dir), "--out", str(bundle)).code == 0
    done = clade_subprocess(["--data-dir", str(data.root), "join", str(bundle)])
    assert done.returncode == 0, done.stderr


def test_run_simulate_forget_unarchive_direct(cli: CliRunner) -> None:
    kept = cli("remember", "Never LP in pools under $100K TVL", "--kind", "warning", "--json").json()["id"]
    faded = cli("remember", "Curve 3pool depth thins on Sundays", "--kind", "insight", "--json").json()["id"]
    run = cli("curator", "run", "--json")
    assert run.code == 0, run.err
    report = run.json()
    assert {"entries_decayed", "entries_pruned", "entries_merged", "episodes_consolidated", "entries_promoted",
            "heuristics_proposed", "duration_ms"} <= set(report)
    sim = cli("curator", "simulate", "--days", "40", "--json").json()
    by_id = {e["id"]: e for e in sim["entries"]}
    assert by_id[faded]["fades"] and by_id[faded]["pruned"] and not by_id[kept]["fades"]
    assert cli("curator", "simulate", "--days", "forty").code == 2
    assert "fade below the retrieval threshold" in cli("curator", "simulate", "--days", "40").out
    assert cli("forget", faded).code == 0
    back = cli("unarchive", faded, "--json").json()
    assert back == {"id": faded, "archived": False, "changed": True}
    assert cli("show", faded, "--json").json()["archived"] is False
    assert cli("unarchive", "f" * 32).code == 2  # unknown id: a usage error, nothing changed


def test_testament_and_inherit_between_two_golems(cli: CliRunner, data_dir: DataDir, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha").code == 0
    _join(cli, data_dir, owner_dir, tmp_path, "dying")
    warning = cli("remember", "Never bridge through the old router", "--kind", "warning", "--json").json()["id"]
    assert cli("episode", "add", "--summary", "Swapped 200k on Curve at 31 bps slippage", "--protocol",
               "curve").code == 0
    reflection = tmp_path / "reflection.md"
    reflection.write_text("I died chasing APY on an unaudited fork. Check audits first.")
    out = tmp_path / "golem.testament"
    made = cli("testament", "--out", str(out), "--reflection", str(reflection), "--json")
    assert made.code == 0, made.err
    # the warning and the reflection; the raw episode stays behind (no episode summary is written or bequeathed)
    assert made.json()["entries"] == 2 and made.json()["warnings"] == 1 and "episode_summaries" not in made.json()

    heir = DataDir(tmp_path / "heir")
    heir.init()
    _join(cli, heir, owner_dir, tmp_path, "heir")
    got = clade_subprocess(["--data-dir", str(heir.root), "inherit", str(out), "--json"])
    assert got.returncode == 0, got.stderr
    report = json.loads(got.stdout)
    assert (report["entries"], report["siblings"], report["generations"]) == (2, 0, {"1": 2})  # its own: lineage
    shown = clade_subprocess(["--data-dir", str(heir.root), "show", warning, "--json"])
    assert b'"provenance": "inherited"' in shown.stdout.replace(b'":"', b'": "')

    stranger = DataDir(tmp_path / "stranger")
    stranger.init()
    assert cli("owner", "init", "--owner-dir", str(tmp_path / "other-owner"), "--clade", "beta").code == 0
    _join(cli, stranger, tmp_path / "other-owner", tmp_path, "stranger")
    refused = clade_subprocess(["--data-dir", str(stranger.root), "inherit", str(out)])
    assert refused.returncode == 2 and b"nothing was imported" in refused.stderr
    listed = clade_subprocess(["--data-dir", str(stranger.root), "list", "--json"])
    assert b'"entries": []' in listed.stdout.replace(b'":[', b'": [')


def test_curator_run_through_the_daemon(data_dir: DataDir) -> None:
    daemon = DaemonProc(data_dir)
    try:
        daemon.client.post("/v1/memory", json={"content": "Gas on mainnet is cheapest at 03:00 UTC.",
                                                "memory_type": "fact"}).raise_for_status()
        daemon.client.post("/v1/memory", json={"content": "gas on mainnet is cheapest at 03:00 utc",
                                                "memory_type": "fact"}).raise_for_status()
        answer = daemon.client.post("/v1/curator/run")
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert report["entries_merged"] == 1 and report["since_ms"] is None
        again = daemon.client.post("/v1/curator/run").json()
        assert again["entries_merged"] == 0 and again["since_ms"] is not None
        status = daemon.client.get("/v1/status").json()
        assert status["last_curator_cycle"]["entries_merged"] == 0
    finally:
        assert daemon.stop() == 0


def test_restore_as_successor_inherits_knowledge_only(cli: CliRunner, data_dir: DataDir, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha").code == 0
    _join(cli, data_dir, owner_dir, tmp_path, "dead")
    insight = cli("remember", "Funding flips before CPI prints", "--kind", "insight", "--confidence", "0.9",
                  "--json").json()["id"]
    outcome = cli("remember", "ETH/USDC 1850-2150: 40k USDC position, +3,412 USDC", "--kind", "strategy_outcome",
                  "--confidence", "0.95", "--json").json()["id"]
    preference = cli("remember", "Owner prefers max 25% of the book in one pool", "--kind", "preference",
                     "--json").json()["id"]
    sensitive = cli("remember", "max_position_usd: 50000", "--kind", "fact", "--sensitivity", "sensitive",
                    "--json").json()["id"]
    backup = tmp_path / "dead.clade-vault"
    assert cli("backup", "--out", str(backup)).code == 0

    heir = DataDir(tmp_path / "heir")
    heir.init()
    _join(cli, heir, owner_dir, tmp_path, "heir")
    before = heir.load_identity().peer_id
    # the backup is sealed to the owner and the dead golem, not the clade key: the heir's own keys
    # cannot open it (a sibling must not read another's soma); the owner, who makes successors, can
    refused = clade_subprocess(["--data-dir", str(heir.root), "restore", str(backup), "--as-successor", "--json"])
    assert refused.returncode == 2 and b"is a recipient" in refused.stderr, refused.stderr
    done = clade_subprocess(["--data-dir", str(heir.root), "restore", str(backup), "--as-successor", "--json",
                             "--owner-dir", str(owner_dir)])
    assert done.returncode == 0, done.stderr
    assert heir.load_identity().peer_id == before  # the heir keeps its own identity
    with heir.open_store() as store:
        got = store.get(insight)
        assert got.provenance == "inherited" and abs(got.local_confidence - 0.4) < 1e-9
        held = {r[0] for r in store.connection.execute("SELECT id FROM entries")}
        assert not held & {outcome, preference, sensitive}  # the soma died with the golem
    again = cli("restore", str(backup), "--as-successor")  # the dead golem's own dir: refused
    assert again.code == 2 and "own" in again.err
