"""Per-thread CPU priority on Linux: lowering the calling thread's, and telling whether it was.

On Linux a thread id names one thread, so `os.setpriority(PRIO_PROCESS, tid, ...)` lowers that
thread alone. Raising a priority back needs a privilege a daemon does not have: a lowered
thread stays lowered. Where the priority cannot be changed (no per-thread ids, a seccomp
filter refusing `setpriority`: the systemd unit's `~@resources`), the thread keeps running at
normal priority. No trio, no numpy: the embedding process (`daemon.embedding.host`) uses it too.
"""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["BACKGROUND_NICE", "lower_thread_priority", "thread_is_lowered"]

log = logging.getLogger(__name__)
BACKGROUND_NICE = 10  # how far below the process's own priority work that can wait runs


def lower_thread_priority(nice: int = BACKGROUND_NICE) -> None:
    """Lower the calling thread's priority by `nice` (capped at 19); a no-op where it cannot."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except (OSError, AttributeError) as exc:
        log.debug("thread stays at normal priority: %r", exc)


def thread_is_lowered() -> bool:
    """Whether the calling thread runs at a lower priority than the process's main thread
    (False where that cannot be read)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) > os.getpriority(os.PRIO_PROCESS,
                                                                                             os.getpid())
    except (OSError, AttributeError):
        return False
