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
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import trio
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crdt import InvalidValue, Kind
from crdt.body import Pad
from crypto.errors import CryptoError
from crypto.vault import VaultKeys
from daemon.api import agent as api_agent
from daemon.api import death as api_death
from daemon.api import episodes as api_episodes
from daemon.api import knowledge as api_knowledge
from daemon.api import metrics as api_metrics
from daemon.api import operator as api_operator
from daemon.api import trust as api_trust
from daemon.api.ids import EntryId
from daemon.contract.requests import (
    BackupIn,
    ConnectIn,
    DigestIn,
    DisconnectIn,
    EndorseIn,
    EpisodeIn,
    FeedbackIn,
    InheritIn,
    MemoryIn,
    ProbeIn,
    RetractIn,
    SearchIn,
    StyxRetryIn,
    SyncIn,
)
from daemon.contract.responses import (
    BackupOut,
    ConnectOut,
    CuratorOut,
    DigestOut,
    DisconnectOut,
    EntriesOut,
    EntryDoc,
    EpisodeOut,
    FeedbackOut,
    ForgetOut,
    InheritOut,
    KeysOut,
    MemoryOut,
    PeersOut,
    ProbeOut,
    RevocationsOut,
    SearchOut,
    StateDigestOut,
    StatusOut,
    StyxRetryOut,
    StyxStatusOut,
    SyncOut,
    UnarchiveOut,
    errors,
)
from daemon.embedding.embedder import ModelIntegrityError
from daemon.errors import Conflict, DaemonError, NotFound, UsageError
from daemon.grimoire import Episode
from daemon.grimoire.fields import event_ms
from daemon.grimoire.storage_faults import sole_cause, storage_refusal
from daemon.service.state import DaemonState
from daemon.styx.boot import BootError
from daemon.styx.fanin import merge, styx_doc
from daemon.styx.vault import VaultPushError

__all__ = ["MAX_BODY_BYTES", "BodyLimit", "Conflict", "TokenAuth", "create_app", "listener_apps"]

log = logging.getLogger("clade.api")
MAX_BODY_BYTES = 1024 * 1024
DRAIN_BYTES = 16 * 1024 * 1024


def _with_id(full: str, op: Callable[[str], bool]) -> tuple[str, bool]:
    """`op` applied to a resolved id, with the id: what a route answers with."""
    return full, op(full)


def _error(status: int, error: str, detail: object) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status)


def create_app(state: DaemonState) -> FastAPI:
    """The ASGI app for one daemon: every route has a response model and documents its error statuses."""
    app = FastAPI(title="clade control API", version="1", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")).removeprefix("Value error, ")}
                   for e in exc.errors()]  # as `grimoire.fields.error_details`
        return _error(422, "invalid_request", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # a body that is not JSON at all
            return _error(400, "bad_request", exc.detail)
        res = _error(exc.status_code, "not_found" if exc.status_code == 404 else "http_error", exc.detail)
        res.headers.update(exc.headers or {})
        if exc.status_code == 405:  # Allow: every method of every route on this path, not the first one's
            res.headers["allow"] = ", ".join(sorted({
                m for r in app.routes if isinstance(r, APIRoute) and r.matches(request.scope)[0] != Match.NONE
                for m in r.methods or ()}))
        return res

    def answer(code: int, error: str) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return _error(code, error, str(exc))
        return handler

    for refused, code, error in ((NotFound, 404, "not_found"), (Conflict, 409, "conflict"),
                                 (UsageError, 400, "bad_request"), (InvalidValue, 400, "bad_request")):
        app.add_exception_handler(refused, answer(code, error))

    @app.exception_handler(ModelIntegrityError)
    async def unavailable(request: Request, exc: ModelIntegrityError) -> JSONResponse:
        return _error(503, "unavailable", f"the embedding model cannot be loaded: {exc}")

    def refused_by_storage(request: Request, exc: BaseException) -> JSONResponse | None:
        refusal = storage_refusal(exc)
        if refusal is None:
            return None
        state.counters[f"storage_refused_{refusal.error}"] += 1
        log.warning("%s %s refused: %s (%s)", request.method, request.url.path, refusal.detail, exc)
        return _error(refusal.status, refusal.error, refusal.detail)

    known: tuple[tuple[type[BaseException], int, str], ...] = (
        (NotFound, 404, "not_found"), (Conflict, 409, "conflict"), (UsageError, 400, "bad_request"),
        (InvalidValue, 400, "bad_request"))

    def answered(request: Request, exc: BaseException) -> JSONResponse | None:
        """The answer to an exception that is not a bug (a storage refusal, a missing model, a
        known refusal inside a nursery's exception group), else None."""
        cause = sole_cause(exc)
        refused = refused_by_storage(request, cause)
        if refused is not None:
            return refused
        if isinstance(cause, ModelIntegrityError):
            return _error(503, "unavailable", f"the embedding model cannot be loaded: {cause}")
        for kind, code, error in known:
            if cause is not exc and isinstance(cause, kind):
                return _error(code, error, str(cause))
        return None

    # Answered here (ExceptionMiddleware), not by the catch-all below: Starlette's outermost
    # middleware re-raises whatever reaches it after answering, and the server logs a traceback.
    async def not_a_bug(request: Request, exc: Exception) -> JSONResponse:
        found = answered(request, exc)
        if found is None:
            raise exc
        return found

    # DaemonError too: one raised from a storage failure (`cannot snapshot …` of a full disk) is a
    # refusal (the soak's backup during its disk-full fault answered 507 but logged a traceback).
    for kind in (sqlite3.Error, OSError, ExceptionGroup, DaemonError):
        app.add_exception_handler(kind, not_a_bug)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:
        found = answered(request, exc)
        if found is not None:
            return found
        state.counters["api_errors"] += 1
        log.error("api handler failed: %s %s", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal", "the daemon hit an unexpected error; see its log")

    def joined() -> None:
        if state.membership() is None:
            raise Conflict("this golem has not joined a clade (clade join BUNDLE)")

    def p2p_on() -> None:
        if state.p2p is None:
            raise Conflict("sync is off: this golem has not joined a clade, or p2p.enabled is false")

    @app.post("/v1/memory", status_code=201, response_model=MemoryOut, responses=errors(503))
    async def store_memory(body: MemoryIn) -> dict[str, Any]:
        """Write a knowledge entry (or, with `memory_type: episode`, append a raw episode)."""
        if body.memory_type == "episode":
            meta = body.metadata
            pad = None if body.pad is None else Pad(pleasure=body.pad[0], arousal=body.pad[1], dominance=body.pad[2])
            observed = event_ms(body.occurred_at)
            episode = Episode(summary=body.content, observed_ms=state.now_ms() if observed is None else observed,
                              importance=body.importance, protocol=meta.protocols[0] if meta.protocols else None,
                              pad=pad)
            await state.append_episode(episode)
            return {"id": episode.id, "memory_type": "episode", "entry": None}
        entry = await state.remember(body.entry_fields().new_entry())
        return {"id": entry.id, "memory_type": entry.body.kind.value, "entry": entry.to_json()}

    @app.post("/v1/memory/search", response_model=SearchOut, responses=errors())
    async def search_memory(body: SearchIn) -> dict[str, Any]:
        query = body.to_query()
        local: dict[str, Any] = {}
        remote: dict[str, Any] = {}

        async def recall_locally() -> None:
            local["hits"], local["degraded"] = await state.search.recall(query)

        async with trio.open_nursery() as nursery:  # Styx in parallel, bounded by its deadline
            nursery.start_soon(recall_locally)
            # Styx's answers carry no event time: a time-bounded search asks this golem only.
            if state.styx_queried(sensitive=query.include_sensitive) and query.since_ms is None \
                    and query.until_ms is None:
                nursery.start_soon(styx_fan_in, remote, body.query, body.top_k)
        doc: dict[str, Any] = {"query": body.query, "results": [
            {"score": round(h.score, 6), "via": h.via, "release": h.release, "unverified": h.release == "unverified",
             **h.entry.to_json()} for h in local["hits"]]}
        if local["degraded"] is not None:
            doc["degraded"] = local["degraded"]
        if remote:
            doc["styx"] = [styx_doc(r) for r in remote["results"]]
            doc["styx_error"] = remote["error"]
            doc["merged"] = merge(doc["results"], remote["results"], k=body.top_k)
        return doc

    async def styx_fan_in(into: dict[str, Any], text: str, k: int) -> None:
        into["results"], into["error"] = await state.styx_link.ask(text, k=k)

    @app.get("/v1/status", response_model=StatusOut, responses=errors())
    async def status() -> dict[str, Any]:
        return await state.status()

    @app.get("/v1/entries", response_model=EntriesOut, responses=errors())
    async def list_entries(kind: Annotated[list[Kind] | None, Query()] = None,
                           limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
                           archived: bool = False) -> dict[str, Any]:
        entries = await state.on_reader(
            lambda r: r.list_entries(kinds=kind or (), limit=limit, include_archived=archived))
        return {"entries": [e.to_json() for e in entries]}

    @app.get("/v1/entries/{entry_id}", response_model=EntryDoc, responses=errors(400, 404))
    async def get_entry(entry_id: EntryId) -> dict[str, Any]:
        """One entry, archived (forgotten) ones too: forgetting archives, it does not delete."""
        return await state.entry_doc(entry_id)

    @app.post("/v1/entries/{entry_id}/forget", response_model=ForgetOut, responses=errors(400, 404))
    async def forget_entry(entry_id: EntryId) -> dict[str, Any]:
        """Archive an entry locally (nothing crosses to siblings); it stays readable by id and in
        `GET /v1/entries?archived=true`, so this is not an HTTP DELETE. Answers with the full id."""
        full, changed = await state.on_writer(lambda s: _with_id(s.resolve_id(entry_id), s.forget))
        if changed:  # forgetting an archived entry changes nothing: no event
            state.publish("entry_forgotten", {"id": full})
        return {"id": full, "archived": True, "changed": changed}

    @app.post("/v1/entries/{entry_id}/unarchive", response_model=UnarchiveOut, responses=errors(400, 404))
    async def unarchive_entry(entry_id: EntryId) -> dict[str, Any]:
        """Undo an archive (forget, or the curator's prune or merge): live again at its base
        confidence. Answers with the full id."""
        full, changed = await state.on_writer(lambda s: _with_id(s.resolve_id(entry_id), s.unarchive))
        if changed:  # unarchiving a live entry changes nothing: no event
            state.publish("entry_unarchived", {"id": full})
        return {"id": full, "archived": False, "changed": changed}

    @app.delete("/v1/entries/{entry_id}", response_model=ForgetOut, responses=errors(400, 404), deprecated=True)
    async def forget_entry_deprecated(entry_id: EntryId) -> dict[str, Any]:
        """The old spelling of `POST /v1/entries/{entry_id}/forget` (archives; does not delete)."""
        return await forget_entry(entry_id)

    @app.post("/v1/entries/{entry_id}/retract", response_model=EntryDoc, responses=errors(400, 404, 409))
    async def retract_entry(entry_id: EntryId, body: RetractIn | None = None) -> dict[str, Any]:
        """The author retracts its own entry (an op: siblings learn of it). 409 if another golem
        wrote it. `superseded_by` takes a unique prefix too."""
        try:
            entry = await state.retract(entry_id, superseded_by=None if body is None else body.superseded_by)
        except InvalidValue as exc:
            raise Conflict(str(exc)) from None
        return entry.to_json()

    @app.post("/v1/entries/{entry_id}/endorse", response_model=EntryDoc, responses=errors(400, 404, 409))
    async def endorse_entry(entry_id: EntryId, body: EndorseIn | None = None) -> dict[str, Any]:
        """Confirm (or, with `confirm: false`, contradict) a sibling's entry. 409 for one's own entry."""
        try:
            entry = await state.endorse(entry_id, confirm=True if body is None else body.confirm)
        except InvalidValue as exc:
            raise Conflict(str(exc)) from None
        return entry.to_json()

    @app.post("/v1/digest", response_model=DigestOut, responses=errors())
    async def digest(body: DigestIn) -> dict[str, Any]:
        return await state.search.digest(body.to_query(), budget_tokens=body.budget_tokens, fmt=body.format)

    @app.post("/v1/feedback", response_model=FeedbackOut, responses=errors(400, 404, 503))
    async def feedback(body: FeedbackIn) -> dict[str, Any]:
        """Citation feedback; `cited` and `injected` take unique id prefixes too (the answer names full ids)."""
        cited, injected = await state.on_reader(
            lambda r: ([r.resolve_id(i) for i in body.cited], [r.resolve_id(i) for i in body.injected]))
        return await state.feedback(cited=cited, injected=injected, response=body.response)

    @app.post("/v1/episodes", status_code=201, response_model=EpisodeOut, responses=errors())
    async def add_episode(body: EpisodeIn) -> dict[str, Any]:
        observed = event_ms(body.occurred_at)
        episode = Episode(summary=body.summary, observed_ms=state.now_ms() if observed is None else observed,
                          block_number=body.block_number,
                          category=body.category, protocol=body.protocol, payload_json=json.dumps(body.payload),
                          curiosity=body.curiosity, importance=body.importance, quality_verified=body.verified,
                          pad=None if body.pad is None else body.pad.pad())
        stored = await state.append_episode(episode)
        return {"id": stored.id, "episode": stored.to_json()}

    @app.get("/v1/peers", response_model=PeersOut, responses=errors())
    async def peers() -> dict[str, Any]:
        return {"peers": state.peers()}

    @app.post("/v1/peers/connect", response_model=ConnectOut, responses=errors(400, 409))
    async def peers_connect(body: ConnectIn) -> dict[str, Any]:
        p2p_on()
        return state.connect_peer(body.addr)

    @app.post("/v1/peers/disconnect", response_model=DisconnectOut, responses=errors(404, 409))
    async def peers_disconnect(body: DisconnectIn) -> dict[str, Any]:
        p2p_on()
        return await state.disconnect_peer(body.peer_id, hold_s=body.hold_s)

    @app.get("/v1/state-digest", response_model=StateDigestOut, responses=errors())
    async def state_digest() -> dict[str, Any]:
        """Hashes of the replicated state, from one read snapshot: `shared` (the ops that may cross,
        without the context) is equal on siblings holding the same shared ops — after one sync
        round, whatever private ops each wrote; `context` (the causal context alone) is equal once
        they have also seen the same dots, withheld ones included; `all` (every op and the
        context) also covers this golem's private entries."""
        me = state.identity.peer_id
        return await state.on_reader(lambda r: r.sync_digests(me))

    @app.post("/v1/sync", response_model=SyncOut, responses=errors(409))
    async def sync_now(body: SyncIn | None = None) -> dict[str, Any]:
        """Anti-entropy now; 409 while sync is off or if the named peer is not a connected sibling."""
        p2p_on()
        try:
            return await state.sync_now(None if body is None else body.peer_id)
        except UsageError as exc:
            raise Conflict(str(exc)) from None

    @app.post("/v1/p2p/probe", response_model=ProbeOut, responses=errors(409))
    async def probe(body: ProbeIn) -> dict[str, Any]:
        """Publish a raw GossipSub probe (no envelope, no store): siblings emit `probe_received`."""
        p2p_on()
        return {"id": body.id, "sent_ms": await state.node().publish_probe(body.id)}

    @app.post("/v1/revocations", response_model=RevocationsOut, responses=errors(400, 409), openapi_extra={
        "requestBody": {"required": True, "content": {"application/octet-stream": {
            "schema": {"type": "string", "format": "binary"}}}}})
    async def revocations(request: Request) -> dict[str, Any]:
        """Adopt an owner-signed revocation list (the file `clade owner revoke` writes). 409 before
        joining a clade; 400 if it is not this clade owner's valid list."""
        joined()
        return await state.install_revocations(await request.body())

    @app.post("/v1/keys/reload", response_model=KeysOut, responses=errors(400, 409))
    async def keys_reload() -> dict[str, Any]:
        """Re-read the clade keys (what `clade join ROTATION_BUNDLE` and SIGHUP do): gossip is sealed
        with the newest epoch at once, no restart. 409 before joining a clade; 400 for a keyring that
        cannot be read or names another clade."""
        joined()
        return await state.reload_keys()

    @app.post("/v1/backup", response_model=BackupOut, responses=errors(409))
    async def backup(body: BackupIn | None = None) -> dict[str, Any]:
        """An encrypted backup to the clade's recipients; 409 before joining a clade."""
        joined()
        return await state.backup(include_identity=bool(body and body.include_identity))

    @app.post("/v1/curator/run", response_model=CuratorOut, responses=errors())
    async def curator_run() -> dict[str, Any]:
        return await state.curator_cycle()

    def styx_on() -> None:
        if state.styx is None:
            raise Conflict("Styx is off: set [styx] enabled = true and url (or CLADE_STYX__ENABLED, CLADE_STYX__URL)")

    @app.get("/v1/styx/status", response_model=StyxStatusOut, responses=errors(409))
    async def styx_status() -> dict[str, Any]:
        """The outbox (queue_depth, oldest_age_s, parked with reasons) and the pusher's counters; 409 if Styx is off."""
        styx_on()
        return await state.on_writer(state.styx_status)

    @app.post("/v1/styx/retry", response_model=StyxRetryOut, responses=errors(409))
    async def styx_retry(body: StyxRetryIn) -> dict[str, Any]:
        """Put parked items back in the queue: one (by idempotency key) or all (`all: true`)."""
        styx_on()
        key = None if body.all else body.idempotency_key
        if key is None and not body.all:
            raise UsageError("name an idempotency_key or set all: true")
        return {"unparked": await state.styx_retry(key)}

    @app.post("/v1/inherit", response_model=InheritOut, responses=errors(400, 409, 502))
    async def inherit_from_styx(body: InheritIn) -> dict[str, Any]:
        """Boot from the Styx archive (what a golem runtime calls at birth): fetch `from_styx`'s
        latest testament archive from Styx's vault layer, verify the owner's certificate and the
        testament's signatures, and inherit its selection at the archive's weight (0.3). 400: the
        archive is missing or cannot be trusted (tampered, truncated, another clade's; nothing imported); 409:
        not in a clade, or Styx off; 502: Styx failed or the budget is reached."""
        joined()
        styx_on()
        membership, ring = state.membership(), state.keys
        assert membership is not None
        if ring is None:  # sync off: the keys this golem holds on disk
            joined_keys = state.data.load_keys()
            if joined_keys is None:
                raise Conflict("this golem holds no clade key (clade join BUNDLE)")
            ring = joined_keys[1]
        keys = VaultKeys(clade_key=ring.current.key, clade_keys=tuple(ring.all_keys()[1:]))
        try:
            revocations = state.data.load_revocations(membership)
        except CryptoError as exc:
            raise Conflict(f"the installed revocation list cannot be read ({exc}): reinstall it with "
                           "`clade revocations install FILE` before inheriting") from None
        try:
            doc = await state.styx_link.inherit(body.from_styx, membership=membership, keys=keys,
                                                local_replica=state.identity.peer_id, revocations=revocations)
        except BootError as exc:
            raise UsageError(f"{exc} (nothing was imported)") from None
        except VaultPushError as exc:
            return _error(502, "styx_error", f"{exc} (nothing was imported)")  # type: ignore[return-value]
        state.local_write()
        return doc

    @app.get("/v1/events", responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                                             "description": "server-sent events: `event: NAME` + `data: JSON`"},
                                      **errors()}, response_class=StreamingResponse)
    async def events() -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            async with state.subscribe() as receive:
                yield b": connected\n\n"
                async for event, data in receive:
                    yield f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream")

    api_knowledge.register(app, state)  # outcomes on entries, vitality (before the agent tools that call them)
    api_episodes.register(app, state)  # episodes: search, verify (before the agent tools: episode_search calls it)
    api_agent.register(app, state)  # agent memory: tools, working memory, flush, lessons
    api_operator.register(app, state)  # the operator's view: knowledge stats, backups
    api_trust.register(app, state)  # siblings' trust: GET /v1/trust, distrust / trust a peer
    api_death.register(app, state)  # a death the clade hears
    api_metrics.register(app, state)  # GET /metrics for Prometheus
    return app


def listener_apps(state: DaemonState, tcp_token: str | None) -> tuple[ASGIApp, ASGIApp | None]:
    """The control API as `clade run` serves it: on the unix socket with the body limit, and
    (given a token) the same app behind the bearer token for the TCP listener, else None."""
    app = BodyLimit(create_app(state))
    return app, (TokenAuth(app, tcp_token) if tcp_token is not None else None)


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
