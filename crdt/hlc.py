"""Hybrid logical clock (Kulkarni et al., "Logical Physical Clocks", 2014).

A timestamp is (physical milliseconds, logical counter). It packs into one 64-bit integer
(48 bits of ms, 16 of counter) that sorts like the pair, which is how the store keeps it.
The wall clock is injected so the clock is pure and testable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import InvalidValue

__all__ = ["MAX_COUNTER", "MAX_MS", "HybridClock", "Timestamp"]

MAX_MS = (1 << 48) - 1
MAX_COUNTER = (1 << 16) - 1


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """One HLC reading; orders by (ms, counter)."""

    ms: int
    counter: int = 0

    def __post_init__(self) -> None:
        if type(self.ms) is not int or not 0 <= self.ms <= MAX_MS:
            raise InvalidValue("hlc.ms", f"must be an int in 0..{MAX_MS}, got {self.ms!r}")
        if type(self.counter) is not int or not 0 <= self.counter <= MAX_COUNTER:
            raise InvalidValue(
                "hlc.counter", f"must be an int in 0..{MAX_COUNTER}, got {self.counter!r}"
            )

    def pack(self) -> int:
        """The 64-bit integer form; `unpack(t.pack()) == t` and packing preserves order."""
        return (self.ms << 16) | self.counter

    @classmethod
    def unpack_trusted(cls, value: int) -> Timestamp:
        """`unpack` of a value this replica packed or checked itself (its own store): no checks."""
        stamp = object.__new__(cls)
        object.__setattr__(stamp, "ms", value >> 16)
        object.__setattr__(stamp, "counter", value & MAX_COUNTER)
        return stamp

    @classmethod
    def unpack(cls, value: int) -> Timestamp:
        """Inverse of `pack`; raises `InvalidValue` for a negative or over-wide integer."""
        if type(value) is not int or not 0 <= value < (1 << 64):
            raise InvalidValue("hlc", f"packed timestamp must be a 64-bit unsigned int, got {value!r}")
        # Any 64-bit value splits into an ms below 2**48 and a counter below 2**16: nothing left to check.
        return cls.unpack_trusted(value)

    def __str__(self) -> str:
        return f"{self.ms}.{self.counter}"


class HybridClock:
    """A monotonic hybrid clock over an injected wall clock (milliseconds since the epoch).

    `now()` never returns a value <= any earlier `now()` or `update()` result, even if the
    wall clock steps back. `max_skew_ms` bounds how far ahead of our wall clock a remote
    timestamp may be before `update` refuses it.
    """

    def __init__(
        self,
        wall_ms: Callable[[], int],
        *,
        last: Timestamp | None = None,
        max_skew_ms: int = 60_000,
    ) -> None:
        self._wall_ms = wall_ms
        self._last = last if last is not None else Timestamp(0, 0)
        self.max_skew_ms = max_skew_ms

    @property
    def last(self) -> Timestamp:
        """The latest timestamp issued or observed."""
        return self._last

    def observe(self, seen: Timestamp) -> None:
        """Raise the floor to `seen` without a skew check (for state loaded from disk)."""
        if seen > self._last:
            self._last = seen

    def now(self) -> Timestamp:
        """A fresh timestamp for a local event, strictly greater than every earlier one."""
        wall = self._wall_ms()
        if wall > self._last.ms:
            self._last = Timestamp(wall, 0)
        else:
            self._last = self._successor(self._last)
        return self._last

    def skew_ms(self, remote: Timestamp) -> int:
        """How many ms `remote` is ahead of our wall clock (<= 0 when it is not ahead)."""
        return remote.ms - self._wall_ms()

    def update(self, remote: Timestamp) -> Timestamp:
        """Merge a remote timestamp (on receipt); returns the new local reading.

        Raises `InvalidValue` if `remote` is more than `max_skew_ms` ahead of our wall
        clock; the clock is then unchanged, so a peer with a broken clock cannot drag ours
        into the future.
        """
        wall = self._wall_ms()
        ahead = remote.ms - wall
        if ahead > self.max_skew_ms:
            raise InvalidValue(
                "hlc", f"remote clock is {ahead} ms ahead of ours (limit {self.max_skew_ms} ms)"
            )
        top = max(wall, self._last.ms, remote.ms)
        if top == self._last.ms and top == remote.ms:
            counter = max(self._last.counter, remote.counter) + 1
        elif top == self._last.ms:
            counter = self._last.counter + 1
        elif top == remote.ms:
            counter = remote.counter + 1
        else:
            counter = 0
        self._last = self._at(top, counter)
        return self._last

    @staticmethod
    def _successor(t: Timestamp) -> Timestamp:
        return HybridClock._at(t.ms, t.counter + 1)

    @staticmethod
    def _at(ms: int, counter: int) -> Timestamp:
        # A counter overflow (65,536 events within one ms) borrows the next millisecond:
        # still strictly monotonic, and the borrowed ms is repaid when the wall catches up.
        if counter > MAX_COUNTER:
            return Timestamp(ms + 1, 0)
        return Timestamp(ms, counter)
