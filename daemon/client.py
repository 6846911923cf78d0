"""Talk to a running daemon over its unix socket (found through `$DATA/run.json`).

The CLI uses this when a daemon holds the data dir, so writes go through the daemon's
single writer and recall uses its already-loaded model; API errors come back as the same
`UsageError`/`NotFound`/`DaemonError` the direct path raises, so output and exit codes are
identical either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

from daemon.datadir import DataDir
from daemon.errors import DaemonError, NotFound, UsageError
from daemon.grimoire.fields import format_errors

__all__ = ["DaemonClient", "find_socket"]


def find_socket(data: DataDir) -> Path | None:
    """The unix socket of the live daemon serving `data` (from `$DATA/run.json`), else None.

    None when run.json is missing or unreadable, its pid is gone, or the socket file is absent.
    """
    try:
        info = json.loads(data.run_path.read_text())
        pid, socket = int(info["pid"]), Path(info["socket"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return socket if socket.exists() else None


class DaemonClient:
    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._client = httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://clade",
                                    timeout=120)

    @classmethod
    def for_data_dir(cls, data: DataDir) -> DaemonClient | None:
        """A client if a live daemon serves this data dir, else None (use the store directly)."""
        if os.environ.get("CLADE_NO_DAEMON"):
            return None
        socket = find_socket(data)
        return None if socket is None else cls(socket)

    def call(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None) -> Any:
        return self._request(method, path, json=body, params=params)

    def call_bytes(self, method: str, path: str, content: bytes) -> Any:
        """Send a raw body (application/octet-stream)."""
        return self._request(method, path, content=content, headers={"content-type": "application/octet-stream"})

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            res = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DaemonError(f"cannot reach the daemon on {self.socket}: {exc}; is it running?") from None
        finally:
            self._client.close()
        if res.status_code < 400:
            return res.json()
        try:
            detail = res.json().get("detail")
        except ValueError:
            detail = res.text
        if isinstance(detail, list):  # pydantic errors: loc + msg
            detail = format_errors(detail)
        if res.status_code == 404:
            raise NotFound(str(detail))
        if res.status_code < 500:
            raise UsageError(str(detail))
        raise DaemonError(f"the daemon failed: {detail}")
