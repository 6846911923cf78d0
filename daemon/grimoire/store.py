"""The Grimoire's SQLite side: entries, their FTS5 index, the local clock floor.

Durability contract: a write method returns only after COMMIT with `synchronous=FULL` in
WAL mode, so an acknowledged write survives kill -9 and power loss; a write is one
transaction, so a crash never leaves half an entry. What siblings sent (joined gossip and
catch-up frames, their shipped vectors) commits without waiting for the disk
(`synchronous=NORMAL`, `durable=False`): it survives kill -9, and a power loss may roll back
only a tail of those transactions, whole, with the causal context that records them, so
anti-entropy fetches them again; the next durable commit syncs them with it. Writers take the lock up front
(`BEGIN IMMEDIATE`) and wait up to the busy timeout for another writer; readers never
block writers (WAL). Methods are synchronous: the daemon runs them on its writer thread or a
reader thread (`DaemonState.on_writer` / `on_reader`, over `trio.to_thread.run_sync`). The
reads of entries live in daemon/grimoire/reads.py (`EntryReads`, mixed in).
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from crdt import (
    ApplyReport,
    AuthorValue,
    CausalContext,
    Delta,
    EndorseValue,
    EntryBody,
    EvidenceValue,
    HybridClock,
    Mutator,
    Op,
    Timestamp,
    apply_op,
    bodies_first,
    extract_deltas,
    may_cross,
)
from crdt.ops import SlotKind
from crdt.replica import MAX_BATCH_BYTES, MAX_BATCH_OPS, Gate, context_digest, sendable, signed_digest
from crdt.seals import Seal
from daemon.errors import NotFound, StoreBusy, StoreError

from .belief import Belief
from .evidence_store import date_refuted, refute_turns, refuted_candidates
from .id_lists import IN_LIST, as_list
from .outcomes import apply_outcome
from .posterior import Effect, OutcomeInput
from .promotion import sync_gate
from .reads import EntryReads, RecallHit, StoreCounts
from .records import Entry, NewEntry
from .replication import Piece, SqliteBackend, join_delta, load_context, stored_body
from .rooms import RoomWrites
from .rows import ENTRY_COLUMNS, entry_from_row
from .schema import SCHEMA_VERSION, NewerSchema, migrate, user_version
from .seal_store import seal_asks, seal_own_blocks, seals_after, seals_covering
from .styx_store import StyxRoom
from .trust import TrustPolicy

__all__ = ["Grimoire", "LocalIdentity", "RecallHit", "StoreCounts", "wall_clock_ms"]

# SQLite's primary result codes for "another connection holds the lock" (sqlite3.Error.sqlite_errorcode & 0xff).
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
DEFAULT_MAX_SKEW_MS = 60_000


class LocalIdentity(Protocol):
    """What local writes need: the replica id and a signer (a `crypto.Identity`)."""

    @property
    def peer_id(self) -> str: ...

    def sign(self, message: bytes) -> bytes: ...


WAL_AUTOCHECKPOINT_PAGES = 1_000  # SQLite's default: a commit past this many WAL pages checkpoints


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch (the HLC's physical clock)."""
    return time.time_ns() // 1_000_000


class Grimoire(EntryReads, RoomWrites, StyxRoom):
    """An open `grimoire.db`. Use as a context manager or call `close()`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, wall_ms: Callable[[], int]) -> None:
        self._conn = conn
        self.path = path
        self._wall_ms = wall_ms
        self._clock = HybridClock(wall_ms)
        # Called with (this store, ops, local replica) inside every local write's transaction,
        # before it commits: the Styx outbox (daemon/styx/outbox.py) when Styx is enabled.
        self.outbox: Callable[[Grimoire, Sequence[Op], str], None] | None = None
        self._open_writes = 0  # `_write`s open on this connection (the outer one is the transaction)
        self._read_only = False  # a reader (`open_reader`): every commit it sees is another connection's
        self._digests: tuple[int, str, dict[str, str]] | None = None  # (data_version, replica, digests)

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
        if not create and path.stat().st_size == 0:
            # SQLite would quietly treat it as a new, empty database: data loss in disguise.
            raise StoreError(f"{path} is empty (0 bytes): truncated or wiped; restore it from a backup")
        try:
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Check the version before changing anything: a file from a newer clade is
            # refused untouched (switching it to WAL would already rewrite its header).
            version = user_version(conn)
            if version > SCHEMA_VERSION:
                raise NewerSchema(version)
            _enable_wal(conn, path, busy_timeout_ms)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except NewerSchema as exc:
            conn.close()
            raise StoreError(f"{path}: {exc}") from None
        except sqlite3.OperationalError as exc:
            conn.close()
            if _is_busy(exc):
                raise StoreError(
                    f"{path} is locked by another writer (waited {busy_timeout_ms} ms); retry, or raise "
                    "store.busy_timeout_ms"
                ) from None
            raise StoreError(f"{path}: {exc} (is it a clade Grimoire? restore it from a backup)") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path}: {exc} (is it a clade Grimoire? restore it from a backup)") from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, wall_ms)

    @classmethod
    def open_reader(cls, path: Path, *, busy_timeout_ms: int = 10_000,
                    wall_ms: Callable[[], int] = wall_clock_ms) -> Grimoire:
        """A read-only connection to an open store (WAL: it reads beside the writer and sees
        every transaction committed before each of its statements). Writing through it raises
        `sqlite3.OperationalError`. Raises `StoreError` if the store cannot be opened."""
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path} for reading: {exc}") from None
        reader = cls(conn, path, wall_ms)
        reader._read_only = True
        return reader

    def copy_to(self, target: Path) -> None:
        """Write a consistent copy of the whole store to `target` (a new file) through this
        connection: SQLite's online backup in one step, so one read transaction (in WAL mode
        writers go on meanwhile). The daemon's backups copy through a reader it already holds
        (`StoreAccess.on_reader`): a connection opened and closed beside the others would leave
        its descriptor open (SQLite keeps it while other connections hold locks on the file).
        Raises `sqlite3.Error` (a full or read-only disk stays recognisable)."""
        copy_database(self._conn, target)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Grimoire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return user_version(self._conn)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on this connection (a hook after a write runs only once
        it is committed: service/store_access.py)."""
        return self._conn.in_transaction

    @property
    def connection(self) -> sqlite3.Connection:
        """The open connection (for the store's own helper modules: vectors, retrieval)."""
        return self._conn

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One IMMEDIATE write transaction (commit on success, roll back on error): for the
        grimoire package's own modules only. Code outside daemon/grimoire writes through the
        write door (write_door.py) or a named method (rooms.py); tests/test_door_closed.py checks."""
        return self._write()

    # Transitional, for the three callers another change of step 26 rewrites (retrieval.py's
    # feedback, vectors.py's `write_vectors`, cli/backends/store.py's `set_vitality`): the
    # integrator moves them to `_transaction` / `set_vitality` and deletes this name.


    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: commit on success, roll back on any exception. With
        `durable=False` the commit does not wait for the disk (the module docstring: only for
        what siblings sent). Inside another `_write` it is a savepoint of that transaction
        (released, or rolled back to on an exception), and durable as the outer one is."""
        if self._open_writes:
            name = f"write_{self._open_writes}"
            self._conn.execute(f"SAVEPOINT {name}")
            self._open_writes += 1
            try:
                yield self._conn
            except BaseException:
                self._conn.execute(f"ROLLBACK TO {name}")
                self._conn.execute(f"RELEASE {name}")
                raise
            else:
                self._conn.execute(f"RELEASE {name}")
            finally:
                self._open_writes -= 1
            return
        if not durable:
            self._conn.execute("PRAGMA synchronous = NORMAL")  # set outside a transaction, as SQLite asks
        try:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                error = StoreBusy if _is_busy(exc) else StoreError
                raise error(f"{self.path}: {exc}; another writer holds the lock, retry later") from None
            self._open_writes = 1
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._open_writes = 0
        finally:
            if not durable:
                self._conn.execute("PRAGMA synchronous = FULL")

    @contextmanager
    def not_waiting(self) -> Iterator[None]:
        """Within, outside any transaction: this connection does not wait for a lock another
        connection holds (busy timeout 0: a write that cannot begin raises `StoreBusy` at once,
        nothing written) and does not checkpoint the WAL when it commits (the next commit
        outside does, past SQLite's usual `WAL_AUTOCHECKPOINT_PAGES`). With `durable=False`
        writes, nothing within waits for the disk either: what the daemon may run on its event
        loop's own thread (service/store_access.py, `on_writer_short`)."""
        (busy_ms,) = self._conn.execute("PRAGMA busy_timeout").fetchone()
        self._conn.execute("PRAGMA busy_timeout = 0")
        self._conn.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")

    def _next_timestamp(self, conn: sqlite3.Connection) -> Timestamp:
        """A fresh HLC reading above every one this file has issued (call inside `_write`)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_hlc'").fetchone()
        if row is not None:
            self._clock.observe(Timestamp.unpack(row[0]))
        stamp = self._clock.now()
        _set_meta(conn, "last_hlc", stamp.pack())
        return stamp

    # -- local writes (each through a mutator: every entry has its signed ops) --------

    @contextmanager
    def _local_write(self, identity: LocalIdentity) -> Iterator[tuple[SqliteBackend, Mutator]]:
        """One transaction with a backend and a mutator whose seqs are persisted with it.

        The next seq is above both the stored counter and any op of ours we have seen
        (e.g. sent back by a sibling after a restore from an old backup): never reused.
        """
        with self._write() as conn:
            backend = SqliteBackend(conn, local_replica=identity.peer_id, stored_ms=self._wall_ms())
            # Keyed by replica: a successor restoring a predecessor's store has its own counter.
            seq_key = f"local_seq/{identity.peer_id}"
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (seq_key,)).fetchone()
            last = [max(0 if row is None else int(row[0]), backend.context.top(identity.peer_id))]

            def next_seq() -> int:
                last[0] += 1
                return last[0]

            mutator = Mutator(identity.peer_id, identity.sign, next_seq=next_seq,
                              now=lambda: self._next_timestamp(conn))
            yield backend, mutator
            backend.flush()
            _set_meta(conn, seq_key, last[0])
            if backend.written:  # a block of ours this write completed gets its seal (crdt/seals.py)
                seal_own_blocks(conn, identity.peer_id, last[0], identity.sign)
            if self.outbox is not None and backend.written:
                self.outbox(self, backend.written, identity.peer_id)

    @contextmanager
    def _local_batch(
        self, identity: LocalIdentity
    ) -> Iterator[tuple[sqlite3.Connection, Callable[[NewEntry], str]]]:
        """One write transaction in which `add(new)` writes a local entry (returns its id) and
        the caller may read and write its own tables on the connection: all or none. Only the
        write door (write_door.py) calls it: every own entry passes the door's rules."""
        with self._local_write(identity) as (backend, mutator):

            def add(new: NewEntry) -> str:
                body = new.body(identity.peer_id, mutator.now())
                for op in mutator.create(body, new.confidence):
                    apply_op(backend, op)
                return body.id

            yield self._conn, add

    def _own_entry(self, backend: SqliteBackend, entry_id: str) -> tuple[EntryBody, AuthorValue]:
        body = backend.body(entry_id)
        if body is None:
            raise NotFound(f"no entry with id {entry_id!r}")
        op = backend.slot((entry_id, int(SlotKind.AUTHOR), body.author))
        if op is None or not isinstance(op.value, AuthorValue):
            raise StoreError(f"entry {entry_id} has no author slot (incomplete sync?)")
        return body, op.value

    def set_confidence(self, entry_id: str, confidence: float, *, identity: LocalIdentity) -> Entry:
        """The author changes its confidence in its own entry (crosses to siblings)."""
        with self._local_write(identity) as (backend, mutator):
            body, current = self._own_entry(backend, entry_id)
            apply_op(backend, mutator.set_confidence(body, current, confidence))
        return self.get(entry_id)

    def retract(self, entry_id: str, *, identity: LocalIdentity, superseded_by: str | None = None) -> Entry:
        """The author retracts its own entry (crosses to siblings, unlike `forget`)."""
        with self._local_write(identity) as (backend, mutator):
            body, current = self._own_entry(backend, entry_id)
            apply_op(backend, mutator.retract(body, current, superseded_by=superseded_by))
        return self.get(entry_id)

    def endorse(self, entry_id: str, *, identity: LocalIdentity, confirm: bool) -> Entry:
        """Confirm or contradict a sibling's entry (one more in this golem's tally)."""
        with self._local_write(identity) as (backend, mutator):
            body = backend.body(entry_id)
            if body is None:
                raise NotFound(f"no entry with id {entry_id!r}")
            op = backend.slot((entry_id, int(SlotKind.ENDORSE), identity.peer_id))
            current = op.value if op is not None and isinstance(op.value, EndorseValue) else None
            apply_op(backend, mutator.endorse(body, current, confirm=confirm))
        return self.get(entry_id)

    def republish(self, entry_id: str, *, identity: LocalIdentity) -> None:
        """Re-emit an own entry under fresh dots (when it is promoted to cross)."""
        with self._local_write(identity) as (backend, mutator):
            body, current = self._own_entry(backend, entry_id)
            for op in mutator.republish(body, current):
                apply_op(backend, op)

    def promote(self, entry_ids: Sequence[str], identity: LocalIdentity, *, now_ms: int, reason: str) -> list[str]:
        """Mark own entries promoted (`promoted_ms`, `promoted_reason`) and re-emit their ops under
        fresh dots (siblings counted the old dots as seen-and-withheld). Only own, active, not
        archived, not yet promoted entries that may cross are promoted; one transaction; returns
        the ids promoted, in the order given."""
        done: list[str] = []
        with self._local_write(identity) as (backend, mutator):
            for entry_id in dict.fromkeys(entry_ids):
                row = self._conn.execute(
                    "SELECT author, status, archived, promoted_ms FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is None or row[0] != identity.peer_id or row[1] != "active" or row[2] or row[3] is not None:
                    continue
                body, current = self._own_entry(backend, entry_id)
                if not may_cross(body):
                    continue
                for op in mutator.republish(body, current):
                    apply_op(backend, op)
                tally = backend.slot((entry_id, int(SlotKind.EVIDENCE), identity.peer_id))
                if tally is not None and isinstance(tally.value, EvidenceValue):  # its outcomes so far cross too
                    apply_op(backend, mutator.reissue(body, tally.value))
                self._conn.execute("UPDATE entries SET promoted_ms = ?, promoted_reason = ? WHERE id = ?",
                                   (now_ms, reason, entry_id))
                done.append(entry_id)
        return done

    def record_outcome(self, entry_id: str, effect: str, *, metric: str, value: float | None = None,
                       episode_id: str | None = None, note: str | None = None, now_ms: int,
                       identity: LocalIdentity | None = None) -> Entry:
        """Record what happened when this golem acted on an entry (posterior.py, outcomes.py): the
        outcome row, the tally, the local confidence and the decay anchor, in one transaction.
        With `identity`, a positive or negative outcome on an entry that may cross (its own or a
        sibling's) also bumps this golem's signed evidence slot for it (belief.py): the counts
        cross, the outcome row never does.
        Raises `NotFound` for an unknown id, `crdt.InvalidValue` (a ValueError) for a bad field."""
        checked = OutcomeInput.checked(effect, metric=metric, value=value, episode_id=episode_id, note=note)
        if identity is None:
            with self._write() as conn:
                apply_outcome(conn, entry_id, checked, now_ms=now_ms)
            return self.get(entry_id)
        with self._local_write(identity) as (backend, mutator):
            apply_outcome(self._conn, entry_id, checked, now_ms=now_ms)
            body = backend.body(entry_id)
            if body is not None and may_cross(body) and checked.effect is not Effect.NEUTRAL:
                op = backend.slot((entry_id, int(SlotKind.EVIDENCE), identity.peer_id))
                current = op.value if op is not None and isinstance(op.value, EvidenceValue) else None
                apply_op(backend, mutator.evidence(body, current, positive=checked.effect is Effect.POSITIVE))
        return self.get(entry_id)

    def refresh_refuted(self, policy: TrustPolicy, *, now_ms: int
                        ) -> tuple[dict[str, Belief], list[str], list[str]]:
        """Read the pooled belief of every entry with negative evidence, date those that turned
        refuted and clear those that no longer are (a write only when something turned);
        returns (the beliefs read, turned refuted, lifted)."""
        found = self.beliefs(refuted_candidates(self._conn), policy, now_ms=now_ms)
        turned, lifted = refute_turns(self._conn, found)
        if turned or lifted:
            with self._write() as conn:
                date_refuted(conn, turned, lifted, now_ms=now_ms)
        return found, turned, lifted

    def sync_gate(self, local_replica: str, entry_ids: Collection[str] | None = None) -> Gate:
        """The gate for ops sent to siblings (see `promotion.sync_gate`), as of now.

        With `entry_ids`, only those entries' promotion and hold are looked up (the gate is then
        valid for them alone): publishing a few fresh ops must not read every promoted id."""
        promoted: set[str] = set()
        held: set[str] = set()
        if entry_ids is None:
            rows = self._conn.execute(
                "SELECT id, author = ? AND promoted_ms IS NOT NULL, crossing_hold IS NOT NULL FROM entries "
                "WHERE (author = ? AND promoted_ms IS NOT NULL) OR crossing_hold IS NOT NULL",
                (local_replica, local_replica)).fetchall()
        else:
            ids = list(entry_ids)
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                rows += self._conn.execute(
                    "SELECT id, author = ? AND promoted_ms IS NOT NULL, crossing_hold IS NOT NULL FROM entries "
                    f"WHERE id IN {IN_LIST}", (local_replica, as_list(chunk)),
                ).fetchall()
        for entry_id, is_promoted, is_held in rows:
            if is_promoted:
                promoted.add(entry_id)
            if is_held:
                held.add(entry_id)
        return sync_gate(local_replica, frozenset(promoted), frozenset(held))

    def body(self, entry_id: str) -> EntryBody | None:
        """The replicated body of an entry, None if unknown."""
        return SqliteBackend(self._conn, local_replica=None, stored_ms=0).body(entry_id)

    def local_top(self, replica: str) -> int:
        """The highest seq of `replica` this store has seen (ours: the last one we issued)."""
        return self.causal_context().top(replica)

    def ops_of(self, writer: str, after_seq: int) -> list[Op]:
        """`writer`'s ops above `after_seq` that still hold a slot, bodies first, in seq order."""
        with self._snapshot() as backend:
            return [*backend.ops_after(writer, after_seq, bodies=True),
                    *backend.ops_after(writer, after_seq, bodies=False)]

    def backfill_ops(self, identity: LocalIdentity) -> int:
        """Give entries written before schema v3 (no ops yet) their signed ops; returns how many."""
        flag = self._conn.execute("SELECT value FROM meta WHERE key = 'needs_op_backfill'").fetchone()
        if flag is None:
            return 0
        done = 0
        with self._local_write(identity) as (backend, mutator):
            rows = self._named(
                f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE author = ? AND NOT EXISTS "
                "(SELECT 1 FROM ops o WHERE o.entry_id = e.id AND o.slot = 0) ORDER BY created_hlc",
                (identity.peer_id,),
            )
            for row in rows:
                entry = entry_from_row(row)
                for op in mutator.create(entry.body, entry.confidence):
                    apply_op(backend, op)
                done += 1
            self._conn.execute("DELETE FROM meta WHERE key = 'needs_op_backfill'")
        return done

    # -- replication -----------------------------------------------------------------

    def apply_delta(
        self,
        delta: Delta,
        *,
        rejected: Counter[str] | None = None,
        local_replica: str | None = None,
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        sender: str | None = None,
        withheld: CausalContext | None = None,
        durable: bool = True,
    ) -> ApplyReport:
        """Join a verified delta from a sibling in one transaction (all or nothing on crash;
        `durable=False`: committed without waiting for the disk, see the module docstring).

        `sender` is the authenticated peer the delta came from (see `crdt.apply_delta`).
        Ops stamped more than `max_skew_ms` ahead of our clock are refused (`clock_skew`),
        and so is the context the delta carries for their writers; the local HLC then
        moves past every accepted op. `withheld`: dots their writers declared withheld in
        gossip (`crdt.withheld`, checked by the caller), marked seen in the same transaction.
        """
        dropped = [(None, reason) for reason, n in (rejected or Counter()).items() for _ in range(n)]
        return self.join_delta(delta.context, [(bodies_first(delta.ops), dropped)], local_replica=local_replica,
                               max_skew_ms=max_skew_ms, sender=sender, withheld=withheld, durable=durable)

    def join_delta(self, context: CausalContext, pieces: Iterable[Piece], *, local_replica: str | None = None,
                   max_skew_ms: int = DEFAULT_MAX_SKEW_MS, sender: str | None = None,
                   withheld: CausalContext | None = None, durable: bool = True,
                   seals: Sequence[Seal] = ()) -> ApplyReport:
        """`apply_delta` for a delta whose ops arrive in pieces as they are verified
        (`daemon.grimoire.ingest`); one transaction, committed after the last piece, with the
        delta's checked `seals` (kept to serve on)."""
        with self._write(durable=durable) as conn:
            return join_delta(conn, context, pieces, local_replica=local_replica, now_ms=self._wall_ms(),
                              max_skew_ms=max_skew_ms, sender=sender, withheld=withheld, seals=seals)

    def seals_covering(self, ops: Sequence[Op], *, limit: int, sent: Collection[tuple[str, int]] = ()
                       ) -> list[Seal]:
        """The seals a delta of `ops` should carry when served (`seal_store.seals_covering`)."""
        return seals_covering(self._conn, ops, limit=limit, sent=sent)

    def seal_asks(self, me: str | None, skip: Callable[[str, int], bool]) -> list[tuple[str, int, int]]:
        """Whose seals this store lacks, for a sync v3 want (`seal_store.seal_asks`)."""
        return seal_asks(self._conn, self.causal_context(), me=me, skip=skip)

    def seals_after(self, asks: Iterable[tuple[str, int]], *, limit: int) -> list[Seal]:
        """The seals held for a sync v3 want's asks (`seal_store.seals_after`)."""
        return seals_after(self._conn, asks, limit=limit)

    def causal_context(self) -> CausalContext:
        """The local causal context (what this replica has seen)."""
        return load_context(self._conn)

    def iter_deltas(
        self,
        peer: CausalContext,
        *,
        gate: Gate = may_cross,
        max_ops: int = MAX_BATCH_OPS,
        max_bytes: int = MAX_BATCH_BYTES,
        first_max_ops: int | None = None,
    ) -> Generator[Delta, None, None]:
        """The delta-intervals a peer with context `peer` lacks, from one read snapshot
        (`crdt.extract_deltas`: `first_max_ops` caps the first one).

        Consume it promptly: the snapshot (a read transaction) stays open until the
        iterator is exhausted or closed.
        """
        with self._snapshot() as backend:
            yield from extract_deltas(backend, peer, gate=gate, max_ops=max_ops, max_bytes=max_bytes,
                                      first_max_ops=first_max_ops)

    def state_digest(self, gate: Gate | None = None, *, context: bool = True) -> str:
        """Canonical hash of ops and context: equal on replicas that have converged.

        With `gate` (e.g. `sync_gate(me)`), only the ops that may be shared are hashed:
        siblings that synced agree on that part, while private entries differ by design.
        Without `context`, the ops alone are hashed: siblings holding the same shared ops agree
        even while one has not yet seen the dots of another's private ops (`context_digest`).
        """
        with self._snapshot() as backend:
            rows = backend.signed_rows()
            if gate is not None:
                rows = _gated_rows(rows, gate)
            return signed_digest(_signed(rows), backend.context if context else None)

    def context_digest(self) -> str:
        """Canonical hash of the causal context alone: equal once two replicas have seen the same
        dots, the withheld ones (`crdt.withheld`) included."""
        return context_digest(self.causal_context())

    def sendable_count(self, peer: CausalContext, *, gate: Gate = may_cross) -> int:
        """How many ops a peer with context `peer` lacks that pass `gate` (what `iter_deltas`
        would send it), from one read snapshot."""
        with self._snapshot() as backend:
            return sendable(backend, peer, gate=gate)

    def state_digests(self, gate: Gate) -> dict[str, str]:
        """The digests siblings compare (`GET /v1/state-digest`), from one read snapshot: `shared`
        (the ops that may cross, without the context: equal on siblings after one sync round,
        whatever private ops each wrote), `context` (the causal context alone: equal once every
        withheld dot is known too) and `all` (every op and the context)."""
        with self._snapshot() as backend:
            rows = backend.signed_rows()
            return {"shared": signed_digest(_signed(_gated_rows(rows, gate)), None),
                    "context": context_digest(backend.context), "all": signed_digest(_signed(rows), backend.context)}

    def sync_digests(self, local_replica: str) -> dict[str, str]:
        """`state_digests` under this golem's sync gate (`GET /v1/state-digest`). On a reader
        they are kept until another connection commits (SQLite's `data_version`), so asking a
        store that has not changed costs one pragma, not a read of every op. Exact: the kept
        digests are of a snapshot begun after their version was read, and the same version
        read again means nothing was committed since."""
        if not self._read_only:
            return self.state_digests(self.sync_gate(local_replica))
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        kept = self._digests
        if kept is not None and kept[0] == version and kept[1] == local_replica:
            return dict(kept[2])
        digests = self.state_digests(self.sync_gate(local_replica))
        self._digests = (int(version), local_replica, digests)
        return dict(digests)

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
            conn.execute("UPDATE entries SET archived = 1, archived_reason = 'forgotten', archived_ms = ? "
                         "WHERE id = ?", (self._wall_ms(), entry_id))
            return True

    def unarchive(self, entry_id: str) -> bool:
        """Undo an archive (`forget` or the curator's prune or merge): the entry is live again at
        its base confidence, its forgetting curve restarted now. False if it was not archived.

        Raises `NotFound` for an unknown id.
        """
        with self._write() as conn:
            row = conn.execute("SELECT archived FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if row is None:
                raise NotFound(f"no entry with id {entry_id!r}")
            if not row[0]:
                return False
            conn.execute(
                "UPDATE entries SET archived = 0, archived_reason = NULL, archived_ms = NULL, "
                "local_superseded_by = NULL, local_confidence = coalesce(decay_base, local_confidence), "
                "decay_base = coalesce(decay_base, local_confidence), decay_anchor_ms = ? WHERE id = ?",
                (self._wall_ms(), entry_id))
            return True

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` verdict ("ok" when healthy)."""
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def checkpoint(self) -> None:
        """Fold the WAL into the main file (on clean shutdown)."""
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def copy_database(source: sqlite3.Connection, target: Path) -> None:
    """A consistent copy of `source`'s database into the new file `target` (SQLite's online
    backup in one step: one read transaction). Raises `sqlite3.Error`."""
    copy = sqlite3.connect(target)
    try:
        with copy:
            source.backup(copy)
    finally:
        copy.close()


def _signed(rows: list[tuple[str, int, str, bytes, bytes]]) -> Iterator[tuple[str, bytes, bytes]]:
    """(writer, signed bytes, signature) of each row (`SqliteBackend.signed_rows`), in order."""
    return ((writer, signed, signature) for _, _, writer, signed, signature in rows)


def _gated_rows(rows: list[tuple[str, int, str, bytes, bytes]], gate: Gate) -> list[tuple[str, int, str, bytes, bytes]]:
    """The rows (`SqliteBackend.signed_rows`) of entries whose body passes `gate`, as
    `backend.body(entry_id)` then `gate` would choose them, with each entry's body op decoded
    once; an op of an entry whose body is not held never passes."""
    passes: dict[str, bool] = {}
    for entry_id, slot, writer, signed, signature in rows:
        if slot == 0 and entry_id not in passes:
            body = stored_body(writer, signed, signature)
            passes[entry_id] = body is not None and gate(body)
    return [row for row in rows if passes.get(row[0], False)]


def _enable_wal(conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> None:
    """Switch to WAL, waiting out other writers for up to the busy timeout.

    SQLite's busy handler does not cover the journal-mode change on a rollback-journal
    file: it fails at once with "database is locked" while another connection writes.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)  # blocking by design: the store is synchronous (run in a thread)
    if mode != "wal":
        raise StoreError(f"{path}: cannot switch to WAL journal mode (got {mode})")


def _is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the lock (by result code, not text)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


def _set_meta(conn: sqlite3.Connection, key: str, value: object) -> None:
    """Insert or replace one `meta` row."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))
