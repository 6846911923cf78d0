"""The `clade` CLI: every command in text and --json form, and every bad input refused.

Bad inputs must exit 2 with one line on stderr naming the value, and write nothing.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from daemon.datadir import DataDir
from tests.helpers.cli import CliRunner, clade_subprocess

WARNING = "Gas on Arbitrum spikes after 14:00 UTC; delay rebalances until 16:00"


def _snapshot(data: DataDir) -> tuple[str, int, int]:
    """What a bad command must not change: entry rows and episode count."""
    with data.open_store() as store:
        rows = json.dumps([e.to_json() for e in store.list_entries(limit=10_000, include_archived=True)])
    return rows, data.open_episodes().count(), data.open_episodes().version


def test_id_matches_identity_file(cli: CliRunner, data_dir: DataDir) -> None:
    text = cli("id")
    assert text.code == 0
    peer = data_dir.load_identity().peer_id
    assert text.out.strip() == peer
    doc = cli("id", "--json").json()
    assert doc["peer_id"] == peer
    assert bytes.fromhex(doc["public_key"]) == data_dir.load_identity().public_key


def test_remember_round_trip_all_fields(cli: CliRunner, data_dir: DataDir) -> None:
    made = cli(
        "remember", WARNING, "--kind", "warning", "--confidence", "0.9", "--importance", "0.8",
        "--quality", "0.7", "--category", "gas_timing", "--tag", "gas", "--tag", "arbitrum",
        "--protocol", "uniswap-v3", "--token", "USDC", "--token", "WETH", "--chain", "42161",
        "--strategy-id", "lp-range-7", "--sensitivity", "public", "--pad", "0.1,0.6,-0.3",
    )
    assert made.code == 0, made.err
    entry_id = made.out.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", entry_id), entry_id
    doc = cli("show", entry_id, "--json").json()
    assert doc["id"] == entry_id
    assert doc["content"] == WARNING
    assert doc["kind"] == "warning"
    assert doc["category"] == "gas_timing"
    assert doc["confidence"] == 0.9 and doc["local_confidence"] == 0.9
    assert doc["importance"] == 0.8 and doc["quality"] == 0.7
    assert doc["metadata"] == {
        "tokens": ["USDC", "WETH"], "chains": [42161], "protocols": ["uniswap-v3"],
        "strategy_id": "lp-range-7", "tags": ["arbitrum", "gas"],
    }
    assert doc["pad"] == pytest.approx([0.1, 0.6, -0.3])
    assert doc["author"] == data_dir.load_identity().peer_id
    assert doc["provenance"] == "self" and doc["status"] == "active" and doc["archived"] is False
    text = cli("show", entry_id)
    assert WARNING in text.out and "gas_timing" in text.out and "arbitrum, gas" in text.out


def test_remember_json_prints_id_and_entry(cli: CliRunner) -> None:
    doc = cli("--json", "remember", "Curve 3pool depegs widen spreads", "--kind", "fact").json()
    assert doc["entry"]["id"] == doc["id"]
    assert doc["entry"]["kind"] == "fact"


def test_remember_reads_stdin(cli: CliRunner) -> None:
    made = cli("remember", "-", "--json", stdin="multi\nline ✓ content".encode())
    assert made.code == 0, made.err
    assert cli("show", made.json()["id"], "--json").json()["content"] == "multi\nline ✓ content"


def test_list_newest_first_and_kind_filter(cli: CliRunner) -> None:
    ids = [cli("remember", f"entry number {i}", "--kind", kind).out.strip()
           for i, kind in enumerate(["insight", "warning", "insight", "fact"])]
    listed = cli("list", "--json").json()["entries"]
    assert [e["id"] for e in listed] == ids[::-1]
    insights = cli("list", "--kind", "insight", "--json").json()["entries"]
    assert [e["id"] for e in insights] == [ids[2], ids[0]]
    two = cli("list", "--kind", "warning", "--kind", "fact", "--json").json()["entries"]
    assert {e["id"] for e in two} == {ids[1], ids[3]}
    assert len(cli("list", "--limit", "2", "--json").json()["entries"]) == 2
    text = cli("list").out.splitlines()
    assert len(text) == 4 and text[0].split()[0] == ids[3][:8]  # 8 hex characters, as git shows a commit
    shown = cli("show", ids[3][:8], "--json")  # and every command takes that prefix back
    assert shown.code == 0 and shown.json()["id"] == ids[3]
    assert cli("forget", ids[2][:6], "--json").json()["id"] == ids[2]
    assert cli("outcome", ids[1][:8], "positive", "--json").json()["outcomes"]["positive"] == 1
    short = cli("show", ids[3][:3])
    assert short.code != 0 and "at least 4" in short.err
    none = cli("show", "ffff" if not ids[3].startswith("ffff") else "0000")
    assert none.code != 0 and "no entry" in none.err


def test_every_id_argument_takes_a_prefix_without_a_daemon(cli: CliRunner) -> None:
    """The store path resolves what the daemon would: --superseded-by, feedback's ids, an episode's id."""
    old = cli("remember", "Bridge withdrawals on Hop take two hours", "--json").json()["id"]
    new = cli("remember", "Bridge withdrawals on Hop take four hours now", "--json").json()["id"]
    retracted = cli("retract", old[:6], "--superseded-by", new[:6], "--json")
    assert retracted.code == 0, retracted.err
    assert retracted.json()["id"] == old and retracted.json()["superseded_by"] == new
    fed = cli("feedback", "--cited", new[:8], "--json")
    assert fed.code == 0, fed.err
    assert fed.json()["cited"] == [new]
    episode = cli("episode", "add", "--summary", "Watched a withdrawal settle", "--json").json()["id"]
    verified = cli("episode", "verify", episode[:5], "--json")
    assert verified.code == 0 and verified.json()["id"] == episode, verified.err
    assert cli("episode", "verify", episode[:3]).err.count("at least 4") == 1


def test_forget_archives_locally(cli: CliRunner) -> None:
    keep = cli("remember", "aave health factor below 1.1 is dangerous").out.strip()
    gone = cli("remember", "aave borrow rate spikes during liquidations").out.strip()
    forgot = cli("forget", gone, "--json").json()
    assert forgot == {"id": gone, "archived": True, "changed": True}
    assert cli("forget", gone, "--json").json()["changed"] is False
    assert [e["id"] for e in cli("list", "--json").json()["entries"]] == [keep]
    assert {e["id"] for e in cli("list", "--archived", "--json").json()["entries"]} == {keep, gone}
    assert cli("show", gone, "--json").json()["archived"] is True
    assert [h["id"] for h in cli("recall", "aave", "--json", "--keyword-only").json()["results"]] == [keep]
    assert "archived" in cli("forget", keep).out


def keyword_ids(cli: CliRunner, *args: str) -> list[str]:
    return [h["id"] for h in cli("recall", *args, "--json", "--keyword-only").json()["results"]]


def test_recall_keyword_kind_and_importance(cli: CliRunner) -> None:
    a = cli("remember", "Sandwich bots target uniswap swaps above 5 ETH", "--importance", "0.9").out.strip()
    b = cli("remember", "Route large swaps through 1inch to cut slippage", "--importance", "0.2").out.strip()
    c = cli("remember", "MEV sandwich risk rises in volatile blocks", "--kind", "warning").out.strip()
    cli("remember", "Unrelated note about lending", "--protocol", "aave")
    hits = cli("recall", "sandwich", "--json", "--keyword-only").json()["results"]
    assert {h["id"] for h in hits} == {a, c}
    assert all(h["score"] > 0 for h in hits)
    assert keyword_ids(cli, "sandwich", "--kind", "warning") == [c]
    d = cli("remember", "Sandwich losses on swaps grow with slippage tolerance", "--category", "slippage").out.strip()
    assert keyword_ids(cli, "sandwich", "--category", "slippage") == [d]
    assert keyword_ids(cli, "sandwich", "--category", "gas_timing") == []
    assert keyword_ids(cli, "swaps", "--min-importance", "0.5") == [a]
    assert len(cli("recall", "swaps sandwich slippage", "--k", "1", "--json", "--keyword-only").json()["results"]) == 1
    assert {h["id"] for h in cli("recall", "swaps", "--json", "--keyword-only").json()["results"]} == {a, b, d}
    # tags and protocols are indexed too
    assert len(cli("recall", "aave", "--json", "--keyword-only").json()["results"]) == 1
    # FTS5 syntax in a query is treated as plain words, never as an expression
    assert cli("recall", 'sandwich" OR NEAR(*', "--json", "--keyword-only").code == 0
    assert b[:8] in cli("recall", "slippage", "--keyword-only").out  # tables show 8 hex characters


def test_episode_add_and_list(cli: CliRunner) -> None:
    first = cli("episode", "add", "--summary", "Observed a sandwich on WETH/USDC", "--protocol", "uniswap-v3",
                "--block", "19000000", "--category", "jit_defense", "--payload-json", '{"tx": "0xabc", "loss": 12.5}',
                "--json").json()
    second = cli("episode", "add", "--summary", "Gas at 3 gwei", "--json").json()
    listed = cli("episode", "list", "--json").json()["episodes"]
    assert [e["id"] for e in listed] == [second["id"], first["id"]]
    ep = listed[1]
    assert ep["summary"] == "Observed a sandwich on WETH/USDC"
    assert ep["protocol"] == "uniswap-v3" and ep["block_number"] == 19_000_000
    assert ep["category"] == "jit_defense" and ep["payload"] == {"tx": "0xabc", "loss": 12.5}
    assert cli("episode", "list", "--limit", "1", "--json").json()["episodes"][0]["id"] == second["id"]
    assert "Gas at 3 gwei" in cli("episode", "list").out
    assert cli("episode", "add", "--summary", "plain").out.strip() != ""


def test_episode_event_time_and_ranked_search(cli: CliRunner) -> None:
    old = cli("episode", "add", "--summary", "Swapped 2 ETH for USDC on Uniswap at 9 bps slippage",
              "--occurred-at", "2023-05-08T13:56:00+02:00", "--json").json()
    assert old["episode"]["observed_at"] == "2023-05-08T11:56:00.000Z"
    refused = cli("episode", "add", "--summary", "x", "--occurred-at", "last week")
    assert refused.code == 2 and "ISO 8601" in refused.err
    cli("episode", "add", "--summary", "Claimed CRV from the Curve gauge")
    found = cli("episode", "search", "what did my ETH swap cost", "--json").json()["episodes"]
    assert found[0]["id"] == old["id"] and {"similarity", "score"} <= set(found[0])


def test_status_and_config_show(cli: CliRunner, data_dir: DataDir) -> None:
    cli("remember", "one warning", "--kind", "warning")
    status = cli("status", "--json").json()
    assert status["entries"] == 1 and status["by_kind"] == {"warning": 1}
    assert status["peer_id"] == data_dir.load_identity().peer_id
    assert "entries    1" in cli("status").out
    assert status["embedding_backlog"] == 0  # the write door embedded the warning (its repeat check)
    assert "embedding  every entry has a vector" in cli("status").out
    with data_dir.open_store() as store:  # as the embedder would
        store.connection.execute("UPDATE entries SET embedding = zeroblob(4)")
    assert cli("status", "--json").json()["embedding_backlog"] == 0
    assert "embedding  every entry has a vector" in cli("status").out
    shown = cli("config", "show", "--json").json()
    assert shown["config"]["p2p"]["mdns"] is True
    assert "[p2p]" in cli("config", "show").out


def test_config_show_applies_env_and_rejects_bad_file(
    cli: CliRunner, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLADE_LOG__LEVEL", "debug")
    token = "api-token-that-must-never-be-printed-0123456789"
    monkeypatch.setenv("CLADE_API__TOKEN", token)
    shown = cli("config", "show", "--json")
    assert shown.json()["config"]["log"]["level"] == "debug"
    assert shown.json()["config"]["api"]["token"] == "**********"  # set, and masked
    text = cli("config", "show")
    assert "[api]" in text.out and token not in shown.out + shown.err + text.out + text.err
    data_dir.config_path.write_text("[curator]\ntick_seconds = -1\n")
    bad = cli("config", "show")
    assert bad.code == 2
    assert str(data_dir.config_path) in bad.err and "curator.tick_seconds" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


def test_init_refuses_to_overwrite_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from daemon.cli.main import main

    root = tmp_path / "d"
    assert main(["--data-dir", str(root), "init"]) == 0
    key = (root / "identity.key").read_bytes()
    assert stat.S_IMODE((root / "identity.key").stat().st_mode) == 0o600
    for name in ("config.toml", "grimoire.db", "episodes", "PLAYBOOK.md"):
        assert (root / name).exists(), name
    capsys.readouterr()
    assert main(["--data-dir", str(root), "init"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (root / "identity.key").read_bytes() == key
    assert main(["--data-dir", str(root), "init", "--force", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (root / "identity.key").read_bytes() != key
    assert Path(doc["replaced_identity"]).read_bytes() == key


def test_refuses_group_readable_identity(cli: CliRunner, data_dir: DataDir) -> None:
    os.chmod(data_dir.identity_path, 0o640)
    for args in (("id",), ("remember", "x"), ("status",)):
        res = cli(*args)
        assert res.code == 1
        assert f"chmod 600 {data_dir.identity_path}" in res.err


def test_truncated_identity_is_a_clear_error(cli: CliRunner, data_dir: DataDir) -> None:
    data_dir.identity_path.write_bytes(b"short")
    res = cli("id")
    assert res.code == 1 and "truncated" in res.err


def test_uninitialised_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from daemon.cli.main import main

    assert main(["--data-dir", str(tmp_path / "none"), "list"]) == 1
    assert "clade init" in capsys.readouterr().err


BAD_INPUTS = [
    (("remember", ""), "content"),
    (("remember", "   \n\t "), "content"),
    (("remember", "x" * 4097), "4096"),
    (("remember", "é" * 2049), "4096"),  # 4098 bytes of UTF-8
    (("remember", "x", "--confidence", "1.5"), "--confidence"),
    (("remember", "x", "--confidence", "-0.1"), "--confidence"),
    (("remember", "x", "--confidence", "nan"), "--confidence"),
    (("remember", "x", "--confidence", "abc"), "--confidence"),
    (("remember", "x", "--importance", "2"), "--importance"),
    (("remember", "x", "--quality", "inf"), "--quality"),
    (("remember", "x", "--kind", "rumour"), "rumour"),
    (("remember", "x", "--category", "vibes"), "vibes"),
    (("remember", "x", "--sensitivity", "secret"), "secret"),
    (("remember", "x", "--chain", "0"), "--chain"),
    (("remember", "x", "--pad", "1,2"), "--pad"),
    (("remember", "x", "--pad", "0,0,3"), "--pad"),
    (("remember", "x", "--tag", ""), "tags"),
    (("remember", "x", "--tag", "t" * 49), "tags"),
    (("remember", "x", "--protocol", "bad\x01name"), "protocols"),
    (("show", "0123456789abcdef0123456789abcdef"), "0123456789abcdef0123456789abcdef"),
    (("forget", "nope"), "nope"),
    (("list", "--limit", "0"), "--limit"),
    (("list", "--kind", "nonsense"), "nonsense"),
    (("recall", "!!! ???", "--keyword-only"), "no searchable words"),
    (("recall", "   "), "must not be empty"),
    (("recall", "x", "--k", "-3"), "--k"),
    (("recall", "x", "--min-importance", "7"), "--min-importance"),
    (("episode", "add", "--summary", ""), "summary"),
    (("episode", "add", "--summary", "x", "--payload-json", "{not json"), "payload"),
    (("episode", "add", "--summary", "x", "--block", "-1"), "--block"),
    (("episode", "add", "--summary", "x", "--payload-json", '"' + "a" * 70_000 + '"'), "payload"),
    (("frobnicate",), "frobnicate"),
]


@pytest.mark.parametrize(("args", "named"), BAD_INPUTS, ids=[" ".join(a)[:40] for a, _ in BAD_INPUTS])
def test_bad_input_is_refused_and_writes_nothing(
    cli: CliRunner, data_dir: DataDir, args: tuple[str, ...], named: str
) -> None:
    cli("remember", "an existing entry")
    before = _snapshot(data_dir)
    res = cli(*args)
    assert res.code == 2, (res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert named in lines[0]
    assert res.out == ""
    assert _snapshot(data_dir) == before


def test_too_many_tags_refused(cli: CliRunner, data_dir: DataDir) -> None:
    before = _snapshot(data_dir)
    args = ["remember", "x"]
    for i in range(17):
        args += ["--tag", f"t{i}"]
    res = cli(*args)
    assert res.code == 2 and "at most 16" in res.err
    assert _snapshot(data_dir) == before


def test_invalid_utf8_from_stdin_refused(cli: CliRunner, data_dir: DataDir) -> None:
    before = _snapshot(data_dir)
    res = cli("remember", "-", stdin=b"caf\xc3 broken \xff")
    assert res.code == 2 and "UTF-8" in res.err
    assert _snapshot(data_dir) == before


def test_invalid_utf8_in_argv_refused(data_dir: DataDir) -> None:
    """Through the real console script: argv bytes that are not UTF-8."""
    before = _snapshot(data_dir)
    proc = clade_subprocess([b"--data-dir", os.fsencode(data_dir.root), b"remember", b"bad \xff\xfe bytes"])  # type: ignore[list-item]
    assert proc.returncode == 2, proc.stderr
    assert b"UTF-8" in proc.stderr
    assert _snapshot(data_dir) == before


def test_real_console_script_round_trip(data_dir: DataDir) -> None:
    env = {"CLADE_DATA_DIR": str(data_dir.root)}
    made = clade_subprocess(["remember", "Through the real binary", "--json"], env=env)
    assert made.returncode == 0, made.stderr
    entry_id = json.loads(made.stdout)["id"]
    shown = clade_subprocess(["show", entry_id], env=env)
    assert b"Through the real binary" in shown.stdout


def test_negative_zero_values_read_back(cli: CliRunner) -> None:
    """Regression: -0.0 was stored by SQLite as 0.0 and the row no longer hashed to its id."""
    made = cli("remember", "zero test", "--importance", "-0.0", "--pad=-0.0,0,-0", "--json")
    assert made.code == 0, made.err
    entry_id = made.json()["id"]
    assert cli("show", entry_id, "--json").json()["importance"] == 0.0
    assert [h["id"] for h in cli("recall", "zero", "--json", "--keyword-only").json()["results"]] == [entry_id]
