"""The Styx room's tables in grimoire.db: the outbox (`styx_outbox`) and the monthly spend
(`styx_spend`), and the lethe secret in `meta`. All their SQL is here.

`StyxRoom` is mixed into `Grimoire` (store.py): daemon/styx (the outbox hook, the pusher, the
fan-in, the metering), the service and the CLI call its named methods, never a connection.
Reads run on one snapshot; each write is one transaction — or, when the store already has
one open (the outbox hook, called by the Grimoire inside a local write), a part of it, so an
item is enqueued with the write that caused it. What an item says (its JSON) is daemon/styx's
(wire.py); here it is a row. Nothing here deletes an undelivered item.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["OutboxItem", "OutboxRow", "Spend", "StyxRoom", "stored_status"]

LETHE_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One waiting item as the pusher reads it."""

    n: int
    key: str
    kind: str
    layer: str
    item: str
    created_ms: int
    attempts: int


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One item to enqueue (at most once per idempotency key while it waits)."""

    key: str
    kind: str
    layer: str
    item: str


@dataclass(frozen=True, slots=True)
class Spend:
    """One addition to a month's spend (`YYYY-MM`, UTC)."""

    month: str
    usd: float
    calls: int = 0
    items: int = 0
    queries: int = 0


class StyxRoom:
    """The Styx room's named reads and writes (the module docstring)."""

    _conn: sqlite3.Connection

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # Grimoire's

    def _snapshot(self) -> AbstractContextManager[object]:
        raise NotImplementedError  # Grimoire's (reads.py, `_snapshot`)

    @contextmanager
    def _room_read(self) -> Iterator[None]:
        """A read snapshot, unless one (or a write) is already open (`Grimoire.on_snapshot`)."""
        if self._conn.in_transaction:
            yield
        else:
            with self._snapshot():
                yield

    @contextmanager
    def _room_write(self) -> Iterator[sqlite3.Connection]:
        """The open write transaction when there is one (the outbox hook's), else a new one."""
        if self._conn.in_transaction:
            yield self._conn
        else:
            with self._transaction() as conn:
                yield conn

    # -- reads ---------------------------------------------------------------------------

    def styx_spent(self, month: str) -> float:
        """The month's recorded spend in USD (0 when nothing was spent)."""
        return _spent(self._conn, month)

    def outbox_due(self, *, now_ms: int, limit: int) -> list[OutboxItem]:
        """Unparked items whose retry time has come, oldest first (order per kind is kept) — a death
        reflection before anything else: the golem's last word goes out even behind a month's backlog."""
        rows = self._conn.execute(
            "SELECT n, idempotency_key, kind, layer, item, created_ms, attempts FROM styx_outbox "
            "WHERE parked_ms IS NULL AND next_ms <= ? ORDER BY kind != 'death_reflection', n LIMIT ?",
            (now_ms, limit)).fetchall()
        return [OutboxItem(*r) for r in rows]

    def outbox_depth(self) -> int:
        """Items waiting (not parked)."""
        return int(self._conn.execute("SELECT count(*) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()[0])

    def outbox_next_due_ms(self) -> int | None:
        """When the next waiting item is due (None: nothing waits)."""
        row = self._conn.execute("SELECT min(next_ms) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()
        return None if row[0] is None else int(row[0])

    def outbox_status(self, *, now_ms: int) -> dict[str, Any]:
        """queue_depth, oldest_age_s, parked (with reasons) — the outbox part of `clade styx status`."""
        with self._room_read():
            return _status(self._conn, now_ms=now_ms)

    def styx_stored_status(self, *, now_ms: int, month: str, outbox_warn: int) -> dict[str, Any]:
        """What `clade styx status` reads from the store, on one snapshot (`stored_status`)."""
        with self._room_read():
            return stored_status(self._conn, now_ms=now_ms, month=month, outbox_warn=outbox_warn)

    def styx_spend_summary(self, month: str) -> dict[str, Any]:
        """{month, usd, calls, items, queries} of the month."""
        return _summary(self._conn, month)

    # -- writes --------------------------------------------------------------------------

    def lethe_secret(self) -> bytes:
        """This golem's key for public items' ids (wire.public_key): 32 random bytes made on first
        use and kept in `meta` (in the open write transaction, if any); never sent."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'lethe_secret'").fetchone()
        if row is not None:
            return bytes.fromhex(str(row[0]))
        with self._room_write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'lethe_secret'").fetchone()
            if row is not None:
                return bytes.fromhex(str(row[0]))
            secret = secrets.token_bytes(LETHE_KEY_BYTES)
            conn.execute("INSERT INTO meta (key, value) VALUES ('lethe_secret', ?)", (secret.hex(),))
            return secret

    def outbox_add(self, rows: Sequence[OutboxRow], *, created_ms: int) -> list[str]:
        """Enqueue `rows` (in the open write transaction, if any: the outbox hook's); a key already
        waiting is not queued twice. Returns the keys queued (or already waiting)."""
        with self._room_write() as conn:
            for r in rows:
                conn.execute("INSERT OR IGNORE INTO styx_outbox (idempotency_key, kind, layer, item, created_ms) "
                             "VALUES (?, ?, ?, ?, ?)", (r.key, r.kind, r.layer, r.item, created_ms))
        return [r.key for r in rows]

    def styx_record_spend(self, spend: Spend) -> None:
        """Add one call's cost to its month."""
        with self._room_write() as conn:
            _record(conn, spend)

    def styx_charge(self, spend: Spend, *, cap: float | None) -> float | None:
        """Record `spend` unless it would take the month past `cap` (USD; None: no cap). Returns
        None when recorded, else the month's spend so far (nothing recorded)."""
        with self._transaction() as conn:
            spent = _spent(conn, spend.month)
            if cap is not None and spent + spend.usd > cap + 1e-12:
                return spent
            if spend.usd:
                _record(conn, spend)
        return None

    def outbox_delivered(self, ns: Sequence[int], spend: Spend) -> None:
        """Acknowledged items leave the outbox; the call's cost is recorded with them."""
        with self._transaction() as conn:
            conn.executemany("DELETE FROM styx_outbox WHERE n = ?", [(n,) for n in ns])
            _record(conn, spend)

    def outbox_retry_later(self, ns: Sequence[int], spend: Spend, *, next_ms: int, error: str) -> None:
        """Items that failed wait until `next_ms`; the call's cost is recorded with them."""
        with self._transaction() as conn:
            conn.executemany("UPDATE styx_outbox SET attempts = attempts + 1, next_ms = ?, last_error = ? WHERE n = ?",
                             [(next_ms, error[:500], n) for n in ns])
            _record(conn, spend)

    def outbox_park(self, ns: Sequence[int], spend: Spend, *, now_ms: int, reason: str) -> None:
        """Items Styx refused for good are parked (kept, not retried); the call's cost is recorded."""
        with self._transaction() as conn:
            conn.executemany("UPDATE styx_outbox SET attempts = attempts + 1, parked_ms = ?, last_error = ? "
                             "WHERE n = ?", [(now_ms, reason[:500], n) for n in ns])
            _record(conn, spend)

    def outbox_unpark(self, key: str | None) -> int:
        """Back to the queue: one parked item (by idempotency key) or all of them (None). Returns how many."""
        with self._transaction() as conn:
            if key is None:
                return int(conn.execute(
                    "UPDATE styx_outbox SET parked_ms = NULL, next_ms = 0 WHERE parked_ms IS NOT NULL").rowcount)
            return int(conn.execute("UPDATE styx_outbox SET parked_ms = NULL, next_ms = 0 WHERE idempotency_key = ? "
                                    "AND parked_ms IS NOT NULL", (key,)).rowcount)


def stored_status(conn: sqlite3.Connection, *, now_ms: int, month: str, outbox_warn: int) -> dict[str, Any]:
    """The outbox's status plus the month's spend (`spend`, `spend_month_usd`) and `outbox_warning`
    (more waiting than `outbox_warn`)."""
    doc = _status(conn, now_ms=now_ms)
    spend = _summary(conn, month)
    doc.update(spend=spend, spend_month_usd=spend["usd"], outbox_warning=doc["queue_depth"] > outbox_warn)
    return doc


def _status(conn: sqlite3.Connection, *, now_ms: int) -> dict[str, Any]:
    depth, oldest = conn.execute(
        "SELECT count(*), min(created_ms) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()
    parked = [{"idempotency_key": k, "kind": kind, "reason": reason, "parked_at_ms": at}
              for k, kind, reason, at in conn.execute(
                  "SELECT idempotency_key, kind, last_error, parked_ms FROM styx_outbox WHERE parked_ms IS NOT NULL "
                  "ORDER BY n LIMIT 100")]
    (n_parked,) = conn.execute("SELECT count(*) FROM styx_outbox WHERE parked_ms IS NOT NULL").fetchone()
    return {"queue_depth": int(depth), "oldest_age_s": None if oldest is None else round((now_ms - oldest) / 1000, 1),
            "parked": int(n_parked), "parked_items": parked}


def _record(conn: sqlite3.Connection, spend: Spend) -> None:
    conn.execute(
        "INSERT INTO styx_spend (month, usd, calls, items, queries) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (month) DO UPDATE SET usd = usd + excluded.usd, calls = calls + excluded.calls, "
        "items = items + excluded.items, queries = queries + excluded.queries",
        (spend.month, float(spend.usd), spend.calls, spend.items, spend.queries))


def _spent(conn: sqlite3.Connection, month: str) -> float:
    row = conn.execute("SELECT usd FROM styx_spend WHERE month = ?", (month,)).fetchone()
    return 0.0 if row is None else float(row[0])


def _summary(conn: sqlite3.Connection, month: str) -> dict[str, Any]:
    row = conn.execute("SELECT usd, calls, items, queries FROM styx_spend WHERE month = ?", (month,)).fetchone()
    usd, calls, items, queries = row if row is not None else (0.0, 0, 0, 0)
    return {"month": month, "usd": round(float(usd), 6), "calls": int(calls), "items": int(items),
            "queries": int(queries)}
