"""The TUI's typed view of the daemon: its control API through the one client
(`daemon.client.ApiClient`: httpx over the unix socket, or TCP with a bearer token) and its
event stream. It never opens the store.

Every answer is checked against the daemon's own response models (`daemon.contract.responses`);
anything else — a refused connection, a 5xx, a body that is not the documented shape — comes
out as one of the client's errors, never as a crash: `Unreachable` (retry later), `Refused`
(the daemon said no: 4xx, with its reason) and `BadResponse` (it answered something
unexpected; keep the last good data and say so).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from daemon.client import ApiClient, ApiError, BadResponse, Endpoint, Refused, TransportFactory, Unreachable
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

__all__ = ["ApiError", "BadResponse", "Endpoint", "PeerView", "Refused", "Snapshot", "TransportFactory", "TuiClient",
           "Unreachable"]

M = TypeVar("M", bound=BaseModel)


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


class TuiClient(ApiClient):
    """The one API client with the TUI's typed reads and actions, and the event stream."""

    async def _typed(self, model: type[M], method: str, path: str, **kw: Any) -> M:
        doc = await self.call(method, path, **kw)
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

