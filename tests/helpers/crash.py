"""Killing a child process mid-write (SIGKILL) and reading what it had acknowledged."""

from __future__ import annotations

import random
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.helpers import procs

LINE_TIMEOUT = 30.0


class Child(procs.Child):
    """A `procs.Child` to SIGKILL mid-write, used as a context manager: only its complete stdout
    lines count (a line cut short by the kill was never acknowledged)."""

    timeout = LINE_TIMEOUT
    complete_lines_only = True

    def __init__(self, script: str, *args: str, stderr_path: Path) -> None:
        self._stack = ExitStack()
        super().__init__(self._stack, script, *args, stderr_path=stderr_path)

    def kill(self) -> list[str]:
        """SIGKILL the child; returns the complete lines it printed that were not yet read."""
        self.proc.kill()
        code = self.proc.wait(timeout=LINE_TIMEOUT)
        assert code == -signal.SIGKILL, f"child had already exited with {code}; stderr:\n{self.stderr()}"
        return self.rest()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def run_until_killed(
    child: Child, rng: random.Random, iteration: int, *, max_lines: int = 200, max_delay: float = 0.15
) -> list[str]:
    """Wait for "ready", let the child write, SIGKILL it; returns every acknowledged line.

    Even iterations kill right after a random number of acknowledged lines (the child is
    then somewhere inside its next transaction); odd ones after a random delay, so the
    kill lands at an arbitrary point in time.
    """
    assert child.line() == "ready"
    acked: list[str] = []
    if iteration % 2 == 0:
        wanted = rng.randint(1, max_lines)
        while len(acked) < wanted:
            acked.append(child.line())
    else:
        delay = rng.uniform(0.0, max_delay)
        # Not synchronisation: the random kill point. The child must still be writing.
        with pytest.raises(subprocess.TimeoutExpired):
            child.proc.wait(timeout=delay)
    return acked + child.kill()
