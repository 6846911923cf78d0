"""ReplayGuard: every envelope of the window is refused a second time however many there are;
forgetting those sent before the window costs O(1) a check amortised, within twice a window's
traffic of memory."""

from __future__ import annotations

import pytest

from crypto import EnvelopeError, EnvelopeReason, ReplayGuard

NOW = 1_800_000_000_000


def _id(i: int) -> bytes:
    return i.to_bytes(16, "big")


def test_a_busy_window_is_pruned_rarely_and_still_refuses_every_replay() -> None:
    guard = ReplayGuard(window_ms=600_000)
    prunes = 0
    for i in range(5000):  # all within the window: nothing can be forgotten
        seen = guard._seen
        guard.check(_id(i), NOW + i, NOW + i)
        prunes += guard._seen is not seen
    assert prunes <= 4  # past 1024, 2048, 4096 remembered, not on every check past 1024
    assert len(guard._seen) == 5000
    for i in (0, 1, 2500, 4999):
        with pytest.raises(EnvelopeError) as info:
            guard.check(_id(i), NOW + i, NOW + 5000)
        assert info.value.reason is EnvelopeReason.REPLAYED


def test_envelopes_before_the_window_are_forgotten_and_refused_as_stale() -> None:
    guard = ReplayGuard(window_ms=1000)
    for i in range(3000):
        guard.check(_id(i), NOW + i, NOW + i)
    assert len(guard._seen) <= 2 * 1000 + 2  # a window's traffic is ~1000 here
    with pytest.raises(EnvelopeError) as info:
        guard.check(_id(0), NOW, NOW + 3000)
    assert info.value.reason is EnvelopeReason.STALE
    with pytest.raises(EnvelopeError) as info:
        guard.check(_id(2999), NOW + 2999, NOW + 3000)
    assert info.value.reason is EnvelopeReason.REPLAYED
