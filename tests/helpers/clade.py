"""Multi-daemon tests: a running loopback clade, waiting for a condition, writing on a golem, the ids it holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daemon.testing.harness import Golem, LoopbackClade


@contextmanager
def running_clade(root: Path, n: int) -> Iterator[LoopbackClade]:
    """A `LoopbackClade` of `n` golems under `root`, all started and connected; stopped at the end."""
    clade = LoopbackClade(root, n)
    try:
        clade.start_all()
        yield clade
    finally:
        clade.close()


def write(golem: Golem, content: str, kind: str = "warning", **extra: Any) -> str:
    return str(golem.call("POST", "/v1/memory", json={"content": content, "memory_type": kind, **extra})["id"])


def ids_on(golem: Golem) -> set[str]:
    return {e["id"] for e in golem.call("GET", "/v1/entries", params={"limit": 10_000})["entries"]}
