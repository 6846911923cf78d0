"""The MCP server's tools and resources, as calls on the control API (pure: no I/O).

Each tool names its JSON Schema (derived from the very pydantic models the API validates
with, through `daemon.agent.tools.input_schema`, like the Anthropic tool definitions) and
turns its arguments into one API request; the API does every check, so a refused input is
refused with the API's own message. Nothing is validated here but what makes the request:
a path segment is percent-encoded, and `.`/`..` (which URL normalisation would fold into
another route) are refused.

    memory_save, memory_recall, memory_search,  POST /v1/tools/{name}   (the agent tools;
    memory_outcome, episode_search                episode_search: this golem's own episodes)
    memory_digest                               POST /v1/digest (a format to choose; no sensitive entries)
    working_memory_read / _write / _close       GET / PUT /v1/working-memory/{session}, POST …/close
    memory_flush                                POST /v1/memory/flush
    resource clade://digest/{query}             POST /v1/digest (XML, no sensitive entries)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, create_model

from daemon.agent.tools import TOOLS as AGENT_TOOLS
from daemon.agent.tools import ToolSpec, input_schema
from daemon.contract.requests import DigestIn, FlushIn, WorkingMemoryIn
from daemon.errors import UsageError

__all__ = ["DIGEST_TEMPLATE", "TOOLS", "ApiRequest", "McpTool", "digest_request", "tool"]

DIGEST_TEMPLATE = "clade://digest/{query}"
DIGEST_PREFIX = "clade://digest/"


@dataclass(frozen=True, slots=True)
class ApiRequest:
    method: str
    path: str
    body: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class McpTool:
    """One MCP tool: its definition and how a call becomes an API request and its answer text."""

    name: str
    description: str
    input_schema: dict[str, Any]
    request: Callable[[dict[str, Any]], ApiRequest]
    answer: Callable[[Any], str]


def segment(name: str, value: object) -> str:
    """`value` as one URL path segment (percent-encoded); `UsageError` if it is not a string,
    or is `.`/`..` (URL normalisation would turn the path into another route's)."""
    if not isinstance(value, str):
        raise UsageError(f"{name}: must be a string")
    if value in (".", ".."):
        raise UsageError(f"{name}: {value!r} is not a valid {name}")
    return quote(value, safe="")


def _compact(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _tool_text(doc: Any) -> str:
    """The text of a `tool_result` block (POST /v1/tools/{name})."""
    return "\n".join(str(c.get("text", "")) for c in doc.get("content", []) if isinstance(c, dict))


def _split(args: dict[str, Any], key: str) -> tuple[object, dict[str, Any]]:
    """`args[key]` (None if absent) and the other arguments."""
    return args.get(key), {k: v for k, v in args.items() if k != key}


# -- memory_digest: the digest in the format the client wants (sensitive entries stay out, as
# in memory_recall: that is not the model's to choose) ----------------------------------------

_DIGEST_FIELDS: dict[str, Any] = {n: (f.annotation, f) for n, f in DigestIn.model_fields.items()
                                  if n in ("query", "budget_tokens", "k", "format", "since", "until")}
DigestInput = create_model("memory_digest", __config__=ConfigDict(extra="forbid"), **_DIGEST_FIELDS)


def _digest(args: dict[str, Any]) -> ApiRequest:
    if "include_sensitive" in args:  # the API would take it: refuse rather than override it silently
        raise UsageError("include_sensitive: extra inputs are not permitted (sensitive entries stay out of the digest)")
    return ApiRequest("POST", "/v1/digest", {**args, "include_sensitive": False})


def _digest_document(doc: Any) -> str:
    document = doc.get("document")
    return document if isinstance(document, str) else _compact(document)


# -- working memory --------------------------------------------------------------------------

SessionInput = create_model("working_memory_session", __config__=ConfigDict(extra="forbid"),
                            session=(str, FlushIn.model_fields["session"]))
WriteInput = create_model("working_memory_write", __config__=ConfigDict(extra="forbid"),
                          session=(str, FlushIn.model_fields["session"]),
                          content=(str, WorkingMemoryIn.model_fields["content"]))
_SESSION_TEXT = "The session's name: 1..40 of A-Z a-z 0-9 . _ -, starting with a letter or digit."


def _session_path(args: dict[str, Any], suffix: str = "") -> str:
    session, _ = _split(args, "session")
    if session is None:
        raise UsageError("session: field required")
    return f"/v1/working-memory/{segment('session', session)}{suffix}"


def _write(args: dict[str, Any]) -> ApiRequest:
    _, body = _split(args, "session")
    return ApiRequest("PUT", _session_path(args), body)


def _schema(name: str, description: str, model: type[BaseModel], properties: dict[str, str]) -> dict[str, Any]:
    return input_schema(ToolSpec(name=name, description=description, model=model, properties=properties))


def _agent_tool(spec: ToolSpec) -> McpTool:
    return McpTool(spec.name, spec.description, input_schema(spec),
                   lambda args: ApiRequest("POST", f"/v1/tools/{spec.name}", {"input": args}), _tool_text)


def _made(name: str, description: str, model: type[BaseModel], properties: dict[str, str],
          request: Callable[[dict[str, Any]], ApiRequest], answer: Callable[[Any], str] = _compact) -> McpTool:
    return McpTool(name, description, _schema(name, description, model, properties), request, answer)


TOOLS: tuple[McpTool, ...] = (
    *(_agent_tool(spec) for spec in AGENT_TOOLS),
    _made("memory_digest",
          "The memory digest for a query, in the format you need: xml (<agent_memory>, as memory_recall), "
          "search-results (content blocks with citations) or json (the entries).",
          DigestInput, {"query": "What you are about to do or want to know, in plain words.",
                        "budget_tokens": "Upper bound on the digest's size in tokens (default 3000).",
                        "k": "At most this many entries (default 10).",
                        "format": "xml (default), search-results or json.",
                        "since": "Optional: only memories from this time on (ISO 8601; no offset means UTC).",
                        "until": "Optional: only memories up to this time (ISO 8601; no offset means UTC)."},
          _digest, _digest_document),
    _made("working_memory_read",
          "Read your working memory for a session: a scratch text kept between turns (at most 64 KiB).",
          SessionInput, {"session": _SESSION_TEXT},
          lambda args: ApiRequest("GET", _session_path(args)), lambda doc: str(doc.get("content", ""))),
    _made("working_memory_write",
          "Replace your working memory for a session with this text. Mark lines worth keeping with "
          "LESSON:, STRATEGY:, WARNING: or FACT: and they become long-term memories when the session closes.",
          WriteInput, {"session": _SESSION_TEXT, "content": "The whole working memory text (replaces the old one)."},
          _write),
    _made("working_memory_close",
          "Close a session: every marked line of its working memory becomes a long-term memory, then it is cleared.",
          SessionInput, {"session": _SESSION_TEXT}, lambda args: ApiRequest("POST", _session_path(args, "/close"))),
    _made("memory_flush",
          "Save several facts from this session to long-term memory at once, all or none (retries are safe: "
          "a fact already flushed in this session is not written again).",
          FlushIn, {"session": _SESSION_TEXT, "facts": "The facts: 1..256 entries, each like memory_save's input."},
          lambda args: ApiRequest("POST", "/v1/memory/flush", args)),
)
_BY_NAME = {t.name: t for t in TOOLS}


def tool(name: str) -> McpTool | None:
    return _BY_NAME.get(name)


def digest_request(uri: str) -> ApiRequest:
    """The digest a `clade://digest/{query}` resource stands for; `UsageError` for another URI."""
    if not uri.startswith(DIGEST_PREFIX) or len(uri) == len(DIGEST_PREFIX):
        raise UsageError(f"unknown resource {uri!r}: the resources are {DIGEST_TEMPLATE}")
    return ApiRequest("POST", "/v1/digest", {"query": unquote(uri[len(DIGEST_PREFIX):]), "format": "xml",
                                             "include_sensitive": False})
