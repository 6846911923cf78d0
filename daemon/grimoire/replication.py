"""The CRDT's storage in SQLite: `SqliteBackend` runs `crdt.replica` against grimoire.db.

Every call happens inside one store transaction. Putting an op also keeps the `entries`
rows (the materialised view retrieval reads) in step: a body op inserts the row, an
author op updates confidence and status, an endorse op adjusts the tallies, an evidence op
keeps the `evidence` table (evidence_store.py). The causal
context is loaded once per transaction and the replicas it changed are written back by
`flush()` before commit.

`join_delta` (a sibling's delta, catch-up's hot path) runs the backend `deferred`: op rows, new
entries rows and author-slot updates wait for `flush` and go in one `executemany` each (an
author op whose entry's row is still held back is folded into it, as the UPDATE would set it,
unless it changes the status: that UPDATE's trigger stamps `live_seq`), and before each piece
`prefetch` reads the stored slots, bodies and entry rows its ops will ask for in a few `IN (…)`
queries. tests/grimoire/test_join_fast_path.py holds it to a statement per op, row for row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence

import msgpack

from crdt import (
    ApplyReport,
    AuthorValue,
    CausalContext,
    DeltaJoin,
    Dot,
    EndorseValue,
    EntryBody,
    EvidenceValue,
    Op,
    SlotKind,
    Status,
    Timestamp,
    open_stored_op,
)
from crdt.seals import Seal

from .evidence_store import record_evidence
from .id_lists import IN_LIST, as_list
from .records import dumps_list
from .seal_store import put_seals
from .trust_store import record_endorsement

__all__ = ["CLADE_LOCAL_CONFIDENCE", "Piece", "SqliteBackend", "join_delta", "load_context", "raise_clock_floor"]

# docs/design/ecology.md: a sibling's entry enters with local confidence 0.4 (it must be re-earned).
CLADE_LOCAL_CONFIDENCE = 0.4
_OP_COLUMNS = "writer, seq, signed, signature"

_PUT_OP = (
    "INSERT INTO ops (entry_id, slot, writer, seq, hlc, signed, signature) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (entry_id, slot, writer) DO UPDATE SET seq = excluded.seq, hlc = excluded.hlc, "
    "signed = excluded.signed, signature = excluded.signature")
# The author changing its confidence re-anchors its own forgetting curve; a republish with the
# same confidence (promotion) leaves the decayed value alone.
_PUT_AUTHOR = (
    "UPDATE entries SET "
    "local_confidence = CASE WHEN provenance = 'self' AND confidence != ?1 THEN ?1 ELSE local_confidence END, "
    "decay_base = CASE WHEN provenance = 'self' AND confidence != ?1 THEN NULL ELSE decay_base END, "
    "decay_anchor_ms = CASE WHEN provenance = 'self' AND confidence != ?1 THEN ?4 ELSE decay_anchor_ms END, "
    "confidence = ?1, status = ?2, superseded_by = ?3 WHERE id = ?5")

_INSERT_ENTRY = (
    "INSERT INTO entries (id, author, kind, category, content, tokens, chains, protocols, tags, "
    "strategy_id, importance, quality, sensitivity, pad_pleasure, pad_arousal, pad_dominance, origin, "
    "generation, bloodstain, created_hlc, confidence, status, superseded_by, provenance, local_confidence, "
    "decay_anchor_ms, stored_ms, occurred_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO NOTHING")
# Positions in an `_INSERT_ENTRY` row that an author op folded into it sets (`_fold_author`).
_CONFIDENCE, _STATUS, _SUPERSEDED_BY, _PROVENANCE, _LOCAL_CONFIDENCE, _DECAY_ANCHOR_MS = 20, 21, 22, 23, 24, 25
_ACTIVE = Status.ACTIVE.label
_IN_CHUNK = 500  # ids per `IN (…)` of a prefetch (SQLite allows 32,766 variables; keep statements small)

Piece = tuple[Sequence[Op], Sequence[tuple[str | None, str]]]
"""Part of a delta: verified ops, and (writer, reason) for each op refused on the way (a bad
signature…; writer None when it was not even a peer id)."""


def _load_op(row: tuple[str, int, bytes, bytes]) -> Op:
    """Ops in grimoire.db were verified and validated when they arrived: read back, not re-admitted."""
    writer, _, signed, signature = row
    return open_stored_op(writer, signed, signature)


def stored_body(writer: str, signed: bytes, signature: bytes) -> EntryBody | None:
    """The entry body a stored slot-0 op holds (None if it holds none)."""
    value = open_stored_op(writer, signed, signature).value
    return value if isinstance(value, EntryBody) else None


def load_context(conn: sqlite3.Connection) -> CausalContext:
    """The causal context stored in grimoire.db."""
    rows = conn.execute("SELECT replica, vv, cloud FROM causal_context").fetchall()
    return CausalContext.from_rows((r, vv, msgpack.unpackb(cloud)) for r, vv, cloud in rows)


class SqliteBackend:
    """`crdt.Backend` over one open transaction of grimoire.db."""

    def __init__(self, conn: sqlite3.Connection, *, local_replica: str | None, stored_ms: int,
                 deferred: bool = False) -> None:
        self._conn = conn
        self._local = local_replica
        self._stored_ms = stored_ms
        # `deferred` (joining a sibling's delta, where nothing but this backend reads the
        # transaction until `flush`): op rows and author-slot updates are written by one
        # executemany each at `flush`, in the order they were put, instead of a statement per op
        # (bench_clade's catch-up ceiling). Reads of this backend see them meanwhile (`_put`,
        # `_by_dot`, `_bodies`).
        self._deferred = deferred
        self._op_rows: list[tuple[str, int, str, int, int, bytes, bytes]] = []
        self._author_rows: list[tuple[float, str, str | None, int, str]] = []
        # `deferred` also holds back the entries rows of new bodies (one executemany at `flush`,
        # in put order, so their rids are as before): an author op for such a row while no
        # update of it is queued is folded into the row (`_fold_author`) instead of an UPDATE.
        self._entry_rows: dict[str, list[object]] = {}
        self._updated: set[str] = set()  # entries with a queued author update: no folding into them
        self._existing: dict[str, bool] = {}  # entry id -> whether its entries row exists (`prefetch`)
        self._slots: dict[tuple[str, int, str], Op | None] = {}  # stored slots read ahead (`prefetch`)
        self._by_dot: dict[Dot, Op] = {}
        self._context: CausalContext | None = None
        self._snapshot: dict[str, tuple[int, list[int]]] = {}
        self._bodies: dict[str, EntryBody | None] = {}
        self.written: list[Op] = []  # every op put in this transaction, in order (the Styx outbox reads them)
        self._first_new_rid: int | None = None  # entries rows inserted since: rids >= it (none deleted)
        # Entries whose row this transaction inserted (so no stored op of theirs predates it),
        # and the ops put since: a slot of such an entry is answered without a query.
        self._new_entries: set[str] = set()
        self._put: dict[tuple[str, int, str], Op] = {}

    @property
    def context(self) -> CausalContext:
        if self._context is None:
            self._context = load_context(self._conn)
            self._snapshot = {r: (vv, cloud) for r, vv, cloud in self._context.to_rows()}
        return self._context

    def flush(self) -> None:
        """Index the new entries rows for keyword search and write back the context rows that
        changed; with `deferred`, first the op rows and author updates put since the last
        flush. Call before commit (and before reading the transaction other than through this
        backend)."""
        self._write_deferred()
        if self._first_new_rid is not None:
            # One INSERT … SELECT for the whole transaction: per-row FTS5 inserts (a trigger)
            # cost a third of joining a sibling's warning (bench_clade's catch-up ceiling).
            self._conn.execute(
                "INSERT INTO entries_fts (rowid, content, tags, protocols) "
                "SELECT rid, content, tags, protocols FROM entries WHERE rid >= ?", (self._first_new_rid,))
            self._first_new_rid = None
        if self._context is None:
            return
        for replica, vv, cloud in self._context.to_rows():
            if self._snapshot.get(replica) != (vv, cloud):
                self._conn.execute(
                    "INSERT INTO causal_context (replica, vv, cloud) VALUES (?, ?, ?) "
                    "ON CONFLICT (replica) DO UPDATE SET vv = excluded.vv, cloud = excluded.cloud",
                    (replica, vv, msgpack.packb(cloud)),
                )
                self._snapshot[replica] = (vv, cloud)

    def _write_deferred(self) -> None:
        if self._entry_rows:
            if self._first_new_rid is None:
                # A new rowid is one above the largest, so every row inserted now is at or above it.
                self._first_new_rid = int(self._conn.execute("SELECT coalesce(max(rid), 0) + 1 FROM entries")
                                          .fetchone()[0])
            self._conn.executemany(_INSERT_ENTRY, self._entry_rows.values())
            self._entry_rows = {}
            self._updated.clear()
        if self._op_rows:
            self._conn.executemany(_PUT_OP, self._op_rows)
            self._op_rows = []
        if self._author_rows:
            self._conn.executemany(_PUT_AUTHOR, self._author_rows)
            self._author_rows = []

    def slot(self, key: tuple[str, int, str]) -> Op | None:
        put = self._put.get(key)
        if put is not None or key[0] in self._new_entries:
            return put  # the latest put in this transaction holds the slot
        if key in self._slots:
            return self._slots[key]
        row = self._conn.execute(
            f"SELECT {_OP_COLUMNS} FROM ops WHERE entry_id = ? AND slot = ? AND writer = ?", key
        ).fetchone()
        return None if row is None else _load_op(row)

    def op_at(self, dot: Dot) -> Op | None:
        if dot in self._by_dot:
            return self._by_dot[dot]
        row = self._conn.execute(
            f"SELECT {_OP_COLUMNS} FROM ops WHERE writer = ? AND seq = ?", (dot.replica, dot.seq)
        ).fetchone()
        return None if row is None else _load_op(row)

    def body(self, entry_id: str) -> EntryBody | None:
        if entry_id not in self._bodies:
            row = self._conn.execute(
                f"SELECT {_OP_COLUMNS} FROM ops WHERE entry_id = ? AND slot = 0", (entry_id,)
            ).fetchone()
            self._bodies[entry_id] = None if row is None else stored_body(row[0], row[2], row[3])
        return self._bodies[entry_id]

    def ops_after(self, writer: str, seq: int, *, bodies: bool) -> Iterator[Op]:
        self._write_deferred()
        cursor = self._conn.execute(
            f"SELECT {_OP_COLUMNS} FROM ops WHERE writer = ? AND seq > ? AND (slot = 0) = ? ORDER BY seq",
            (writer, seq, bodies),
        )
        for row in cursor:
            yield _load_op(row)

    def dots_after(self, writer: str, seq: int) -> Iterator[tuple[int, str]]:
        self._write_deferred()
        yield from self._conn.execute("SELECT seq, entry_id FROM ops WHERE writer = ? AND seq > ? ORDER BY seq",
                                      (writer, seq))

    def put(self, op: Op, replaces: Op | None) -> None:
        self.written.append(op)
        self._put[op.key] = op
        row = (op.entry_id, int(op.slot), op.writer, op.seq, op.hlc.pack(), op.signed, op.signature)
        if self._deferred:
            self._by_dot[op.dot] = op
            self._op_rows.append(row)
        else:
            self._conn.execute(_PUT_OP, row)
        value = op.value
        if isinstance(value, EntryBody):
            self._bodies[op.entry_id] = value
            if self._deferred:
                self._defer_entry(value)
            else:
                self._insert_entry(value)
        elif isinstance(value, AuthorValue):
            update = (value.confidence, value.status.label, value.superseded_by, op.hlc.ms, op.entry_id)
            if not self._deferred:
                self._conn.execute(_PUT_AUTHOR, update)
            elif not self._fold_author(update):
                self._author_rows.append(update)
                self._updated.add(op.entry_id)
        elif isinstance(value, EndorseValue):
            self._write_deferred()  # rare: the tallies' tables are written in order, as before
            old = replaces.value if replaces is not None and isinstance(replaces.value, EndorseValue) else None
            self._conn.execute(
                "UPDATE entries SET confirms = confirms + ?, contradicts = contradicts + ? WHERE id = ?",
                (value.confirms - (old.confirms if old else 0),
                 value.contradicts - (old.contradicts if old else 0), op.entry_id),
            )
            record_endorsement(self._conn, op.entry_id, op.writer, confirms=value.confirms,
                               contradicts=value.contradicts, local=op.writer == self._local)
        elif isinstance(value, EvidenceValue):
            self._write_deferred()
            record_evidence(self._conn, op.entry_id, op.writer, positive=value.positive, negative=value.negative,
                            local=op.writer == self._local, stored_ms=self._stored_ms)

    def prefetch(self, ops: Iterable[Op]) -> None:
        """Read ahead, in a few `IN (…)` queries, what joining `ops` will ask of the stored state
        (their slots, their entries' bodies, whether those entries have a row) instead of a
        query per op. Only reads: the answers are those `slot`, `body` and `put` would get."""
        keys: list[tuple[str, int, str]] = []
        ids: set[str] = set()
        for op in ops:
            entry = op.entry_id
            if entry in self._new_entries:
                continue  # nothing stored predates this transaction's row
            key = op.key
            if key not in self._put and key not in self._slots:
                keys.append(key)
                ids.add(entry)
            if entry not in self._existing or entry not in self._bodies:
                ids.add(entry)
        if not ids:
            return
        ordered = sorted(ids)
        found: dict[tuple[str, int, str], tuple[str, int, bytes, bytes]] = {}
        existing: set[str] = set()
        for at in range(0, len(ordered), _IN_CHUNK):
            chunk = ordered[at:at + _IN_CHUNK]
            listed = (as_list(chunk),)
            for entry, slot, writer, seq, signed, signature in self._conn.execute(
                    f"SELECT entry_id, slot, {_OP_COLUMNS} FROM ops WHERE entry_id IN {IN_LIST}", listed):
                found[(entry, slot, writer)] = (writer, seq, signed, signature)
            existing.update(r[0] for r in self._conn.execute(f"SELECT id FROM entries WHERE id IN {IN_LIST}", listed))
        for key in keys:
            row = found.get(key)
            self._slots[key] = None if row is None else _load_op(row)
        bodies = {entry: row for (entry, slot, _), row in found.items() if slot == SlotKind.BODY}
        for entry in ordered:
            self._existing.setdefault(entry, entry in existing)
            if entry not in self._bodies:
                row = bodies.get(entry)
                body = None if row is None else _load_op(row).value
                self._bodies[entry] = body if isinstance(body, EntryBody) else None

    def _defer_entry(self, b: EntryBody) -> None:
        """`_insert_entry`, held back until `flush` (only if no row for `b` exists or is held)."""
        if b.id in self._entry_rows:
            return
        exists = self._existing.get(b.id)
        if exists is None:
            exists = self._conn.execute("SELECT 1 FROM entries WHERE id = ?", (b.id,)).fetchone() is not None
        if exists:
            return
        self._existing[b.id] = True
        self._entry_rows[b.id] = self._entry_row(b)
        self._new_entries.add(b.id)

    def _fold_author(self, update: tuple[float, str, str | None, int, str]) -> bool:
        """Apply an author update (`_PUT_AUTHOR`'s parameters) to the held-back row of its entry,
        as the UPDATE would: False (nothing done) when the row is not held back, an update of it
        is already queued (order), or the update changes the status (the UPDATE's trigger
        stamps `live_seq`: schema v16)."""
        confidence, status, superseded_by, anchor_ms, entry = update
        row = self._entry_rows.get(entry)
        if row is None or entry in self._updated or status != row[_STATUS]:
            return False
        if row[_PROVENANCE] == "self" and row[_CONFIDENCE] != confidence:
            row[_LOCAL_CONFIDENCE] = confidence  # decay_base stays NULL, as the UPDATE sets it
            row[_DECAY_ANCHOR_MS] = anchor_ms
        row[_CONFIDENCE], row[_STATUS], row[_SUPERSEDED_BY] = confidence, status, superseded_by
        return True

    def _entry_row(self, b: EntryBody) -> list[object]:
        """`_INSERT_ENTRY`'s parameters for the row of a body seen for the first time."""
        own = b.author == self._local
        pad = b.pad.as_tuple() if b.pad is not None else (None, None, None)
        return [
            b.id, b.author, b.kind.value, None if b.category is None else b.category.value, b.content,
            dumps_list(b.tokens), dumps_list(b.chains), dumps_list(b.protocols), dumps_list(b.tags),
            b.strategy_id, b.importance, b.quality, b.sensitivity.value, *pad, b.origin.value,
            b.generation, int(b.bloodstain), b.created.pack(), 0.0, _ACTIVE, None,
            "self" if own else "clade", 0.0 if own else CLADE_LOCAL_CONFIDENCE, None, self._stored_ms,
            b.occurred_ms,
        ]

    def _insert_entry(self, b: EntryBody) -> None:
        """The entries row for a body seen for the first time (no-op if the row exists:
        a re-published body, or an archived entry's late ops, which stay archived)."""
        cursor = self._conn.execute(_INSERT_ENTRY, self._entry_row(b))
        if cursor.rowcount == 1:
            self._new_entries.add(b.id)
            if self._first_new_rid is None:
                # A new rowid is one above the largest, so every row inserted after this one is above it too.
                self._first_new_rid = cursor.lastrowid

    def all_ops(self) -> list[Op]:
        """Every slot-holding op (for tests; digests read `signed_rows`)."""
        self._write_deferred()
        rows = self._conn.execute(f"SELECT {_OP_COLUMNS} FROM ops ORDER BY entry_id, slot, writer").fetchall()
        return [_load_op(r) for r in rows]

    def signed_rows(self) -> list[tuple[str, int, str, bytes, bytes]]:
        """Every slot-holding op as stored, (entry id, slot, writer, signed bytes, signature), in
        `Op.key` order, none decoded (`crdt.signed_digest`; `stored_body` decodes a body row)."""
        self._write_deferred()
        rows: list[tuple[str, int, str, bytes, bytes]] = self._conn.execute(
            "SELECT entry_id, slot, writer, signed, signature FROM ops ORDER BY entry_id, slot, writer").fetchall()
        return rows


def join_delta(conn: sqlite3.Connection, context: CausalContext, pieces: Iterable[Piece], *,
               local_replica: str | None, now_ms: int, max_skew_ms: int, sender: str | None,
               withheld: CausalContext | None = None, seals: Sequence[Seal] = ()) -> ApplyReport:
    """Join one delta from a sibling inside the caller's transaction, piece by piece as its
    ops are verified (`crdt.DeltaJoin`), then its `context`; `seals` (checked) are kept
    (`seal_store.put_seals`) to serve on.

    Ops stamped more than `max_skew_ms` ahead of `now_ms` are refused (`clock_skew`), and
    so is the context row of their writers; the local HLC floor moves past every accepted op.
    `withheld`: dots declared withheld by their writers' gossip (`crdt.withheld`), merged whole.
    """
    backend = SqliteBackend(conn, local_replica=local_replica, stored_ms=now_ms, deferred=True)
    join = DeltaJoin(backend, sender=sender)
    for ops, refused in pieces:
        for writer, reason in refused:
            join.refuse(writer, reason)
        kept: list[Op] = []
        for op in ops:
            if op.hlc.ms - now_ms > max_skew_ms:
                join.refuse(op.writer, "clock_skew")
            else:
                kept.append(op)
        backend.prefetch(kept)
        join.add(kept)
    report = join.finish(context, withheld=withheld)
    backend.flush()
    if seals:
        put_seals(conn, seals)
    if report.applied_ops:
        raise_clock_floor(conn, max(op.hlc for op in report.applied_ops))
    return report


def raise_clock_floor(conn: sqlite3.Connection, seen: Timestamp) -> None:
    """Move the stored HLC floor (meta `last_hlc`) up to `seen` if it is below."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'last_hlc'").fetchone()
    if row is None or Timestamp.unpack(row[0]) < seen:
        conn.execute("INSERT INTO meta (key, value) VALUES ('last_hlc', ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (seen.pack(),))
