"""The agent's tables in grimoire.db: working memory per session, and the idempotency records
of what a flush, an import or a close already wrote (`agent_migrations`).

daemon/agent/memory.py decides what to write (pure: the entries, their keys, the labels of
errors); the SQL is here, and every entry passes the write door (write_door.py) in the same
transaction as its record: all or none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crdt import InvalidValue
from daemon.errors import Conflict, UsageError

from .store import Grimoire, LocalIdentity
from .write_door import Prepared, Written, entry_batch, written

__all__ = ["SessionClear", "set_working_memory", "write_once"]


@dataclass(frozen=True, slots=True)
class SessionClear:
    """Clear `session`'s working memory with the batch, refusing (`Conflict`) if its text is no
    longer `expected` (it changed since it was read)."""

    session: str
    expected: str


def write_once(store: Grimoire, identity: LocalIdentity, scope: str, prepared: Prepared, keys: Sequence[str], *,
               now_ms: int, label: Callable[[int], str], clear: SessionClear | None = None) -> Written:
    """Write the prepared entries not yet recorded in `scope` under their idempotency `keys` (one
    per entry), and their records, through the write door in one transaction; an entry already
    recorded is not written again, its earlier id stands in its place. An entry that breaks a rule
    refuses the batch with `UsageError` naming `label(i)`. With `clear`, the session's working
    memory is cleared in the same transaction."""
    ids: list[str] = []
    with entry_batch(store, identity, prepared, now_ms=now_ms) as (conn, door):
        for i, key in enumerate(keys):
            row = conn.execute("SELECT entry_id FROM agent_migrations WHERE scope = ? AND line_hash = ?",
                               (scope, key)).fetchone()
            if row is not None:
                ids.append(str(row[0]))
                continue
            try:
                entry_id = door.add(i)
            except InvalidValue as exc:
                raise UsageError(f"{label(i)}: {exc}") from None
            conn.execute("INSERT INTO agent_migrations (scope, line_hash, entry_id, migrated_ms) VALUES (?, ?, ?, ?)",
                         (scope, key, entry_id, now_ms))
            ids.append(entry_id)
        if clear is not None:
            row = conn.execute("SELECT content FROM working_memory WHERE session = ?", (clear.session,)).fetchone()
            if ("" if row is None else str(row[0])) != clear.expected:
                raise Conflict(f"working memory of session {clear.session!r} changed during the close; close it again")
            conn.execute("DELETE FROM working_memory WHERE session = ?", (clear.session,))
    return written(store, door, ids)


def set_working_memory(store: Grimoire, session: str, content: str, *, now_ms: int) -> None:
    """Replace the session's text (empty text deletes it), in one transaction."""
    with store._transaction() as conn:
        if content:
            conn.execute("INSERT INTO working_memory (session, content, updated_ms) VALUES (?, ?, ?) "
                         "ON CONFLICT (session) DO UPDATE SET content = excluded.content, "
                         "updated_ms = excluded.updated_ms", (session, content, now_ms))
        else:
            conn.execute("DELETE FROM working_memory WHERE session = ?", (session,))
