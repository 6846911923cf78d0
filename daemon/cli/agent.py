"""CLI commands for agent memory (registered by `daemon.cli.main`).

    clade wm show SESSION | set SESSION TEXT|- | close SESSION
    clade flush FILE [--session S]          FILE: JSON {"session", "facts"} or JSONL (one memory body a line)
    clade lessons import FILE [--format auto|markdown|jsonl]
    clade init --lessons FILE [--lessons-format …]

Each goes through the running daemon when one serves the data dir (its single writer; siblings
hear of new warnings at once), else works directly on the store (`daemon.cli.backends`): same
checks, same output.
Files are checked completely before anything is written; a bad line is named by its number.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.agent import memory as am
from daemon.cli import render
from daemon.cli.backends import backend_for
from daemon.cli.render import renders
from daemon.contract.requests import MAX_FLUSH_ITEMS, MAX_WORKING_MEMORY_BYTES, FlushFact, FlushIn
from daemon.datadir import DataDir
from daemon.errors import UsageError

__all__ = ["register", "render"]

Handler = Callable[[argparse.Namespace, DataDir], Any]
_FORMATS = ["auto", "markdown", "jsonl"]


def register(sub: argparse._SubParsersAction[Any],
             command: Callable[[str, Handler, str], argparse.ArgumentParser], *,
             common: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    p = command("wm", cmd_wm_show, "working memory of an agent session: show, set, close")
    wm = p.add_subparsers(dest="wm_command", required=True, metavar="SUBCOMMAND", parser_class=parser_class)
    show = wm.add_parser("show", parents=[common], help="print a session's working memory")
    show.set_defaults(handler=cmd_wm_show)
    show.add_argument("session", metavar="SESSION")
    put = wm.add_parser("set", parents=[common], help="replace a session's working memory")
    put.set_defaults(handler=cmd_wm_set)
    put.add_argument("session", metavar="SESSION")
    put.add_argument("text", metavar="TEXT", help="the content (≤ 64 KiB of UTF-8); '-' reads standard input")
    close = wm.add_parser("close", parents=[common],
                          help="migrate LESSON:/STRATEGY:/WARNING:/FACT: lines to long-term entries, then clear")
    close.set_defaults(handler=cmd_wm_close)
    close.add_argument("session", metavar="SESSION")

    p = command("flush", cmd_flush, "store facts of a session before compaction, all or none")
    p.add_argument("file", metavar="FILE", help='JSON {"session", "facts": [...]} or JSONL; - reads stdin')
    p.add_argument("--session", default=None, help="the session (required for JSONL)")

    p = command("lessons", cmd_lessons_import, "pre-seed lessons")
    lessons = p.add_subparsers(dest="lessons_command", required=True, metavar="SUBCOMMAND",
                               parser_class=parser_class)
    imp = lessons.add_parser("import", parents=[common], help="import lessons from markdown or JSONL, all or none")
    imp.set_defaults(handler=cmd_lessons_import)
    imp.add_argument("file", metavar="FILE", help="markdown (one lesson a line) or JSONL; - reads stdin")
    imp.add_argument("--format", choices=_FORMATS, default="auto")

    init = sub.choices["init"]
    init.add_argument("--lessons", default=None, metavar="FILE", help="then import lessons from FILE (see lessons)")
    init.add_argument("--lessons-format", choices=_FORMATS, default="auto")
    init.set_defaults(handler=_init_with_lessons(init.get_default("handler")))


def _read_file(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise UsageError(f"{name}: cannot read ({exc.strerror or exc})") from None


# -- working memory -----------------------------------------------------------------


def cmd_wm_show(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).working_memory(am.check_session(args.session))


def _content(text: str) -> str:
    if text != "-":
        return text
    raw = sys.stdin.buffer.read(MAX_WORKING_MEMORY_BYTES + 1)
    if len(raw) > MAX_WORKING_MEMORY_BYTES:
        raise am.ContentTooLarge(f"content: over {MAX_WORKING_MEMORY_BYTES} bytes on standard input; working "
                                 f"memory holds at most {MAX_WORKING_MEMORY_BYTES} bytes per session")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"content: is not valid UTF-8 (byte {exc.start} of standard input)") from None


def cmd_wm_set(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    session = am.check_session(args.session)
    content = am.check_working_text(_content(args.text))
    return backend_for(data).set_working_memory(session, content)


def cmd_wm_close(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).close_working_memory(am.check_session(args.session))


# -- flush ---------------------------------------------------------------------------


def _flush_body(raw: bytes, name: str, session: str | None) -> FlushIn:
    """The flush request a file describes, every fact checked (errors name the index or line)."""
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "facts" in doc:
        if session is not None and doc.get("session", session) != session:
            raise UsageError(f"{name}: session {doc['session']!r} differs from --session {session!r}")
        try:
            body = FlushIn.model_validate({**doc, "session": doc.get("session", session)})
        except ValidationError as exc:
            err = exc.errors()[0]
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise UsageError(f"{name}: {'.'.join(str(p) for p in err['loc'])}: {msg}") from None
        am.check_session(body.session)
        for i, fact in enumerate(body.facts):
            am.checked_entry(fact, f"{name}: facts[{i}]", extra_tags=(am.session_tag(body.session),))
        return body
    if session is None:
        raise UsageError(f'{name}: JSONL facts need --session (or write a JSON {{"session", "facts"}} document)')
    am.check_session(session)
    facts = am.parse_memory_bodies(raw, name=name, extra_tags=(am.session_tag(session),))
    if not 1 <= len(facts) <= MAX_FLUSH_ITEMS:
        raise UsageError(f"{name}: {len(facts)} facts; a flush holds 1..{MAX_FLUSH_ITEMS}")
    return FlushIn(session=session, facts=[FlushFact.model_validate(f.memory.model_dump(mode="json"))
                                          for f in facts])


def cmd_flush(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    name = "<stdin>" if args.file == "-" else args.file
    body = _flush_body(_read_file(args.file), name, args.session)
    return backend_for(data).flush(body)


# -- lessons -------------------------------------------------------------------------


def _import(data: DataDir, name: str, lessons: list[am.Lesson]) -> dict[str, Any]:
    return {"file": name, **backend_for(data).import_lessons(name, lessons)}


def _lessons(file: str, fmt: str) -> tuple[str, list[am.Lesson]]:
    name = "<stdin>" if file == "-" else file
    return name, am.parse_lessons(_read_file(file), name=name, fmt=fmt)


def cmd_lessons_import(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    name, lessons = _lessons(args.file, args.format)
    return _import(data, name, lessons)


def _init_with_lessons(init: Handler) -> Handler:
    def cmd_init(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
        if args.lessons is None:
            return dict(init(args, data))
        name, lessons = _lessons(args.lessons, args.lessons_format)  # checked before anything is created
        doc = dict(init(args, data))
        doc["lessons"] = _import(data, name, lessons)
        return doc

    return renders(render.init)(cmd_init)


# -- text output ---------------------------------------------------------------------


def _wm_shown(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(doc["content"], end="" if not doc["content"] or doc["content"].endswith("\n") else "\n")


def _wm_set(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"session {doc['session']}: {doc['bytes']} bytes")


def _wm_closed(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for entry_id in doc["migrated"]:
        print(entry_id)
    already = f"; {len(doc['existing'])} migrated before" if doc["existing"] else ""
    print(f"session {doc['session']}: {len(doc['migrated'])} entries migrated{already}; cleared")


def _flushed(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for entry_id in doc["ids"]:
        print(entry_id)
    print(f"session {doc['session']}: {doc['created']} stored, {len(doc['ids']) - doc['created']} stored before")


def _imported(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for entry_id in doc["ids"]:
        print(entry_id)
    print(f"{doc['file']}: {doc['created']} lessons imported, {doc['skipped']} imported before")


renders(_wm_shown)(cmd_wm_show)
renders(_wm_set)(cmd_wm_set)
renders(_wm_closed)(cmd_wm_close)
renders(_flushed)(cmd_flush)
renders(_imported)(cmd_lessons_import)
