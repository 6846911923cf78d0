"""The daemon's one clock: wall-clock milliseconds that move with trio's clock.

Every service, route and the store's hybrid logical clock read `Clock.now_ms` (handed to them
as a `Callable[[], int]`); pure library code takes `now_ms` as an argument. The reading is the
wall clock plus how far trio's clock has moved beyond real time since the clock was made:

    now_ms = wall_ms() + ((trio_now - trio_at_start) - (real_now - real_at_start)) * 1000

Under trio's `SystemClock` (a real daemon) trio time is real (monotonic) time, so the second
term is 0 and `now_ms` is the wall clock itself: it follows NTP and a machine's suspend, which
an anchored "start + elapsed monotonic time" would not. Under a `trio.testing.MockClock` the
trio clock jumps while real time barely moves, and `now_ms` jumps with it: a test waits hours
of daemon time (retention, schedules, decay) in milliseconds, with no sleep on wall time.

Reading it is thread-safe: the store's worker threads call `now_ms` too (trio's clocks read
`perf_counter` plus an offset, or a virtual base, without the run loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

__all__ = ["Clock"]


class Clock:
    """Wall-clock ms moved by trio's clock (the module's rule). Make it with `Clock.of_trio()`
    inside `trio.run`, or give the trio clock (any `trio.abc.Clock`) and the wall clock."""

    def __init__(self, trio_clock: trio.abc.Clock, *, wall_ms: Callable[[], int] | None = None,
                 real_s: Callable[[], float] = time.perf_counter) -> None:
        self._trio = trio_clock
        self._wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self._real_s = real_s
        self._trio_at_start = trio_clock.current_time()
        self._real_at_start = real_s()
        self.started_ms = self.now_ms()

    @classmethod
    def of_trio(cls) -> Clock:
        """The clock of the running trio loop (raises `RuntimeError` outside `trio.run`)."""
        return cls(trio.lowlevel.current_clock())

    def moved_s(self) -> float:
        """How far trio's clock has moved beyond real time since this clock was made (0 under
        trio's own clock; what a `MockClock` jumped)."""
        return (self._trio.current_time() - self._trio_at_start) - (self._real_s() - self._real_at_start)

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, as the daemon sees them."""
        return self._wall_ms() + round(self.moved_s() * 1000)

    def uptime_s(self) -> float:
        """Seconds since this clock was made, on the same clock."""
        return (self.now_ms() - self.started_ms) / 1000
