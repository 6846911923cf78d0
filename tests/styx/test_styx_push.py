"""A real daemon pushes to the reference Styx server and loses nothing (daemon/styx/pusher.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN as TOKEN
from tests.helpers.cli import CliRunner
from tests.helpers.polling import eventually
from tests.helpers.styx import flush_warnings as _flush
from tests.helpers.styx import styx_env as _env


def test_styx_down_across_two_kills_then_up_every_item_once(data_dir: DataDir, styx: StyxServer) -> None:
    styx.set_faults(status=503, retry_after=0)  # down for the whole production
    daemon = DaemonProc(data_dir, env=_env(styx))
    _flush(daemon, 0, 250)
    _flush(daemon, 10_000, 5, private=True)  # never pushed
    daemon.stop(signal.SIGKILL)
    daemon = DaemonProc(data_dir, env=_env(styx))
    _flush(daemon, 250, 250)
    _flush(daemon, 500, 250)
    daemon.stop(signal.SIGKILL)
    daemon = DaemonProc(data_dir, env=_env(styx))
    _flush(daemon, 750, 250)
    assert styx.keys() == []
    eventually(lambda: daemon.request("GET", "/v1/status").json()["styx"]["failures"] >= 1,
               timeout=60, what="the restarted pusher's first (refused) attempt")
    status = daemon.request("GET", "/v1/status").json()["styx"]
    assert status["queue_depth"] == 1000
    styx.clear_faults()  # Styx is back
    try:
        eventually(lambda: len(styx.keys()) == 1000, timeout=120, what="1,000 items at Styx")
        eventually(lambda: daemon.request("GET", "/v1/status").json()["styx"]["queue_depth"] == 0,
                   timeout=30, what="an empty outbox")
        keys = styx.keys()
        assert len(set(keys)) == 1000
        contents = {r["content"] for r in styx.query("never LP pool", [], 100)}
        assert not any("10000" in c or "10004" in c for c in contents)
        seqs = [int(k.rsplit(":", 1)[1]) for k in keys]
        assert seqs == sorted(seqs)  # pushed in the order written
    finally:
        assert daemon.stop() == 0


def test_a_lost_answer_is_retried_with_the_same_keys_and_stored_once(data_dir: DataDir, styx: StyxServer) -> None:
    styx.set_faults(commit_then_reset=True, times=1)
    daemon = DaemonProc(data_dir, env=_env(styx))
    try:
        _flush(daemon, 0, 20)
        eventually(lambda: daemon.request("GET", "/v1/status").json()["styx"]["queue_depth"] == 0,
                   timeout=60, what="a drained outbox")
        stats = styx.stats()
        assert stats["entries"] == 20 and stats["batches"] >= 2 and stats["items_received"] > 20
    finally:
        assert daemon.stop() == 0


def test_a_hopeless_answer_parks_the_items(data_dir: DataDir, styx: StyxServer) -> None:
    styx.set_faults(status=403)
    daemon = DaemonProc(data_dir, env=_env(styx))
    try:
        _flush(daemon, 0, 3)
        eventually(lambda: daemon.request("GET", "/v1/status").json()["styx"]["parked"] == 3,
                   timeout=60, what="3 parked items")
        status = daemon.request("GET", "/v1/status").json()["styx"]
        assert status["queue_depth"] == 0 and "HTTP 403" in status["parked_items"][0]["reason"]
        assert TOKEN not in str(daemon.stderr_lines)  # the token is never logged
    finally:
        assert daemon.stop() == 0


def test_cli_status_and_retry_through_the_daemon(data_dir: DataDir, styx: StyxServer) -> None:
    from tests.helpers.cli import clade_subprocess

    styx.set_faults(status=401)
    daemon = DaemonProc(data_dir, env=_env(styx))
    try:
        _flush(daemon, 0, 2)
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["parked"] == 2,
                   timeout=60, what="2 parked items")
        shown = clade_subprocess(["--data-dir", str(data_dir.root), "styx", "status"])
        assert shown.returncode == 0 and b"2 parked" in shown.stdout and b"HTTP 401" in shown.stdout
        styx.clear_faults()
        again = clade_subprocess(["--data-dir", str(data_dir.root), "styx", "retry", "--all", "--json"])
        assert again.returncode == 0 and json.loads(again.stdout) == {"unparked": 2}
        eventually(lambda: len(styx.keys()) == 2, timeout=60, what="2 items at Styx")
    finally:
        assert daemon.stop() == 0
    off = clade_subprocess(["--data-dir", str(data_dir.root), "styx", "status", "--json"])  # read from the store
    assert off.returncode == 0, off.stderr
    doc = json.loads(off.stdout)
    assert doc["queue_depth"] == 0 and doc["delivered"] is None and doc["spend"]["calls"] >= 2
    offline_retry = clade_subprocess(["--data-dir", str(data_dir.root), "styx", "retry", "--all"])
    assert offline_retry.returncode == 2 and b"no daemon" in offline_retry.stderr


def test_search_fans_in_styx_with_discounts_and_a_hanging_styx_does_not_block(data_dir: DataDir,
                                                                               styx: StyxServer) -> None:
    from daemon.styx.wire import batch_body, item_json

    entry = {"id": "e" * 32, "kind": "insight", "content": "Funding flips negative before CPI prints",
             "confidence": 0.7, "importance": 0.5, "category": None, "metadata": {}, "provenance": "self",
             "created_at": "2026-11-23T00:00:00.000Z"}
    styx.store_batch(None, json.loads(batch_body("sibling", [
        item_json(writer="sibling", seq=1, layers=["clade"], entry=entry)])))
    daemon = DaemonProc(data_dir, env={**_env(styx, query=True), "CLADE_STYX__QUERY_DEADLINE_MS": "300"})
    try:
        daemon.request("POST", "/v1/memory", json={"content": "Funding turns negative ahead of CPI",
                                                   "memory_type": "fact"}).raise_for_status()
        found = daemon.request("POST", "/v1/memory/search", json={"query": "funding before CPI"}).json()
        assert found["results"] and found["styx_error"] is None
        assert [(r["id"], r["layer"], r["relevance"], r["score"], r["local_confidence"], r["provenance"])
                for r in found["styx"]] == [  # relevance 1.0 × the clade discount; rank 0.40 × that + 0.30
            ("e" * 32, "clade", 0.8, 0.62, 0.2, "styx:clade")]
        merged = {r["id"]: r for r in found["merged"]}
        assert merged["e" * 32]["score"] == 0.62 and merged["e" * 32]["provenance"] == "styx:clade"
        styx.set_faults(hang=True)
        slow = daemon.request("POST", "/v1/memory/search", json={"query": "funding before CPI"}).json()
        assert slow["results"] and slow["styx"] == [] and slow["styx_error"] == "no answer within 300 ms"
        styx.clear_faults()
    finally:
        assert daemon.stop() == 0


def test_backup_push_uploads_the_sealed_file_and_retries_it_whole(data_dir: DataDir, styx: StyxServer,
                                                                  tmp_path: Path) -> None:
    from tests.helpers.cli import clade_subprocess

    peer = clade_subprocess(["--data-dir", str(data_dir.root), "id"]).stdout.decode().strip()
    env = {"CLADE_STYX__URL": styx.url, "CLADE_STYX__TOKEN": TOKEN}
    styx.set_faults(status=502, times=1)  # the first attempt fails: the file is sent again from its start
    out = tmp_path / "b.clade-vault"
    done = clade_subprocess(["--data-dir", str(data_dir.root), "backup", "--out", str(out), "--recipient", peer,
                             "--push", "--json"], env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["styx"]["attempts"] == 2 and doc["styx"]["bytes"] == out.stat().st_size
    assert (tmp_path / "vault" / peer / out.name).read_bytes() == out.read_bytes()
    styx.set_faults(status=403)
    refused = clade_subprocess(["--data-dir", str(data_dir.root), "backup", "--out", str(tmp_path / "c"),
                                "--recipient", peer, "--push"], env=env)
    assert refused.returncode == 1 and b"retrying cannot help" in refused.stderr
    assert (tmp_path / "c").exists()  # the backup is kept
    assert TOKEN.encode() not in refused.stderr + refused.stdout


def test_the_daemons_backups_go_to_the_vault(cli: CliRunner, data_dir: DataDir, styx: StyxServer,
                                             tmp_path: Path) -> None:
    from tests.helpers.cli import clade_subprocess

    owner = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner), "--clade", "alpha").code == 0
    peer = clade_subprocess(["--data-dir", str(data_dir.root), "id"]).stdout.decode().strip()
    bundle = tmp_path / "g.bundle"
    assert cli("owner", "admit", peer, "--owner-dir", str(owner), "--out", str(bundle)).code == 0
    assert clade_subprocess(["--data-dir", str(data_dir.root), "join", str(bundle)]).returncode == 0
    daemon = DaemonProc(data_dir, env={**_env(styx), "CLADE_P2P__ENABLED": "false", "CLADE_STYX__BACKUP_WAIT_S": "2"})
    try:
        doc = daemon.request("POST", "/v1/backup", json={}).json()
        assert doc["styx"]["attempts"] == 1 and doc.get("styx_error") is None and doc["styx_pending"] is False
        path = Path(doc["path"])
        assert (tmp_path / "vault" / peer / path.name).read_bytes() == path.read_bytes()
        # Styx hangs: the request is answered after backup_wait_s (the soak's waited 90 s), the
        # upload goes on behind it and lands once Styx answers again.
        styx.set_faults(hang=True, times=1)
        pending = daemon.request("POST", "/v1/backup", json={}, timeout=30).json()
        assert pending["styx_pending"] is True and pending.get("styx") is None
        assert not (tmp_path / "vault" / peer / Path(pending["path"]).name).exists()
        styx.clear_faults()  # the hung attempt is reset; the retry succeeds
        late = tmp_path / "vault" / peer / Path(pending["path"]).name
        eventually(lambda: late.exists() and late.read_bytes() == Path(pending["path"]).read_bytes(), timeout=30,
                   what="the pending upload to land in the vault")
    finally:
        assert daemon.stop() == 0


def test_cli_writes_without_a_daemon_enter_the_outbox_and_the_next_daemon_pushes_them(
        data_dir: DataDir, styx: StyxServer) -> None:
    """`clade remember` with no daemon running, Styx configured: the warning enters the outbox in
    the write's transaction (a private one and an insight do not: policy decides), and the
    daemon's next start drains it to Styx."""
    from tests.helpers.cli import clade_subprocess

    data_dir.config_path.write_text(f'[styx]\nenabled = true\nclade_enabled = true\nurl = "{styx.url}"\n')
    env = {"CLADE_STYX__TOKEN": TOKEN}
    base = ["--data-dir", str(data_dir.root)]

    def remember(text: str, *extra: str) -> str:
        done = clade_subprocess([*base, "remember", text, "--json", *extra], env=env)
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["id"])

    warning = remember("Never bridge through Multichain: the MPC keys are gone", "--kind", "warning")
    remember("Private: our stop-loss on ETH is 2,800", "--kind", "warning", "--sensitivity", "private")
    remember("Curve 3pool depth thins on Sundays", "--kind", "insight")
    off = clade_subprocess([*base, "styx", "status", "--json"], env=env)
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout)["queue_depth"] == 1
    assert styx.keys() == []  # nothing was sent: no daemon ran
    daemon = DaemonProc(data_dir, env={**env, "CLADE_STYX__BACKOFF_CAP_S": "0.5", "CLADE_STYX__BACKOFF_BASE_S": "0.1"})
    try:
        eventually(lambda: len(styx.keys()) == 1, timeout=60, what="the offline warning at Styx")
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["queue_depth"] == 0,
                   timeout=30, what="an empty outbox")
        assert [i["id"] for i in styx.items()] == [warning]
    finally:
        assert daemon.stop() == 0


def test_cli_writes_without_styx_configured_enqueue_nothing(cli: CliRunner, data_dir: DataDir) -> None:
    assert cli("remember", "Never bridge through Multichain", "--kind", "warning").code == 0
    with data_dir.open_store() as store:
        assert store.outbox is None
        assert store.connection.execute("SELECT count(*) FROM styx_outbox").fetchone()[0] == 0
