"""Agent memory on the store: per-session working memory, write-then-compact flushes and
lesson imports (synchronous functions over an open `Grimoire`).

The daemon runs them in its writer thread; the CLI calls them directly when no daemon runs.

- **Working memory** is one text (≤ 64 KiB of UTF-8) per session, kept in `working_memory`.
  Closing a session turns every line marked `LESSON:`, `STRATEGY:`, `WARNING:` or `FACT:` into
  a long-term entry (heuristic, strategy_outcome, warning, fact) tagged `session:<name>`, then
  clears the session, all in one transaction.
- **One write door**: every entry written here passes daemon/grimoire/write_door.py (the repeat
  hold for warnings) like any other own write; callers validate first (`flush_news`,
  `lesson_news`, `marked_news`), prepare vectors off the writer's thread, then write.
- **Idempotency**: every entry written here is recorded in `agent_migrations` under a scope
  (`session/<name>` or `lessons`) and the hash of its kind and whitespace-normalised content,
  in the same transaction as the entry. A line (or flushed fact, or lesson) already recorded in
  its scope is not written again: retried closes, flushes and imports create nothing new.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from crdt import InvalidValue, Kind, Timestamp
from daemon.contract.requests import MAX_FLUSH_ITEMS, MAX_LESSONS, MAX_WORKING_MEMORY_BYTES, SESSION_PATTERN, MemoryIn
from daemon.errors import UsageError
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.agent_store import SessionClear, set_working_memory, write_once
from daemon.grimoire.fields import EntryFields
from daemon.grimoire.store import LocalIdentity
from daemon.grimoire.write_door import Prepared, Written

__all__ = [
    "PREFIX_KINDS",
    "ContentTooLarge",
    "Lesson",
    "Marked",
    "check_session",
    "check_working_text",
    "checked_entry",
    "close_working_memory",
    "flush_facts",
    "flush_news",
    "import_lessons",
    "lesson_news",
    "marked_news",
    "new_entry",
    "parse_lessons",
    "parse_memory_lines",
    "read_working_memory",
    "session_tag",
    "tagged_line",
    "write_working_memory",
]

# First character a letter or digit; at most 40, so the tag `session:<name>` fits the 48-character label limit.
_SESSION = re.compile(SESSION_PATTERN)
PREFIX_KINDS: dict[str, Kind] = {
    "LESSON": Kind.HEURISTIC, "STRATEGY": Kind.STRATEGY_OUTCOME, "WARNING": Kind.WARNING, "FACT": Kind.FACT,
}
_TAGGED = re.compile(r"^\s*(?:[-*+]\s+)?(LESSON|STRATEGY|WARNING|FACT):(.*)$")
_BULLET = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:\s+(?:\[[ xX]\]\s+)?|$)")
_RULE = re.compile(r"^(?:[-*_=]\s*){3,}$")
_VALIDATION_AUTHOR = "validation"  # a syntactically valid peer id: checks bodies before any identity exists


class ContentTooLarge(UsageError):
    """Working memory over its size limit (HTTP 413)."""


@dataclass(frozen=True, slots=True)
class Lesson:
    line: int
    memory: MemoryIn


# -- validation ------------------------------------------------------------------------


def check_session(name: str) -> str:
    """A session name: 1–40 of `A-Z a-z 0-9 . _ -`, starting with a letter or digit."""
    if not _SESSION.fullmatch(name):
        shown = name if len(name) <= 80 else name[:77] + "..."
        raise UsageError(f"session {shown!r} is not a valid name: 1..40 characters of A-Z a-z 0-9 . _ -, "
                         "starting with a letter or digit")
    return name


def session_tag(session: str) -> str:
    return f"session:{session}"


def check_working_text(text: str) -> str:
    """Working-memory text: valid UTF-8, no NUL or other control characters (tab, newline and
    carriage return are fine), at most 64 KiB encoded (`ContentTooLarge` beyond)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UsageError(f"content: is not valid UTF-8 (lone surrogate at character {exc.start})") from None
    if size > MAX_WORKING_MEMORY_BYTES:
        raise ContentTooLarge(f"content: {size} bytes of UTF-8; working memory holds at most "
                              f"{MAX_WORKING_MEMORY_BYTES} bytes per session")
    for i, ch in enumerate(text):
        code = ord(ch)
        if code == 0:
            raise UsageError(f"content: NUL character at character {i}; working memory is text")
        if (code < 32 and ch not in "\t\n\r") or code == 127:
            raise UsageError(f"content: control character U+{code:04X} at character {i}; "
                             "only tab, newline and carriage return are allowed")
    return text


def new_entry(memory: EntryFields, *, extra_tags: Sequence[str] = ()) -> NewEntry:
    """The entry a memory body (as for POST /v1/memory, not an episode) describes."""
    return memory.entry_fields().new_entry(extra_tags=extra_tags)


def checked_entry(memory: EntryFields, label: str, *, extra_tags: Sequence[str] = ()) -> NewEntry:
    """`new_entry`, with every entry rule checked now; errors name `label`."""
    if isinstance(memory, MemoryIn) and memory.memory_type == "episode":
        raise UsageError(f"{label}: memory_type episode is not accepted here: episodes are raw observations "
                         "outside the Grimoire's transaction (write them with POST /v1/memory or /v1/episodes)")
    try:
        new = new_entry(memory, extra_tags=extra_tags)
        new.body(_VALIDATION_AUTHOR, Timestamp(0))
    except InvalidValue as exc:
        raise UsageError(f"{label}: {exc}") from None
    return new


def tagged_line(line: str) -> tuple[Kind, str] | None:
    """(kind, content) of a working-memory line marked `LESSON:` etc. (optionally as a list item)."""
    found = _TAGGED.match(line)
    if found is None:
        return None
    return PREFIX_KINDS[found.group(1)], found.group(2).strip()


def line_key(kind: Kind, content: str) -> str:
    """The idempotency key of an entry: its kind and whitespace-normalised content."""
    normal = " ".join(content.split())
    return hashlib.blake2b(f"{kind.value}\x1f{normal}".encode(), digest_size=16).hexdigest()


# -- batches -------------------------------------------------------------------------
# Each batch is validated first (pure: `flush_news`, `lesson_news`, `marked_news`), then the
# caller prepares the vectors the write door needs (daemon/grimoire/write_door.py) off the
# writer's thread, then the batch is written through the door in one transaction.


def _write_batch(store: Grimoire, identity: LocalIdentity, scope: str, prepared: Prepared, *,
                 now_ms: int, label: Callable[[int], str], clear: SessionClear | None = None) -> Written:
    """Write the prepared entries not yet recorded in `scope`, and their records, through the
    write door in one transaction (daemon/grimoire/agent_store.py, `write_once`)."""
    keys = [line_key(new.kind, new.content) for new in prepared.news]
    return write_once(store, identity, scope, prepared, keys, now_ms=now_ms, label=label, clear=clear)


def flush_news(session: str, facts: Sequence[EntryFields]) -> list[NewEntry]:
    """The entries a flush writes, every rule checked (an error names `facts[i]`); episodes refused."""
    check_session(session)
    if not 1 <= len(facts) <= MAX_FLUSH_ITEMS:
        raise UsageError(f"facts: {len(facts)} items; a flush holds 1..{MAX_FLUSH_ITEMS}")
    tag = session_tag(session)
    return [checked_entry(f, f"facts[{i}]", extra_tags=(tag,)) for i, f in enumerate(facts)]


def flush_facts(store: Grimoire, identity: LocalIdentity, session: str, prepared: Prepared, *,
                now_ms: int) -> Written:
    """Store every fact (`flush_news`) tagged with the session, all or none.

    A fact already recorded in this session (same kind and content) is not written again; its
    earlier id is returned in its place."""
    return _write_batch(store, identity, f"session/{session}", prepared, now_ms=now_ms,
                        label=lambda i: f"facts[{i}]")


def lesson_news(lessons: Sequence[EntryFields], *,
                label: Callable[[int], str] = lambda i: f"lessons[{i}]") -> list[NewEntry]:
    """The entries an import writes, every rule checked (an error names `label(i)`)."""
    if not 1 <= len(lessons) <= MAX_LESSONS:
        raise UsageError(f"lessons: {len(lessons)} items; an import holds 1..{MAX_LESSONS}")
    return [checked_entry(m, label(i)) for i, m in enumerate(lessons)]


def import_lessons(store: Grimoire, identity: LocalIdentity, prepared: Prepared, *, now_ms: int,
                   label: Callable[[int], str] = lambda i: f"lessons[{i}]") -> Written:
    """Store lessons (`lesson_news`) all or none; one imported before (same kind and content) is skipped."""
    return _write_batch(store, identity, "lessons", prepared, now_ms=now_ms, label=label)


# -- working memory ------------------------------------------------------------------


def read_working_memory(store: Grimoire, session: str) -> dict[str, Any]:
    """`{session, content, bytes, updated_ms}`; an unknown session reads as empty (updated_ms null)."""
    check_session(session)
    content, updated = store.working_memory(session)
    return {"session": session, "content": content, "bytes": len(content.encode("utf-8")), "updated_ms": updated}


def write_working_memory(store: Grimoire, session: str, content: str, *, now_ms: int) -> dict[str, Any]:
    """Replace the session's text (empty text clears it)."""
    check_session(session)
    check_working_text(content)
    set_working_memory(store, session, content, now_ms=now_ms)
    return {"session": session, "bytes": len(content.encode("utf-8")), "updated_ms": now_ms if content else None}


def parse_memory_lines(content: str) -> list[tuple[int, Kind, str]]:
    """(line number, kind, content) of every marked line."""
    out = []
    for number, line in enumerate(content.splitlines(), start=1):
        tagged = tagged_line(line)
        if tagged is not None:
            out.append((number, *tagged))
    return out


@dataclass(frozen=True, slots=True)
class Marked:
    """A session's working memory as read for a close: its text and the entries its marked lines make."""

    session: str
    content: str
    news: list[NewEntry]
    lines: list[int]


def marked_news(store: Grimoire, session: str) -> Marked:
    """Read the session's marked lines as entries, every rule checked.

    A line that breaks an entry rule (empty after its marker, over 4 KiB) refuses the close,
    naming the line: nothing is migrated and the session is kept."""
    check_session(session)
    content = read_working_memory(store, session)["content"]
    marked = parse_memory_lines(content)
    tag = session_tag(session)
    news = []
    for number, kind, text in marked:
        new = NewEntry(kind=kind, content=text, tags=(tag,))
        try:
            new.body(_VALIDATION_AUTHOR, Timestamp(0))
        except InvalidValue as exc:
            raise UsageError(f"working memory line {number}: {exc}") from None
        news.append(new)
    return Marked(session, content, news, [number for number, _, _ in marked])


def close_working_memory(store: Grimoire, identity: LocalIdentity, marked: Marked, prepared: Prepared, *,
                         now_ms: int) -> Written:
    """Migrate the marked lines (`marked_news`) into entries, then clear the session; one
    transaction. If the session's text changed since it was read, nothing is written and the
    close is refused (`Conflict`): the caller reads it again."""
    return _write_batch(store, identity, f"session/{marked.session}", prepared, now_ms=now_ms,
                        label=lambda i: f"working memory line {marked.lines[i]}",
                        clear=SessionClear(marked.session, marked.content))


# -- lesson files --------------------------------------------------------------------


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _markdown_line(line: str) -> tuple[Kind, str] | None:
    text = line.strip()
    if not text or text.startswith("#") or _RULE.match(text):
        return None
    bullet = _BULLET.match(text)
    if bullet is not None:
        text = text[bullet.end():].strip()
        if not text:
            return None
    tagged = tagged_line(text)
    return tagged if tagged is not None else (Kind.HEURISTIC, text)


def _jsonl_object(text: str, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: expected a JSON object (a memory body as for POST /v1/memory)")
    return doc


def parse_memory_bodies(raw: bytes, *, name: str, extra_tags: Sequence[str] = ()) -> list[Lesson]:
    """JSONL: one memory body (as for POST /v1/memory) per non-blank line, each fully checked."""
    out = []
    for number, line in enumerate(_lines(raw, name), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            memory = MemoryIn.model_validate(_jsonl_object(line, where))
        except ValidationError as exc:
            raise UsageError(f"{where}: {_first_error(exc)}") from None
        checked_entry(memory, where, extra_tags=extra_tags)
        out.append(Lesson(number, memory))
    return out


def _lines(raw: bytes, name: str) -> list[str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UsageError(f"{name}:{line}: not valid UTF-8") from None
    return text.removeprefix("\ufeff").splitlines()


def parse_lessons(raw: bytes, *, name: str, fmt: str = "auto") -> list[Lesson]:
    """Lessons from a markdown file (one per line or list item; `LESSON:`, `STRATEGY:`,
    `WARNING:`, `FACT:` pick the kind, others are heuristics; headings, rules and blank lines
    skipped) or JSONL (one memory body per line). Every lesson is checked; the first bad line
    is refused with its number. `fmt`: auto (by suffix, else by the first non-blank line),
    markdown or jsonl."""
    if fmt == "auto":
        suffix = Path(name).suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            fmt = "jsonl"
        elif suffix in (".md", ".markdown", ".txt"):
            fmt = "markdown"
        else:
            first = next((ln.strip() for ln in _lines(raw, name) if ln.strip()), "")
            fmt = "jsonl" if first.startswith("{") else "markdown"
    if fmt == "jsonl":
        lessons = parse_memory_bodies(raw, name=name)
    elif fmt == "markdown":
        lessons = []
        for number, line in enumerate(_lines(raw, name), start=1):
            parsed = _markdown_line(line)
            if parsed is None:
                continue
            kind, text = parsed
            where = f"{name}:{number}"
            try:
                memory = MemoryIn.model_validate({"content": text, "memory_type": kind.value})
            except ValidationError as exc:
                raise UsageError(f"{where}: {_first_error(exc)}") from None
            checked_entry(memory, where)
            lessons.append(Lesson(number, memory))
    else:
        raise UsageError(f"format {fmt!r}: expected auto, markdown or jsonl")
    if not lessons:
        raise UsageError(f"{name}: no lessons in the file")
    if len(lessons) > MAX_LESSONS:
        raise UsageError(f"{name}: {len(lessons)} lessons; at most {MAX_LESSONS} per import (split the file)")
    return lessons

