"""`GET /v1/knowledge/stats` and `GET /v1/backups` (the operator TUI's reads) on a real daemon,
the backup scheduler behind `next_due_ms` (on MockClock), and the `[tui]` config section."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio
import trio.testing

from daemon.config import load_config
from daemon.datadir import DataDir
from daemon.errors import ConfigError
from daemon.service.backup_schedule import BackupSchedule, run_backups
from daemon.testing.harness import LoopbackClade
from daemon.testing.process import DaemonProc


def test_knowledge_stats_count_live_entries_by_confidence_and_ops(data_dir: DataDir) -> None:
    daemon = DaemonProc(data_dir)
    try:
        before = daemon.request("GET", "/v1/knowledge/stats").json()
        assert before == {"live": 0, "by_kind": {}, "confidence_histogram": [0] * 10, "ops": 0}
        for content, confidence in (("a", 0.05), ("b", 0.55), ("c", 1.0)):
            assert daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": "insight",
                                                              "confidence": confidence}).status_code == 201
        forgotten = daemon.request("GET", "/v1/entries").json()["entries"][0]["id"]
        assert daemon.request("POST", f"/v1/entries/{forgotten}/forget").status_code == 200
        stats = daemon.request("GET", "/v1/knowledge/stats").json()
        assert stats["live"] == 2 and stats["by_kind"] == {"insight": 2}
        assert sum(stats["confidence_histogram"]) == 2 and stats["ops"] > before["ops"]
        backups = daemon.request("GET", "/v1/backups").json()
        assert backups["count"] == 0 and backups["last"] is None and backups["next_due_ms"] is None  # no clade
    finally:
        assert daemon.stop() == 0


def _descriptors_on(pid: int, db: Path) -> int:
    """How many of process `pid`'s open descriptors are the file `db` itself."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += fd.readlink() == db
        except OSError:
            continue  # closed while we looked
    return count


@pytest.mark.slow
def test_backups_list_the_newest_and_the_next_scheduled_run(tmp_path: Path) -> None:
    """And a backup leaves the daemon's open files as they were: its copy of the store goes
    through a reader the daemon holds, so no closed connection's descriptor stays behind (the
    soak read the one SQLite kept as a descriptor leak)."""
    clade = LoopbackClade(tmp_path, 1)
    try:
        (golem,) = clade.golems
        clade.start(golem)
        db = golem.data.db_path.resolve()
        before = _descriptors_on(golem.pid, db)
        assert before >= 2  # the writer's connection and the readers', opened at start
        made = golem.call("POST", "/v1/backup", json={})
        got = golem.call("GET", "/v1/backups")
        assert got["count"] == 1 and got["last"]["bytes"] == made["bytes"] == got["total_bytes"]
        assert got["last"]["name"] == Path(made["path"]).name
        assert got["next_due_ms"] > got["last"]["at_ms"] and got["interval_hours"] == 24.0
        assert golem.call("POST", "/v1/backup", json={})["bytes"] > 0
        assert _descriptors_on(golem.pid, db) == before
    finally:
        clade.close()


def test_next_backup_shown_is_when_the_scheduler_runs_a_full_interval_after_the_last_finished() -> None:
    """Backups that take 10 minutes on a 1 h interval: the shown time is each next start
    (wall = trio time here), which drifts 10 minutes a run from a grid laid from start-up."""
    hour, took = 3600.0, 600.0
    schedule = BackupSchedule()
    runs: list[tuple[float, float]] = []
    shown: list[int | None] = []
    finished_send, finished = trio.open_memory_channel[None](math.inf)  # one item per backup run

    async def backup() -> None:
        started = trio.current_time()
        await trio.sleep(took)  # the backup's work: 10 minutes, on the MockClock below
        runs.append((started, trio.current_time()))
        finished_send.send_nowait(None)

    async def main() -> None:
        stop = trio.Event()
        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_backups(schedule, interval_s=lambda: hour, backup=backup, stop=stop))
            for n in range(3):  # look 1 s after the start, then 1 s after each backup finished
                await trio.sleep_until(t0 + 1 if n == 0 else runs[-1][1] + 1)
                now = trio.current_time()
                shown.append(schedule.due_ms(now=now, now_ms=round(now * 1000)))
                with trio.fail_after(2 * (hour + took)):  # mock time: the run is a whole cycle late
                    await finished.receive()
            stop.set()
        assert schedule.due is None  # stopped: nothing scheduled
        starts = [round(a - t0) for a, _ in runs]
        assert starts == [3600, 3600 + 600 + 3600, 2 * (3600 + 600) + 3600]
        assert shown == [round(a * 1000) for a, _ in runs]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(shown) == 3 and shown[1] is not None and shown[0] is not None
    assert shown[1] - shown[0] == (hour + took) * 1000  # not one interval: the grid's mistake


def test_tui_config_section_and_its_environment_override(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[tui]\ntheme = "16"\nkeymap = { quit = "x,ctrl+q", "action.backup" = "ctrl+b" }\n')
    config = load_config(path, env={})
    assert config.tui.theme == "16" and config.tui.keymap == {"quit": "x,ctrl+q", "action.backup": "ctrl+b"}
    env = load_config(path, env={"CLADE_TUI__KEYMAP": '{"help": "h"}', "CLADE_TUI__THEME": "mono"})
    assert env.tui.keymap == {"help": "h"} and env.tui.theme == "mono"
    path.write_text('[tui]\ntheme = "neon"\n')
    with pytest.raises(ConfigError, match=r"tui\.theme"):
        load_config(path, env={})
