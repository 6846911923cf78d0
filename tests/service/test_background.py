"""The background embedder's thread: lower CPU priority than the rest of the daemon, and only
that thread (Linux per-thread nice)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from crypto import Identity
from daemon.config import load_config
from daemon.datadir import DataDir
from daemon.grimoire import Grimoire
from daemon.service.background import BACKGROUND_NICE, BackgroundThread
from daemon.service.state import DaemonState


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


async def test_work_runs_at_a_lower_priority_on_its_own_thread() -> None:
    before = _nice()
    background = BackgroundThread("test-bg")
    try:
        there, name = await background.run(lambda: (_nice(), threading.current_thread().name))
    finally:
        background.close()
    assert there == min(19, before + BACKGROUND_NICE)
    assert name.startswith("test-bg")
    assert _nice() == before  # the caller's thread (and the process) keep theirs


async def test_the_backlog_waits_for_a_catch_up_join_but_only_so_long(tmp_path: Path,
                                                                      autojump_clock: trio.testing.MockClock) -> None:
    """`DaemonState.ingest_idle`: at once with no round being joined; when the last of two
    overlapping rounds ends; after `at_most_s` if one never ends."""
    data = DataDir(tmp_path / "d")
    data.root.mkdir()
    store = Grimoire.open(tmp_path / "g.db", create=True)
    state = DaemonState(data=data, config=load_config(None, {}), identity=Identity.generate(), store=store)
    try:
        start = trio.current_time()
        await state.ingest_idle(at_most_s=10)
        assert trio.current_time() == start  # nothing joined: no wait

        async def round_of(seconds: float) -> None:
            with state.ingesting():
                await trio.sleep(seconds)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(round_of, 3)
            nursery.start_soon(round_of, 5)
            await trio.testing.wait_all_tasks_blocked()  # both rounds under way
            await state.ingest_idle(at_most_s=10)
            assert trio.current_time() - start == pytest.approx(5)  # the later round's end
        with state.ingesting():  # a round that outlasts the wait
            await state.ingest_idle(at_most_s=10)
            assert trio.current_time() - start == pytest.approx(15)
        await state.ingest_idle(at_most_s=10)
        assert trio.current_time() - start == pytest.approx(15)  # idle again
    finally:
        state.close_readers()
        store.close()
