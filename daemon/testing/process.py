"""One real `clade run` child process, for tests, benchmarks and `clade demo`.

`DaemonProcess` starts `clade --data-dir D run ARGS` (the venv's console script, so a
PYTHONPATH checkout runs its own code), collects stderr line by line on a thread, waits for log
lines with a timeout (`wait_for`; the ready line names the control socket), talks to the
control API over that unix socket (clients from `daemon.client.Endpoint`; `request` gives the
response, `call` its JSON and raises on an error status), and stops it cleanly (`stop`: the
signal, a wait, then SIGKILL if it hangs). Every error names the daemon and ends with the last
lines of its stderr.
`DaemonProc` is the same, started by its constructor on loopback (the tests' form).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from daemon.client import Endpoint, Unreachable
from daemon.datadir import DataDir

from .notify import NotifySocket

__all__ = ["CLADE", "LOOPBACK_ENV", "DaemonExited", "DaemonProc", "DaemonProcess"]

CLADE = str(Path(sys.executable).with_name("clade"))

# systemd variables a test's own environment may carry; a child gets them only when asked.
_SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "RUNTIME_DIRECTORY")


class DaemonExited(RuntimeError):
    """The daemon exited while something waited for it."""


class DaemonProcess:
    """One `clade run` process (not started until `spawn`/`start`; restartable after `stop`)."""

    def __init__(self, data: DataDir | Path, *, name: str = "daemon", client_timeout: float = 120) -> None:
        self.data = data if isinstance(data, DataDir) else DataDir(data)
        self.name = name
        self.client_timeout = client_timeout
        self.proc: subprocess.Popen[bytes] | None = None  # None when not started, or stopped
        self.returncode: int | None = None  # of the last run `stop` ended
        self.stderr_lines: list[str] = []
        self.ready: dict[str, Any] = {}
        self.socket = ""
        self.spawned_at = 0.0  # time.perf_counter() at Popen
        self.ready_line_at: float | None = None  # time.perf_counter() when the ready line came
        self._lines: queue.Queue[str] = queue.Queue()
        self._pump: threading.Thread | None = None
        self._client: httpx.Client | None = None

    # -- starting ---------------------------------------------------------------------------------

    def spawn(self, args: Sequence[str] = (), env: dict[str, str] | None = None, *,
              notify: NotifySocket | None = None) -> None:
        """Start the process and return at once (`wait_ready` waits for it). `env` is added to
        this process's environment, without its systemd variables unless `env` or `notify`
        sets them."""
        self.close_client()
        self.stderr_lines = []
        self.ready = {}
        self.socket = ""
        self.ready_line_at = None
        self._lines = queue.Queue()
        full_env = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_ENV}
        if notify is not None:
            full_env["NOTIFY_SOCKET"] = str(notify.path)
        full_env.update(env or {})
        self.spawned_at = time.perf_counter()
        self.proc = subprocess.Popen([CLADE, "--data-dir", str(self.data.root), "run", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=full_env)
        self._pump = threading.Thread(target=self._read_stderr, args=(self.proc,), daemon=True)
        self._pump.start()

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            if self.ready_line_at is None and '"event": "ready"' in line:
                self.ready_line_at = time.perf_counter()
            self.stderr_lines.append(line)
            self._lines.put(line)

    def wait_ready(self, timeout: float = 60) -> dict[str, Any]:
        """The daemon's ready line (a JSON object naming its control `socket`), once it came."""
        self.ready = json.loads(self.wait_for('"event": "ready"', timeout=timeout))
        if self.proc is not None and self.ready.get("pid") not in (None, self.proc.pid):
            raise DaemonExited(f"{self.name}: the ready line names pid {self.ready.get('pid')}, "
                               f"the child is {self.proc.pid}")
        self.socket = str(self.ready["socket"])
        return self.ready

    def start(self, args: Sequence[str] = (), env: dict[str, str] | None = None, *,
              notify: NotifySocket | None = None, timeout: float = 60) -> DaemonProcess:
        """`spawn`, then `wait_ready`."""
        self.spawn(args, env, notify=notify)
        self.wait_ready(timeout)
        return self

    # -- watching ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    def stderr_tail(self, n: int = 20) -> list[str]:
        return self.stderr_lines[-n:]

    def wait_for(self, needle: str, *, timeout: float = 30) -> str:
        """The next stderr line containing `needle`. Raises TimeoutError after `timeout` s, and
        DaemonExited as soon as the daemon exits without printing it."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name}: no stderr line with {needle!r} in {timeout} s; "
                                   f"last lines: {self.stderr_tail()}")
            try:
                line = self._lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc is not None and self.proc.poll() is not None and self._lines.empty():
                    raise DaemonExited(f"{self.name} exited ({self.proc.returncode}) before a line with "
                                       f"{needle!r}; last lines: {self.stderr_tail()}") from None
                continue
            if needle in line:
                return line

    def log_problems(self) -> list[str]:
        """Stderr lines at level error/critical, and tracebacks."""
        bad = []
        for line in self.stderr_lines:
            try:
                level = json.loads(line).get("level", "")
            except (ValueError, AttributeError):
                level = "error" if "Traceback" in line else ""
            if level in ("error", "critical"):
                bad.append(line[:400])
        return bad

    # -- the control API --------------------------------------------------------------------------

    @property
    def client(self) -> httpx.Client:
        """This run's kept client on the control socket (closed by `stop` or a restart)."""
        if self._client is None:  # one client per run (a new one costs ~38 ms of CPU)
            self._client = self.open_client()
        return self._client

    def open_client(self, timeout: float | None = None) -> httpx.Client:
        """A new client on the control socket (the caller closes it). DaemonExited when there is
        no socket (not ready yet, or gone: the daemon exited)."""
        if not self.socket:
            raise DaemonExited(f"{self.name} is not ready (no control socket yet)")
        try:
            return Endpoint(socket=Path(self.socket)).http_client(
                timeout_s=self.client_timeout if timeout is None else timeout)
        except Unreachable as exc:
            raise DaemonExited(f"{self.name}: {exc}; last lines: {self.stderr_tail(5)}") from None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request on this run's kept client. A GET whose kept-alive connection the server
        closed while idle (its keep-alive timeout) is sent once more, on a new connection."""
        client = self.client
        try:
            return client.request(method, path, **kwargs)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            if method != "GET" or not self.running:
                raise
            return client.request(method, path, **kwargs)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a request; RuntimeError on a status >= 400."""
        res = self.request(method, path, **kwargs)
        if res.status_code >= 400:
            raise RuntimeError(f"{self.name}: {method} {path} -> {res.status_code} {res.text}")
        return res.json()

    def call_bytes(self, method: str, path: str, content: bytes) -> Any:
        return self.call(method, path, content=content, headers={"content-type": "application/octet-stream"})

    def close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- stopping ---------------------------------------------------------------------------------

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> int | None:
        """Send `sig`, wait up to `timeout` s, SIGKILL if still running; the exit code (None if
        never started; the last run's exit code if already stopped). Raises subprocess.TimeoutExpired
        when it had to be killed."""
        self.close_client()
        if self.proc is None:
            return self.returncode
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            self.returncode = proc.wait(timeout=timeout)
            return self.returncode
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if self._pump is not None:
                self._pump.join(timeout=5)
            if proc.stderr is not None:
                proc.stderr.close()


# A test's daemon listens for peers on a free loopback port, without mDNS, so that daemons of
# tests running side by side (pytest-xdist) neither fight over the default port nor meet.
LOOPBACK_ENV = {"CLADE_P2P__LISTEN": '["/ip4/127.0.0.1/tcp/0"]', "CLADE_P2P__MDNS": "false"}


class DaemonProc(DaemonProcess):
    """A `DaemonProcess` started, and ready, when constructed; on `LOOPBACK_ENV` unless `env`
    (or an `args` --listen) says otherwise."""

    def __init__(self, data: DataDir | Path, *, env: dict[str, str] | None = None, args: Sequence[str] = (),
                 notify: NotifySocket | None = None, timeout: float = 60, name: str = "daemon") -> None:
        super().__init__(data, name=name)
        self.start(args, {**LOOPBACK_ENV, **(env or {})}, notify=notify, timeout=timeout)
