"""Talk to a running daemon over its unix socket (found through `$DATA/run.json`).

The CLI uses this when a daemon holds the data dir, so writes go through the daemon's
single writer and recall uses its already-loaded model; API errors come back as the same
`UsageError`/`NotFound`/`DaemonError` the direct path raises, so output and exit codes are
identical either way.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import httpx

from daemon.datadir import DataDir
from daemon.errors import DaemonError, NotFound, UsageError
from daemon.grimoire.fields import format_errors
from daemon.presence import pid_alive

__all__ = ["DaemonClient", "daemon_is_live", "find_socket"]


def find_socket(data: DataDir) -> Path | None:
    """The unix socket of the live daemon serving `data` (from `$DATA/run.json`), else None.

    None when run.json is missing or unreadable, its pid is gone, or the socket file is absent.
    """
    try:
        info = json.loads(data.run_path.read_text())
        pid, socket = int(info["pid"]), Path(info["socket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return socket if pid_alive(pid) and socket.exists() else None


def daemon_is_live(data: DataDir, *, timeout_s: float = 2.0) -> bool:
    """True if a daemon answers on the socket named by `$DATA/run.json` (a connect succeeds).

    The liveness probe for commands that must not run beside a daemon; it ignores
    `CLADE_NO_DAEMON` (that only routes commands around the daemon) and closes what it opens.
    """
    path = find_socket(data)
    if path is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout_s)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class DaemonClient:
    """Calls to the daemon's control API on its unix socket; every failure is a `DaemonError`
    (`UsageError`/`NotFound` for 4xx answers, as the direct path raises).

    Reusable: any number of calls. Used as a context manager (`with DaemonClient(...) as c:`)
    it keeps one connection open across the calls and closes it on exit; otherwise (or after
    `close()`) each call opens and closes its own, so a client left unclosed holds nothing.
    """

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._client: httpx.Client | None = None  # held only inside `with`

    def _open(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://clade",
                            timeout=120)

    def __enter__(self) -> DaemonClient:
        if self._client is None:
            self._client = self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the held connection (if any); later calls open their own."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    @classmethod
    def for_data_dir(cls, data: DataDir) -> DaemonClient | None:
        """A client if a live daemon serves this data dir, else None (use the store directly).

        None also when `CLADE_NO_DAEMON` is set: not a liveness probe (see `daemon_is_live`)."""
        if os.environ.get("CLADE_NO_DAEMON"):
            return None
        path = find_socket(data)
        return None if path is None else cls(path)

    def call(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None) -> Any:
        return self._request(method, path, json=body, params=params)

    def call_bytes(self, method: str, path: str, content: bytes) -> Any:
        """Send a raw body (application/octet-stream)."""
        return self._request(method, path, content=content, headers={"content-type": "application/octet-stream"})

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        if not self.socket.exists():  # checked first: httpcore leaks the socket of a failed unix connect
            raise DaemonError(f"cannot reach the daemon on {self.socket}: no such socket; is it running?")
        try:
            if self._client is not None:
                res = self._client.request(method, path, **kwargs)
            else:
                with self._open() as client:
                    res = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DaemonError(f"cannot reach the daemon on {self.socket}: {exc}; is it running?") from None
        if res.status_code < 400:
            try:
                return res.json()
            except ValueError:
                raise DaemonError(f"the daemon sent a {res.status_code} that is not JSON: {res.text[:200]!r}") from None
        try:
            payload = res.json()
        except ValueError:
            payload = None
        detail = payload.get("detail") if isinstance(payload, dict) else res.text
        if isinstance(detail, list):  # pydantic errors: loc + msg
            detail = format_errors(detail)
        if res.status_code == 404:
            raise NotFound(str(detail))
        if res.status_code < 500:
            raise UsageError(str(detail))
        raise DaemonError(f"the daemon failed: {detail}")
