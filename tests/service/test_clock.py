"""The daemon's one clock (daemon/service/clock.py): the wall clock under trio's own clock,
moved by a MockClock's jumps in tests, readable from the store's worker threads."""

from __future__ import annotations

import time

import trio
import trio.testing

from daemon.service.clock import Clock


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_under_trios_own_clock_it_reads_the_wall_clock() -> None:
    clock = Clock.of_trio()
    before = _wall_ms()
    now = clock.now_ms()
    assert before - 5 <= now <= _wall_ms() + 5
    assert abs(clock.moved_s()) < 0.005


async def test_a_mock_clock_moves_it_and_nothing_else_does(mock_clock: trio.testing.MockClock) -> None:
    # The wall clock and real time stand still: only the trio clock can move the reading.
    clock = Clock(trio.lowlevel.current_clock(), wall_ms=lambda: 1_700_000_000_000, real_s=lambda: 0.0)
    assert clock.now_ms() == clock.started_ms == 1_700_000_000_000
    mock_clock.jump(3600)
    assert clock.now_ms() == 1_700_000_000_000 + 3_600_000  # an hour of daemon time
    assert clock.uptime_s() >= 3600


async def test_worker_threads_read_the_same_clock(mock_clock: trio.testing.MockClock) -> None:
    clock = Clock.of_trio()
    mock_clock.jump(86_400)  # a day
    from_thread = await trio.to_thread.run_sync(clock.now_ms)
    assert from_thread - clock.started_ms >= 86_400_000 - 5  # (less the real time the reads took: ms)
    assert abs(from_thread - clock.now_ms()) < 1000
