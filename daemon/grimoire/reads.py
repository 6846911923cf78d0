"""The Grimoire's reads of entries: by id, pinned, listed, by keyword (FTS5, BM25), counted.

`EntryReads` is mixed into `Grimoire` (daemon/grimoire/store.py), which owns the connection
and the writes; it needs only `_conn`. Every method runs on the calling thread (the daemon
calls them through `DaemonState.on_reader`/`on_writer`), on a snapshot where it says so.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self, TypeVar

from crdt import Category, Kind
from crdt.ops import SlotKind
from daemon.errors import NotFound

from .belief import Belief, BeliefPolicy
from .drift_store import DriftState, read_baseline, read_drift_state
from .evidence_store import BELIEF, beliefs
from .id_lists import IN_LIST, as_list
from .keywords import QueryTerms, affordable, query_words, searchable_text
from .lexical import words as lexical_words
from .records import Entry
from .replication import SqliteBackend
from .rows import (
    ENTRY_COLUMN_NAMES,
    ENTRY_COLUMNS,
    RANK_COLUMN_COUNT,
    RANK_COLUMNS,
    RankFields,
    entry_from_row,
    rank_fields,
)
from .short_ids import ID_LENGTH, SHOWN, checked_prefix, the_one
from .trust import TrustPolicy
from .trust_store import AlertState, TrustView, ViewCache, alert_state

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from daemon.embedding.embedder import EmbeddingInfo
from .vitality import Vitality, read_vitality

__all__ = ["EntryReads", "RecallHit", "StoreCounts"]

_VIEWS = ViewCache()  # siblings' trust per store connection, read again only after a commit (`trust_view`)


T = TypeVar("T")


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
    archived_for_capacity: int = 0  # of `archived`: by the curator because the Grimoire was over its budget


class EntryReads:
    """Reads of the `entries` table over `self._conn` (the store's one connection)."""

    _conn: sqlite3.Connection

    @contextmanager
    def _snapshot(self) -> Iterator[SqliteBackend]:
        """One read transaction (a consistent snapshot in WAL mode) and a read-only backend on it;
        inside a transaction already open (`read_snapshot`, a write), that one."""
        if self._conn.in_transaction:
            yield SqliteBackend(self._conn, local_replica=None, stored_ms=0)
            return
        self._conn.execute("BEGIN")
        try:
            yield SqliteBackend(self._conn, local_replica=None, stored_ms=0)
        finally:
            self._conn.execute("COMMIT")

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Every read inside sees one state of the file (a read transaction in WAL mode: writers
        go on meanwhile); a recall gathers its evidence in one. Re-entrant."""
        with self._snapshot():
            yield

    def _named(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Rows of a query as `sqlite3.Row` (columns read by name)."""
        cursor = self._conn.cursor()
        cursor.row_factory = sqlite3.Row
        try:
            return list(cursor.execute(sql, params).fetchall())
        finally:
            cursor.close()

    def resolve_id(self, text: str) -> str:
        """The full id an entry id or a unique prefix of one names (the rules: short_ids.py):
        a full id is returned as given (its read says whether it exists); a prefix must start
        exactly one entry's id. Raises `NotFound` when nothing matches (or `text` is no id at
        all), `UsageError` for an ambiguous prefix (naming up to five candidates) or one too short."""
        given = checked_prefix(text, "entry")
        if len(given) == ID_LENGTH:
            return given
        found = [str(r[0]) for r in self._conn.execute(
            "SELECT id FROM entries WHERE id >= ? AND id < ? ORDER BY id LIMIT ?", (given, given + "g", SHOWN + 1))]
        return the_one(given, found, "entry")

    def get(self, entry_id: str) -> Entry:
        """The entry with this id (archived ones too); raises `NotFound`."""
        rows = self._named(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        if not rows:
            raise NotFound(f"no entry with id {entry_id!r}")
        return entry_from_row(rows[0])

    def rank_fields(self, entry_ids: Sequence[str]) -> list[RankFields]:
        """What ranking needs of these entries (any order; unknown ids are skipped)."""
        return [rank_fields(r) for r in self.rows_by_id(RANK_COLUMNS, entry_ids)]

    def rank_rows(self, entry_ids: Sequence[str]) -> list[tuple[RankFields, str]]:
        """`rank_fields` of these entries and, with each, its `keywords.searchable_text` (what
        lexical coverage reads), in one read (any order; unknown ids are skipped)."""
        out: list[tuple[RankFields, str]] = []
        for start in range(0, len(entry_ids), 500):
            chunk = list(entry_ids[start:start + 500])
            for row in self._conn.execute(f"SELECT {RANK_COLUMNS}, content, tags, protocols FROM entries "
                                          f"WHERE id IN {IN_LIST}", (as_list(chunk),)):
                out.append((rank_fields(row), searchable_text(*row[RANK_COLUMN_COUNT:RANK_COLUMN_COUNT + 3])))
        return out

    def rows_by_id(self, columns: str, entry_ids: Sequence[str]) -> list[Any]:
        """Rows of `columns` (trusted SQL, never user input) for these ids, as `sqlite3.Row` (by
        position or by name); unknown ids skipped."""
        rows: list[Any] = []
        for start in range(0, len(entry_ids), 500):
            chunk = list(entry_ids[start:start + 500])
            rows.extend(self._named(
                f"SELECT {columns} FROM entries WHERE id IN {IN_LIST}", (as_list(chunk),)))
        return rows

    def trust_view(self, policy: TrustPolicy, *, now_ms: int) -> TrustView | None:
        """Siblings' trust under `policy` (trust_store.author_views), one view per connection kept
        until anything is committed (`ViewCache`): recall, entry documents, the belief and the
        crossing gate share it. None when trust is off."""
        return _VIEWS.views(self, self._conn, now_ms=now_ms, policy=policy) if policy.enabled else None

    def author_trust(self, policy: TrustPolicy, *, now_ms: int) -> TrustView:
        """Every sibling author's trust under `policy`, computed even when trust is off (what
        `GET /v1/trust` shows); cached like `trust_view`."""
        return _VIEWS.views(self, self._conn, now_ms=now_ms, policy=policy)

    def trust_alerts(self) -> AlertState:
        """The suspect and distrusted authors as last recorded (trust_store.alert_state)."""
        return alert_state(self._conn)

    def drift_state(self) -> DriftState | None:
        """The last embedding drift check as stored (drift_store.py), or None."""
        return read_drift_state(self._conn)

    def drift_baseline(self, info: EmbeddingInfo) -> NDArray[np.float32] | None:
        """The reference documents' baseline vectors in `info`'s space (drift_store.py), or None."""
        return read_baseline(self._conn, info)

    def vitality(self) -> Vitality:
        """The golem's vitality as last set (vitality.py)."""
        return read_vitality(self._conn)

    def working_memory(self, session: str) -> tuple[str, int | None]:
        """A session's working-memory text and when it was last written (empty, None: never)."""
        row = self._conn.execute("SELECT content, updated_ms FROM working_memory WHERE session = ?",
                                 (session,)).fetchone()
        return ("", None) if row is None else (str(row[0]), int(row[1]))

    def on_snapshot(self, read: Callable[[Self], T]) -> T:
        """`read(self)` on one read snapshot: the named reads it makes (counts, `vitality`,
        `trust_alerts`, `drift_state`, the Styx room's) see one consistent state (the metrics'
        scrape). `read` must not call a method that opens a snapshot or a write itself."""
        with self._snapshot():
            return read(self)

    def entry_figures(self) -> tuple[dict[tuple[str, bool], int], int]:
        """Entries counted by (kind, archived), and how many (archived too) have no vector yet."""
        counts = {(str(kind), bool(archived)): int(n) for kind, archived, n in self._conn.execute(
            "SELECT kind, archived, count(*) FROM entries GROUP BY kind, archived")}
        (backlog,) = self._conn.execute(
            "SELECT count(*) FROM entries INDEXED BY entries_unembedded WHERE embedding IS NULL").fetchone()
        return counts, int(backlog)

    def leaving(self, entry_id: str) -> bool | None:
        """Whether an entry may leave this golem, and how: None when it crosses nowhere (held as a
        repeat or inherited, refuted, not active), else whether the curator promoted it."""
        row = self._conn.execute(
            "SELECT promoted_ms FROM entries WHERE id = ? AND status = 'active' AND crossing_hold IS NULL "
            "AND refuted_ms IS NULL", (entry_id,)).fetchone()
        return None if row is None else row[0] is not None

    def body_seq(self, entry_id: str, author: str) -> int:
        """The sequence number of the author's body op of an entry (the Styx idempotency key's)."""
        row = self._conn.execute("SELECT seq FROM ops WHERE entry_id = ? AND slot = ? AND writer = ?",
                                 (entry_id, int(SlotKind.BODY), author)).fetchone()
        if row is None:
            raise NotFound(f"no body op of entry {entry_id!r} by {author!r}")
        return int(row[0])

    def own_reflection_since(self, author: str, since_ms: int) -> str | None:
        """The id of `author`'s bloodstained death reflection stored at or after `since_ms`, if any."""
        row = self._conn.execute(
            "SELECT id FROM entries WHERE author = ? AND kind = 'death_reflection' AND bloodstain = 1 "
            "AND stored_ms >= ? ORDER BY stored_ms, id LIMIT 1", (author, since_ms)).fetchone()
        return None if row is None else str(row[0])

    def own_tallies(self, author: str) -> dict[str, tuple[str, bool, int, int]]:
        """For each of `author`'s live entries: (sensitivity, promoted, outcomes positive plus
        confirmations, outcomes negative plus contradictions)."""
        return {str(r[0]): (str(r[1]), r[2] is not None, int(r[3]), int(r[4])) for r in self._conn.execute(
            "SELECT id, sensitivity, promoted_ms, outcomes_positive + confirms, outcomes_negative + contradicts "
            "FROM entries WHERE author = ? AND archived = 0 AND status = 'active'", (author,))}

    def beliefs(self, entry_ids: Sequence[str], policy: TrustPolicy, *, now_ms: int,
                belief: BeliefPolicy = BELIEF) -> dict[str, Belief]:
        """The pooled belief of each of these entries (belief.py): siblings' evidence weighed by
        the trust view under `policy` (every member in full when trust is off)."""
        return beliefs(self._conn, entry_ids, self.trust_view(policy, now_ms=now_ms), belief)

    def with_beliefs(self, entries: Sequence[Entry], policy: TrustPolicy, *, now_ms: int) -> list[Entry]:
        """`entries`, each with its pooled belief attached (what the entry document shows)."""
        found = self.beliefs([e.id for e in entries], policy, now_ms=now_ms)
        return [replace(e, belief=found.get(e.id)) for e in entries]

    def get_many(self, entry_ids: Sequence[str]) -> list[Entry]:
        """The entries with these ids that exist (any order; unknown ids are skipped)."""
        return [entry_from_row(r) for r in self.rows_by_id(ENTRY_COLUMNS, entry_ids)]

    def pinned(self, *, tags: Sequence[str] = (), fact_keys: Sequence[str] = (), limit: int = 64) -> list[Entry]:
        """Active, unarchived entries carrying one of `tags`, and facts whose content starts with
        `KEY:` or `KEY =` for one of `fact_keys` (case-insensitive); newest first, at most `limit`.

        FTS5 narrows the rows (a phrase in the tags column, an initial phrase in the content);
        the exact rule is then checked on each row, so no FTS syntax leaks from config values.
        """
        found: dict[str, Entry] = {}

        def candidates(column: str, label: str, initial: bool) -> list[Entry]:
            words = lexical_words(label.lower())
            if not words:
                return []
            match = f'{column} : {"^ " if initial else ""}"{" ".join(words)}"'
            rows = self._named(
                f"SELECT {_prefixed('e.')} FROM entries_fts JOIN entries e ON e.rid = entries_fts.rowid "
                "WHERE entries_fts MATCH ? AND e.archived = 0 AND e.status = 'active' "
                "ORDER BY e.created_hlc DESC LIMIT ?", (match, 4 * limit))
            return [entry_from_row(r) for r in rows]

        for tag in tags:
            for entry in candidates("tags", tag, False):
                if tag.casefold() in (t.casefold() for t in entry.body.tags):
                    found.setdefault(entry.id, entry)
        for key in fact_keys:
            rule = re.compile(rf"\s*{re.escape(key)}\s*[:=]", re.IGNORECASE)
            for entry in candidates("content", key, True):
                if entry.body.kind is Kind.FACT and rule.match(entry.body.content):
                    found.setdefault(entry.id, entry)
        ordered = sorted(found.values(), key=lambda e: (-e.body.created.pack(), e.id))
        return ordered[:limit]

    def list_entries(
        self, *, kinds: Sequence[Kind] = (), limit: int = 50, include_archived: bool = False
    ) -> list[Entry]:
        """Newest first; `kinds` empty means all kinds."""
        where, params = _filters(kinds, include_archived, None)
        rows = self._named(
            f"SELECT {ENTRY_COLUMNS} FROM entries {where} ORDER BY created_hlc DESC LIMIT ?",
            (*params, int(limit)),
        )
        return [entry_from_row(r) for r in rows]

    def keyword_search(
        self,
        query: str,
        *,
        k: int = 10,
        kinds: Sequence[Kind] = (),
        min_importance: float | None = None,
    ) -> list[RecallHit]:
        """Keyword search (FTS5, BM25) over content, tags and protocols of live entries: the
        store's own primitive (ranked recall is recall.py's, on top of `keyword_scores`).

        The query is treated as plain words (never as FTS5 syntax); raises `UsageError`
        if it has none.
        """
        scored = self.keyword_scores(query, k=k, kinds=kinds, min_importance=min_importance)
        by_id = {e.id: e for e in self.get_many([i for i, _ in scored])}
        return [RecallHit(by_id[i], score) for i, score in scored if i in by_id]

    def keyword_scores(
        self,
        query: str,
        *,
        k: int = 10,
        kinds: Sequence[Kind] = (),
        min_importance: float | None = None,
        terms: QueryTerms | None = None,
        categories: Sequence[Category] = (),
        include_sensitive: bool = True,
    ) -> list[tuple[str, float]]:
        """(id, BM25 score) of the best keyword matches among live entries (unarchived, active)
        of `kinds` and `categories` (empty: any), sensitive ones only with `include_sensitive`,
        best first.

        Ranks inside FTS5 first (over-fetching 4×k rowids) and only then joins the entries
        table for the filters, so a common word over 50,000 entries does not drag every
        matching row through the join; when the filters leave fewer than k of those, it ranks
        every match (at most `keywords.MAX_POSTINGS` postings) and filters before the cut.
        Raises `UsageError` if the query has no words. `terms`: the query's
        `keywords.query_terms`, when the caller has them already.
        """
        words = list(terms.match) if terms is not None else affordable(self._conn, query_words(query))
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        where, params = _filters(kinds, False, min_importance, column_prefix="e.")
        where = where.replace("WHERE", "AND", 1) if where else ""
        where += " AND e.status = 'active'"
        if categories:
            where += f" AND e.category IN {IN_LIST}"
            params.append(as_list(Category(c).value for c in categories))
        if not include_sensitive:
            where += " AND e.sensitivity != 'sensitive'"
        # `n`: how many matches the inner ranking kept (all of them when fewer than 4×k exist).
        sql = ("SELECT e.id, r.rank, r.n FROM (SELECT rowid, rank, count(*) OVER () AS n FROM (SELECT rowid, "
               "bm25(entries_fts, 1.0, 0.5, 0.5) AS rank FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rank "
               f"LIMIT ?)) r JOIN entries e ON e.rid = r.rowid WHERE 1 {where} ORDER BY r.rank LIMIT ?")
        inner = 4 * int(k)
        rows = self._conn.execute(sql, (match, inner, *params, int(k))).fetchall()
        if len(rows) < k and (not rows or rows[0][2] >= inner):
            # The filters held back most of the first 4×k and there are more: rank every match, filter, cut.
            rows = self._conn.execute(sql, (match, -1, *params, int(k))).fetchall()
        return [(str(r[0]), -float(r[1])) for r in rows]

    def counts(self) -> StoreCounts:
        """Entry totals, all read from one snapshot (so they agree with each other)."""
        with self._snapshot():
            total, archived, for_capacity = self._conn.execute(
                "SELECT count(*), coalesce(sum(archived), 0), "
                "coalesce(sum(archived = 1 AND archived_reason = 'over_capacity'), 0) FROM entries"
            ).fetchone()
            by_kind = dict(
                self._conn.execute(
                    "SELECT kind, count(*) FROM entries WHERE archived = 0 GROUP BY kind ORDER BY kind"
                ).fetchall()
            )
        return StoreCounts(entries=int(total), archived=int(archived), by_kind=by_kind,
                           archived_for_capacity=int(for_capacity))

    def confidence_histogram(self, bins: int = 10) -> list[int]:
        """Live (unarchived) entries counted by local confidence in `bins` equal buckets over
        [0, 1] (the last bucket includes 1.0)."""
        counts = [0] * bins
        rows = self._conn.execute(
            "SELECT min(max(CAST(local_confidence * ? AS INTEGER), 0), ? - 1) AS b, count(*) FROM entries "
            "WHERE archived = 0 GROUP BY b", (bins, bins)).fetchall()
        for bucket, n in rows:
            counts[int(bucket)] = int(n)
        return counts


def _prefixed(prefix: str) -> str:
    return ", ".join(prefix + c for c in ENTRY_COLUMN_NAMES)


def _filters(
    kinds: Sequence[Kind], include_archived: bool, min_importance: float | None, *, column_prefix: str = ""
) -> tuple[str, list[Any]]:
    p = column_prefix
    clauses: list[str] = []
    params: list[Any] = []
    if not include_archived:
        clauses.append(f"{p}archived = 0")
    if kinds:
        clauses.append(f"{p}kind IN {IN_LIST}")
        params.append(as_list(Kind(k).value for k in kinds))
    if min_importance is not None:
        clauses.append(f"{p}importance >= ?")
        params.append(float(min_importance))
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params
