"""Multi-daemon tests: waiting until a condition holds, writing on a golem, the ids it holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from daemon.testing.harness import Golem


def eventually(check: Callable[[], Any], *, timeout: float = 30, what: str = "condition",
               state: Callable[[], Any] | None = None) -> Any:
    """Poll `check` until it returns a truthy value (or fail after `timeout` s, showing `state()`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                                 + (f"; state: {state()}" if state is not None else ""))
        time.sleep(0.05)


def write(golem: Golem, content: str, kind: str = "warning", **extra: Any) -> str:
    return str(golem.call("POST", "/v1/memory", json={"content": content, "memory_type": kind, **extra})["id"])


def ids_on(golem: Golem) -> set[str]:
    return {e["id"] for e in golem.call("GET", "/v1/entries", params={"limit": 10_000})["entries"]}
