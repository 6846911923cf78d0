"""`clade tui`: the operator's terminal UI (the `tui` package), on this data dir's daemon.

    clade tui [--data-dir DIR | --socket PATH | --url URL [--token T]] [--read-only] [--theme T]

The daemon is found like every other command finds it (run.json in the data dir names the
socket), or named by its socket, or by its TCP URL with the bearer token (default: the data
dir's `[api] token`). Keys and colours come from the data dir's `[tui]` config section.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from daemon.cli.endpoint import add_endpoint_args, endpoint_from
from daemon.cli.render import renders
from daemon.datadir import DataDir
from daemon.errors import DaemonError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    p = command("tui", cmd_tui, "the operator's terminal UI: siblings, knowledge, live feed, actions")
    add_endpoint_args(p)
    p.add_argument("--read-only", action="store_true", help="watch only: every action is disabled")
    p.add_argument("--theme", choices=["auto", "truecolor", "256", "16", "mono"], default=None,
                   help="colours (default: [tui] theme, else from $COLORTERM/$TERM)")


def _nothing(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """The TUI has drawn everything already."""


@renders(_nothing)
def cmd_tui(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    from tui.main import run

    endpoint = endpoint_from(args, data)
    config = data.load_config()
    code = run(endpoint, config=config.tui, read_only=args.read_only, theme=args.theme)
    if code:
        raise DaemonError(f"the TUI stopped with status {code}")
    return {"exit": code}
