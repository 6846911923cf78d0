"""`clade peers`, `clade sync`, `clade revocations install`, `clade demo`: the sync commands.

All but `demo` talk to the running daemon (peers exist only while it runs);
`revocations install` also works on a stopped golem (the daemon reads the list at start).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.cli.backends import backend_for
from daemon.cli.render import renders
from daemon.client import DaemonClient
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser], common: argparse.ArgumentParser,
             parser_class: type[argparse.ArgumentParser], *, peer_addr: Callable[[str], str],
             positive: Callable[[str], int]) -> Any:
    """Add the sync commands; returns the `clade peers` subcommand group (cli/trust.py adds to it)."""
    p = command("peers", cmd_peers, "list known peers (connected, member, sync position, traffic)")
    sub = p.add_subparsers(dest="peers_command", required=False, metavar="SUBCOMMAND", parser_class=parser_class)
    connect = sub.add_parser("connect", parents=[common], help="dial a sibling now (and keep redialing it)")
    connect.add_argument("addr", type=peer_addr, metavar="MULTIADDR", help="/ip4/…/tcp/…/p2p/PEERID")
    drop = sub.add_parser("disconnect", parents=[common], help="drop a peer and refuse it for a while")
    drop.add_argument("peer_id", metavar="PEER_ID")
    drop.add_argument("--hold", type=positive, default=600, metavar="SECONDS",
                      help="refuse it (both ways) for this long (default 600)")
    p = command("sync", cmd_sync, "run anti-entropy now with one sibling, or with every connected one")
    p.add_argument("peer_id", nargs="?", default=None, metavar="PEER_ID")
    p = command("revocations", cmd_revocations, "install an owner-signed revocation list")
    rsub = p.add_subparsers(dest="revocations_command", required=True, metavar="SUBCOMMAND",
                            parser_class=parser_class)
    install = rsub.add_parser("install", parents=[common], help="adopt a revocation list (drops revoked peers)")
    install.add_argument("file", type=Path, metavar="REVOCATIONS")
    p = command("demo", cmd_demo, "start an owner and N golems on loopback, sync a few entries, report, stop")
    p.add_argument("--siblings", type=positive, default=3, metavar="N", help="golems to start (default 3, max 10)")
    return sub


def _client(data: DataDir) -> DaemonClient:
    client = DaemonClient.for_data_dir(data)
    if client is None:
        raise DaemonError(f"no clade daemon runs on {data.root}: start it with `clade run`")
    return client


def cmd_peers(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    sub = getattr(args, "peers_command", None)
    if sub == "connect":
        return dict(_client(data).call("POST", "/v1/peers/connect", body={"addr": args.addr}))
    if sub == "disconnect":
        return dict(_client(data).call("POST", "/v1/peers/disconnect",
                                       body={"peer_id": args.peer_id, "hold_s": args.hold}))
    return dict(_client(data).call("GET", "/v1/peers"))


def cmd_sync(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return dict(_client(data).call("POST", "/v1/sync", body={"peer_id": args.peer_id}))


def cmd_revocations(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    try:
        raw = args.file.read_bytes()
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read: {exc.strerror}") from None
    return backend_for(data).install_revocations(raw)


def cmd_demo(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    from daemon.testing.harness import run_demo

    if not 1 <= args.siblings <= 10:
        raise UsageError(f"--siblings {args.siblings}: between 1 and 10")
    return run_demo(args.siblings)


def _peers(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    sub = getattr(args, "peers_command", None)
    if sub == "connect":
        print(f"dialing {doc['peer_id']} at {doc['dialing']}")
    elif sub == "disconnect":
        print(f"disconnected {doc['peer_id']}; refused for {doc['held_s']:.0f} s")
    else:
        if not doc["peers"]:
            print("no peers known yet")
        for p in doc["peers"]:
            state = "member" if p["member"] else (f"refused: {p['refused']}" if p["refused"] else "stranger")
            link = "up  " if p["connected"] else "down"
            rtt = "-" if p["rtt_ms"] is None else f"{p['rtt_ms']:.1f}ms"
            position = f"behind {p['behind']} ahead {p['ahead']}" if p["behind"] is not None else "not synced"
            if p.get("withheld"):  # dots of private ops: not missing, never crossing
                position += f" withheld {p['withheld']}"
            print(f"{p['peer_id']}  {link}  {state:<8}  rtt {rtt:<8} {position}  "
                  f"in {p['msgs_in']}/{p['bytes_in']}B out {p['msgs_out']}/{p['bytes_out']}B")


def _synced(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for s in doc["synced"]:
        if "error" in s:
            print(f"{s['peer_id']}: {s['error']}")
        else:
            print(f"{s['peer_id']}: {s['applied']} ops applied in {s['rounds']} rounds, {s['seconds']} s")


def _revocations(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    verdict = "adopted" if doc["adopted"] else "not newer than the installed list; kept the installed one"
    print(f"revocation list v{doc['version']} ({len(doc['revoked'])} revoked): {verdict}")


def _demo(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(doc["report"])


renders(_peers)(cmd_peers)
renders(_synced)(cmd_sync)
renders(_revocations)(cmd_revocations)
renders(_demo)(cmd_demo)
