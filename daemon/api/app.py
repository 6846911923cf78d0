"""The local control API: FastAPI routes over the daemon's state.

Served by hypercorn's trio worker on `$RUNTIME_DIRECTORY/clade.sock` (mode 0660) and,
optionally, on 127.0.0.1 with a bearer token. Every error is JSON `{error, detail}` with a
4xx status; request bodies over 1 MiB are refused; a bug in a handler is a logged 500 that
never takes the daemon down. Store work runs in a worker thread, one writer at a time.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crdt import InvalidValue, Kind
from crdt.body import Category, Pad, Sensitivity
from daemon.api import agent as api_agent
from daemon.api.models import (
    BackupIn,
    ConnectIn,
    DigestIn,
    DisconnectIn,
    EpisodeIn,
    FeedbackIn,
    MemoryIn,
    ProbeIn,
    SearchIn,
    SyncIn,
)
from daemon.errors import NotFound, UsageError
from daemon.grimoire import Episode, NewEntry
from daemon.service.state import DaemonState

__all__ = ["MAX_BODY_BYTES", "BodyLimit", "TokenAuth", "create_app"]

log = logging.getLogger("clade.api")
MAX_BODY_BYTES = 1024 * 1024
DRAIN_BYTES = 16 * 1024 * 1024


def _error(status: int, error: str, detail: object) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status)


def create_app(state: DaemonState) -> FastAPI:
    """The ASGI app for one daemon."""
    app = FastAPI(title="clade control API", version="1", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()]
        return _error(422, "invalid_request", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, "not_found" if exc.status_code == 404 else "http_error", exc.detail)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    @app.exception_handler(UsageError)
    async def usage(request: Request, exc: UsageError) -> JSONResponse:
        return _error(400, "bad_request", str(exc))

    @app.exception_handler(InvalidValue)
    async def invalid_value(request: Request, exc: InvalidValue) -> JSONResponse:
        return _error(400, "bad_request", str(exc))

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:
        state.counters["api_errors"] += 1
        log.error("api handler failed: %s %s", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal", "the daemon hit an unexpected error; see its log")

    @app.post("/v1/memory", status_code=201)
    async def store_memory(body: MemoryIn) -> dict[str, Any]:
        meta = body.metadata
        if body.memory_type == "episode":
            episode = Episode(summary=body.content, observed_ms=state.now_ms(), importance=body.importance,
                              protocol=meta.protocols[0] if meta.protocols else None)
            await state.append_episode(episode)
            return {"id": episode.id, "memory_type": "episode"}
        pad = None if body.pad is None else Pad(pleasure=body.pad[0], arousal=body.pad[1], dominance=body.pad[2])
        new = NewEntry(kind=Kind(body.memory_type), content=body.content, confidence=body.confidence,
                       importance=body.importance, quality=body.quality, category=body.category,
                       tokens=tuple(meta.tokens), chains=tuple(meta.chains), protocols=tuple(meta.protocols),
                       tags=tuple(meta.tags), strategy_id=meta.strategy_id, sensitivity=Sensitivity(body.sensitivity),
                       pad=pad)
        entry = await state.remember(new)
        return {"id": entry.id, "memory_type": entry.body.kind.value, "entry": entry.to_json()}

    @app.post("/v1/memory/search")
    async def search_memory(body: SearchIn) -> dict[str, Any]:
        kinds = body.type_filter if isinstance(body.type_filter, list) else (
            [body.type_filter] if body.type_filter else [])
        hits = await state.recall(body.query, k=body.top_k, kinds=tuple(kinds), min_importance=body.min_importance)
        return {"query": body.query, "results": [
            {"score": round(h.score, 6), "via": h.via, **h.entry.to_json()} for h in hits]}

    @app.get("/v1/status")
    async def status() -> dict[str, Any]:
        return await state.status()

    @app.get("/v1/entries")
    async def list_entries(kind: list[Kind] | None = None, limit: int = 50, archived: bool = False) -> dict[str, Any]:
        if not 1 <= limit <= 10_000:
            raise UsageError(f"limit must be in 1..10000, got {limit}")
        entries = await state.db(lambda s: s.list_entries(kinds=kind or (), limit=limit, include_archived=archived))
        return {"entries": [e.to_json() for e in entries]}

    @app.get("/v1/entries/{entry_id}")
    async def get_entry(entry_id: str) -> dict[str, Any]:
        entry = await state.db(lambda s: s.get(entry_id))
        return dict(entry.to_json())

    @app.delete("/v1/entries/{entry_id}")
    async def forget_entry(entry_id: str) -> dict[str, Any]:
        changed = await state.db(lambda s: s.forget(entry_id))
        state.publish("entry_forgotten", {"id": entry_id})
        return {"id": entry_id, "archived": True, "changed": changed}

    @app.post("/v1/digest")
    async def digest(body: DigestIn) -> dict[str, Any]:
        return await state.digest(body.query, budget_tokens=body.budget_tokens, k=body.k, fmt=body.format,
                                  include_sensitive=body.include_sensitive)

    @app.post("/v1/feedback")
    async def feedback(body: FeedbackIn) -> dict[str, Any]:
        if not body.cited and not body.injected:
            raise UsageError("give cited and/or injected entry ids")
        if body.response is not None and not body.response.strip():
            raise UsageError("response must not be blank")
        return await state.feedback(cited=body.cited, injected=body.injected, response=body.response)

    @app.post("/v1/episodes", status_code=201)
    async def add_episode(body: EpisodeIn) -> dict[str, Any]:
        try:
            category = None if body.category is None else Category(body.category)
        except ValueError:
            raise UsageError(f"category {body.category!r} is not one of the twelve") from None
        episode = Episode(summary=body.summary, observed_ms=state.now_ms(), block_number=body.block_number,
                          category=category, protocol=body.protocol, payload_json=json.dumps(body.payload),
                          curiosity=body.curiosity, importance=body.importance)
        await state.append_episode(episode)
        return {"id": episode.id, "episode": episode.to_json()}

    @app.get("/v1/peers")
    async def peers() -> dict[str, Any]:
        return {"peers": state.peers()}

    @app.post("/v1/peers/connect")
    async def peers_connect(body: ConnectIn) -> dict[str, Any]:
        return state.connect_peer(body.addr)

    @app.post("/v1/peers/disconnect")
    async def peers_disconnect(body: DisconnectIn) -> dict[str, Any]:
        return await state.disconnect_peer(body.peer_id, hold_s=body.hold_s)

    @app.get("/v1/state-digest")
    async def state_digest() -> dict[str, Any]:
        """Hashes of the replicated state (ops + causal context): `shared` (what may cross)
        is equal on siblings once synced; `all` also covers this golem's private entries."""
        me = state.identity.peer_id
        return await state.db(lambda s: {"shared": s.state_digest(s.sync_gate(me)), "all": s.state_digest()})

    @app.post("/v1/sync")
    async def sync_now(body: SyncIn | None = None) -> dict[str, Any]:
        return await state.sync_now(None if body is None else body.peer_id)

    @app.post("/v1/p2p/probe")
    async def probe(body: ProbeIn) -> dict[str, Any]:
        """Publish a raw GossipSub probe (no envelope, no store): siblings emit `probe_received`."""
        return {"id": body.id, "sent_ms": await state.node().publish_probe(body.id)}

    @app.post("/v1/revocations")
    async def revocations(request: Request) -> dict[str, Any]:
        return await state.install_revocations(await request.body())

    @app.post("/v1/backup")
    async def backup(body: BackupIn | None = None) -> dict[str, Any]:
        return await state.backup(include_identity=bool(body and body.include_identity))

    @app.post("/v1/curator/run")
    async def curator_run() -> dict[str, Any]:
        return await state.curator_cycle()

    @app.get("/v1/events")
    async def events() -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            async with state.subscribe() as receive:
                yield b": connected\n\n"
                async for event, data in receive:
                    yield f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream")

    api_agent.register(app, state)  # agent memory: tools, working memory, flush, lessons
    return app


class BodyLimit:
    """ASGI middleware: refuse request bodies over `limit` bytes with a JSON 413."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                if declared.isdigit() and int(declared) <= DRAIN_BYTES:
                    await _drain(receive)  # let the client finish sending, so it reads our answer
                await _send_json(send, 413, {"error": "too_large", "detail": f"request body over {self.limit} bytes"})
                return
            await self.app(scope, receive, send)  # the server enforces the declared length
            return
        # No declared length (chunked): read it here, at most limit + 1 bytes, then replay it.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.limit:
                if message.get("more_body", False):
                    await _drain(receive)
                await _send_json(send, 413, {"error": "too_large", "detail": f"request body over {self.limit} bytes"})
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


class TokenAuth:
    """ASGI middleware for the TCP listener: `Authorization: Bearer <token>`, compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._token):
                await _send_json(send, 401, {"error": "unauthorized", "detail": "missing or wrong bearer token"})
                return
        await self.app(scope, receive, send)


async def _drain(receive: Receive) -> None:
    """Read and discard the rest of a refused body (at most DRAIN_BYTES): a client still
    writing when the server answers and closes would see a reset instead of the 413."""
    seen = 0
    while seen <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _send_json(send: Callable[[Message], Awaitable[None]], status: int, doc: dict[str, str]) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
