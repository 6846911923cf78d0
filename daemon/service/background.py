"""A low-priority thread for work that can wait: the background embedder.

Embedding an entry costs ~10 ms of one core with MiniLM (the model's own floor on a 2-core VM,
bench_clade --profile); on a golem that receives a clade's warnings, that work competes for the
cores with requests, gossip validation and the store's writer. Run on this thread (nice
+`BACKGROUND_NICE` over the daemon's own, Linux per-thread priority), it takes whatever CPU
they leave and gives it back at once when they wake. Where the priority cannot be lowered, it
runs at normal priority.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import trio

__all__ = ["BACKGROUND_NICE", "BackgroundThread"]

log = logging.getLogger(__name__)
BACKGROUND_NICE = 10
T = TypeVar("T")


def _lower_priority(nice: int) -> None:
    try:  # on Linux a thread id names one thread: only this one is lowered
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except (OSError, AttributeError) as exc:
        log.debug("background thread stays at normal priority: %r", exc)


class BackgroundThread:
    """One worker thread at a lower CPU priority; `await run(fn)` runs `fn` there."""

    def __init__(self, name: str, *, nice: int = BACKGROUND_NICE) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name, initializer=_lower_priority, initargs=(nice,))

    async def run(self, fn: Callable[[], T]) -> T:
        future = self._pool.submit(fn)
        return await trio.to_thread.run_sync(future.result)

    def close(self) -> None:
        """Stop taking work; a call running finishes on its own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
