"""The background embedder's thread: lower CPU priority than the rest of the daemon, and only
that thread (Linux per-thread nice)."""

from __future__ import annotations

import os
import threading

from daemon.service.background import BACKGROUND_NICE, BackgroundThread


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
