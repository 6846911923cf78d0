"""The Styx outbox in grimoire.db: written with its cause, drained by the pusher, never truncated.

`OutboxWriter` is the store's hook (`Grimoire.outbox`): inside the transaction of a local
write it looks at the ops written and enqueues, per crossing entry (wire.py's table: a
warning, anti_knowledge, regime shift or death reflection when written; an insight, fact,
causal link, heuristic or constraint when the curator promotes it, its body re-emitted under
a fresh dot), at most two items: one for its enabled private layers (vault, clade; key
`WRITER:SEQ` of the body op that caused it; the item lists every layer) and one anonymised
item for the public lethe layer when that is enabled (`wire.public_item_json`). Only what
may cross to a sibling is enqueued: public, a kind that may cross, active, not held
(`crossing_hold`), not refuted (`refuted_ms`). Private and sensitive entries, raw episodes
and kinds that never cross never are.

The rest are reads and updates the pusher and the operator use: `due`, `delivered`,
`retry_later`, `park`, `unpark`, `status`. Nothing here deletes an undelivered item; only an
acknowledged one leaves the table.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crdt import Op, SlotKind
from crdt.body import EntryBody

from . import ledger
from .wire import (
    LAYERS,
    LETHE_KEY_BYTES,
    PUBLIC_LAYERS,
    at_once,
    item_json,
    layers_for,
    playbook_item,
    public_item_json,
)

if TYPE_CHECKING:
    from daemon.config import StyxConfig
    from daemon.grimoire.store import Grimoire

__all__ = ["OutboxItem", "OutboxWriter", "delivered", "depth", "due", "enqueue_entry", "enqueue_playbook",
           "next_due_ms", "park", "retry_later", "status", "stored_status", "unpark", "writer_for"]


@dataclass(frozen=True, slots=True)
class OutboxItem:
    n: int
    key: str
    kind: str
    layer: str
    item: str
    created_ms: int
    attempts: int


class OutboxWriter:
    """The `Grimoire.outbox` hook: enqueue what crosses to the enabled layers."""

    def __init__(self, *, layers: Sequence[str] = LAYERS, now_ms: Any = None) -> None:
        self.layers = tuple(layers)
        self._now_ms = now_ms

    def __call__(self, store: Grimoire, ops: Sequence[Op], me: str) -> None:
        """Inside the write transaction of `ops`: reads through the store, writes the outbox's
        rows through `Grimoire.room_write`."""
        for op in ops:
            if op.writer != me or op.slot is not SlotKind.BODY or not isinstance(op.value, EntryBody):
                continue
            body = op.value
            promoted = store.leaving(body.id)  # a held (a repeat, inherited) or refuted entry crosses nowhere
            if promoted is None:
                continue
            if not (at_once(body.kind) or promoted):
                continue
            layers = layers_for(body.kind, body.sensitivity.value, enabled=self.layers)
            if not layers:
                continue
            created = op.hlc.ms if self._now_ms is None else int(self._now_ms())
            doc = store.get(body.id).to_json()

            def enqueue(conn: sqlite3.Connection, o: Op = op, d: dict[str, Any] = doc,
                        ls: Sequence[str] = layers, c: int = created) -> None:
                enqueue_entry(conn, writer=o.writer, seq=o.seq, kind=d["kind"], layers=ls, entry=d, created_ms=c)

            store.room_write(enqueue)


def writer_for(styx: StyxConfig) -> OutboxWriter | None:
    """The outbox hook for this `[styx]` config: None when Styx is off, else a writer for the
    enabled layers. The daemon and every CLI write without a daemon install the same one, so
    what a write enqueues does not depend on whether a daemon was running."""
    if not styx.enabled:
        return None
    return OutboxWriter(layers=[n for n, on in (("vault", styx.vault_enabled), ("clade", styx.clade_enabled),
                                                 ("lethe", styx.lethe_enabled)) if on])


def enqueue_entry(conn: sqlite3.Connection, *, writer: str, seq: int, kind: str, layers: Sequence[str],
                  entry: dict[str, Any], created_ms: int) -> list[str]:
    """Queue one entry's items for `layers` (inside the caller's transaction): one item for its
    private layers, one anonymised item for the public layer; each at most once per cause.
    Returns the keys queued (or already waiting)."""
    keys: list[str] = []
    private = [layer for layer in layers if layer not in PUBLIC_LAYERS]
    rows: list[tuple[str, str, str]] = []
    if private:
        rows.append((f"{writer}:{seq}", private[0], item_json(writer=writer, seq=seq, layers=private, entry=entry)))
    if PUBLIC_LAYERS & set(layers):
        text = public_item_json(secret=lethe_secret(conn), writer=writer, seq=seq, entry=entry)
        rows.append((json.loads(text)["idempotency_key"], "lethe", text))
    for key, layer, item in rows:
        conn.execute("INSERT OR IGNORE INTO styx_outbox (idempotency_key, kind, layer, item, created_ms) "
                     "VALUES (?, ?, ?, ?, ?)", (key, kind, layer, item, created_ms))
        keys.append(key)
    return keys


def lethe_secret(conn: sqlite3.Connection) -> bytes:
    """This golem's key for public items' ids (wire.public_key): 32 random bytes made on first
    use and kept in the store's `meta` table (inside the caller's transaction); never sent."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'lethe_secret'").fetchone()
    if row is not None:
        return bytes.fromhex(str(row[0]))
    secret = secrets.token_bytes(LETHE_KEY_BYTES)
    conn.execute("INSERT INTO meta (key, value) VALUES ('lethe_secret', ?)", (secret.hex(),))
    return secret


def enqueue_playbook(conn: sqlite3.Connection, *, golem: str, text: str, now_ms: int, created_at: str) -> str:
    """Queue a PLAYBOOK.md snapshot for the vault layer (once per distinct text while it waits); returns its key."""
    key, item = playbook_item(golem=golem, text=text, created_at=created_at)
    conn.execute("INSERT OR IGNORE INTO styx_outbox (idempotency_key, kind, layer, item, created_ms) "
                 "VALUES (?, 'playbook', 'vault', ?, ?)", (key, item, now_ms))
    return key


def due(conn: sqlite3.Connection, *, now_ms: int, limit: int) -> list[OutboxItem]:
    """Unparked items whose retry time has come, oldest first (order per kind is kept) — a death
    reflection before anything else: the golem's last word goes out even behind a month's backlog."""
    rows = conn.execute(
        "SELECT n, idempotency_key, kind, layer, item, created_ms, attempts FROM styx_outbox "
        "WHERE parked_ms IS NULL AND next_ms <= ? ORDER BY kind != 'death_reflection', n LIMIT ?",
        (now_ms, limit)).fetchall()
    return [OutboxItem(*r) for r in rows]


def depth(conn: sqlite3.Connection) -> int:
    """Items waiting (not parked)."""
    return int(conn.execute("SELECT count(*) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()[0])


def next_due_ms(conn: sqlite3.Connection) -> int | None:
    """When the next waiting item is due (None: nothing waits)."""
    row = conn.execute("SELECT min(next_ms) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()
    return None if row[0] is None else int(row[0])


def delivered(conn: sqlite3.Connection, ns: Sequence[int]) -> None:
    conn.executemany("DELETE FROM styx_outbox WHERE n = ?", [(n,) for n in ns])


def retry_later(conn: sqlite3.Connection, ns: Sequence[int], *, next_ms: int, error: str) -> None:
    conn.executemany("UPDATE styx_outbox SET attempts = attempts + 1, next_ms = ?, last_error = ? WHERE n = ?",
                     [(next_ms, error[:500], n) for n in ns])


def park(conn: sqlite3.Connection, ns: Sequence[int], *, now_ms: int, reason: str) -> None:
    conn.executemany("UPDATE styx_outbox SET attempts = attempts + 1, parked_ms = ?, last_error = ? WHERE n = ?",
                     [(now_ms, reason[:500], n) for n in ns])


def unpark(conn: sqlite3.Connection, key: str | None) -> int:
    """Back to the queue: one parked item (by idempotency key) or all of them (None). Returns how many."""
    if key is None:
        return conn.execute("UPDATE styx_outbox SET parked_ms = NULL, next_ms = 0 WHERE parked_ms IS NOT NULL").rowcount
    return conn.execute("UPDATE styx_outbox SET parked_ms = NULL, next_ms = 0 WHERE idempotency_key = ? "
                        "AND parked_ms IS NOT NULL", (key,)).rowcount


def stored_status(conn: sqlite3.Connection, *, now_ms: int, outbox_warn: int) -> dict[str, Any]:
    """What `clade styx status` reads from the store: `status`, plus the month's spend (the
    ledger: `spend`, `spend_month_usd`) and `outbox_warning` (more waiting than `outbox_warn`)."""
    doc = status(conn, now_ms=now_ms)
    spend = ledger.summary(conn, ledger.month_of(now_ms))
    doc.update(spend=spend, spend_month_usd=spend["usd"], outbox_warning=doc["queue_depth"] > outbox_warn)
    return doc


def status(conn: sqlite3.Connection, *, now_ms: int) -> dict[str, Any]:
    """queue_depth, oldest_age_s, parked (with reasons) — the outbox part of `clade styx status`."""
    depth, oldest = conn.execute(
        "SELECT count(*), min(created_ms) FROM styx_outbox WHERE parked_ms IS NULL").fetchone()
    parked = [{"idempotency_key": k, "kind": kind, "reason": reason, "parked_at_ms": at}
              for k, kind, reason, at in conn.execute(
                  "SELECT idempotency_key, kind, last_error, parked_ms FROM styx_outbox WHERE parked_ms IS NOT NULL "
                  "ORDER BY n LIMIT 100")]
    (n_parked,) = conn.execute("SELECT count(*) FROM styx_outbox WHERE parked_ms IS NOT NULL").fetchone()
    return {"queue_depth": int(depth), "oldest_age_s": None if oldest is None else round((now_ms - oldest) / 1000, 1),
            "parked": int(n_parked), "parked_items": parked}
