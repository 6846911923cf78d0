"""`clade mcp`: serve this golem's memory to an MCP client (Claude Desktop, Claude Code, …) on stdio.

    clade mcp [--data-dir DIR | --socket PATH | --url URL [--token T]] [--timeout S]

The daemon is found as `clade tui` finds it (run.json in the data dir, re-read on reconnect,
or a socket, or a TCP URL with the bearer token). stdout carries the protocol: nothing else
is printed there; logs go to stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from daemon.cli.endpoint import add_endpoint_args, endpoint_from
from daemon.cli.render import renders
from daemon.datadir import DataDir
from daemon.errors import UsageError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.1 <= value <= 600:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 600 seconds, got {text}")
    return value


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    p = command("mcp", cmd_mcp, "serve this golem's memory over the Model Context Protocol (stdio)")
    add_endpoint_args(p)
    p.add_argument("--timeout", type=_timeout, default=30.0, metavar="SECONDS",
                   help="give up on a daemon call after this long (default 30)")


def _nothing(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """stdout was the protocol's: print nothing after it."""


@renders(_nothing)
def cmd_mcp(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    from daemon.mcp.server import serve_stdio

    if args.json:
        raise UsageError("clade mcp speaks MCP on stdout; --json does not apply")
    serve_stdio(endpoint_from(args, data), timeout_s=args.timeout)
    return {}
