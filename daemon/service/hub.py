"""The event hub: what `GET /v1/events` streams and the metrics observe.

`publish` counts every event (`event_<name>`), hands it synchronously to each observer
(daemon/metrics: histograms; an observer must not raise), then to each subscriber's buffer
without waiting: a subscriber whose buffer is full misses that event (`events_dropped`), one
that went away is forgotten. The payloads more than one caller builds are in events.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

__all__ = ["SUBSCRIBER_BUFFER", "Event", "EventHub"]

Event = tuple[str, dict[str, Any]]
SUBSCRIBER_BUFFER = 256  # events a subscriber may lag behind before it misses some


class EventHub:
    """Publish/subscribe for the daemon's events, counted in the daemon's `counters`."""

    def __init__(self, counters: Counter[str]) -> None:
        self.counters = counters
        # Called with every published event, synchronously (daemon/metrics: histograms); must not raise.
        self.observers: list[Callable[[str, dict[str, Any]], None]] = []
        self._subscribers: set[trio.MemorySendChannel[Event]] = set()

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to every subscriber; a subscriber that lags is dropped from this one."""
        self.counters[f"event_{event}"] += 1
        for observe in self.observers:
            observe(event, data)
        for send in list(self._subscribers):
            try:
                send.send_nowait((event, data))
            except trio.WouldBlock:
                self.counters["events_dropped"] += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.discard(send)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[trio.MemoryReceiveChannel[Event]]:
        """A channel of every event published while the context is open (`SUBSCRIBER_BUFFER` deep)."""
        send, receive = trio.open_memory_channel[Event](SUBSCRIBER_BUFFER)
        self._subscribers.add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
