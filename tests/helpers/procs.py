"""A Python child process for multi-process tests: stdout lines on a queue, read with a timeout."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0


class Child:
    """A Python child whose stdout lines arrive on a queue, read with a timeout.

    `stack` reaps it at its close (killed if still running, pipes and stderr file closed)."""

    timeout = TIMEOUT
    complete_lines_only = False  # drop a last line the child did not finish (with "\n")

    def __init__(self, stack: ExitStack, script: str, *args: str, stderr_path: Path) -> None:
        self._stderr_path = stderr_path
        self._stderr = stack.enter_context(stderr_path.open("wb"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        stack.callback(self._reap)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.endswith(b"\n") or not self.complete_lines_only:
                self._lines.put(raw.decode().rstrip("\n"))
        self._lines.put(None)

    def _reap(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=self.timeout)
        self._pump.join(timeout=self.timeout)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return self._stderr_path.read_text(errors="replace")

    def line(self, timeout: float | None = None) -> str:
        """The next stdout line; fails the test on timeout (default `self.timeout`) or early exit."""
        timeout = self.timeout if timeout is None else timeout
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child printed nothing for {timeout}s; stderr:\n{self.stderr()}") from None
        if item is None:
            raise AssertionError(f"child exited early (code {self.proc.wait()}); stderr:\n{self.stderr()}")
        return item

    def lines_until(self, marker: str) -> list[str]:
        """Every line before `marker` (which is consumed)."""
        out = []
        while (line := self.line()) != marker:
            out.append(line)
        return out

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def finish(self) -> tuple[int, str]:
        """Wait for a clean exit; (exit code, stderr)."""
        code = self.proc.wait(timeout=self.timeout)
        return code, self.stderr()

    def rest(self) -> list[str]:
        """The lines printed after the last one read (call once the child has exited)."""
        self._pump.join(timeout=self.timeout)
        assert not self._pump.is_alive()
        out = []
        while (item := self._lines.get_nowait()) is not None:
            out.append(item)
        return out


def gone(pid: int) -> bool:
    """Whether process `pid` has exited (reaped, or a zombie nobody has reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True
