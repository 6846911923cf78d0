"""A fake systemd `$NOTIFY_SOCKET`: a unix datagram socket whose messages a thread collects.

Give its `path` to a daemon as `NOTIFY_SOCKET`; `wait_for` then awaits the next `KEY=value`
notification (in order: a second `wait_for("READY", "1")` waits for a second READY=1), and
`first_at`/`times` give when they came (time.perf_counter) for benchmarks.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["NotifySocket"]


class NotifySocket:
    """Collects (perf_counter time, fields) of every datagram sent to `path` until `close()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self._read = 0  # messages before this index were consumed by `wait_for`
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            at = time.perf_counter()
            fields = dict(line.split("=", 1) for line in data.decode(errors="replace").splitlines() if "=" in line)
            with self._cond:
                self.messages.append((at, fields))
                self._cond.notify_all()

    def wait_for(self, key: str, value: str | None = None, *, timeout: float = 30) -> dict[str, str]:
        """The fields of the next unread notification carrying `key` (`=value` if given).

        Raises TimeoutError, naming every notification received, after `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        with self._cond:
            while True:
                for index in range(self._read, len(self.messages)):
                    fields = self.messages[index][1]
                    if key in fields and (value is None or fields[key] == value):
                        self._read = index + 1
                        return fields
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"no {key}={value} notification in {timeout} s; "
                                       f"got {[m for _, m in self.messages]}")
                self._cond.wait(min(left, 0.2))

    def first_at(self, key: str, value: str, *, after: float, timeout: float,
                 alive: Callable[[], bool] | None = None) -> float | None:
        """The perf_counter time of the first `key=value` received at or after `after`, or None
        after `timeout` s (or as soon as `alive()` is false)."""
        deadline = time.perf_counter() + timeout
        with self._cond:
            while True:
                for at, fields in self.messages:
                    if at >= after and fields.get(key) == value:
                        return at
                left = deadline - time.perf_counter()
                if left <= 0 or (alive is not None and not alive()):
                    return None
                self._cond.wait(min(left, 0.2))

    def times(self, key: str, value: str) -> list[float]:
        """When each `key=value` notification came (perf_counter)."""
        with self._cond:
            return [at for at, fields in self.messages if fields.get(key) == value]

    def close(self) -> None:
        self._closed = True
        self._thread.join(timeout=2)
        self.sock.close()
        self.path.unlink(missing_ok=True)
