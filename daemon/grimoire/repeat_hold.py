"""The write door's repeat hold: a warning or anti_knowledge that repeats one this golem gossiped
within 24 h (cosine ≥ 0.95 and the same figures, promotion.figures) is written held
(`crossing_hold = 'near_duplicate'`), in the transaction that writes it, so no publisher ever
sees it unheld. Called by `write_door.Door.add` only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from crdt import Kind, Timestamp
from daemon.embedding.embedder import EmbeddingInfo

from .admission import max_similarity
from .id_lists import IN_LIST, as_list
from .promotion import WARNING_REPEAT, figures
from .records import NewEntry
from .store import Grimoire, LocalIdentity
from .vector_index import IndexSnapshot
from .vectors import model_clause, put_vectors

__all__ = ["Near", "add_checked", "own_recent_near"]

# Where a vector's close entries are found (the daemon's in-memory vector index): (id, cosine)
# of the entries at cosine ≥ the repeat threshold, best first.
Near = Callable[[Grimoire, NDArray[np.float32]], list[tuple[str, float]]]
_SKEW_MARGIN_MS = 3_600_000


def own_recent_near(snapshot: Callable[[], IndexSnapshot | None], author: str, now_ms: Callable[[], int]) -> Near:
    """A `Near` that looks only where a repeat can be: `author`'s own warnings and anti_knowledge
    of the window (an index seek on author and time), their cosines read from the index's current
    snapshot (a few rows, not the whole matrix: the check cost 6-9 ms on the writer thread at
    50,000 entries when it multiplied every vector). No snapshot loaded: none close."""
    def near(store: Grimoire, vector: NDArray[np.float32]) -> list[tuple[str, float]]:
        index = snapshot()
        if index is None:
            return []
        since_ms = max(0, now_ms() - WARNING_REPEAT.window_ms)
        # Seek on (author, stored_ms): an own entry is stored when written, and its HLC runs at most
        # the clock skew ahead of the wall clock, so a day and an hour of stored_ms hold the window.
        ids = [row[0] for row in store.connection.execute(
            "SELECT id FROM entries INDEXED BY entries_by_author WHERE author = ? AND stored_ms >= ? "
            "AND kind IN ('warning', 'anti_knowledge') AND created_hlc >= ?",
            (author, since_ms - _SKEW_MARGIN_MS, Timestamp(since_ms).pack()))]
        cosines = index.cosines(ids, vector)
        return sorted(((i, c) for i, c in cosines.items() if c >= WARNING_REPEAT.similarity), key=lambda ic: -ic[1])
    return near


def add_checked(conn: sqlite3.Connection, add: Callable[[NewEntry], str], new: NewEntry, identity: LocalIdentity,
                *, vector: NDArray[np.float32], info: EmbeddingInfo, now_ms: int,
                close: Sequence[tuple[str, float]] | None = None) -> tuple[str, float | None]:
    """Inside an open door batch (write_door.py, `Door.add`): write a warning or anti_knowledge
    with its vector, held if it repeats one this golem gossiped within the window. Returns the
    entry's id and, when held, the cosine to the one it repeats.

    `close`: the (id, cosine) of entries at cosine ≥ the repeat threshold, best first, found in
    the in-memory vector index by one matrix-vector product (`VectorIndex.within`); only those
    few rows are read (own, a warning kind, not held, of the window, the same figures), so the
    cost does not grow with the day's warnings. Without it (the offline CLI, no index) the
    window's own warnings are scanned. The decision is the same either way: held iff some such
    warning is that close."""
    if new.kind not in (Kind.WARNING, Kind.ANTI_KNOWLEDGE):
        raise ValueError(f"add_checked: {new.kind.value} is not a warning kind")
    since = Timestamp(max(0, now_ms - WARNING_REPEAT.window_ms)).pack()
    stated = figures(new.content)
    clause, params = model_clause(info)
    similarity: float | None = None
    if close is None:
        rows = conn.execute(
            "SELECT embedding, content FROM entries WHERE author = ? AND kind IN ('warning', 'anti_knowledge') "
            f"AND crossing_hold IS NULL AND created_hlc >= ? AND embedding IS NOT NULL AND {clause}",
            (identity.peer_id, since, *params)).fetchall()
        references = [v for v in (np.frombuffer(blob, dtype=np.float32) for blob, content in rows
                                  if figures(content) == stated) if v.shape[0] == info.dim]
        best = max_similarity(vector, references)
        similarity = best if best is not None and best >= WARNING_REPEAT.similarity else None
    elif close:
        cosine = dict(close)
        for first in range(0, len(close), 500):
            chunk = [entry_id for entry_id, _ in close[first:first + 500]]
            rows = conn.execute(
                f"SELECT id, content FROM entries WHERE id IN {IN_LIST} AND author = ? "
                "AND kind IN ('warning', 'anti_knowledge') AND crossing_hold IS NULL AND created_hlc >= ? "
                f"AND {clause}", (as_list(chunk), identity.peer_id, since, *params)).fetchall()
            found = [cosine[i] for i, content in rows if figures(content) == stated]
            if found:
                similarity = max(found)  # `close` is best first: no later chunk is closer
                break
    entry_id = add(new)
    put_vectors(conn, info, [entry_id], np.asarray([vector], dtype=np.float32))
    if similarity is not None:
        conn.execute("UPDATE entries SET crossing_hold = 'near_duplicate' WHERE id = ?", (entry_id,))
    return entry_id, similarity
