"""The tests' one way to wait for a condition that no event announces: poll it with a timeout.

`eventually` blocks (a test driving a daemon in another process); `eventually_async` awaits
(trio tasks, or a textual pilot: pass its `pause`). Both call `check` until it returns something
truthy and return that; after `timeout` seconds they fail with an `AssertionError` naming
`what`, the last value `check` returned and, when given, `state()` (what the test would want to
see to find out why). Wait on an event or a channel instead wherever one exists.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

__all__ = ["eventually", "eventually_async"]


def eventually(check: Callable[[], Any], *, what: str, timeout: float = 30.0, interval: float = 0.05,
               state: Callable[[], Any] | None = None) -> Any:
    """`check()`'s first truthy value, polled every `interval` s (the module's rule)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, value, state))
        time.sleep(interval)


async def eventually_async(check: Callable[[], Any], *, what: str, timeout: float = 30.0, interval: float = 0.05,
                           pause: Callable[[float], Awaitable[Any]] = trio.sleep,
                           state: Callable[[], Any] | None = None) -> Any:
    """`check()`'s first truthy value (awaited when `check` is a coroutine function), with
    `pause(interval)` between tries: `trio.sleep` by default, a textual `pilot.pause` in the TUI's
    tests. The timeout is on the wall clock (`time.monotonic`), whichever loop runs."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, value, state))
        await pause(interval)


def _timed_out(what: str, timeout: float, last: Any, state: Callable[[], Any] | None) -> str:
    shown = f"timed out after {timeout:g} s waiting for {what} (last: {last!r})"
    return shown + (f"; state: {state()}" if state is not None else "")
