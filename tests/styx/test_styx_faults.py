"""Each of the reference server's fault modes against a real daemon: retried as specified,
nothing duplicated, nothing lost; the monthly spend survives a restart; a tick cap pauses and
resumes; PLAYBOOK.md snapshots reach the vault layer once per distinct text."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

import pytest

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.polling import eventually
from tests.helpers.styx import flush_warnings as _flush
from tests.helpers.styx import styx_env as _env

ENTRIES = "/v1/styx/entries"


def _drained(daemon: DaemonProc, styx: StyxServer, n: int) -> None:
    eventually(lambda: len(styx.keys()) == n, timeout=60, what=f"{n} items at Styx")
    eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["queue_depth"] == 0,
               timeout=30, what="an empty outbox")


@pytest.mark.parametrize(("fault", "timeout_s"), [
    pytest.param({"status": 500, "times": 3}, 10.0, id="500"),
    pytest.param({"status": 408, "times": 2}, 10.0, id="408"),
    pytest.param({"reset": True, "times": 3}, 10.0, id="connection-reset"),
    pytest.param({"delay_s": 1.2, "times": 2}, 0.4, id="slow-past-the-timeout"),  # commits after we gave up
    pytest.param({"delay_s": 0.3, "times": 2}, 10.0, id="slow-within-the-timeout"),
])
def test_each_fault_is_retried_and_nothing_is_duplicated_or_lost(data_dir: DataDir, styx: StyxServer,
                                                                fault: dict[str, Any], timeout_s: float) -> None:
    styx.set_faults(**fault)
    daemon = DaemonProc(data_dir, env={**_env(styx), "CLADE_STYX__TIMEOUT_S": str(timeout_s)})
    try:
        _flush(daemon, 0, 10)
        _drained(daemon, styx, 10)
        keys = styx.keys()
        assert len(keys) == len(set(keys)) == 10
        attempts = len(styx.arrivals(ENTRIES))
        status = daemon.request("GET", "/v1/styx/status").json()
        if fault.get("status") or fault.get("reset") or timeout_s < 1:  # each faulted call failed, then one took
            assert attempts == fault["times"] + 1 and status["failures"] == fault["times"]
        else:  # slow but in time: delivered at the first attempt
            assert attempts == 1 and status["failures"] == 0
        assert status["delivered"] == 10 and status["last_success_at"].endswith("Z")
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_retry_after_is_honoured_in_both_forms(data_dir: DataDir, styx: StyxServer, form: str) -> None:
    """Backoff is capped at 0.5 s here, so a gap of ~2 s between attempts can only come from Retry-After."""
    daemon = DaemonProc(data_dir, env=_env(styx))
    try:
        set_at = time.monotonic()
        value: Any = 2 if form == "seconds" else formatdate(time.time() + 3, usegmt=True)  # once the daemon is up
        styx.set_faults(status=429 if form == "seconds" else 503, retry_after=value, times=1)
        _flush(daemon, 0, 3)
        _drained(daemon, styx, 3)
        first, second = styx.arrivals(ENTRIES)
        if form == "seconds":
            assert second - first >= 1.5  # 2 s after the refusal, whatever the backoff (0.5 s here)
        else:  # the date is absolute (1 s resolution): not retried before it, however late the first try
            assert second >= set_at + 3 - 1.05
    finally:
        assert daemon.stop() == 0


def test_the_monthly_budget_stops_pushing_not_writing_and_survives_a_restart(data_dir: DataDir,
                                                                             styx: StyxServer) -> None:
    env = {**_env(styx), "CLADE_STYX__PRICES__PER_ITEM": "0.01", "CLADE_STYX__BUDGET__MONTHLY": "0.05",
           "CLADE_STYX__BUDGET__DEATH_RESERVE": "0",  # the whole month for pushes here (the reserve: test_death)
           "CLADE_STYX__BUDGET__MAX_PER_TICK": "1", "CLADE_STYX__BATCH": "2"}
    daemon = DaemonProc(data_dir, env=env)
    try:
        _flush(daemon, 0, 9)
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["paused_by_budget"],
                   timeout=60, what="the budget pause")
        status = daemon.request("GET", "/v1/styx/status").json()
        assert len(styx.keys()) == 5 and status["queue_depth"] == 4  # 5 × 0.01 USD; the rest keep waiting
        assert abs(status["spend_month_usd"] - 0.05) < 1e-9
    finally:
        assert daemon.stop() == 0
    assert len(styx.keys()) == 5
    daemon = DaemonProc(data_dir, env=env)
    try:
        _flush(daemon, 100, 1)  # a write wakes the pusher: it must still be over the budget
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["paused_by_budget"],
                   timeout=60, what="the pause again")
        status = daemon.request("GET", "/v1/styx/status").json()
        assert status["queue_depth"] == 5 and len(styx.keys()) == 5
        assert abs(status["spend_month_usd"] - 0.05) < 1e-9
        assert status["spend"]["items"] == 5 and status["spend"]["calls"] == 3  # batches of 2, 2, 1
    finally:
        assert daemon.stop() == 0


def test_a_tick_cap_pauses_pushing_for_the_rest_of_the_tick(data_dir: DataDir, styx: StyxServer) -> None:
    """One call's worth per (hour-long) tick: the first item goes, the pusher pauses, the rest
    wait in the outbox. (The next tick resuming is Budget's: test_styx_policy, on exact times.)"""
    env = {**_env(styx), "CLADE_STYX__PRICES__PER_CALL": "0.01", "CLADE_STYX__BUDGET__MAX_PER_TICK": "0.01",
           "CLADE_STYX__BUDGET__TICK_S": "3600", "CLADE_STYX__BATCH": "1"}
    daemon = DaemonProc(data_dir, env=env)
    try:
        _flush(daemon, 0, 3)
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["paused_by_budget"],
                   timeout=60, what="the tick pause")
        status = daemon.request("GET", "/v1/styx/status").json()
        assert len(styx.keys()) == 1 and len(styx.arrivals(ENTRIES)) == 1
        assert status["queue_depth"] == 2 and status["spend"]["calls"] == 1
    finally:
        assert daemon.stop() == 0


def test_playbook_snapshots_go_to_the_vault_layer_once_per_text(data_dir: DataDir, styx: StyxServer) -> None:
    daemon = DaemonProc(data_dir, env={**_env(styx), "CLADE_P2P__ENABLED": "false"})
    try:
        daemon.request("POST", "/v1/memory", json={"content": "Never LP below $100K TVL",
                                                   "memory_type": "heuristic"}).raise_for_status()
        daemon.request("POST", "/v1/memory", json={"content": "The owner's seed phrase is in safe 7",
                                                   "memory_type": "warning", "sensitivity": "sensitive"}
                       ).raise_for_status()
        assert daemon.request("POST", "/v1/curator/run", json={}).status_code == 200
        eventually(lambda: any(i["kind"] == "playbook" for i in styx.items()),
                   timeout=30, what="a PLAYBOOK snapshot at Styx")
        assert "safe 7" not in data_dir.playbook_path.read_text()
        assert daemon.request("POST", "/v1/curator/run", json={}).status_code == 200  # the same text: not again
        _flush(daemon, 0, 1)  # a marker queued after the second cycle; the outbox drains in order
        eventually(lambda: any(i["kind"] == "warning" for i in styx.items()), timeout=30, what="the marker at Styx")
    finally:
        assert daemon.stop() == 0
    snapshots = [i for i in styx.items() if i["kind"] == "playbook"]
    assert len(snapshots) == 1
    (snap,) = snapshots
    assert snap["layer"] == "vault" and "Never LP below $100K TVL" in snap["content"]
    assert "safe 7" not in snap["content"]  # a sensitive entry never leaves, not even in the snapshot
    assert snap["idempotency_key"].endswith(":" + snap["id"]) and snap["id"].startswith("playbook-")
    assert snap["metadata"]["bytes"] == len(snap["content"].encode())
