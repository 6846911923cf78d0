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


async def test_starved_work_runs_again_at_normal_priority_until_relaxed(
        autojump_clock: trio.testing.MockClock) -> None:
    """A call the low-priority thread has not finished after `patience_s` (a busy host gives a
    nice +10 thread no CPU; here it is held) is run at normal priority, and so is every later
    call until `relax()`; then the low-priority thread takes work again."""
    before = _nice()
    if min(19, before + BACKGROUND_NICE) == before:
        pytest.skip(f"the tests run at nice {before}: the background thread cannot be told apart by its priority")
    held = threading.Event()
    calls: list[tuple[str, int]] = []

    def work(tag: str) -> int:
        nice = _nice()
        calls.append((tag, nice))
        if nice != before:  # the low-priority thread: starved until the test lets it go
            held.wait(timeout=30)
        return nice

    background = BackgroundThread("test-starved", patience_s=10)
    try:
        start = trio.current_time()
        assert await background.run(lambda: work("first")) == before  # the normal-priority rerun's answer
        assert trio.current_time() - start == pytest.approx(10)
        assert background.starved and background.starvations == 1
        assert await background.run(lambda: work("second")) == before  # straight to normal priority
        assert trio.current_time() - start == pytest.approx(10)
        held.set()  # the starved twin finishes; its result was dropped
        background.relax()
        autojump_clock.autojump_threshold = float("inf")  # time stands still: no patience runs out
        assert await background.run(lambda: work("third")) == min(19, before + BACKGROUND_NICE)
    finally:
        held.set()
        background.close()
    assert [tag for tag, nice in calls if nice == before] == ["first", "second"]
    assert background.starvations == 1


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
                await trio.sleep(seconds)  # a round that lasts `seconds` of mock time (autojump_clock)

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
