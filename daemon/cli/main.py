"""`clade`: the command line.

Every command takes `--json` (one JSON document on stdout) and `--data-dir`. Exit codes:
0 success, 2 bad usage or input (nothing written), 1 any other failure. Errors are one
line on stderr that names the bad value and what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sqlite3
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from crdt import InvalidValue, Kind
from crdt.body import Category, Pad
from crypto import CryptoError, MembershipError
from crypto.vault import VaultError
from daemon.cli import agent as cli_agent
from daemon.cli import clade as cli_clade
from daemon.cli import completion as cli_completion
from daemon.cli import curator as cli_curator
from daemon.cli import death as cli_death
from daemon.cli import episodes as cli_episodes
from daemon.cli import knowledge as cli_knowledge
from daemon.cli import mcp as cli_mcp
from daemon.cli import memory as cli_memory
from daemon.cli import p2p as cli_p2p
from daemon.cli import render
from daemon.cli import styx as cli_styx
from daemon.cli import trust as cli_trust
from daemon.cli import tui as cli_tui
from daemon.cli.backends import backend_for
from daemon.cli.ids import ID_HELP, entry_id
from daemon.cli.render import renders
from daemon.client import DaemonClient
from daemon.config import check_multiaddr, load_config
from daemon.datadir import DataDir
from daemon.embedding.embedder import EPISODE_MODEL, Embedder, ModelIntegrityError, get_embedder
from daemon.errors import DaemonError, UsageError
from daemon.grimoire import Episode, wall_clock_ms
from daemon.grimoire.episode_recall import EpisodeQuery, recall_episodes
from daemon.grimoire.fields import cli_options, parse_event_time
from daemon.grimoire.storage_faults import storage_refusal

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (expected 0..1)") from None
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (expected 0..1)")
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
        return value

    return parse


_positive_int = _int_at_least(1)


def _listen_addr(text: str) -> str:
    try:
        return check_multiaddr(text, peer=False)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _peer_addr(text: str) -> str:
    try:
        return check_multiaddr(text, peer=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

_non_negative_int = _int_at_least(0)


def _pad(text: str) -> Pad:
    parts = text.split(",")
    try:
        p, a, d = (float(x) for x in parts)
        return Pad(pleasure=p, arousal=a, dominance=d)
    except (ValueError, InvalidValue):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not three numbers in -1..1 separated by commas (pleasure,arousal,dominance)"
        ) from None


_KINDS = [k.value for k in Kind]
_CATEGORIES = [c.value for c in Category]
_PARSERS: dict[str, Callable[[str], Any]] = {"unit": _unit, "positive_int": _positive_int, "pad": _pad}


def _entry_options(p: argparse.ArgumentParser) -> None:
    """`clade remember`'s options, one per field of the entry model (`EntryFields`)."""
    for path, info, cli in cli_options():
        dest = "_".join(path)
        if cli.positional:
            p.add_argument(dest, metavar=cli.flag, help=cli.help)
            continue
        kw: dict[str, Any] = {"dest": dest, "help": cli.help, "metavar": cli.metavar or path[-1].upper()}
        choices = _choices(info.annotation)
        if choices:
            kw["choices"] = choices
            kw["help"] = f"{cli.help}: one of {', '.join(choices)}"
        if cli.parse:
            kw["type"] = _PARSERS[cli.parse]
        if cli.repeat:
            p.add_argument(cli.flag, action="append", default=[], **kw)
        else:
            default = info.get_default(call_default_factory=True)
            p.add_argument(cli.flag, default=getattr(default, "value", default), **kw)


def _choices(annotation: Any) -> list[str]:
    """The allowed values of an enum field (optional or annotated or not), else []."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    for arg in typing.get_args(annotation):
        if found := _choices(arg):
            return found
    return []


def _entry_document(args: argparse.Namespace) -> dict[str, Any]:
    """The entry fields given on the command line, as the JSON document the API takes."""
    doc: dict[str, Any] = {}
    for path, _info, _cli in cli_options():
        value = getattr(args, "_".join(path))
        if isinstance(value, Pad):
            value = list(value.as_tuple())
        target = doc
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    doc["content"] = _read_text_arg(doc["content"])
    return doc


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for tests and docs)."""
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON document on stdout")
    common.add_argument("--data-dir", default=argparse.SUPPRESS,
                        help="data directory (default: $CLADE_DATA_DIR, else ./.clade)")

    parser = _Parser(prog="clade", description="Peer-to-peer clade sync daemon and Grimoire CLI.")
    parser.add_argument("--json", action="store_true", default=False, help="print one JSON document on stdout")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $CLADE_DATA_DIR, else ./.clade)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def command(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    p = command("init", cmd_init, "create the data directory and a new identity")
    p.add_argument("--force", action="store_true", help="replace an existing identity (the old key is kept)")
    command("id", cmd_id, "print this golem's peer id")
    command("status", cmd_status, "summarise the data directory")
    p = command("run", cmd_run, "run the daemon in the foreground (control API, curator, backups)")
    p.add_argument("--config", type=Path, default=None, help="config file (default: $DATA/config.toml)")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default=None)
    p.add_argument("--listen", action="append", type=_listen_addr, default=None, metavar="MULTIADDR",
                   help="p2p listen address, repeatable (replaces p2p.listen), e.g. /ip4/0.0.0.0/tcp/4001")
    p.add_argument("--bootstrap", action="append", type=_peer_addr, default=None, metavar="MULTIADDR",
                   help="sibling to dial, /ip4/…/tcp/…/p2p/PEERID, repeatable (added to p2p.bootstrap)")
    p.add_argument("--no-mdns", action="store_true", help="do not discover siblings by mDNS")
    p.add_argument("--styx-url", default=None, metavar="URL",
                   help="enable Styx with this endpoint (as CLADE_STYX__ENABLED=true CLADE_STYX__URL=URL)")

    p = command("config", cmd_config_show, "configuration")
    config_sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND", parser_class=_Parser)
    config_sub.add_parser("show", parents=[common], help="print the effective configuration").set_defaults(
        handler=cmd_config_show
    )

    p = command("remember", cmd_remember, "write a knowledge entry; prints its id")
    _entry_options(p)

    p = command("retract", cmd_retract, "retract an entry you wrote (siblings learn of it)")
    p.add_argument("id", metavar="ID", help=ID_HELP)

    p.add_argument("--superseded-by", default=None, metavar="ID", help="the entry that replaces it (an id or prefix)")

    p = command("endorse", cmd_endorse, "confirm (or --contradict) a sibling's entry")
    p.add_argument("id", metavar="ID", help=ID_HELP)
    p.add_argument("--contradict", action="store_true", help="count a contradiction instead of a confirmation")

    p = command("show", cmd_show, "print one entry")
    p.add_argument("id", metavar="ID", help=ID_HELP)

    p = command("list", cmd_list, "list entries, newest first")
    p.add_argument("--kind", action="append", choices=_KINDS, default=[], metavar="KIND", help="repeatable")
    p.add_argument("--limit", type=_positive_int, default=50)
    p.add_argument("--archived", action="store_true", help="include forgotten (archived) entries")

    p = command("forget", cmd_forget, "archive an entry locally (nothing is sent to siblings)")
    p.add_argument("id", metavar="ID", help=ID_HELP)

    p = command("episode", cmd_episode_list, "raw local observations")
    ep_sub = p.add_subparsers(dest="episode_command", required=True, metavar="SUBCOMMAND", parser_class=_Parser)
    add = ep_sub.add_parser("add", parents=[common], help="append an episode")
    add.set_defaults(handler=cmd_episode_add)
    add.add_argument("--summary", required=True)
    add.add_argument("--protocol", default=None)
    add.add_argument("--block", type=_non_negative_int, default=None)
    add.add_argument("--category", choices=_CATEGORIES, default=None, metavar="CATEGORY")
    add.add_argument("--payload-json", default="null", metavar="JSON")
    add.add_argument("--curiosity", type=_unit, default=0.0)
    add.add_argument("--importance", type=_unit, default=0.5)
    add.add_argument("--verified", action="store_true", help="quality-verified: consolidation replays only those")
    add.add_argument("--pad", type=_pad, default=None, metavar="P,A,D",
                     help="PAD when observed, each -1..1 (write --pad=-0.2,0.5,0 when it starts with a minus)")
    add.add_argument("--occurred-at", type=_event_time, default=None, metavar="WHEN",
                     help="when it was observed (ISO 8601; no offset means UTC); default now")
    found = ep_sub.add_parser("search", parents=[common], help="find episodes by meaning")
    found.set_defaults(handler=cmd_episode_search)
    found.add_argument("query", metavar="QUERY")
    found.add_argument("--k", type=_positive_int, default=10)
    lst = ep_sub.add_parser("list", parents=[common], help="list episodes, newest first")
    lst.set_defaults(handler=cmd_episode_list)
    lst.add_argument("--limit", type=_positive_int, default=50)
    cli_episodes.register(ep_sub, common=common)

    cli_clade.register(sub, command, common, _Parser)
    cli_trust.register(cli_p2p.register(command, common, _Parser, peer_addr=_peer_addr, positive=_positive_int), common)
    cli_memory.register(command, kinds=_KINDS, unit=_unit, positive=_positive_int, pad=_pad, parser_class=_Parser,
                        common=common)
    cli_agent.register(sub, command, common=common, parser_class=_Parser)
    cli_curator.register(command, common=common, parser_class=_Parser)
    cli_knowledge.register(command)
    cli_death.register(command)
    cli_styx.register(command, common=common, parser_class=_Parser)
    cli_tui.register(command)
    cli_mcp.register(command)
    cli_completion.register(command, build_parser)
    return parser


# -- handlers: each returns a JSON-ready document; render.text() prints it for humans --


@renders(render.init)
def cmd_init(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    report = data.init(force=args.force)
    return {
        "data_dir": str(data.root),
        "peer_id": report.peer_id,
        "created": report.created,
        "replaced_identity": None if report.replaced_identity is None else str(report.replaced_identity),
    }


@renders(render.peer_id)
def cmd_id(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    identity = data.load_identity()
    return {"peer_id": identity.peer_id, "public_key": identity.public_key.hex(), "data_dir": str(data.root)}


@renders(render.status)
def cmd_status(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    from daemon.grimoire import vectors  # numpy: only for the commands that need it

    identity = data.load_identity()
    with data.open_store() as store:
        counts = store.counts()
        schema = store.schema_version
        vitality = store.vitality().to_json()
        backlog = vectors.embedding_backlog(store)
    return {
        "data_dir": str(data.root),
        "peer_id": identity.peer_id,
        "schema_version": schema,
        "entries": counts.entries - counts.archived,
        "archived": counts.archived,
        "archived_for_capacity": counts.archived_for_capacity,
        "by_kind": counts.by_kind,
        "embedding_backlog": backlog,
        "episodes": data.open_episodes().count(),
        "vitality": vitality,
        "daemon_memory": _daemon_memory(data),
    }


def _daemon_memory(data: DataDir) -> dict[str, Any] | None:
    """The running daemon's `memory` (GET /v1/status: RSS, peak, the model), None when no
    daemon serves the data dir or it cannot say."""
    client = DaemonClient.for_data_dir(data)
    if client is None:
        return None
    try:
        memory: dict[str, Any] | None = client.call("GET", "/v1/status").get("memory")
    except DaemonError:
        return None
    return memory


@renders(render.stopped)
def cmd_run(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    from daemon.api.app import listener_apps
    from daemon.service.runtime import run_daemon

    overrides: dict[str, Any] = {}
    if args.listen:
        overrides["listen"] = args.listen
    if args.bootstrap:
        configured = (load_config(args.config) if args.config else data.load_config()).p2p.bootstrap
        overrides["bootstrap"] = list(dict.fromkeys([*configured, *args.bootstrap]))
    if args.no_mdns:
        overrides["mdns"] = False
    if args.styx_url:
        os.environ["CLADE_STYX__ENABLED"] = "true"
        os.environ["CLADE_STYX__URL"] = args.styx_url
    return run_daemon(data, api=listener_apps, config_path=args.config, log_level=args.log_level,
                      p2p_overrides=overrides)


@renders(render.config)
def cmd_config_show(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return {"config_file": str(data.config_path), "config": data.load_config().model_dump(mode="json")}


def _read_text_arg(text: str) -> str:
    if text != "-":
        return text
    raw = sys.stdin.buffer.read(64 * 1024)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"content: is not valid UTF-8 (byte {exc.start} of standard input)") from None


@renders(render.id_only)
def cmd_remember(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).remember(_entry_document(args))


@renders(render.entry_state)
def cmd_retract(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    """Through the daemon when one runs (its publisher gossips the op), else on the store."""
    backend = backend_for(data)
    superseded_by = None if args.superseded_by is None else entry_id(backend, args.superseded_by)
    return backend.retract(entry_id(backend, args.id), superseded_by=superseded_by)


@renders(render.entry_state)
def cmd_endorse(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    """Through the daemon when one runs (its publisher gossips the op), else on the store."""
    backend = backend_for(data)
    return backend.endorse(entry_id(backend, args.id), confirm=not args.contradict)


@renders(render.entry_block)
def cmd_show(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).entry(args.id)


@renders(render.entries)
def cmd_list(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).entries(kinds=args.kind, limit=args.limit, archived=args.archived)


@renders(render.forgotten)
def cmd_forget(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    backend = backend_for(data)
    return backend.forget(entry_id(backend, args.id))


def _event_time(text: str) -> int:
    """`--occurred-at`: ISO 8601 (fields.parse_event_time) as Unix ms; argparse names a bad one."""
    try:
        return parse_event_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _episode_embedder(data: DataDir) -> Embedder:
    """Episodes (up to millions of raw observations, 384-d LanceDB column with an ANN index)
    use MiniLM alone, whatever vector space the knowledge entries use: cheap to append."""
    return get_embedder(data.root / "embedder", EPISODE_MODEL)


@renders(render.id_only)
def cmd_episode_add(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    draft = Episode(
        summary=args.summary,
        observed_ms=wall_clock_ms() if args.occurred_at is None else args.occurred_at,
        block_number=args.block,
        category=None if args.category is None else Category(args.category),
        protocol=args.protocol,
        payload_json=args.payload_json,
        curiosity=args.curiosity,
        importance=args.importance,
        quality_verified=args.verified,
        pad=args.pad,
    )
    try:
        vector = _episode_embedder(data).embed([draft.summary])[0]
        episode = dataclasses.replace(draft, embedding=tuple(float(x) for x in vector))
    except ModelIntegrityError as exc:
        # Keep the observation; it is only missing from semantic episode search.
        print(f"clade: warning: episode stored without an embedding: {exc}", file=sys.stderr)
        episode = draft
    data.open_episodes().append([episode])
    return {"id": episode.id, "episode": episode.to_json()}


@renders(render.episodes)
def cmd_episode_search(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    vector = _episode_embedder(data).embed([args.query])[0]
    found = recall_episodes(data.open_episodes(), [float(x) for x in vector], EpisodeQuery(k=args.k),
                            now_ms=wall_clock_ms())
    return {"query": args.query, "episodes": [{"similarity": round(h.similarity, 6), "score": round(h.score, 6),
                                               **h.episode.to_json()} for h in found]}


@renders(render.episodes)
def cmd_episode_list(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return {"episodes": [e.to_json() for e in data.open_episodes().scan(limit=args.limit)]}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `clade` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    data = DataDir.resolve(args.data_dir)
    try:
        document = args.handler(args, data)
        if args.json:
            print(json.dumps(document, ensure_ascii=False, indent=None))
        else:
            render.text(args, document)  # the renderer the command's handler named
        sys.stdout.flush()
        return 0
    except (UsageError, InvalidValue, MembershipError, VaultError) as exc:
        return _fail(2, str(exc))
    except (DaemonError, CryptoError) as exc:
        return _fail(1, _with_remedy(exc))
    except BrokenPipeError:
        # `clade list | head`: the reader went away; not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, sqlite3.Error) as exc:
        if storage_refusal(exc) is None:
            raise
        return _fail(1, _with_remedy(exc))  # a full or read-only disk: what to do, not a traceback
    except KeyboardInterrupt:
        return 130


def _with_remedy(exc: BaseException) -> str:
    """The error's text, and what to do when the storage refused (a full or read-only disk)."""
    refusal = storage_refusal(exc)
    return str(exc) if refusal is None else f"{exc}; {refusal.detail}"


def _fail(code: int, message: str) -> int:
    print(f"clade: error: {' '.join(message.split())}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
