"""The Grimoire's SQLite side: entries, their FTS5 index, the local clock floor.

Durability contract: a write method returns only after COMMIT with `synchronous=FULL` in
WAL mode, so an acknowledged write survives kill -9 and power loss; a write is one
transaction, so a crash never leaves half an entry. Writers take the lock up front
(`BEGIN IMMEDIATE`) and wait up to the busy timeout for another writer; readers never
block writers (WAL). Methods are synchronous: the daemon calls them via `trio.to_thread`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crdt import EntryBody, HybridClock, Kind, Pad, Timestamp
from crdt.body import Category, Origin, Sensitivity

from ..errors import NotFound, StoreError, UsageError
from .records import Entry, NewEntry, dumps_list
from .schema import NewerSchema, migrate, user_version

__all__ = ["Grimoire", "RecallHit", "StoreCounts", "wall_clock_ms"]

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_QUERY_WORDS = 32
_ENTRY_COLUMNS = (
    "id, author, kind, category, content, tokens, chains, protocols, tags, strategy_id, "
    "importance, quality, sensitivity, pad_pleasure, pad_arousal, pad_dominance, origin, "
    "generation, bloodstain, created_hlc, confidence, status, superseded_by, provenance, "
    "local_confidence, access_count, last_accessed_ms, archived, stored_ms"
)


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch (the HLC's physical clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One keyword-search result: the entry and its BM25 relevance (higher is better)."""

    entry: Entry
    score: float


@dataclass(frozen=True, slots=True)
class StoreCounts:
    entries: int
    archived: int
    by_kind: dict[str, int]


class Grimoire:
    """An open `grimoire.db`. Use as a context manager or call `close()`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, wall_ms: Callable[[], int]) -> None:
        self._conn = conn
        self.path = path
        self._clock = HybridClock(wall_ms)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        create: bool = False,
        busy_timeout_ms: int = 10_000,
        wall_ms: Callable[[], int] = wall_clock_ms,
    ) -> Grimoire:
        """Open (and migrate) the store at `path`.

        Raises `StoreError` if it does not exist (unless `create`), is not a SQLite
        database, was written by a newer clade, or stays locked past the busy timeout.
        """
        if not create and not path.exists():
            raise StoreError(f"no Grimoire at {path}; run `clade init` first")
        try:
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                raise StoreError(f"{path}: cannot switch to WAL journal mode (got {mode})")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except NewerSchema as exc:
            conn.close()
            raise StoreError(f"{path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path}: {exc} (is it a clade Grimoire? restore it from a backup)") from None
        return cls(conn, path, wall_ms)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Grimoire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return user_version(self._conn)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: commit on success, roll back on any exception."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"{self.path}: {exc}; another writer holds the lock, retry later") from None
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")

    def _next_timestamp(self, conn: sqlite3.Connection) -> Timestamp:
        """A fresh HLC reading above every one this file has issued (call inside `_write`)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_hlc'").fetchone()
        if row is not None:
            self._clock.observe(Timestamp.unpack(row[0]))
        stamp = self._clock.now()
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('last_hlc', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (stamp.pack(),),
        )
        return stamp

    # -- writes --------------------------------------------------------------------

    def remember(self, new: NewEntry, *, author: str) -> Entry:
        """Write a local entry; returns it once committed. Raises `crdt.InvalidValue`."""
        return self.remember_many([new], author=author)[0]

    def remember_many(self, news: Sequence[NewEntry], *, author: str) -> list[Entry]:
        """Write several local entries in one transaction (all or none)."""
        now = wall_clock_ms()
        entries: list[Entry] = []
        with self._write() as conn:
            for new in news:
                body = new.body(author, self._next_timestamp(conn))
                entry = Entry(
                    body=body, confidence=float(new.confidence), status="active",
                    superseded_by=None, provenance=Origin.SELF.value,
                    local_confidence=float(new.confidence), access_count=0,
                    last_accessed_ms=None, archived=False, stored_ms=now,
                )
                self._insert(conn, entry)
                entries.append(entry)
        return entries

    @staticmethod
    def _insert(conn: sqlite3.Connection, entry: Entry) -> None:
        b = entry.body
        pad = b.pad.as_tuple() if b.pad is not None else (None, None, None)
        conn.execute(
            f"INSERT INTO entries ({_ENTRY_COLUMNS}) VALUES ({', '.join('?' * 29)})",
            (
                b.id, b.author, b.kind.value, None if b.category is None else b.category.value,
                b.content, dumps_list(b.tokens), dumps_list(b.chains), dumps_list(b.protocols),
                dumps_list(b.tags), b.strategy_id, b.importance, b.quality, b.sensitivity.value,
                *pad, b.origin.value, b.generation, int(b.bloodstain), b.created.pack(),
                entry.confidence, entry.status, entry.superseded_by, entry.provenance,
                entry.local_confidence, entry.access_count, entry.last_accessed_ms,
                int(entry.archived), entry.stored_ms,
            ),
        )

    def forget(self, entry_id: str) -> bool:
        """Archive an entry locally (no op crosses). False if it was already archived.

        Raises `NotFound` for an unknown id.
        """
        with self._write() as conn:
            row = conn.execute("SELECT archived FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if row is None:
                raise NotFound(f"no entry with id {entry_id!r}")
            if row[0]:
                return False
            conn.execute("UPDATE entries SET archived = 1 WHERE id = ?", (entry_id,))
            return True

    # -- reads ---------------------------------------------------------------------

    def get(self, entry_id: str) -> Entry:
        """The entry with this id (archived ones too); raises `NotFound`."""
        row = self._conn.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no entry with id {entry_id!r}")
        return _entry_from_row(row)

    def list_entries(
        self, *, kinds: Sequence[Kind] = (), limit: int = 50, include_archived: bool = False
    ) -> list[Entry]:
        """Newest first; `kinds` empty means all kinds."""
        where, params = _filters(kinds, include_archived, None)
        rows = self._conn.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM entries {where} ORDER BY created_hlc DESC LIMIT ?",
            (*params, int(limit)),
        ).fetchall()
        return [_entry_from_row(r) for r in rows]

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        kinds: Sequence[Kind] = (),
        min_importance: float | None = None,
    ) -> list[RecallHit]:
        """Keyword search (FTS5, BM25) over content, tags and protocols of live entries.

        The query is treated as plain words (never as FTS5 syntax); raises `UsageError`
        if it has none.
        """
        words = [w.lower() for w in _WORD.findall(query)][:_MAX_QUERY_WORDS]
        if not words:
            raise UsageError(f"query {query!r} has no searchable words (letters or digits)")
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        where, params = _filters(kinds, False, min_importance)
        where = where.replace("WHERE", "AND", 1) if where else ""
        rows = self._conn.execute(
            f"SELECT {_prefixed('e.')}, bm25(entries_fts, 1.0, 0.5, 0.5) AS rank "
            f"FROM entries_fts JOIN entries e ON e.rid = entries_fts.rowid "
            f"WHERE entries_fts MATCH ? {where} ORDER BY rank LIMIT ?",
            (match, *params, int(k)),
        ).fetchall()
        return [RecallHit(_entry_from_row(r[:-1]), -float(r[-1])) for r in rows]

    def counts(self) -> StoreCounts:
        total, archived = self._conn.execute(
            "SELECT count(*), coalesce(sum(archived), 0) FROM entries"
        ).fetchone()
        by_kind = dict(
            self._conn.execute(
                "SELECT kind, count(*) FROM entries WHERE archived = 0 GROUP BY kind ORDER BY kind"
            ).fetchall()
        )
        return StoreCounts(entries=int(total), archived=int(archived), by_kind=by_kind)

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` verdict ("ok" when healthy)."""
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def checkpoint(self) -> None:
        """Fold the WAL into the main file (on clean shutdown)."""
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _prefixed(prefix: str) -> str:
    return ", ".join(prefix + c.strip() for c in _ENTRY_COLUMNS.split(","))


def _filters(
    kinds: Sequence[Kind], include_archived: bool, min_importance: float | None
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if not include_archived:
        clauses.append("archived = 0")
    if kinds:
        clauses.append(f"kind IN ({', '.join('?' * len(kinds))})")
        params.extend(Kind(k).value for k in kinds)
    if min_importance is not None:
        clauses.append("importance >= ?")
        params.append(float(min_importance))
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _entry_from_row(row: Sequence[Any]) -> Entry:
    (eid, author, kind, category, content, tokens, chains, protocols, tags, strategy_id,
     importance, quality, sensitivity, pp, pa, pd, origin, generation, bloodstain, created,
     confidence, status, superseded_by, provenance, local_confidence, access_count,
     last_accessed_ms, archived, stored_ms) = row
    body = EntryBody(
        author=author, kind=Kind(kind), content=content, created=Timestamp.unpack(created),
        category=None if category is None else Category(category),
        tokens=tuple(json.loads(tokens)), chains=tuple(json.loads(chains)),
        protocols=tuple(json.loads(protocols)), tags=tuple(json.loads(tags)),
        strategy_id=strategy_id, importance=importance, quality=quality,
        sensitivity=Sensitivity(sensitivity),
        pad=None if pp is None else Pad(pleasure=pp, arousal=pa, dominance=pd),
        origin=Origin(origin), generation=generation, bloodstain=bool(bloodstain),
    )
    if body.id != eid:
        raise StoreError(f"entry {eid}: stored body does not hash to its id (corrupt row)")
    return Entry(
        body=body, confidence=confidence, status=status, superseded_by=superseded_by,
        provenance=provenance, local_confidence=local_confidence, access_count=access_count,
        last_accessed_ms=last_accessed_ms, archived=bool(archived), stored_ms=stored_ms,
    )
