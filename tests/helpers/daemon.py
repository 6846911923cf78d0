"""A real daemon whose control API also listens on TCP (127.0.0.1, a free port) behind a bearer token."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def daemon_over_tcp(data: DataDir, token: str) -> Iterator[tuple[DaemonProc, str]]:
    """`clade run` on `data` with `[api] tcp_port` free and `token`: (the daemon, "127.0.0.1:PORT");
    the daemon must stop with status 0."""
    port = free_port()
    data.config_path.write_text(f'[api]\ntcp_port = {port}\ntoken = "{token}"\n')
    daemon = DaemonProc(data)
    try:
        yield daemon, f"127.0.0.1:{port}"
    finally:
        assert daemon.stop() == 0


def search_by_meaning(daemon: DaemonProc, body: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """`POST /v1/memory/search` until the answer comes by meaning. The model loads on first
    need: a search waits up to 5 s for it, then answers from keywords (`"degraded":
    "keyword_only"`) while the load goes on, which on a machine starved of CPU can take longer."""
    deadline = time.monotonic() + timeout
    while True:
        found: dict[str, Any] = daemon.call("POST", "/v1/memory/search", json=body)
        if found["degraded"] is None:
            return found
        assert found["degraded"] == "keyword_only", found
        assert time.monotonic() < deadline, "the embedding model never loaded"
