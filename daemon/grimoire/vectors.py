"""Entry vectors in grimoire.db: which entries need one, writing them, and an in-memory
index (a float32 matrix) that catches up with new vectors by time watermark.

Measured choice (bench/bench_recall.py): brute-force cosine over a contiguous numpy matrix
answers a 50,000-entry top-k in a few ms, well under the embedding of the query itself,
so entries need no ANN index; episodes (up to millions) use LanceDB's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from crdt import Category, Kind
from daemon.embedding.embedder import EmbeddingInfo

from .store import Grimoire, wall_clock_ms

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Eligible", "VectorIndex", "embedding_backlog", "missing_vectors", "model_clause", "put_vectors",
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
    with store.transaction() as conn:
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


_KIND_CODE = {k.value: i for i, k in enumerate(Kind)}
_NO_CATEGORY = -1


@dataclass(frozen=True, slots=True)
class Eligible:
    """What the vector search may return, applied before its cut: entries of these kinds and
    categories (empty: any), sensitive ones only when asked. Archived and retracted entries are
    never eligible (the live mask)."""

    kinds: tuple[Kind, ...] = ()
    categories: tuple[Category, ...] = ()
    include_sensitive: bool = True


class VectorIndex:
    """All current-model entry vectors as one matrix, refreshed incrementally, with per-row
    attributes (kind, category, sensitive, live) that `nearest` filters on before its cut.

    The rows live in a buffer with spare room (grown ×1.5), filled row by row as SQLite hands
    them over: a 50,000-vector load holds the matrix and one row, not every blob, a list of
    arrays and a stacked copy besides (peak RSS +140 MiB at 50,000 before, about +75 now).

    Live mask: an archived or retracted entry keeps its row (nothing is deleted; it may be
    unarchived) but `nearest` never returns it, so it takes no candidate slot. `refresh` learns
    of archive and status changes through `entries.live_seq` (schema v16: a trigger stamps
    every change), reading only what changed since it last looked.

    Not thread-safe on its own: `refresh` writes rows in place, so readers and the refresh must
    not overlap (`Retriever` runs every call on it under one lock)."""

    GROWTH = 1.5

    def __init__(self, info: EmbeddingInfo) -> None:
        self.info = info
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._buffer: NDArray[np.float32] = np.zeros((0, info.dim), dtype=np.float32)
        self._kind: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._category: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._sensitive: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._live: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._categories: dict[str, int] = {c.value: i for i, c in enumerate(Category)}
        self._watermark = -1
        self._live_watermark = -1

    @property
    def _matrix(self) -> NDArray[np.float32]:
        """The filled rows."""
        return self._buffer[: len(self._ids)]

    def _room_for(self, rows: int) -> None:
        if rows <= self._buffer.shape[0]:
            return
        size = max(rows, int(self._buffer.shape[0] * self.GROWTH) + 64)
        n = len(self._ids)
        grown = np.zeros((size, self.info.dim), dtype=np.float32)
        grown[:n] = self._matrix
        self._buffer = grown
        for name in ("_kind", "_category", "_sensitive", "_live"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[:n] = old[:n]
            setattr(self, name, new)

    def refresh(self, store: Grimoire) -> None:
        """Load vectors written since the last refresh (new entries, re-embeddings) and the
        archive and status changes since then (the live mask)."""
        clause, params = model_clause(self.info)
        conn = store.connection
        if self._watermark < 0:  # the first load: size the buffer once (an index-only count)
            (count,) = conn.execute(f"SELECT count(*) FROM entries WHERE {clause}", params).fetchone()
            self._room_for(int(count))
            # Changes stamped from here on are read next time; rows read below carry their state.
            (latest,) = conn.execute("SELECT coalesce(max(live_seq), 0) FROM entries "
                                     "WHERE live_seq IS NOT NULL").fetchone()
            self._live_watermark = int(latest)
        rows = conn.execute(
            # INDEXED BY: otherwise SQLite prefers the model index and walks every vector
            # (76 ms a query at 50,000 entries in bench/bench_recall.py) instead of only the new ones.
            "SELECT id, embedding, embedding_created_ms, kind, category, sensitivity, archived = 0 AND "
            "status = 'active' FROM entries INDEXED BY entries_by_embedding_time "
            f"WHERE embedding_created_ms > ? AND {clause} ORDER BY embedding_created_ms",
            (self._watermark, *params))
        for entry_id, blob, created, kind, category, sensitivity, live in rows:  # one row at a time
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] != self.info.dim:
                continue
            row = self._row.get(entry_id)
            if row is None:
                row = len(self._ids)
                self._room_for(row + 1)
                self._ids.append(entry_id)
                self._row[entry_id] = row
            self._buffer[row] = vec
            self._kind[row] = _KIND_CODE.get(kind, -1)
            self._category[row] = _NO_CATEGORY if category is None else self._category_code(category)
            self._sensitive[row] = sensitivity == "sensitive"
            self._live[row] = bool(live)
            self._watermark = max(self._watermark, int(created))
        for entry_id, live, seq in conn.execute(
                "SELECT id, archived = 0 AND status = 'active', live_seq FROM entries INDEXED BY entries_by_live_seq "
                "WHERE live_seq > ? ORDER BY live_seq", (self._live_watermark,)):
            row = self._row.get(entry_id)
            if row is not None:
                self._live[row] = bool(live)
            self._live_watermark = max(self._live_watermark, int(seq))

    def _category_code(self, category: str) -> int:
        code = self._categories.get(category)
        if code is None:  # a category this build does not know (a newer sibling's): its own code
            code = self._categories[category] = min(len(self._categories), 127)
        return code

    def __len__(self) -> int:
        return len(self._ids)

    def live_count(self) -> int:
        """How many indexed entries are live (neither archived nor retracted)."""
        return int(self._live[: len(self._ids)].sum())

    def as_mapping(self) -> dict[str, NDArray[np.float32]]:
        """id → vector of every indexed entry, archived ones too (views into the matrix, no
        copies: a 50,000-entry copy would be 75 MB; a later re-embedding of the same model
        writes the same values)."""
        return {entry_id: self._matrix[row] for entry_id, row in self._row.items()}

    def vector(self, entry_id: str) -> NDArray[np.float32] | None:
        """A copy of the entry's vector (None if it has none of this model)."""
        row = self._row.get(entry_id)
        return None if row is None else self._matrix[row].copy()

    def cosines(self, entry_ids: Sequence[str], query: NDArray[np.float32]) -> dict[str, float]:
        """id → cosine with `query` of those of `entry_ids` that have a vector (unit vectors)."""
        rows = [(entry_id, row) for entry_id in entry_ids if (row := self._row.get(entry_id)) is not None]
        if not rows:
            return {}
        scores = self._matrix[[row for _, row in rows]] @ query
        return {entry_id: float(s) for (entry_id, _), s in zip(rows, scores, strict=True)}

    def _mask(self, eligible: Eligible) -> NDArray[np.bool_]:
        n = len(self._ids)
        mask = self._live[:n].copy()
        if eligible.kinds:
            mask &= np.isin(self._kind[:n], [_KIND_CODE[Kind(k).value] for k in eligible.kinds])
        if eligible.categories:
            codes = [self._categories[c.value] for c in eligible.categories if c.value in self._categories]
            mask &= np.isin(self._category[:n], codes)
        if not eligible.include_sensitive:
            mask &= ~self._sensitive[:n]
        return mask

    def nearest(self, query: NDArray[np.float32], k: int, *, eligible: Eligible = Eligible(),
                offset: int = 0) -> list[tuple[str, float]]:
        """The eligible entries ranked `offset` to `offset + k` by cosine with `query` (unit
        vectors), best first: (id, cosine). Filtering happens before the cut, so a flood of
        archived or other-kind neighbours never takes a slot."""
        matrix = self._matrix
        if not matrix.shape[0] or k <= 0:
            return []
        mask = self._mask(eligible)
        rows = np.flatnonzero(mask)
        if rows.shape[0] <= offset:
            return []
        # The whole product, then the eligible rows' scores: gathering the rows first copies them,
        # which costs as much memory traffic as the product itself (1.20× the plain top-k for a
        # kind filter, against 1.03×: bench/bench_vector_filters.py).
        scores = (matrix @ query)[rows]
        end = min(offset + k, rows.shape[0])
        top = np.argpartition(-scores, end - 1)[:end] if end < rows.shape[0] else np.arange(rows.shape[0])
        top = top[np.argsort(-scores[top], kind="stable")][offset:end]
        return [(self._ids[int(rows[i])], float(scores[i])) for i in top]

    def within(self, query: NDArray[np.float32], threshold: float) -> list[tuple[str, float]]:
        """Every (id, cosine) at cosine ≥ `threshold` from `query`, best first (vectors are unit
        length): one matrix-vector product, whatever the threshold lets through."""
        matrix = self._matrix
        if not matrix.shape[0]:
            return []
        scores = matrix @ query
        hits = np.flatnonzero(scores >= threshold)
        hits = hits[np.argsort(-scores[hits], kind="stable")]
        return [(self._ids[i], float(scores[i])) for i in hits]
