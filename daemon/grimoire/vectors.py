"""Entry vectors in grimoire.db: which entries need one, writing and reading them. The
in-memory index over them is vector_index.py.

Measured choice (bench/bench_recall.py): brute-force cosine over a contiguous numpy matrix
answers a 50,000-entry top-k in a few ms, well under the embedding of the query itself,
so entries need no ANN index; episodes (up to millions) use LanceDB's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from daemon.embedding.embedder import EmbeddingInfo

from .store import Grimoire, wall_clock_ms

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["embedding_backlog", "missing_vectors", "model_clause", "put_vectors",
           "stored_vectors", "vector_report", "write_vectors"]


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


def write_vectors(store: Grimoire, info: EmbeddingInfo, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
    """Store vectors (row i for ids[i]) with their model info, in one transaction.

    Each write is stamped strictly later than every earlier one (at least the wall clock),
    so `VectorIndex.refresh` reads only vectors newer than its watermark, never again the
    whole last millisecond's batch."""
    with store._transaction() as conn:
        put_vectors(conn, info, ids, vectors)


def put_vectors(conn: sqlite3.Connection, info: EmbeddingInfo, ids: Sequence[str],
                vectors: NDArray[np.float32]) -> None:
    """`write_vectors` inside the caller's transaction (e.g. the one writing the entry)."""
    (latest,) = conn.execute("SELECT coalesce(max(embedding_created_ms), 0) FROM entries "
                              "WHERE embedding_created_ms IS NOT NULL").fetchone()
    now = max(wall_clock_ms(), int(latest) + 1)
    conn.executemany(
        "UPDATE entries SET embedding = ?, embedding_model = ?, embedding_model_version = ?, "
        "embedding_preprocess_hash = ?, embedding_created_ms = ? WHERE id = ?",
        [(vectors[i].astype(np.float32).tobytes(), info.model, info.model_version, info.preprocess_hash, now,
          entry_id) for i, entry_id in enumerate(ids)],
    )


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
