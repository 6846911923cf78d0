"""`clade episode verify ID`: mark an episode quality-verified (registered by `daemon.cli.main`).

Consolidation replays verified episodes only. Through the daemon when one runs
(`POST /v1/episodes/{id}/verify`), else on the episode log directly; idempotent either way.
"""

from __future__ import annotations

import argparse
from typing import Any

from daemon.cli.backends import backend_for
from daemon.cli.ids import ID_HELP
from daemon.cli.render import renders
from daemon.datadir import DataDir

__all__ = ["register"]


def register(episode_commands: Any, *, common: argparse.ArgumentParser) -> None:
    """Add `verify` to the `clade episode` subcommands (`episode_commands`: argparse's subparsers)."""
    p = episode_commands.add_parser("verify", parents=[common], help="mark an episode quality-verified "
                                                                     "(consolidation replays only those)")
    p.set_defaults(handler=cmd_episode_verify)
    p.add_argument("id", metavar="ID", help=ID_HELP)


def _verified_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['id']} verified" + ("" if doc["changed"] else " (already)"))


@renders(_verified_text)
def cmd_episode_verify(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).verify_episode(args.id)
