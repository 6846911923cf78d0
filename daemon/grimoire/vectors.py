"""Entry vectors in grimoire.db: which entries need one, writing and reading them. The
in-memory index over them is vector_index.py.

Measured choice (bench/bench_recall.py): brute-force cosine over a contiguous numpy matrix
answers a 50,000-entry top-k in a few ms, well under the embedding of the query itself,
so entries need no ANN index; episodes (up to millions) use LanceDB's.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from daemon.embedding.check_plan import CheckPlan
from daemon.embedding.embedder import EmbeddingInfo
from daemon.embedding.shipped import Shipped, VectorShipping, sampled

from .id_lists import IN_LIST, as_list
from .store import Grimoire, wall_clock_ms
from .trust_store import record_forged_vector

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["accept_shipped", "accept_shipped_vectors", "authors_cleared", "checks_pending", "clean_checks",
           "embedding_backlog", "missing_vectors", "model_clause", "own_vectors", "put_vectors", "settle_checks",
           "shipped_to_check", "stored_vectors", "vector_report", "write_vectors"]


def model_clause(info: EmbeddingInfo) -> tuple[str, tuple[str, str, str]]:
    """A WHERE clause (and its parameters) matching rows whose vector is of `info`'s model."""
    return ("embedding_model = ? AND embedding_model_version = ? AND embedding_preprocess_hash = ?",
            (info.model, info.model_version, info.preprocess_hash))


def missing_vectors(store: Grimoire, info: EmbeddingInfo, *, limit: int = 10_000, newest_first: bool = False,
                    other_models: bool = True) -> list[tuple[str, str]]:
    """(id, content) of entries with no vector (archived ones too: they may return), oldest first
    or newest first (the tail a query embeds for read-your-writes); with `other_models`, also
    entries whose vector is of another model (after a model change), once none lacks one."""
    order = "DESC" if newest_first else "ASC"
    rows = store.connection.execute(
        f"SELECT id, content FROM entries INDEXED BY entries_unembedded WHERE embedding IS NULL "
        f"ORDER BY rid {order} LIMIT ?", (limit,)).fetchall()
    if len(rows) >= limit or not other_models:
        return [(r[0], r[1]) for r in rows]
    clause, params = model_clause(info)
    # Two index-only counts: when every vector is of this model, skip the scan.
    (current,) = store.connection.execute(f"SELECT count(*) FROM entries WHERE {clause}", params).fetchone()
    (total,) = store.connection.execute("SELECT count(*) FROM entries").fetchone()
    if current + len(rows) >= total:
        return [(r[0], r[1]) for r in rows]
    others = store.connection.execute(
        f"SELECT id, content FROM entries WHERE embedding IS NOT NULL AND NOT ({clause}) ORDER BY rid {order} LIMIT ?",
        (*params, limit - len(rows))).fetchall()
    return [(r[0], r[1]) for r in [*rows, *others]]


def embedding_backlog(store: Grimoire) -> int:
    """How many entries (archived ones too) have no vector yet: until the embedder reaches
    them they are found by keywords only. An index-only count on `entries_unembedded`."""
    (n,) = store.connection.execute(
        "SELECT count(*) FROM entries INDEXED BY entries_unembedded WHERE embedding IS NULL").fetchone()
    return int(n)


def checks_pending(store: Grimoire) -> int:
    """How many siblings' shipped vectors drawn for a check wait for it (an index-only count)."""
    (n,) = store.connection.execute("SELECT count(*) FROM entries INDEXED BY entries_vector_to_check "
                                    "WHERE embedding_source = 'to_check'").fetchone()
    return int(n)


def write_vectors(store: Grimoire, info: EmbeddingInfo, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
    """Store vectors (row i for ids[i]) with their model info, in one transaction.

    Each write is stamped strictly later than every earlier one (at least the wall clock),
    so `VectorIndex.refresh` reads only vectors newer than its watermark, never again the
    whole last millisecond's batch."""
    with store._transaction() as conn:
        put_vectors(conn, info, ids, vectors)


def _stamp(conn: sqlite3.Connection) -> int:
    """A vector write's time: strictly later than every earlier one (see `write_vectors`)."""
    (latest,) = conn.execute("SELECT coalesce(max(embedding_created_ms), 0) FROM entries "
                              "WHERE embedding_created_ms IS NOT NULL").fetchone()
    return max(wall_clock_ms(), int(latest) + 1)


def put_vectors(conn: sqlite3.Connection, info: EmbeddingInfo, ids: Sequence[str],
                vectors: NDArray[np.float32]) -> None:
    """`write_vectors` inside the caller's transaction (e.g. the one writing the entry)."""
    now = _stamp(conn)
    conn.executemany(
        "UPDATE entries SET embedding = ?, embedding_model = ?, embedding_model_version = ?, "
        "embedding_preprocess_hash = ?, embedding_created_ms = ?, embedding_source = NULL WHERE id = ?",
        [(vectors[i].astype(np.float32).tobytes(), info.model, info.model_version, info.preprocess_hash, now,
          entry_id) for i, entry_id in enumerate(ids)],
    )


# -- vectors shipped with gossip (daemon/embedding/shipped.py) ----------------------------------


def own_vectors(store: Grimoire, info: EmbeddingInfo, author: str, ids: Sequence[str]
                ) -> dict[str, NDArray[np.float32]]:
    """The vectors this golem made itself, in `info`'s space, of its own entries among `ids`
    (what its gossip ships): never a vector it was shipped, never another author's entry."""
    clause, params = model_clause(info)
    out: dict[str, NDArray[np.float32]] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        for entry_id, blob in store.connection.execute(
                f"SELECT id, embedding FROM entries WHERE id IN {IN_LIST} AND author = ? AND embedding IS NOT NULL "
                f"AND embedding_source IS NULL AND {clause}", (as_list(chunk), author, *params)):
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] == info.dim:
                out[str(entry_id)] = vec
    return out


def accept_shipped(conn: sqlite3.Connection, info: EmbeddingInfo, author: str,
                   vectors: Mapping[str, NDArray[np.float32]], *, check: Callable[[str], bool]) -> int:
    """Store `author`'s shipped vectors (in `info`'s space, unit, `info.dim` long) for its
    entries that have no vector yet, inside the caller's transaction: marked 'to_check' where
    `check(entry id)` draws it, else 'author'. Entries of another author, unknown here or
    already embedded are left alone. Returns how many were stored."""
    rows = [(entry_id, vec) for entry_id, vec in vectors.items() if vec.shape == (info.dim,)]
    if not rows:
        return 0
    now = _stamp(conn)
    before = conn.total_changes
    conn.executemany(
        "UPDATE entries SET embedding = ?, embedding_model = ?, embedding_model_version = ?, "
        "embedding_preprocess_hash = ?, embedding_created_ms = ?, embedding_source = ? "
        "WHERE id = ? AND author = ? AND embedding IS NULL",
        [(vec.astype(np.float32).tobytes(), info.model, info.model_version, info.preprocess_hash, now,
          "to_check" if check(entry_id) else "author", entry_id, author) for entry_id, vec in rows])
    return conn.total_changes - before


def clean_checks(conn: sqlite3.Connection, author: str) -> int:
    """How many checks of `author`'s shipped vectors matched here in a row since its last mismatch."""
    row = conn.execute("SELECT clean FROM vector_check_runs WHERE author = ?", (author,)).fetchone()
    return int(row[0]) if row else 0


def authors_cleared(store: Grimoire, plan: CheckPlan) -> int:
    """How many authors' shipped vectors are checked at the plan's `cleared` share now."""
    if (at := plan.clears_at()) is None:
        return 0
    (n,) = store.connection.execute("SELECT count(*) FROM vector_check_runs WHERE clean >= ?", (at,)).fetchone()
    return int(n)


def accept_shipped_vectors(store: Grimoire, shipping: VectorShipping, shipped: Sequence[tuple[str, Shipped]], *,
                           salt: str) -> int:
    """`accept_shipped` of each sender's vectors (the sender is the entries' author: the
    codec kept no other), in one transaction; a section of another space is ignored (its
    entries are embedded here as before). Each is drawn for a check at the share the plan
    gives for its author's record here (`clean_checks`). `salt`: this golem's id, for the draw."""
    used = 0
    with store._transaction() as conn:
        for author, section in shipped:
            if section.space == shipping.space:
                rate = shipping.plan.rate(clean_checks(conn, author))
                used += accept_shipped(conn, shipping.info, author, section.vectors,
                                       check=functools.partial(_drawn, salt=salt, rate=rate))
    return used


def _drawn(entry_id: str, *, salt: str, rate: float) -> bool:
    return sampled(entry_id, salt, rate)


def shipped_to_check(store: Grimoire, info: EmbeddingInfo, *, limit: int
                     ) -> list[tuple[str, str, str, NDArray[np.float32]]]:
    """(id, content, author, shipped vector) of shipped vectors drawn for a check, oldest first."""
    clause, params = model_clause(info)
    out = []
    for entry_id, content, author, blob in store.connection.execute(
            f"SELECT id, content, author, embedding FROM entries INDEXED BY entries_vector_to_check "
            f"WHERE embedding_source = 'to_check' AND {clause} ORDER BY rid LIMIT ?", (*params, limit)):
        out.append((str(entry_id), str(content), str(author), np.frombuffer(blob, dtype=np.float32)))
    return out


def settle_checks(store: Grimoire, info: EmbeddingInfo, matched: Sequence[tuple[str, str]],
                  forged: Sequence[tuple[str, str, NDArray[np.float32]]], *, now_ms: int) -> None:
    """Record checks in one transaction: each (id, author) in `matched` becomes 'checked' and
    lengthens its author's clean run; each (id, author, own vector) in `forged` takes this
    golem's own vector, sets its author's run back to 0 (a batch with both: 0) and makes the
    author suspect (trust_store.record_forged_vector)."""
    with store._transaction() as conn:
        changed = conn.total_changes
        runs: Counter[str] = Counter()
        for entry_id, author in matched:
            conn.execute("UPDATE entries SET embedding_source = 'checked' WHERE id = ? AND embedding_source = "
                         "'to_check'", (entry_id,))
            if conn.total_changes > changed:  # a check settled twice counts once
                runs[author] += 1
                changed = conn.total_changes
        conn.executemany("INSERT INTO vector_check_runs (author, clean) VALUES (?, ?) "
                         "ON CONFLICT (author) DO UPDATE SET clean = clean + excluded.clean", sorted(runs.items()))
        if forged:
            put_vectors(conn, info, [i for i, _, _ in forged], np.stack([v for _, _, v in forged]))
            for author in sorted({a for _, a, _ in forged}):
                conn.execute("INSERT INTO vector_check_runs (author, clean) VALUES (?, 0) "
                             "ON CONFLICT (author) DO UPDATE SET clean = 0", (author,))
                record_forged_vector(conn, author, now_ms=now_ms)


def stored_vectors(store: Grimoire, info: EmbeddingInfo, ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
    """The current-model vectors of these entries (ids without one are left out)."""
    space = (info.model, info.model_version, info.preprocess_hash)
    out: dict[str, NDArray[np.float32]] = {}
    columns = "id, embedding, embedding_model, embedding_model_version, embedding_preprocess_hash"
    for entry_id, blob, *model in store.rows_by_id(columns, ids):
        if blob is not None and tuple(model) == space:
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] == info.dim:
                out[entry_id] = vec
    return out


def vector_report(store: Grimoire, info: EmbeddingInfo) -> dict[str, int]:
    """How many entries have a vector of this model, of another model, or none."""
    clause, params = model_clause(info)
    current, other, none = store.connection.execute(
        f"SELECT coalesce(sum(embedding IS NOT NULL AND ({clause})), 0), "
        f"coalesce(sum(embedding IS NOT NULL AND NOT ({clause})), 0), coalesce(sum(embedding IS NULL), 0) "
        "FROM entries", (*params, *params)).fetchone()
    return {"current": int(current), "other_model": int(other), "missing": int(none)}
