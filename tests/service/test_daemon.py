"""`clade run` as a service: sd_notify, signals, reload, the control API and its guards."""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.datadir import DataDir
from daemon.testing.notify import NotifySocket
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner
from tests.helpers.polling import eventually


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(tmp_path / "notify.sock")
    yield sock
    sock.close()


def test_ready_watchdog_stopping_and_nothing_lost(data_dir: DataDir, notify: NotifySocket) -> None:
    env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "400000"}  # pet every 0.2 s
    daemon = DaemonProc(data_dir, env=env)
    ready = notify.wait_for("READY", "1")
    assert "entries" in ready.get("STATUS", "")
    for _ in range(6):
        notify.wait_for("WATCHDOG", "1", timeout=5)  # it keeps petting (at half of WATCHDOG_USEC: below)
    assert all("entries" in m.get("STATUS", "") for _, m in notify.messages if m.get("WATCHDOG") == "1")
    ids = [daemon.request("POST", "/v1/memory", json={"content": f"written just before SIGTERM {i}",
                                                      "memory_type": "warning"}).json()["id"] for i in range(20)]
    assert daemon.stop(signal.SIGTERM) == 0
    notify.wait_for("STOPPING", "1", timeout=5)
    assert not data_dir.run_path.exists() and not Path(daemon.socket).exists()
    with data_dir.open_store() as store:
        assert {e.id for e in store.list_entries(limit=100)} == set(ids)


def test_watchdog_pets_at_half_of_watchdog_usec_and_only_for_this_process() -> None:
    from daemon.service.notify import watchdog_interval

    assert watchdog_interval({"WATCHDOG_USEC": "400000"}) == 0.2
    assert watchdog_interval({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": str(os.getpid())}) == 0.2
    assert watchdog_interval({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": str(os.getpid() + 1)}) is None
    assert watchdog_interval({}) is None and watchdog_interval({"WATCHDOG_USEC": "soon"}) is None


def test_sighup_reloads_a_valid_config_and_keeps_the_old_on_an_invalid_one(
        data_dir: DataDir, notify: NotifySocket) -> None:
    daemon = DaemonProc(data_dir, env={"NOTIFY_SOCKET": str(notify.path)})
    notify.wait_for("READY", "1")
    data_dir.config_path.write_text("[curator]\ntick_seconds = 5.0\n")
    daemon.proc.send_signal(signal.SIGHUP)
    notify.wait_for("RELOADING", "1")
    line = daemon.wait_for("config reloaded")
    assert "curator.tick_seconds" in line
    notify.wait_for("READY", "1")
    data_dir.config_path.write_text("[curator]\ntick_seconds = -1\n")
    daemon.proc.send_signal(signal.SIGHUP)
    line = daemon.wait_for("reload refused")
    assert "curator.tick_seconds" in line
    assert daemon.request("GET", "/v1/status").status_code == 200  # still serving
    assert daemon.stop() == 0


def test_fatal_errors_stop_with_exit_1(data_dir: DataDir) -> None:
    data_dir.identity_path.chmod(0o644)
    import subprocess
    import sys

    proc = subprocess.run([str(Path(sys.executable).with_name("clade")), "--data-dir", str(data_dir.root), "run"],
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 1 and b"chmod 600" in proc.stderr


def test_a_second_daemon_on_the_same_data_dir_is_refused(shared: DaemonProc) -> None:
    import subprocess
    import sys

    proc = subprocess.run([str(Path(sys.executable).with_name("clade")), "--data-dir", str(shared.data.root), "run"],
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 1 and b"another clade daemon" in proc.stderr
    assert shared.request("GET", "/v1/status").status_code == 200


def test_a_second_daemon_is_refused_before_it_opens_the_store(data_dir: DataDir) -> None:
    """A newer `clade run` must not migrate the schema under a running daemon, then be refused."""
    import sqlite3
    import subprocess
    import sys
    from contextlib import closing

    from daemon.grimoire import schema

    data_dir.db_path.unlink()
    with closing(sqlite3.connect(data_dir.db_path, isolation_level=None)) as conn:
        schema.migrate(conn, target=1)  # the store as an older daemon left it
    before = data_dir.db_path.read_bytes()
    # run.json of a live daemon: this test's own process stands in for it (alive, not the new pid)
    data_dir.run_path.write_text(json.dumps({"pid": os.getpid(), "socket": "/nonexistent.sock"}))
    proc = subprocess.run([str(Path(sys.executable).with_name("clade")), "--data-dir", str(data_dir.root), "run"],
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 1 and b"another clade daemon" in proc.stderr, proc.stderr
    with closing(sqlite3.connect(data_dir.db_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1  # not migrated
    assert data_dir.db_path.read_bytes() == before
    assert data_dir.run_path.exists()  # the other daemon's run.json is left alone


def test_daemon_client_is_reusable_and_raises_only_daemon_errors(shared: DaemonProc, tmp_path: Path) -> None:
    from daemon.client import DaemonClient
    from daemon.errors import DaemonError, NotFound

    client = DaemonClient(Path(shared.socket))
    peer = shared.ready["peer_id"]
    assert client.call("GET", "/v1/status")["peer_id"] == peer
    assert client.call("GET", "/v1/status")["peer_id"] == peer  # a second call on the same client
    with client as held:  # one connection across the calls
        assert [held.call("GET", "/v1/status")["peer_id"] for _ in range(3)] == [peer] * 3
        with pytest.raises(NotFound):
            held.call("GET", "/v1/entries/" + "0" * 32)
    assert client.call("GET", "/v1/status")["peer_id"] == peer  # after close: still usable
    client.close()
    with pytest.raises(DaemonError, match="cannot reach the daemon"):
        DaemonClient(tmp_path / "nobody.sock").call("GET", "/v1/status")


def test_endpoint_clients_give_undecoded_answers_and_cap_their_pool(shared: DaemonProc, tmp_path: Path) -> None:
    """`Endpoint.http_client` / `async_http_client`: the same socket as `DaemonClient`, answers
    left as they came (a 404 is a response, not an error), the async pool capped at `connections`."""
    import asyncio

    from daemon.client import Endpoint, Unreachable

    endpoint = Endpoint(socket=Path(shared.socket))
    with endpoint.http_client(timeout_s=30) as client:
        assert client.get("/v1/status").json()["peer_id"] == shared.ready["peer_id"]
        assert client.get("/v1/entries/" + "0" * 32).status_code == 404

    async def concurrently() -> tuple[list[int], int | None]:
        async with endpoint.async_http_client(timeout_s=30, connections=2) as client:
            answers = await asyncio.gather(*(client.get("/v1/status") for _ in range(6)))
            pool = client._transport._pool  # type: ignore[attr-defined]  # httpcore's pool: its cap
            return [a.status_code for a in answers], pool._max_connections

    statuses, cap = asyncio.run(concurrently())
    assert statuses == [200] * 6 and cap == 2
    with pytest.raises(Unreachable, match="no such socket"):
        Endpoint(socket=tmp_path / "nobody.sock").http_client()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_liveness_probe_sees_a_live_daemon_and_leaks_nothing(shared: DaemonProc, data_dir: DataDir) -> None:
    import socket as s

    from daemon.client import daemon_is_live

    before = _open_fds()
    assert daemon_is_live(shared.data)
    assert not daemon_is_live(data_dir)  # no run.json
    stale = data_dir.root / "stale.sock"
    with s.socket(s.AF_UNIX) as dead:
        dead.bind(str(stale))  # the socket file of a daemon that died: nothing listens
    data_dir.run_path.write_text(json.dumps({"pid": os.getpid(), "socket": str(stale)}))
    assert not daemon_is_live(data_dir)
    assert _open_fds() == before


def test_guards_see_a_live_daemon_even_when_told_to_bypass_it(shared: DaemonProc, tmp_path: Path) -> None:
    """CLADE_NO_DAEMON routes commands around the daemon; it must not switch off the guard
    of commands that must not run beside one."""
    from tests.helpers.cli import clade_subprocess

    proc = clade_subprocess(["--data-dir", str(shared.data.root), "testament", "--out", str(tmp_path / "t.bin")],
                            env={"CLADE_NO_DAEMON": "1"})
    assert proc.returncode == 2 and b"a daemon is running" in proc.stderr, proc.stderr


def test_embeddings_rebuild_refuses_while_a_daemon_owns_the_store(daemon: DaemonProc) -> None:
    """Clearing every vector behind a running daemon would leave its index and drift state wrong:
    `clade embeddings rebuild` refuses, says what to do, and clears no vector."""
    import sqlite3
    from contextlib import closing

    from tests.helpers.cli import clade_subprocess

    def vectors() -> dict[str, bytes | None]:
        with closing(sqlite3.connect(f"file:{daemon.data.db_path}?mode=ro", uri=True)) as conn:
            return dict(conn.execute("SELECT id, embedding FROM entries"))

    made = daemon.call("POST", "/v1/memory", json={"content": "Rebuild guard: pool X drains at night",
                                                    "memory_type": "insight"})
    wait_until_embedded(daemon)
    before = vectors()
    assert before[made["id"]] is not None
    proc = clade_subprocess(["--data-dir", str(daemon.data.root), "embeddings", "rebuild"],
                            env={"CLADE_NO_DAEMON": "1"})
    assert proc.returncode == 2, proc.stderr
    assert b"a daemon is running" in proc.stderr and b"before rebuilding the vectors" in proc.stderr, proc.stderr
    assert vectors() == before


def test_socket_is_0660(shared: DaemonProc) -> None:
    assert stat.S_IMODE(os.stat(shared.socket).st_mode) == 0o660


def test_memory_endpoints_in_gateway_shapes(shared: DaemonProc) -> None:
    made = shared.request("POST", "/v1/memory", json={
        "content": "Morpho Blue markets with thin liquidity freeze withdrawals", "memory_type": "warning",
        "importance": 0.8, "metadata": {"tokens": ["USDC"], "chains": [8453], "protocols": ["morpho"],
                                        "strategy_id": "lend-1"}})
    assert made.status_code == 201, made.text
    entry_id = made.json()["id"]
    assert made.json()["entry"]["metadata"]["chains"] == [8453]
    fact = shared.request("POST", "/v1/memory", json={"content": "USDC has 6 decimals", "memory_type": "fact"})
    assert fact.status_code == 201
    ep = shared.request("POST", "/v1/memory", json={"content": "saw a depeg at block 5", "memory_type": "episode"})
    assert ep.status_code == 201 and ep.json()["memory_type"] == "episode"
    wait_until_embedded(shared)  # searches embed only the query; entries are embedded in the background
    found = shared.request("POST", "/v1/memory/search", json={"query": "lending pool exits get stuck", "top_k": 3})
    assert found.status_code == 200 and found.json()["results"][0]["id"] == entry_id
    only_facts = shared.request("POST", "/v1/memory/search", json={"query": "token precision", "type_filter": "fact"})
    assert {r["kind"] for r in only_facts.json()["results"]} == {"fact"}
    got = shared.request("GET", f"/v1/entries/{entry_id}")
    assert got.status_code == 200 and got.json()["content"].startswith("Morpho")
    listed = shared.request("GET", "/v1/entries", params={"kind": "warning", "limit": 5}).json()["entries"]
    assert entry_id in {e["id"] for e in listed}
    gone = shared.request("DELETE", f"/v1/entries/{entry_id}")
    assert gone.status_code == 200 and gone.json()["archived"] is True
    assert entry_id not in {e["id"] for e in shared.request("GET", "/v1/entries").json()["entries"]}


def test_other_endpoints(shared: DaemonProc) -> None:
    status = shared.request("GET", "/v1/status").json()
    assert status["peer_id"] == shared.ready["peer_id"]
    assert shared.request("GET", "/v1/peers").json() == {"peers": []}
    shared.request("POST", "/v1/memory", json={"content": "Never chase a depeg below 0.97", "memory_type": "warning"})
    digest = shared.request("POST", "/v1/digest", json={"query": "stablecoin depeg", "budget_tokens": 500})
    assert digest.status_code == 200 and digest.json()["document"].startswith("<agent_memory>")
    assert digest.json()["tokens"] <= 500
    episode = shared.request("POST", "/v1/episodes", json={"summary": "MEV bot front-ran a swap", "block_number": 7,
                                                            "payload": {"loss_usd": 12.5}, "category": "jit_defense"})
    assert episode.status_code == 201 and episode.json()["episode"]["payload"] == {"loss_usd": 12.5}
    cycle = shared.request("POST", "/v1/curator/run")
    assert cycle.status_code == 200 and cycle.json()["entries_pruned"] == 0
    assert "depeg" in shared.data.playbook_path.read_text()
    backup = shared.request("POST", "/v1/backup", json={})
    assert backup.status_code == 409 and backup.json()["error"] == "conflict"  # not in a clade yet
    spec = shared.request("GET", "/openapi.json").json()
    assert "/v1/memory/search" in spec["paths"]


def test_events_stream(shared: DaemonProc) -> None:
    with httpx.Client(transport=httpx.HTTPTransport(uds=shared.socket), base_url="http://clade",
                      timeout=30) as client, client.stream("GET", "/v1/events") as stream:
        lines = stream.iter_lines()
        assert next(lines) == ": connected"
        content = "event test entry:\n\tAave v3 caps\x0bsupply " + "of wstETH " * 20
        made = shared.request("POST", "/v1/memory", json={"content": content, "memory_type": "insight",
                                                          "category": "risk_events", "confidence": 0.8}).json()
        # The first event line, or None if the stream ends first (which must fail, not pass).
        first_event = next((line for line in lines if line.startswith("event:")), None)
        assert first_event == "event: entry_written"
        data = json.loads(next(lines).removeprefix("data:"))
        author = shared.request("GET", "/v1/status").json()["peer_id"]
        assert data == {"id": made["id"], "kind": "insight", "category": "risk_events", "confidence": 0.8,
                        "source": "self", "author": author, "preview": data["preview"]}
        preview = data["preview"]
        assert len(preview) == 120 and preview.endswith("…") and "\n" not in preview and "\x0b" not in preview
        assert preview.startswith("event test entry: Aave v3 caps supply of wstETH of wstETH")
        # The agent routes (flush, lessons, working memory) publish the same payload.
        shared.request("POST", "/v1/memory/flush", json={"session": "events", "facts": [
            {"content": "Morpho markets are isolated", "memory_type": "fact"}]}).raise_for_status()
        assert next((line for line in lines if line.startswith("event:")), None) == "event: entry_written"
        flushed = json.loads(next(lines).removeprefix("data:"))
        assert set(flushed) == set(data) and flushed["preview"] == "Morpho markets are isolated"
        assert flushed["kind"] == "fact" and flushed["category"] is None and flushed["author"] == author


def test_forget_and_unarchive_publish_only_when_they_change_something(shared: DaemonProc) -> None:
    entry = shared.request("POST", "/v1/memory", json={"content": "forgotten twice", "memory_type": "insight"}).json()
    with httpx.Client(transport=httpx.HTTPTransport(uds=shared.socket), base_url="http://clade",
                      timeout=30) as client, client.stream("GET", "/v1/events") as stream:
        lines = stream.iter_lines()
        assert next(lines) == ": connected"
        for action in ("forget", "forget", "unarchive", "unarchive"):  # each second call changes nothing
            shared.request("POST", f"/v1/entries/{entry['id']}/{action}")
        marker = shared.request("POST", "/v1/memory", json={"content": "marker", "memory_type": "insight"}).json()
        seen: list[tuple[str, str]] = []
        event = ""
        for line in lines:
            if line.startswith("event:"):
                event = line.removeprefix("event: ")
            elif line.startswith("data:"):
                about = json.loads(line.removeprefix("data: ")).get("id")
                if about in (entry["id"], marker["id"]):
                    seen.append((event, about))
                if about == marker["id"] and event == "entry_written":
                    break
    # the marker's event arrived after any the second calls could have published
    assert seen == [("entry_forgotten", entry["id"]), ("entry_unarchived", entry["id"]),
                    ("entry_written", marker["id"])]


@pytest.mark.parametrize(("method", "path", "body", "status", "error"), [
    ("POST", "/v1/memory", {"content": ""}, 422, "invalid_request"),
    ("POST", "/v1/memory", {"content": "x", "memory_type": "rumour"}, 422, "invalid_request"),
    ("POST", "/v1/memory", {"content": "x", "importance": 2}, 422, "invalid_request"),
    ("POST", "/v1/memory", {"content": "x", "surprise": 1}, 422, "invalid_request"),
    ("POST", "/v1/memory", {"content": "x" * 5000}, 422, "invalid_request"),
    ("POST", "/v1/memory", {"content": "é" * 2049}, 422, "invalid_request"),  # 4098 bytes of UTF-8
    ("POST", "/v1/memory", {"content": "x" * 9000}, 422, "invalid_request"),
    ("POST", "/v1/memory/search", {"query": "x", "top_k": 0}, 422, "invalid_request"),
    ("GET", "/v1/entries/0123456789abcdef0123456789abcdef", None, 404, "not_found"),
    ("DELETE", "/v1/entries/nope", None, 404, "not_found"),
    ("GET", "/v1/entries?limit=0", None, 422, "invalid_request"),
    ("GET", "/v1/nowhere", None, 404, "not_found"),
    ("POST", "/v1/episodes", {"summary": "x", "category": "vibes"}, 422, "invalid_request"),
    ("POST", "/v1/memory", "not json", 422, "invalid_request"),
])
def test_error_shapes(shared: DaemonProc, method: str, path: str, body: object, status: int, error: str) -> None:
    kw = {"content": body} if isinstance(body, str) else ({"json": body} if body is not None else {})
    res = shared.request(method, path, **kw)
    assert res.status_code == status, res.text
    assert res.json()["error"] == error and "detail" in res.json()


def test_oversized_bodies_are_refused(shared: DaemonProc) -> None:
    big = b'{"content": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    res = shared.request("POST", "/v1/memory", content=big, headers={"content-type": "application/json"})
    assert res.status_code == 413 and res.json()["error"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no content-length: counted as it streams
        yield b'{"content": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    res = shared.request("POST", "/v1/memory", content=chunks(), headers={"content-type": "application/json"})
    assert res.status_code == 413
    assert shared.request("GET", "/v1/status").status_code == 200


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                           max_leaves=12)
bodies = st.one_of(json_values, st.fixed_dictionaries(
    {}, optional={"content": json_values, "memory_type": st.sampled_from(["fact", "warning", "episode", "x"]),
                  "importance": json_values, "metadata": json_values, "query": json_values, "top_k": json_values,
                  "type_filter": json_values, "min_importance": json_values, "summary": json_values,
                  "budget_tokens": json_values, "format": json_values, "payload": json_values}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(path=st.sampled_from(["/v1/memory", "/v1/memory/search", "/v1/digest", "/v1/episodes"]), body=bodies)
def test_fuzzed_bodies_never_cause_a_5xx(shared: DaemonProc, path: str, body: object) -> None:
    try:
        payload = json.dumps(body, allow_nan=True)
    except (TypeError, ValueError):
        return
    res = shared.request("POST", path, content=payload, headers={"content-type": "application/json"})
    assert res.status_code < 500, res.text
    assert shared.proc.poll() is None


def test_tcp_listener_needs_the_token(data_dir: DataDir) -> None:
    import socket as s

    with s.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "tcp-listener-token-never-logged-0123456789"
    data_dir.config_path.write_text(f'[api]\ntcp_port = {port}\ntoken = "{token}"\n')
    daemon = DaemonProc(data_dir)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/v1/status").status_code == 401
        assert httpx.get(f"{base}/v1/status", headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.get(f"{base}/v1/status", headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["peer_id"] == daemon.ready["peer_id"]
        os.kill(daemon.pid, signal.SIGHUP)
        daemon.wait_for("config reloaded", timeout=30)
    finally:
        assert daemon.stop() == 0
    assert token not in "\n".join(daemon.stderr_lines)  # never logged, not even on a reload


def _run_fails_with_one_line(data_dir: DataDir) -> str:
    """`clade run` that must fail at start-up: exit 1, stderr exactly one `clade: error:` line."""
    import subprocess
    import sys

    proc = subprocess.run([str(Path(sys.executable).with_name("clade")), "--data-dir", str(data_dir.root), "run"],
                          capture_output=True, timeout=60, check=False, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("clade: error: "), proc.stderr
    return lines[0]


def test_a_second_daemon_on_a_locked_data_dir_is_fatal_in_one_line(data_dir: DataDir) -> None:
    """The data dir's lock (daemon/presence.py) is taken before anything is opened: with it held
    (as a daemon starting at the same moment would hold it, before any run.json exists), `clade
    run` refuses at once and leaves the store and the socket alone."""
    from daemon.presence import DaemonLock

    lock = DaemonLock.acquire(data_dir.root, data_dir.run_path)
    try:
        before = data_dir.db_path.stat().st_mtime_ns
        line = _run_fails_with_one_line(data_dir)
        assert "daemon.lock" in line and "another clade daemon" in line, line
        assert data_dir.db_path.stat().st_mtime_ns == before and not data_dir.run_path.exists()
    finally:
        lock.release()
    again = DaemonLock.acquire(data_dir.root, data_dir.run_path)  # released: free again
    again.release()


def test_tcp_port_without_token_is_fatal_in_one_line(data_dir: DataDir) -> None:
    data_dir.config_path.write_text("[api]\ntcp_port = 7411\n")
    line = _run_fails_with_one_line(data_dir)
    assert "api.token is not set" in line and "CLADE_API__TOKEN" in line


def test_tcp_port_in_use_is_fatal_in_one_line(data_dir: DataDir) -> None:
    import socket as s

    with s.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data_dir.config_path.write_text(f'[api]\ntcp_port = {port}\ntoken = "{"t" * 40}"\n')
        line = _run_fails_with_one_line(data_dir)
    assert f"127.0.0.1:{port}" in line and "another port" in line
    assert not data_dir.run_path.exists()


def test_cli_goes_through_a_running_daemon_with_identical_output(cli: CliRunner, data_dir: DataDir) -> None:
    direct_bad = cli("remember", "   ")
    daemon = DaemonProc(data_dir)
    try:
        made = cli("remember", "Through the daemon: Aave rates jump at 90% utilisation", "--kind", "warning",
                   "--tag", "aave", "--category", "risk_events", "--quality", "0.8", "--pad=-0.5,0.9,0.1", "--json")
        assert made.code == 0, made.err
        entry_id = made.json()["id"]
        assert daemon.request("GET", "/v1/status").json()["counters"]["event_entry_written"] == 1
        wait_until_embedded(daemon)  # searches embed only the query; the embedder service does entries
        found = cli("recall", "lending interest spikes", "--json")  # bumps the access count once
        assert found.code == 0 and found.json()["results"][0]["id"] == entry_id
        via_api = {cmd: cli(*cmd) for cmd in [("show", entry_id, "--json"), ("show", entry_id), ("list", "--json"),
                                              ("list",), ("show", "f" * 32)]}
        api_bad = cli("remember", "   ")
    finally:
        assert daemon.stop() == 0
    for cmd, res in via_api.items():
        direct = cli(*cmd)
        assert (direct.code, direct.out, direct.err) == (res.code, res.out, res.err), cmd
    assert (api_bad.code, api_bad.err) == (direct_bad.code, direct_bad.err) == (2, direct_bad.err)
    assert cli("forget", entry_id, "--json").json()["changed"] is True


def wait_until_embedded(daemon: DaemonProc, timeout: float = 120) -> None:
    """Until every entry has a vector (the daemon embeds in the background; no event says so),
    as the daemon's status counts them (checked against the store once it says none)."""
    eventually(lambda: daemon.request("GET", "/v1/status").json()["embedding_backlog"] == 0, timeout=timeout,
               interval=0.5, what="every entry embedded (status: embedding_backlog 0)",
               state=lambda: daemon.request("GET", "/v1/status").json()["embedding_backlog"])
    with daemon.data.open_store() as store:
        unembedded = store.connection.execute("SELECT count(*) FROM entries WHERE embedding IS NULL")
        assert unembedded.fetchone() == (0,)


def test_background_embedder_works_through_a_backlog(shared: DaemonProc) -> None:
    for i in range(40):
        shared.request("POST", "/v1/memory", json={"content": f"Backlog {i}: Curve pool {i} rebalances slowly",
                                                   "memory_type": "insight"})
    wait_until_embedded(shared)
    assert shared.request("GET", "/v1/status").json()["counters"]["entries_embedded"] >= 40


def test_too_long_socket_path_is_a_clear_fatal_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    deep = DataDir(tmp_path / ("d" * 60) / ("e" * 60))
    deep.init()
    proc = subprocess.run([str(Path(sys.executable).with_name("clade")), "--data-dir", str(deep.root), "run"],
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 1 and b"107 bytes" in proc.stderr and b"Traceback" not in proc.stderr
