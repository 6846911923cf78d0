"""Control API routes for agent memory: tools, working memory, flush, lesson import.

    GET  /v1/tools                               tool definitions (Anthropic tool-use format)
    POST /v1/tools/{name}                        run one: {input, tool_use_id?} → a tool_result block
    GET  /v1/working-memory/{session}            {session, content, bytes, updated_ms}
    PUT  /v1/working-memory/{session}            {content} (≤ 64 KiB of UTF-8)
    POST /v1/working-memory/{session}/close      migrate marked lines, clear → {session, migrated, existing}
                                                 (409: the text changed during the close)
    POST /v1/memory/flush                        {session, facts[1..256]} all or none → {session, ids, created}
    POST /v1/lessons                             {lessons[1..4096]} all or none → {ids, created, skipped}

Registered by `api.create_app`; new entries pass the one write door (`Writes.write`,
daemon/grimoire/write_door.py) on the daemon's writer thread.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.convertors import Convertor, register_url_convertor

from crdt import InvalidValue
from daemon.agent import memory as am
from daemon.agent.tools import ToolRunner, UnknownTool, definitions, tool_result
from daemon.contract.requests import SESSION_PATTERN, FlushIn, LessonsIn, WorkingMemoryIn
from daemon.contract.responses import (
    CloseOut,
    FlushOut,
    LessonsOut,
    ToolResultOut,
    ToolsOut,
    WorkingMemoryOut,
    WorkingMemoryWritten,
    errors,
)
from daemon.errors import NotFound, UsageError
from daemon.grimoire.fields import error_details
from daemon.service.state import DaemonState

__all__ = ["ToolCallIn", "register"]

_WM_PREFIX = "/v1/working-memory/"


class _AnyText(Convertor[str]):
    """A path parameter that matches anything, newlines and slashes included, so that every bad
    session name reaches the handler and is refused with 400 (not a routing 404)."""

    # Anything but a path ending in `/close` (that one is the close route's: other methods on it get 405).
    regex = r"(?s:(?!.*/close$).*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


class _AnyTextBeforeClose(_AnyText):
    """The session of `…/{session}/close`: anything."""

    regex = r"(?s:.*)"


register_url_convertor("wm_session", _AnyText())
register_url_convertor("wm_session_close", _AnyTextBeforeClose())


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] = Field(description="the tool_use block's input")
    tool_use_id: str | None = Field(None, min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_-]+$",
                                    description="the tool_use block's id (echoed in the tool_result)")


def _error(status: int, error: str, detail: object, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status)


def _session(request: Request, suffix: str = "") -> str:
    """The session named by the request's path, checked. Read from the decoded path itself rather
    than the route's match (whose `$` may also match before a trailing newline): what is checked is
    exactly what the client sent. The `session` parameter of the routes only documents it."""
    path = str(request.scope["path"])
    name = path.removeprefix(_WM_PREFIX)
    if suffix:
        name = name.removesuffix(suffix)
    return am.check_session(name)


def register(app: FastAPI, state: DaemonState) -> None:
    """Add the agent-memory routes to the control API (after its own routes)."""
    runner = ToolRunner(app)

    @app.exception_handler(am.ContentTooLarge)
    async def too_large(request: Request, exc: am.ContentTooLarge) -> JSONResponse:
        return _error(413, "too_large", str(exc))

    session_param = Path(description="1..40 of A-Z a-z 0-9 . _ -, starting with a letter or digit (else 400)",
                         json_schema_extra={"pattern": SESSION_PATTERN})

    @app.get("/v1/tools", response_model=ToolsOut, responses=errors())
    async def tools() -> dict[str, Any]:
        """Tool definitions for `anthropic.Anthropic().messages.create(tools=...)`."""
        return {"tools": definitions()}

    @app.post("/v1/tools/{name}", response_model=ToolResultOut, responses=errors(400, 404, 503))
    async def call_tool(name: str, body: ToolCallIn) -> JSONResponse:
        """Run one tool; errors keep the API's status and shape, plus a ready `tool_result` with
        `is_error: true` to hand back to the model."""
        use_id = body.tool_use_id

        def failed(status: int, error: str, detail: object, text: str) -> JSONResponse:
            return _error(status, error, detail, tool_result=tool_result(text, use_id, is_error=True))

        try:
            text = await runner.run(name, body.input)
        except UnknownTool as exc:
            return failed(404, "not_found", str(exc), str(exc))
        except ValidationError as exc:
            details = error_details(exc, prefix=("body", "input"))
            text = "; ".join(f"{'.'.join(str(p) for p in d['loc'][2:]) or 'input'}: {d['msg']}" for d in details)
            return failed(422, "invalid_request", details, f"invalid input: {text}")
        except NotFound as exc:
            return failed(404, "not_found", str(exc), str(exc))
        except (UsageError, InvalidValue) as exc:
            return failed(400, "bad_request", str(exc), str(exc))
        return JSONResponse(tool_result(text, use_id))

    @app.get("/v1/working-memory/{session:wm_session}", response_model=WorkingMemoryOut, responses=errors(400))
    async def working_memory_get(request: Request, session: str = session_param) -> dict[str, Any]:
        name = _session(request)
        return await state.on_writer(lambda s: am.read_working_memory(s, name))

    @app.put("/v1/working-memory/{session:wm_session}", response_model=WorkingMemoryWritten, responses=errors(400))
    async def working_memory_put(request: Request, body: WorkingMemoryIn,
                                 session: str = session_param) -> dict[str, Any]:
        name = _session(request)
        am.check_working_text(body.content)
        return await state.on_writer(lambda s: am.write_working_memory(s, name, body.content, now_ms=state.now_ms()))

    @app.post("/v1/working-memory/{session:wm_session_close}/close", response_model=CloseOut,
              responses=errors(400, 409))
    async def working_memory_close(request: Request, session: str = session_param) -> dict[str, Any]:
        name = _session(request, suffix="/close")
        marked = await state.on_reader(lambda r: am.marked_news(r, name))
        batch = await state.writes.write(marked.news, lambda s, p: am.close_working_memory(
            s, state.identity, marked, p, now_ms=state.now_ms()))
        return {"session": name, "migrated": [e.id for e in batch.created], "existing": batch.existing}

    @app.post("/v1/memory/flush", response_model=FlushOut, responses=errors(400))
    async def flush(body: FlushIn) -> dict[str, Any]:
        news = am.flush_news(body.session, body.facts)
        batch = await state.writes.write(news, lambda s, p: am.flush_facts(s, state.identity, body.session, p,
                                                                           now_ms=state.now_ms()))
        return {"session": body.session, "ids": batch.ids, "created": len(batch.created)}

    @app.post("/v1/lessons", response_model=LessonsOut, responses=errors(400))
    async def lessons(body: LessonsIn) -> dict[str, Any]:
        news = am.lesson_news(body.lessons)
        batch = await state.writes.write(news, lambda s, p: am.import_lessons(s, state.identity, p,
                                                                              now_ms=state.now_ms()))
        return {"ids": batch.ids, "created": len(batch.created), "skipped": len(batch.ids) - len(batch.created)}
