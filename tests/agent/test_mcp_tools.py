"""daemon/mcp/tools.py without a daemon: each tool's API request, exactly, and the inputs it
refuses before any request (a path segment that would name another route)."""

from __future__ import annotations

import pytest

from daemon.errors import UsageError
from daemon.mcp.tools import TOOLS, ApiRequest, digest_request, segment, tool

ENTRY = "0123456789abcdef0123456789abcdef"


def _request(name: str, args: dict[str, object]) -> ApiRequest:
    found = tool(name)
    assert found is not None
    return found.request(dict(args))


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("memory_save", {"content": "x"}, ApiRequest("POST", "/v1/tools/memory_save", {"input": {"content": "x"}})),
    ("memory_recall", {"query": "q"}, ApiRequest("POST", "/v1/tools/memory_recall", {"input": {"query": "q"}})),
    ("memory_digest", {"query": "q", "format": "json"},
     ApiRequest("POST", "/v1/digest", {"query": "q", "format": "json", "include_sensitive": False})),
    ("memory_outcome", {"entry_id": ENTRY, "effect": "negative", "metric": "pnl_usd", "value": -3},
     ApiRequest("POST", "/v1/tools/memory_outcome",
                {"input": {"entry_id": ENTRY, "effect": "negative", "metric": "pnl_usd", "value": -3}})),
    ("working_memory_read", {"session": "s-1"}, ApiRequest("GET", "/v1/working-memory/s-1")),
    ("working_memory_write", {"session": "s", "content": "c"}, ApiRequest("PUT", "/v1/working-memory/s",
                                                                         {"content": "c"})),
    ("working_memory_close", {"session": "s 2"}, ApiRequest("POST", "/v1/working-memory/s%202/close")),
    ("memory_flush", {"session": "s", "facts": []}, ApiRequest("POST", "/v1/memory/flush",
                                                               {"session": "s", "facts": []})),
])
def test_each_tool_is_one_api_request(name: str, args: dict[str, object], expected: ApiRequest) -> None:
    assert _request(name, args) == expected


@pytest.mark.parametrize(("name", "args", "message"), [
    ("working_memory_read", {"session": "."}, "session: '.' is not a valid"),
    ("working_memory_read", {"session": 12}, "session: must be a string"),
    ("working_memory_close", {}, "session: field required"),
    ("memory_digest", {"query": "q", "include_sensitive": True}, "include_sensitive: extra inputs are not permitted"),
])
def test_refused_before_any_request(name: str, args: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        _request(name, args)


def test_segment_quotes_everything_but_unreserved() -> None:
    assert segment("x", "A-z_0.9~") == "A-z_0.9~"
    assert segment("x", "é/%") == "%C3%A9%2F%25"


def test_digest_resource() -> None:
    assert digest_request("clade://digest/gas%20spikes%2Fbase") == ApiRequest(
        "POST", "/v1/digest", {"query": "gas spikes/base", "format": "xml", "include_sensitive": False})
    for bad in ("clade://digest/", "clade://other/x", "file:///etc/passwd"):
        with pytest.raises(UsageError, match="unknown resource"):
            digest_request(bad)


def test_every_schema_is_a_closed_object() -> None:
    assert len({t.name for t in TOOLS}) == len(TOOLS)
    for t in TOOLS:
        assert t.input_schema["type"] == "object" and t.input_schema.get("additionalProperties") is False, t.name
        assert "$ref" not in str(t.input_schema) and "$defs" not in t.input_schema, t.name
