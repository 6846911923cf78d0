"""The TUI's only link to the daemon: its control API (httpx over the unix socket, or TCP with
a bearer token) and its event stream. It never opens the store.

Every answer is checked against the daemon's own response models (`daemon.contract.responses`);
anything else — a refused connection, a 5xx, a body that is not the documented shape — comes
out as one of this module's errors, never as a crash: `Unreachable` (retry later),
`Refused` (the daemon said no: 4xx, with its reason) and `BadResponse` (it answered
something unexpected; keep the last good data and say so).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from daemon.client import find_socket
from daemon.contract.responses import (
    BackupOut,
    BackupsOut,
    ConnectOut,
    CuratorOut,
    DisconnectOut,
    DistrustOut,
    EntriesOut,
    EntryDoc,
    ForgetOut,
    KnowledgeStatsOut,
    PeersOut,
    SearchOut,
    StatusOut,
)
from daemon.datadir import DataDir
from daemon.grimoire.fields import format_errors

__all__ = ["ApiClient", "ApiError", "BadResponse", "Endpoint", "PeerView", "Refused", "Snapshot", "Unreachable"]

M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """The root of the TUI's errors about talking to the daemon."""


class Unreachable(ApiError):
    """No daemon answered (not running, socket gone, connection dropped)."""


class Refused(ApiError):
    """The daemon refused the request (4xx); the message is its `detail`."""


class BadResponse(ApiError):
    """The daemon answered something that is not the documented response."""


class PeerView(BaseModel):
    """One record of `GET /v1/peers` (the fields the TUI shows; others ignored)."""

    model_config = ConfigDict(extra="ignore")

    peer_id: str
    addrs: list[str] = []
    connected: bool = False
    member: bool = False
    last_seen: int | None = None
    behind: int | None = None
    ahead: int | None = None
    rtt_ms: float | None = None
    msgs_in: int = 0
    msgs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    refused: str | None = None
    last_sync: int | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One poll of the daemon: everything the main screen shows except the feed."""

    status: StatusOut
    peers: list[PeerView]
    stats: KnowledgeStatsOut | None
    backups: BackupsOut | None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the daemon is: a data dir (its run.json names the socket, re-read on every
    reconnect, so a restarted daemon is found), a socket path, or a URL with a token."""

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

    def transport(self) -> tuple[httpx.AsyncBaseTransport, str, dict[str, str]]:
        """(transport, base URL, headers) for a new connection; raises `Unreachable`."""
        if self.url:
            headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
            return httpx.AsyncHTTPTransport(), self.url.rstrip("/"), headers
        socket = self.socket
        if socket is None and self.data_dir is not None:
            socket = find_socket(DataDir(self.data_dir))
            if socket is None:
                raise Unreachable(f"no daemon runs on {self.data_dir} (no live run.json)")
        if socket is None:
            raise Unreachable("no daemon named: give --data-dir, --socket or --url")
        return httpx.AsyncHTTPTransport(uds=str(socket)), "http://clade", {}


TransportFactory = Callable[[], tuple[httpx.AsyncBaseTransport, str, dict[str, str]]]


class ApiClient:
    """Async calls to the control API. `transport` makes a fresh connection (tests pass a
    `httpx.MockTransport` factory); the client is rebuilt after any transport failure."""

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
        `Unreachable`, `Refused` (4xx, the API's message) or `BadResponse` (5xx, not JSON).
        Also the client of `clade mcp` (daemon/mcp/server.py)."""
        return await self._call(method, path, **kw)

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            res = await self._http().request(method, path, **kw)
        except httpx.HTTPError as exc:
            await self.reset()
            raise Unreachable(f"{method} {path}: {exc or type(exc).__name__}") from None
        try:
            doc = res.json()
        except ValueError:
            raise BadResponse(f"{method} {path}: HTTP {res.status_code}, not JSON") from None
        if res.status_code >= 500:
            raise BadResponse(f"{method} {path}: the daemon failed: {_detail(doc)}")
        if res.status_code >= 400:
            raise Refused(_detail(doc))
        return doc

    async def _typed(self, model: type[M], method: str, path: str, **kw: Any) -> M:
        doc = await self._call(method, path, **kw)
        try:
            return model.model_validate(doc)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise BadResponse(f"{method} {path}: unexpected answer ({where}: {first['msg']})") from None

    # -- reads ------------------------------------------------------------------------------

    async def snapshot(self) -> Snapshot:
        """Status, peers, knowledge stats and backups. The last two are optional (an older
        daemon without them still gives a usable screen)."""
        status = await self._typed(StatusOut, "GET", "/v1/status")
        peers_doc = await self._typed(PeersOut, "GET", "/v1/peers")
        peers = []
        for raw in peers_doc.peers:
            try:
                peers.append(PeerView.model_validate(raw))
            except ValidationError:
                continue  # one odd record must not hide the others
        stats = await self._optional(KnowledgeStatsOut, "/v1/knowledge/stats")
        backups = await self._optional(BackupsOut, "/v1/backups")
        return Snapshot(status=status, peers=peers, stats=stats, backups=backups)

    async def _optional(self, model: type[M], path: str) -> M | None:
        try:
            return await self._typed(model, "GET", path)
        except Refused:
            return None

    async def entry(self, entry_id: str) -> EntryDoc:
        return await self._typed(EntryDoc, "GET", f"/v1/entries/{entry_id}")

    async def recent(self, limit: int = 20) -> EntriesOut:
        return await self._typed(EntriesOut, "GET", "/v1/entries", params={"limit": limit})

    async def search(self, query: str, k: int = 20) -> SearchOut:
        return await self._typed(SearchOut, "POST", "/v1/memory/search", json={"query": query, "top_k": k})

    # -- actions ----------------------------------------------------------------------------

    async def backup(self) -> BackupOut:
        return await self._typed(BackupOut, "POST", "/v1/backup", json={})

    async def curator_run(self) -> CuratorOut:
        return await self._typed(CuratorOut, "POST", "/v1/curator/run")

    async def forget(self, entry_id: str) -> ForgetOut:
        return await self._typed(ForgetOut, "POST", f"/v1/entries/{entry_id}/forget")

    async def endorse(self, entry_id: str, *, confirm: bool) -> EntryDoc:
        return await self._typed(EntryDoc, "POST", f"/v1/entries/{entry_id}/endorse", json={"confirm": confirm})

    async def connect_peer(self, addr: str) -> ConnectOut:
        return await self._typed(ConnectOut, "POST", "/v1/peers/connect", json={"addr": addr})

    async def hold_peer(self, peer_id: str, hold_s: float) -> DisconnectOut:
        return await self._typed(DisconnectOut, "POST", "/v1/peers/disconnect",
                                 json={"peer_id": peer_id, "hold_s": hold_s})

    async def distrust_peer(self, peer_id: str, *, distrusted: bool) -> DistrustOut:
        """`POST /v1/peers/distrust` (or `/trust` with `distrusted=False`)."""
        path = "/v1/peers/distrust" if distrusted else "/v1/peers/trust"
        return await self._typed(DistrustOut, "POST", path, json={"peer_id": peer_id})

    # -- the event stream -------------------------------------------------------------------

    async def events(self) -> AsyncIterator[tuple[str, Any]]:
        """Server-sent events as (name, data) until the stream ends; raises `Unreachable` when
        it cannot connect or drops. A malformed frame comes out as ("malformed", text)."""
        try:
            async with self._http().stream("GET", "/v1/events", timeout=httpx.Timeout(10.0, read=None)) as res:
                if res.status_code != 200:
                    raise BadResponse(f"GET /v1/events: HTTP {res.status_code}")
                yield "connected", {}
                name: str | None = None
                async for line in res.aiter_lines():
                    if line.startswith("event: "):
                        name = line[7:].strip()
                    elif line.startswith("data: ") and name is not None:
                        try:
                            data = json.loads(line[6:])
                        except ValueError:
                            yield "malformed", line[6:200]
                        else:
                            yield name, data
                        name = None
        except httpx.HTTPError as exc:
            await self.reset()
            raise Unreachable(f"event stream: {exc or type(exc).__name__}") from None


def _detail(doc: Any) -> str:
    if isinstance(doc, dict) and "detail" in doc:
        detail = doc["detail"]
        if isinstance(detail, list):  # pydantic's errors: where and what, as the CLI says them
            if all(isinstance(d, dict) for d in detail):
                return format_errors(detail)
            return "; ".join(str(d) for d in detail)
        return str(detail)
    return str(doc)[:200]
