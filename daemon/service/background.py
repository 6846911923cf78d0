"""A low-priority thread for work that can wait: the background embedder.

Embedding an entry costs ~10 ms of one core with MiniLM (the model's own floor on a 2-core VM,
bench_clade --profile); on a golem that receives a clade's warnings, that work competes for the
cores with requests, gossip validation and the store's writer. Run on this thread (nice
+`BACKGROUND_NICE` over the daemon's own, Linux per-thread priority), it takes whatever CPU
they leave and gives it back at once when they wake. Where the priority cannot be lowered, it
runs at normal priority (`daemon.thread_priority`). The model itself runs in the embedding
process: a call made from this thread is marked low priority there (`remote.ModelHost` reads
the calling thread's priority) and runs on that process's own lowered thread.

"Whatever CPU they leave" can be none: on a host kept busy by other processes (an agent
runtime, other services) a nice +10 thread gets ~1/10 the share of each of them and a batch
that needs half a second of CPU waited minutes (step 22: 72 of 200 received warnings without a
vector for minutes at load average 23). With `patience_s`, a call that has not finished by then
is run again on a normal-priority thread (its low-priority twin's result is dropped: the work
must be idempotent), and every later call runs there too (`starved`) until `relax()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import trio

from daemon.thread_priority import BACKGROUND_NICE, lower_thread_priority

__all__ = ["BACKGROUND_NICE", "BackgroundThread"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class BackgroundThread:
    """One worker thread at a lower CPU priority; `await run(fn)` runs `fn` there (or, once
    starved, at normal priority: see the module docstring)."""

    def __init__(self, name: str, *, nice: int = BACKGROUND_NICE, patience_s: float | None = None) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name, initializer=lower_thread_priority, initargs=(nice,))
        self._patience_s = patience_s
        self.starved = False  # a call outwaited `patience_s`: calls run at normal priority until `relax()`
        self.starvations = 0  # how many times that happened

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on the low-priority thread; with `patience_s`, on a normal-priority worker
        thread if that has not finished it by then, or while `starved`. `fn` may thus run
        twice, the first result dropped: it must be idempotent."""
        if self.starved:
            return await trio.to_thread.run_sync(fn)
        future = self._pool.submit(fn)
        if self._patience_s is None:
            return await trio.to_thread.run_sync(future.result)
        with trio.move_on_after(self._patience_s):
            # mypy 2.4 reads a keyword after trio's `*args: Unpack[Ts]` as one of the args
            return await trio.to_thread.run_sync(future.result, abandon_on_cancel=True)  # type: ignore[call-arg]
        self.starved = True
        self.starvations += 1
        log.info("background thread starved for %.0f s: running at normal priority until its work is done",
                 self._patience_s)
        return await trio.to_thread.run_sync(fn)

    def relax(self) -> None:
        """The work that starved is done: back to the low-priority thread."""
        self.starved = False

    def close(self) -> None:
        """Stop taking work; a call running finishes on its own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
