"""The backup scheduler: a backup a full interval after the previous one finished.

`run_backups` waits `interval_s()` (read afresh each time: a SIGHUP reload applies to the
next wait), backs up, and waits again from when the backup finished; manual backups in
between do not move it. `BackupSchedule` holds the moment it waits for, on trio's clock
(`trio.current_time()`, so `MockClock` drives it), and turns it into the wall-clock time
the operator is shown (`GET /v1/backups` `next_due_ms`, the TUI): what the loop will do,
not a grid from start-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

__all__ = ["BackupSchedule", "run_backups"]


class BackupSchedule:
    """When the scheduler backs up next. `due` is a `trio.current_time()` value, None before
    the scheduler first armed (or once it stopped)."""

    def __init__(self) -> None:
        self.due: float | None = None

    def arm(self, now: float, interval_s: float) -> float:
        """The scheduler starts waiting at `now` (trio time): the next backup is `interval_s` later."""
        self.due = now + interval_s
        return self.due

    def due_ms(self, *, now: float, now_ms: int) -> int | None:
        """`due` as wall-clock ms, given the same instant on both clocks (`now` trio, `now_ms` wall)."""
        if self.due is None:
            return None
        return now_ms + round((self.due - now) * 1000)


async def run_backups(schedule: BackupSchedule, *, interval_s: Callable[[], float],
                      backup: Callable[[], Awaitable[object]], stop: trio.Event) -> None:
    """Back up every `interval_s()` after the previous backup finished, until `stop` is set."""
    try:
        while True:
            with trio.move_on_at(schedule.arm(trio.current_time(), interval_s())):
                await stop.wait()
                return
            await backup()
    finally:
        schedule.due = None
