"""CLI commands for the Styx client (registered by `daemon.cli.main`); they ask the running daemon.

    clade styx status [--json]           outbox depth and age, parked items, spend, the pusher's counters
                                         (without a running daemon: read from the store, no counters)
    clade styx retry (ID | --all)        put parked items back in the queue
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from daemon.cli.backends import backend_for
from daemon.cli.render import renders
from daemon.client import DaemonClient
from daemon.datadir import DataDir
from daemon.errors import UsageError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser], *,
             common: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    p = command("styx", cmd_styx_status, "the Styx client: outbox status, retry parked items")
    sub = p.add_subparsers(dest="styx_command", required=True, metavar="SUBCOMMAND", parser_class=parser_class)
    sub.add_parser("status", parents=[common], help="outbox depth, oldest item, parked items, failures").set_defaults(
        handler=cmd_styx_status)
    retry = sub.add_parser("retry", parents=[common], help="put parked items back in the queue")
    retry.set_defaults(handler=cmd_styx_retry)
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("key", nargs="?", metavar="ID", help="an item's idempotency key (PEER_ID:SEQ)")
    which.add_argument("--all", action="store_true", help="every parked item")


def _client(data: DataDir) -> DaemonClient:
    client = DaemonClient.for_data_dir(data)
    if client is None:
        raise UsageError(f"no daemon runs on {data.root}: the Styx outbox is drained by `clade run`")
    return client


def _status_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    age = "" if doc["oldest_age_s"] is None else f", oldest {doc['oldest_age_s']:.0f} s"
    counters = ("the daemon is not running" if doc["delivered"] is None
                else f"{doc['delivered']} delivered, {doc['failures']} failed calls")
    print(f"styx {doc['url']}: {doc['queue_depth']} waiting{age}, {doc['parked']} parked, {counters}")
    spend = doc["spend"]
    cap = doc.get("budget_month_usd")
    print(f"  spend {spend['month']}: {spend['usd']:.4f}" + ("" if cap is None else f" of {cap:g}")
          + f" USD ({spend['calls']} calls, {spend['items']} items, "
          f"{spend['queries']} queries)" + (f"; last success {doc['last_success_at']}" if doc["last_success_at"]
                                             else ""))
    if doc["last_error"]:
        print(f"  last error: {doc['last_error']}")
    for item in doc["parked_items"]:
        print(f"  parked {item['idempotency_key']} ({item['kind']}): {item['reason']}")
    if doc["paused_by_budget"]:
        print(f"  paused by the spend budget (this month {doc['spend_month_usd']:.4f} USD): resumes next period")
    if doc["outbox_warning"]:
        print("  the outbox is past [styx] outbox_warn: nothing is dropped, but Styx is not keeping up")


@renders(_status_text)
def cmd_styx_status(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).styx_status()  # no daemon: what waits in the store, no pusher's counters


def _retry_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['unparked']} item(s) back in the queue")


@renders(_retry_text)
def cmd_styx_retry(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    body = {"all": True} if args.all else {"idempotency_key": args.key}
    return dict(_client(data).call("POST", "/v1/styx/retry", body=body))
