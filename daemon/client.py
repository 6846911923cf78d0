"""The one client of the daemon's control API: where the daemon is, how to reach it, and what
its answers mean — for the CLI (synchronous `DaemonClient`), and the TUI and the MCP server
(asynchronous `ApiClient`; the TUI's typed reads are `tui.client.TuiClient`).

Both decode every answer the same way (`decode`) and raise the same errors, which are
`DaemonError`s so the CLI's exit codes hold: `Unreachable` (no daemon answered: retry later),
`Refused` (a 4xx, with the daemon's reason; `NotFoundRefused` for a 404, also a `NotFound`)
and `BadResponse` (a 5xx, or an answer that is not JSON). An `Endpoint` is a data dir (its
run.json names the socket, re-read on every reconnect, so a restarted daemon is found), a socket
path, or a URL with a bearer token (never in a repr or a log).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from daemon.datadir import DataDir
from daemon.errors import DaemonError, NotFound, UsageError
from daemon.grimoire.fields import format_errors
from daemon.presence import pid_alive

__all__ = [
    "ApiClient",
    "ApiError",
    "BadResponse",
    "DaemonClient",
    "Endpoint",
    "NotFoundRefused",
    "Refused",
    "TransportFactory",
    "Unreachable",
    "daemon_is_live",
    "decode",
    "detail_of",
    "find_socket",
]


class ApiError(DaemonError):
    """The root of the errors about talking to the daemon."""


class Unreachable(ApiError):
    """No daemon answered (not running, socket gone, connection dropped)."""


class Refused(ApiError, UsageError):
    """The daemon refused the request (4xx); the message is its `detail`."""


class NotFoundRefused(Refused, NotFound):
    """The daemon answered 404: what the request named does not exist."""


class BadResponse(ApiError):
    """The daemon failed (5xx) or answered something that is not the documented response."""


def find_socket(data: DataDir) -> Path | None:
    """The unix socket of the live daemon serving `data` (from `$DATA/run.json`), else None.

    None when run.json is missing or unreadable, its pid is gone, or the socket file is absent.
    """
    try:
        info = json.loads(data.run_path.read_text())
        pid, path = int(info["pid"]), Path(info["socket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if pid_alive(pid) and path.exists() else None


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


def refuse_beside_daemon(data: DataDir, what: str) -> None:
    """Raise `UsageError` when a daemon owns `data` (`daemon_is_live`): `what` (e.g. "rebuilding
    the vectors") writes the store behind the daemon's back, which would leave its in-memory
    state (the vector index, the clock, the caches) wrong."""
    if daemon_is_live(data):
        raise UsageError(f"a daemon is running on {data.root}; stop it (systemctl stop clade, or Ctrl-C on "
                         f"`clade run`) before {what}")


def detail_of(doc: Any) -> str:
    """The reason in an error body (`{error, detail}`), pydantic's errors said as the CLI says them."""
    if isinstance(doc, dict) and "detail" in doc:
        detail = doc["detail"]
        if isinstance(detail, list):
            if all(isinstance(d, dict) for d in detail):
                return format_errors(detail)
            return "; ".join(str(d) for d in detail)
        return str(detail)
    return str(doc)[:200]


def decode(res: httpx.Response) -> Any:
    """The JSON of a 2xx/3xx answer; else the error it stands for."""
    try:
        doc = res.json()
    except ValueError:
        raise BadResponse(f"the daemon sent a {res.status_code} that is not JSON: {res.text[:200]!r}") from None
    if res.status_code >= 500:
        raise BadResponse(f"the daemon failed: {detail_of(doc)}")
    if res.status_code == 404:
        raise NotFoundRefused(detail_of(doc))
    if res.status_code >= 400:
        raise Refused(detail_of(doc))
    return doc


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the daemon is: a data dir, a socket path, or a URL with a token."""

    data_dir: Path | None = None
    socket: Path | None = None
    url: str | None = None
    token: str | None = field(default=None, repr=False)  # never in a repr, a log or a traceback

    def describe(self) -> str:
        if self.url:
            return self.url
        if self.socket:
            return str(self.socket)
        return f"the daemon of {self.data_dir}"

    def _resolved(self) -> tuple[Path | None, str, dict[str, str]]:
        """(socket or None for the URL, base URL, headers); raises `Unreachable`."""
        if self.url:
            headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
            return None, self.url.rstrip("/"), headers
        path = self.socket
        if path is None and self.data_dir is not None:
            path = find_socket(DataDir(self.data_dir))
            if path is None:
                raise Unreachable(f"no daemon runs on {self.data_dir} (no live run.json)")
        if path is None:
            raise Unreachable("no daemon named: give --data-dir, --socket or --url")
        return path, "http://clade", {}

    def transport(self) -> tuple[httpx.AsyncBaseTransport, str, dict[str, str]]:
        """(async transport, base URL, headers) for a new connection; raises `Unreachable`."""
        path, base, headers = self._resolved()
        return (httpx.AsyncHTTPTransport() if path is None else httpx.AsyncHTTPTransport(uds=str(path))), base, headers

    def sync_transport(self) -> tuple[httpx.BaseTransport, str, dict[str, str]]:
        """(transport, base URL, headers) for a new synchronous connection; raises `Unreachable`."""
        path, base, headers = self._resolved()
        if path is not None and not path.exists():  # checked first: httpcore leaks a failed unix connect
            raise Unreachable(f"cannot reach the daemon on {path}: no such socket; is it running?")
        return (httpx.HTTPTransport() if path is None else httpx.HTTPTransport(uds=str(path))), base, headers

    def http_client(self, *, timeout_s: float | None = 120.0) -> httpx.Client:
        """A new synchronous httpx client on this endpoint, undecoded (the caller closes it): for
        callers that read statuses or streams themselves (the test harness, the benches).
        `timeout_s` None waits forever (an event stream). Raises `Unreachable`."""
        transport, base, headers = self.sync_transport()
        return httpx.Client(transport=transport, base_url=base, headers=headers, timeout=timeout_s)

    def async_http_client(self, *, timeout_s: float | None = 120.0,
                          connections: int | None = None) -> httpx.AsyncClient:
        """A new asynchronous httpx client on this endpoint, undecoded (the caller closes it);
        `connections` caps its pool (and its kept-alive connections) when given. Raises `Unreachable`."""
        path, base, headers = self._resolved()
        limits = (httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
                  if connections is not None else httpx.Limits())
        transport = (httpx.AsyncHTTPTransport(limits=limits) if path is None
                     else httpx.AsyncHTTPTransport(uds=str(path), limits=limits))
        return httpx.AsyncClient(transport=transport, base_url=base, headers=headers, timeout=timeout_s)


TransportFactory = Callable[[], tuple[httpx.AsyncBaseTransport, str, dict[str, str]]]


class DaemonClient:
    """Synchronous calls to the control API (the CLI's); every failure is an `ApiError`.

    Reusable: any number of calls. Used as a context manager (`with DaemonClient(...) as c:`)
    it keeps one connection open across the calls and closes it on exit; otherwise (or after
    `close()`) each call opens and closes its own, so a client left unclosed holds nothing.
    """

    def __init__(self, where: Path | Endpoint, *, timeout_s: float = 120.0) -> None:
        self.endpoint = where if isinstance(where, Endpoint) else Endpoint(socket=where)
        self._timeout = timeout_s
        self._client: httpx.Client | None = None  # held only inside `with`

    @property
    def socket(self) -> Path | None:
        return self.endpoint.socket

    def _open(self) -> httpx.Client:
        return self.endpoint.http_client(timeout_s=self._timeout)

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
        try:
            if self._client is not None:
                res = self._client.request(method, path, **kwargs)
            else:
                with self._open() as client:
                    res = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Unreachable(f"cannot reach the daemon on {self.endpoint.describe()}: {exc}; is it running?") from None
        return decode(res)


class ApiClient:
    """Asynchronous calls to the control API (the TUI's and `clade mcp`'s). `transport` makes a
    fresh connection (tests pass a `httpx.MockTransport` factory); the connection is rebuilt
    after any transport failure."""

    def __init__(self, transport: TransportFactory, *, timeout_s: float = 10.0) -> None:
        self._factory = transport
        self._timeout = timeout_s
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def for_endpoint(cls, endpoint: Endpoint, *, timeout_s: float = 10.0) -> ApiClient:
        return cls(endpoint.transport, timeout_s=timeout_s)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            transport, base, headers = self._factory()
            self._client = httpx.AsyncClient(transport=transport, base_url=base, headers=headers,
                                             timeout=self._timeout)
        return self._client

    async def reset(self) -> None:
        """Drop the connection (the next call resolves the endpoint again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def aclose(self) -> None:
        await self.reset()

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        """One request (`kw` as for httpx: `json=`, `params=`); its JSON answer. Raises
        `Unreachable`, `Refused` (4xx, the API's message) or `BadResponse` (5xx, not JSON)."""
        try:
            res = await self._http().request(method, path, **kw)
        except httpx.HTTPError as exc:
            await self.reset()
            raise Unreachable(f"{method} {path}: {exc or type(exc).__name__}") from None
        try:
            return decode(res)
        except BadResponse as exc:
            raise BadResponse(f"{method} {path}: {exc}") from None
