"""Start a real `clade run` subprocess for tests; talk to it over its unix socket."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from daemon.datadir import DataDir

CLADE = str(Path(sys.executable).with_name("clade"))


class DaemonProc:
    """A running daemon; `stderr_lines` collects its stderr as it comes."""

    def __init__(self, data: DataDir, *, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.data = data
        self.proc = subprocess.Popen([CLADE, "--data-dir", str(data.root), "run", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **(env or {})})
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.ready = json.loads(self.wait_for('"event": "ready"', timeout=60))
        self.socket = self.ready["socket"]
        self.client = httpx.Client(transport=httpx.HTTPTransport(uds=self.socket), base_url="http://clade",
                                   timeout=60)

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.stderr_lines.append(line)
            self.lines.put(line)

    def wait_for(self, needle: str, *, timeout: float = 30) -> str:
        """The next stderr line containing `needle` (fails after `timeout` s or if the daemon exits)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no stderr line with {needle!r} in {timeout} s: {self.stderr_lines[-20:]}")
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(
                        f"daemon exited ({self.proc.returncode}): {self.stderr_lines[-20:]}") from None
                continue
            if needle in line:
                return line

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.client.request(method, path, **kw)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 20) -> int:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()


class NotifySocket:
    """A fake systemd notify socket: a unix datagram socket collecting messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.messages: list[tuple[float, dict[str, str]]] = []

    def wait_for(self, key: str, value: str | None = None, *, timeout: float = 30) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                break
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append((time.monotonic(), fields))
            if key in fields and (value is None or fields[key] == value):
                return fields
        raise AssertionError(f"no {key}={value} notification in {timeout} s; got {[m for _, m in self.messages]}")

    def close(self) -> None:
        self.sock.close()
