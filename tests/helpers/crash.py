"""Killing a child process mid-write (SIGKILL) and reading what it had acknowledged."""

from __future__ import annotations

import queue
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINE_TIMEOUT = 30.0


class Child:
    """A Python child whose complete stdout lines arrive on a queue, read with a timeout."""

    def __init__(self, script: str, *args: str, stderr_path: Path) -> None:
        self._stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            # A line cut short by the kill was never acknowledged: drop it.
            if raw.endswith(b"\n"):
                self._lines.put(raw.decode())
        self._lines.put(None)

    def stderr(self) -> str:
        self._stderr.flush()
        return self._stderr_path.read_text(errors="replace")

    def line(self, timeout: float = LINE_TIMEOUT) -> str:
        """The next complete stdout line; fails the test on timeout or early exit."""
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child printed nothing for {timeout}s; stderr:\n{self.stderr()}") from None
        if item is None:
            raise AssertionError(f"child exited early (code {self.proc.wait()}); stderr:\n{self.stderr()}")
        return item.rstrip("\n")

    def kill(self) -> list[str]:
        """SIGKILL the child; returns the complete lines it printed that were not yet read."""
        self.proc.kill()
        code = self.proc.wait(timeout=LINE_TIMEOUT)
        assert code == -signal.SIGKILL, f"child had already exited with {code}; stderr:\n{self.stderr()}"
        self._pump.join(timeout=LINE_TIMEOUT)
        assert not self._pump.is_alive()
        rest: list[str] = []
        while (item := self._lines.get_nowait()) is not None:
            rest.append(item.rstrip("\n"))
        return rest

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=LINE_TIMEOUT)
        self._pump.join(timeout=LINE_TIMEOUT)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self._stderr.close()


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
