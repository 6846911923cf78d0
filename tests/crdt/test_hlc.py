"""Hybrid logical clock: monotonic under wall-clock steps, bounded remote skew, packing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crdt import HybridClock, InvalidValue, Timestamp
from crdt.hlc import MAX_COUNTER


class Wall:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def test_now_follows_wall_clock() -> None:
    wall = Wall(1_000)
    clock = HybridClock(wall)
    assert clock.now() == Timestamp(1_000, 0)
    wall.ms = 2_000
    assert clock.now() == Timestamp(2_000, 0)


def test_now_is_strictly_monotonic_when_wall_stalls_or_steps_back() -> None:
    wall = Wall(5_000)
    clock = HybridClock(wall)
    a = clock.now()
    b = clock.now()
    wall.ms = 4_000  # NTP step back
    c = clock.now()
    assert a < b < c
    assert c == Timestamp(5_000, 2)


def test_update_takes_remote_ahead_within_skew() -> None:
    clock = HybridClock(Wall(1_000), max_skew_ms=500)
    merged = clock.update(Timestamp(1_400, 7))
    assert merged == Timestamp(1_400, 8)
    assert clock.now() > merged


def test_update_refuses_far_future_and_keeps_state() -> None:
    clock = HybridClock(Wall(1_000), max_skew_ms=500)
    before = clock.now()
    with pytest.raises(InvalidValue, match="1501 ms ahead"):
        clock.update(Timestamp(2_501, 0))
    assert clock.last == before
    assert clock.skew_ms(Timestamp(2_501, 0)) == 1_501
    assert clock.skew_ms(Timestamp(10, 0)) < 0


def test_counter_overflow_borrows_next_millisecond() -> None:
    clock = HybridClock(Wall(10), last=Timestamp(10, MAX_COUNTER))
    assert clock.now() == Timestamp(11, 0)


def test_observe_raises_floor() -> None:
    clock = HybridClock(Wall(10))
    clock.observe(Timestamp(99, 3))
    assert clock.now() == Timestamp(99, 4)


@given(st.integers(0, (1 << 48) - 1), st.integers(0, MAX_COUNTER))
def test_pack_round_trip(ms: int, counter: int) -> None:
    t = Timestamp(ms, counter)
    assert Timestamp.unpack(t.pack()) == t


@given(st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, MAX_COUNTER)), min_size=2, max_size=20))
def test_packing_preserves_order(pairs: list[tuple[int, int]]) -> None:
    stamps = [Timestamp(ms, c) for ms, c in pairs]
    assert sorted(stamps) == sorted(stamps, key=lambda t: t.pack())


@given(st.lists(st.one_of(st.tuples(st.just("now"), st.integers(0, 10_000)),
                          st.tuples(st.just("update"), st.integers(0, 10_000))), max_size=50))
def test_every_reading_exceeds_the_previous(events: list[tuple[str, int]]) -> None:
    wall = Wall(5_000)
    clock = HybridClock(wall, max_skew_ms=10_000)
    last = Timestamp(0, 0)
    for op, value in events:
        if op == "now":
            wall.ms = value
            reading = clock.now()
        else:
            reading = clock.update(Timestamp(value, 0))
        assert reading > last
        last = reading


@pytest.mark.parametrize("bad", [-1, 1 << 64, "12"])
def test_unpack_rejects_garbage(bad: object) -> None:
    with pytest.raises(InvalidValue):
        Timestamp.unpack(bad)  # type: ignore[arg-type]
