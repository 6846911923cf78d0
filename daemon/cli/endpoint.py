"""How `clade tui` and `clade mcp` name the daemon they talk to: its data dir (default), its
unix socket, or its TCP listener with a bearer token. One set of options, one resolution."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.datadir import DataDir
from daemon.errors import UsageError

if TYPE_CHECKING:
    from daemon.client import Endpoint

__all__ = ["add_endpoint_args", "endpoint_from"]


def add_endpoint_args(p: argparse.ArgumentParser) -> None:
    """--socket PATH | --url URL [--token TOKEN]."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path, default=None, metavar="PATH", help="the daemon's unix socket")
    where.add_argument("--url", default=None, metavar="URL", help="the daemon's TCP listener, e.g. "
                                                                  "http://127.0.0.1:7410 (with --token)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="bearer token for --url (default: [api] token of the data dir's config)")


def endpoint_from(args: argparse.Namespace, data: DataDir) -> Endpoint:
    """The endpoint the options name; `UsageError` for --token without --url. The data dir's
    `[api] token` is read only when --url comes without --token."""
    from daemon.client import Endpoint

    if args.token and not args.url:
        raise UsageError("--token goes with --url (the unix socket needs no token)")
    if args.url:
        return Endpoint(url=args.url, token=args.token or data.load_config().api.secret_token())
    if args.socket:
        return Endpoint(socket=args.socket)
    return Endpoint(data_dir=data.root)
