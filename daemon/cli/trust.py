"""`clade peers distrust PEER`, `clade peers trust PEER`, `clade peers trust-status`: the operator's
path against a compromised sibling (daemon/api/trust.py). They talk to the running daemon.

`distrust` quarantines every entry of PEER on this golem at once (withheld from digests and
default searches, still readable; nothing deleted); `trust` lifts it. Both are local and
reversible; revoking the member for the whole clade is `clade revocations install`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from daemon.cli.render import renders
from daemon.client import DaemonClient
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError

__all__ = ["register"]

_PEER_ID = re.compile(r"^[A-Za-z0-9]{1,128}$")


def _peer_id(text: str) -> str:
    if not _PEER_ID.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a peer id (1..128 letters and digits, e.g. 12D3KooW…)")
    return text


def register(peers: Any, common: argparse.ArgumentParser) -> None:
    """Add the trust subcommands to the `clade peers` group `peers`."""
    for name, helptext in (("distrust", "quarantine every entry of a sibling here at once (local, reversible)"),
                           ("trust", "lift a distrust; forget the sibling's remembered burst and alert")):
        p = peers.add_parser(name, parents=[common], help=helptext)
        p.add_argument("peer_id", type=_peer_id, metavar="PEER_ID")
        p.set_defaults(handler=cmd_distrust if name == "distrust" else cmd_trust)
    p = peers.add_parser("trust-status", parents=[common], help="siblings' trust, evidence and budgets here")
    p.set_defaults(handler=cmd_trust_status)


def _client(data: DataDir) -> DaemonClient:
    client = DaemonClient.for_data_dir(data)
    if client is None:
        raise DaemonError(f"no clade daemon runs on {data.root}: start it with `clade run`")
    return client


def _mark(args: argparse.Namespace, data: DataDir, path: str) -> dict[str, Any]:
    if not _PEER_ID.match(str(args.peer_id)):
        raise UsageError(f"{args.peer_id!r} is not a peer id")
    return dict(_client(data).call("POST", path, body={"peer_id": args.peer_id}))


def cmd_distrust(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return _mark(args, data, "/v1/peers/distrust")


def cmd_trust(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return _mark(args, data, "/v1/peers/trust")


def cmd_trust_status(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return dict(_client(data).call("GET", "/v1/trust"))


def _marked(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if doc["distrusted"]:
        print(f"distrusted {doc['author']}: its {doc['entries']} entries here are quarantined "
              f"(readable, out of digests); undo with `clade peers trust {doc['author']}`")
    else:
        print(f"trusted {doc['author']} again: its {doc['entries']} entries follow the usual evidence rules")


def _status(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if not doc["authors"]:
        print("no sibling entries held yet")
    for a in doc["authors"]:
        flag = f"SUSPECT ({', '.join(a['reasons'])})" if a["suspect"] else "ok"
        print(f"{a['author']}  trust {a['trust']:.2f}  good {a['good']} bad {a['bad']}  "
              f"arrived {a['fresh_arrivals']} fresh / {a['arrivals']} in {doc['budget_window_s']} s "
              f"(budget {doc['budget_entries']})  {flag}")


renders(_marked)(cmd_distrust)
renders(_marked)(cmd_trust)
renders(_status)(cmd_trust_status)
