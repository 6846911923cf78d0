"""`clade mcp` driven by the MCP Python SDK's own client over stdio (mcp.client.stdio), against
a real daemon: tools listed and called, the digest resource, refused inputs as tool errors
with the API's message, a 10 MiB argument refused cleanly, and a daemon that goes away
mid-session answered with a clear error within a bounded time."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from daemon.agent.tools import definitions
from daemon.api.app import MAX_BODY_BYTES
from daemon.datadir import DataDir
from daemon.mcp.server import MAX_ARGUMENT_BYTES
from daemon.testing.process import DaemonProc

CLADE = str(Path(sys.executable).with_name("clade"))
TOOL_NAMES = {"memory_save", "memory_recall", "memory_search", "memory_digest", "memory_outcome", "episode_search",
              "working_memory_read", "working_memory_write", "working_memory_close", "memory_flush"}


@asynccontextmanager
async def mcp_session(data: DataDir, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=CLADE, args=["--data-dir", str(data.root), "mcp", *extra],
                                   env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    with (data.root / "mcp-stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=90) as session:
            await session.initialize()
            yield session


def run(data: DataDir, body: Callable[[ClientSession], Awaitable[None]], *extra: str) -> None:
    async def main() -> None:
        with anyio.fail_after(240):
            async with mcp_session(data, *extra) as session:
                await body(session)

    anyio.run(main)


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def ok(session: ClientSession, name: str, args: dict[str, Any]) -> str:
    result = await session.call_tool(name, args)
    assert not result.is_error, (name, text(result))
    return text(result)


async def refused(session: ClientSession, name: str, args: dict[str, Any]) -> str:
    result = await session.call_tool(name, args)
    assert result.is_error, (name, text(result))
    return text(result)


def test_argument_limit_is_the_apis() -> None:
    assert MAX_ARGUMENT_BYTES == MAX_BODY_BYTES


def test_tools_and_the_digest_resource(daemon: DaemonProc) -> None:
    async def body(session: ClientSession) -> None:
        listed = (await session.list_tools()).tools
        assert {t.name for t in listed} == TOOL_NAMES
        agent = {d["name"]: d for d in definitions()}
        for t in listed:
            if t.name in agent:  # the agent tools' own schemas and descriptions, not redefined
                assert t.input_schema == agent[t.name]["input_schema"] and t.description == agent[t.name]["description"]
            assert t.input_schema["type"] == "object"

        saved = json.loads(await ok(session, "memory_save", {
            "content": "Curve stETH pool depegs when Lido withdrawals queue", "memory_type": "warning"}))
        assert saved["memory_type"] == "warning" and len(saved["id"]) == 32
        found = json.loads(await ok(session, "memory_search", {"query": "stETH depeg", "top_k": 3}))
        assert found["results"][0]["id"] == saved["id"]
        recalled = await ok(session, "memory_recall", {"query": "stETH depeg risk"})
        assert "<agent_memory" in recalled and "Lido withdrawals" in recalled
        digest = json.loads(await ok(session, "memory_digest", {"query": "stETH depeg risk", "format": "json"}))
        assert saved["id"] in json.dumps(digest)
        assert "include_sensitive" in await refused(session, "memory_digest", {"query": "x", "include_sensitive": True})

        await ok(session, "working_memory_write", {"session": "s1", "content": "draft\nFACT: Base gas is cheap"})
        assert await ok(session, "working_memory_read", {"session": "s1"}) == "draft\nFACT: Base gas is cheap"
        closed = json.loads(await ok(session, "working_memory_close", {"session": "s1"}))
        assert len(closed["migrated"]) == 1
        assert await ok(session, "working_memory_read", {"session": "s1"}) == ""
        flushed = json.loads(await ok(session, "memory_flush", {"session": "s2", "facts": [
            {"content": "Arbitrum sequencer pauses happen", "memory_type": "fact"}]}))
        assert flushed["created"] == 1

        dated = json.loads(await ok(session, "memory_save", {
            "content": "Morpho USDC vault paused withdrawals for an hour", "memory_type": "fact",
            "occurred_at": "2026-03-02T09:00:00Z"}))
        since = json.loads(await ok(session, "memory_search", {"query": "Morpho vault withdrawals paused",
                                                               "until": "2026-03-03"}))
        assert [r["id"] for r in since["results"]] == [dated["id"]]  # the rest were written now
        assert since["results"][0]["occurred_at"] == "2026-03-02T09:00:00.000Z"
        assert "ISO 8601" in await refused(session, "memory_save", {"content": "x", "occurred_at": "yesterday"})
        await ok(session, "memory_save", {"content": "Swapped 2 ETH to USDC on Uniswap at 7 bps slippage",
                                          "memory_type": "episode"})
        episodes = json.loads(await ok(session, "episode_search", {"query": "what did my ETH swap cost"}))
        assert episodes["results"][0]["summary"] == "Swapped 2 ETH to USDC on Uniswap at 7 bps slippage"

        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["clade://digest/{query}"]
        read = await session.read_resource("clade://digest/" + quote("stETH depeg", safe=""))
        doc = read.contents[0]
        assert isinstance(doc, types.TextResourceContents) and "Lido withdrawals" in doc.text

    run(daemon.data, body)
    listed = daemon.request("GET", "/v1/entries", params={"limit": 10}).json()["entries"]
    assert {e["content"] for e in listed} >= {"Curve stETH pool depegs when Lido withdrawals queue",
                                              "Base gas is cheap", "Arbitrum sequencer pauses happen"}


def test_refused_inputs_are_tool_errors_with_the_apis_message(daemon: DaemonProc) -> None:
    async def body(session: ClientSession) -> None:
        message = await refused(session, "memory_save", {"content": ""})
        assert message == "input.content: must not be empty"  # the API's own words
        assert "importance" in await refused(session, "memory_save", {"content": "x", "importance": 7})
        assert "extra" in (await refused(session, "memory_search", {"query": "x", "limit": 3})).lower()
        assert "session" in await refused(session, "working_memory_read", {"session": "no spaces allowed"})
        assert "session" in await refused(session, "working_memory_read", {"session": ".."})
        assert "session: field required" in await refused(session, "working_memory_close", {})
        assert "no tool 'rm_rf'" in await refused(session, "rm_rf", {})
        # 10 MiB in one argument: refused before it reaches the daemon, and the session goes on
        huge = await refused(session, "memory_save", {"content": "x" * (10 * 1024 * 1024)})
        assert "arguments too large" in huge and str(MAX_ARGUMENT_BYTES) in huge
        almost = "y" * (MAX_ARGUMENT_BYTES - 100)
        wm = await refused(session, "working_memory_write", {"session": "s", "content": almost})
        assert "at most 65536 bytes" in wm  # under the MCP limit, over the API's working-memory limit
        with pytest.raises(Exception, match="unknown resource"):
            await session.read_resource("clade://elsewhere/x")
        assert json.loads(await ok(session, "memory_save", {"content": "still alive", "memory_type": "fact"}))["id"]

    run(daemon.data, body)
    assert daemon.proc.poll() is None


def test_outcome_reaches_the_api(daemon: DaemonProc) -> None:
    made = daemon.request("POST", "/v1/memory", json={"content": "Route USDC swaps via 0.05% pools",
                                                      "memory_type": "heuristic"}).json()
    result: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        result["bad"] = await session.call_tool("memory_outcome", {"entry_id": "../../v1/status", "effect": "positive",
                                                                    "metric": "pnl_usd"})
        result["ok"] = await session.call_tool("memory_outcome", {"entry_id": made["id"], "effect": "positive",
                                                                   "metric": "pnl_usd", "value": 12.5})

    run(daemon.data, body)
    assert result["bad"].is_error and "entry_id" in text(result["bad"])  # the API's own refusal
    assert not result["ok"].is_error, text(result["ok"])
    assert daemon.request("GET", f"/v1/entries/{made['id']}").json()["outcomes"]["positive"] == 1


def test_a_daemon_that_goes_away_gives_a_clear_error(daemon: DaemonProc) -> None:
    async def body(session: ClientSession) -> None:
        await ok(session, "working_memory_read", {"session": "s"})
        daemon.proc.send_signal(signal.SIGSTOP)  # alive but silent: the call is bounded by --timeout
        try:
            with anyio.fail_after(30):
                silent = await refused(session, "working_memory_read", {"session": "s"})
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        assert "unreachable" in silent and "clade run" in silent
        await ok(session, "working_memory_read", {"session": "s"})  # back: the next call reconnects
        assert daemon.stop() == 0
        with anyio.fail_after(30):  # bounded: no hang
            message = await refused(session, "memory_search", {"query": "anything"})
        assert "unreachable" in message and "clade run" in message
        with anyio.fail_after(30):
            assert "unreachable" in await refused(session, "working_memory_read", {"session": "s"})

    run(daemon.data, body, "--timeout", "3")
