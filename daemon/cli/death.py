"""`clade die`: a running golem dies and the clade hears it (registered by `daemon.cli.main`).

    clade die --reflection FILE|- [--cause TEXT] [--json]

Asks the running daemon (`POST /v1/death`): the reflection to the clade and Styx, a handful
of insights promoted, the testament and a vault backup written, a `death` event and the
`[death] webhook` notice; every step's outcome is printed. Run again, it resumes what failed.
With no daemon running it refuses: `clade testament` is the offline death.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.cli.curator import read_reflection
from daemon.cli.render import renders
from daemon.client import DaemonClient
from daemon.datadir import DataDir
from daemon.errors import UsageError
from daemon.service.death_plan import MAX_CAUSE_CHARS

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def _cause(text: str) -> str:
    cause = text.strip()
    if not cause or len(cause) > MAX_CAUSE_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in cause):
        raise argparse.ArgumentTypeError(f"the cause must be one line of 1..{MAX_CAUSE_CHARS} characters")
    return cause


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    p = command("die", cmd_die, "the golem dies: reflection to the clade and Styx, testament, backup, webhook")
    p.add_argument("--reflection", type=Path, required=True, metavar="FILE",
                   help="the death reflection (≤ 4 KiB of UTF-8), stored bloodstained; '-' reads stdin")
    p.add_argument("--cause", type=_cause, default=None, metavar="TEXT", help="why (kept from the first call)")


def _died_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for step in doc["steps"]:
        print(f"  {step['name']:<12} {step['status']:<8} {step['detail']}")
    if doc["testament_path"]:
        print(f"testament: {doc['testament_path']}")
    print("the golem is dead; every step done" if doc["complete"]
          else "the golem is dead, but a step failed: run `clade die` again to retry it")


@renders(_died_text)
def cmd_die(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    client = DaemonClient.for_data_dir(data)
    if client is None:
        raise UsageError(f"no daemon runs on {data.root}: start it (`clade run`) so the clade hears the death, "
                         "or write the testament offline (`clade testament --out FILE --reflection FILE`)")
    reflection = read_reflection(args.reflection)
    body: dict[str, Any] = {"reflection": reflection}
    if args.cause is not None:
        body["cause"] = args.cause
    return dict(client.call("POST", "/v1/death", body=body))
