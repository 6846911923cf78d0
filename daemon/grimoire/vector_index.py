"""The vector index: every current-model entry vector as one matrix, published as immutable snapshots.

One writer (`VectorIndex.refresh`, on the store's writer thread in the daemon: `StoreAccess`
refreshes it after every write) reads what changed since it last looked and publishes a new
`IndexSnapshot`. A snapshot never changes: readers — searches on reader threads, the curator,
the write door's repeat check — take the current one (`VectorIndex.current`, one attribute
read) and use it as long as they like, without a lock and without views into a buffer anyone
writes.

What the writer reads: vectors stamped after its watermark (new entries, re-embeddings), and
the entries whose archive state, status or vector changed since its `live_seq` watermark
(schema v16 stamps archive and status changes, v18 a vector cleared or replaced by another
model's). A cleared vector leaves the index; an archived or retracted entry keeps its row, masked
out of `nearest` (it may be unarchived), as before.

How the rows stay immutable without copying the matrix (73 MB at 50,000 MiniLM vectors) at
every commit: rows are append-only. A new vector goes into the next free row of the buffer,
past the end of every published snapshot, so no reader ever sees a row being written; a
re-embedded entry takes a new row and its old row is masked out; per publish the writer copies
only the masks (~0.01 ms a write at 50,000). The ids and the id → row map are shared with the
snapshots, not copied (a copy was ~1 ms and ~3 MB of garbage a write at 50,000 entries):
both only gain entries past every published snapshot's last row, which a snapshot does not
see (`_Rows`); before the writer changes or removes an existing entry's row (a re-embedding, a
cleared vector) it takes a private copy of the map if a snapshot holds it (copy on write). A
full buffer is copied once into a 1.5× larger one (older snapshots keep the old buffer); when
dead rows pass a third of the rows, the live ones are compacted into a fresh buffer and fresh
ids and map.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from crdt import Category, Kind
from daemon.embedding.embedder import EmbeddingInfo

from .vectors import model_clause

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .store import Grimoire

__all__ = ["Eligible", "IndexSnapshot", "VectorIndex"]

_KIND_CODE = {k.value: i for i, k in enumerate(Kind)}
_NO_CATEGORY = -1
_COMPACT_MIN_DEAD = 1_024


@dataclass(frozen=True, slots=True)
class Eligible:
    """What the vector search may return, applied before its cut: entries of these kinds and
    categories (empty: any), sensitive ones only when asked. Archived and retracted entries are
    never eligible (the live mask)."""

    kinds: tuple[Kind, ...] = ()
    categories: tuple[Category, ...] = ()
    include_sensitive: bool = True


_A = TypeVar("_A", bound=np.generic)


def _frozen(array: NDArray[_A]) -> NDArray[_A]:
    """A read-only view (the array itself stays writable for its owner)."""
    view: NDArray[_A] = array.view()
    view.flags.writeable = False
    return view


class _Ids(Sequence[str]):
    """The first `n` ids of the writer's append-only list, read-only (a snapshot's `ids`)."""

    __slots__ = ("_ids", "_n")

    def __init__(self, ids: list[str], n: int) -> None:
        self._ids, self._n = ids, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> str:  # type: ignore[override]  # rows are ints here
        if not -self._n <= index < self._n:
            raise IndexError(index)
        return self._ids[index % self._n]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids[:self._n])


class _Rows(Mapping[str, int]):
    """A snapshot's id → row map: the writer's map as of the publish. The writer only adds
    ids with rows ≥ `n` to a map a snapshot holds (they are not here) and copies it before
    changing an existing row; iteration goes by the snapshot's own ids and `valid` mask, never
    over the dict the writer may be adding to."""

    __slots__ = ("_count", "_ids", "_n", "_rows", "_valid")

    def __init__(self, rows: dict[str, int], ids: list[str], valid: NDArray[np.bool_]) -> None:
        self._rows, self._ids, self._valid, self._n = rows, ids, valid, valid.shape[0]
        self._count = int(np.count_nonzero(valid))  # each id's current row is its one valid row

    def __getitem__(self, entry_id: str) -> int:
        row = self._rows.get(entry_id)
        if row is None or row >= self._n:
            raise KeyError(entry_id)
        return row

    def get(self, entry_id: str, default: int | None = None) -> int | None:  # type: ignore[override]
        row = self._rows.get(entry_id)
        return default if row is None or row >= self._n else row

    def __contains__(self, entry_id: object) -> bool:
        row = self._rows.get(entry_id) if isinstance(entry_id, str) else None
        return row is not None and row < self._n

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return (self._ids[int(row)] for row in np.flatnonzero(self._valid))


@dataclass(frozen=True, slots=True, eq=False)
class IndexSnapshot:
    """The index as of one refresh: read-only, safe to share between threads.

    `matrix` row r is the vector of `ids[r]` when `valid[r]` (rows of cleared or replaced vectors
    stay, invalid); `live[r]`: the entry is neither archived nor retracted."""

    info: EmbeddingInfo
    ids: Sequence[str]
    matrix: NDArray[np.float32]
    kind: NDArray[np.int8]
    category: NDArray[np.int8]
    sensitive: NDArray[np.bool_]
    valid: NDArray[np.bool_]
    live: NDArray[np.bool_]
    row_of: Mapping[str, int]
    categories: dict[str, int]

    @classmethod
    def empty(cls, info: EmbeddingInfo) -> IndexSnapshot:
        return cls(info, (), np.zeros((0, info.dim), dtype=np.float32), np.zeros(0, dtype=np.int8),
                   np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_),
                   np.zeros(0, dtype=np.bool_), {}, {c.value: i for i, c in enumerate(Category)})

    def __len__(self) -> int:
        """How many entries have a vector here (archived ones too)."""
        return len(self.row_of)

    def live_count(self) -> int:
        """How many indexed entries are live (neither archived nor retracted)."""
        return int((self.valid & self.live).sum())

    def as_mapping(self) -> dict[str, NDArray[np.float32]]:
        """id → vector of every indexed entry, archived ones too: read-only views of rows that
        never change (no copy: 75 MB at 50,000 entries)."""
        return {entry_id: self.matrix[row] for entry_id, row in self.row_of.items()}

    def vector(self, entry_id: str) -> NDArray[np.float32] | None:
        """The entry's vector (read-only; None if it has none of this model)."""
        row = self.row_of.get(entry_id)
        return None if row is None else self.matrix[row]

    def cosines(self, entry_ids: Sequence[str], query: NDArray[np.float32]) -> dict[str, float]:
        """id → cosine with `query` of those of `entry_ids` that have a vector (unit vectors)."""
        rows = [(entry_id, row) for entry_id in entry_ids if (row := self.row_of.get(entry_id)) is not None]
        if not rows:
            return {}
        scores = self.matrix[[row for _, row in rows]] @ query
        return {entry_id: float(s) for (entry_id, _), s in zip(rows, scores, strict=True)}

    def _mask(self, eligible: Eligible) -> NDArray[np.bool_]:
        mask = self.valid & self.live
        if eligible.kinds:
            mask &= np.isin(self.kind, [_KIND_CODE[Kind(k).value] for k in eligible.kinds])
        if eligible.categories:
            codes = [self.categories[c.value] for c in eligible.categories if c.value in self.categories]
            mask &= np.isin(self.category, codes)
        if not eligible.include_sensitive:
            mask &= ~self.sensitive
        return mask

    def nearest(self, query: NDArray[np.float32], k: int, *, eligible: Eligible = Eligible(),
                offset: int = 0) -> list[tuple[str, float]]:
        """The eligible entries ranked `offset` to `offset + k` by cosine with `query` (unit
        vectors), best first: (id, cosine). Filtering happens before the cut, so a flood of
        archived or other-kind neighbours never takes a slot."""
        if not self.matrix.shape[0] or k <= 0:
            return []
        rows = np.flatnonzero(self._mask(eligible))
        if rows.shape[0] <= offset:
            return []
        # The whole product, then the eligible rows' scores: gathering the rows first copies them,
        # which costs as much memory traffic as the product itself (1.20× the plain top-k for a
        # kind filter, against 1.03×: bench/bench_vector_filters.py).
        scores = (self.matrix @ query)[rows]
        end = min(offset + k, rows.shape[0])
        top = np.argpartition(-scores, end - 1)[:end] if end < rows.shape[0] else np.arange(rows.shape[0])
        top = top[np.argsort(-scores[top], kind="stable")][offset:end]
        return [(self.ids[int(rows[i])], float(scores[i])) for i in top]

    def within(self, query: NDArray[np.float32], threshold: float) -> list[tuple[str, float]]:
        """Every (id, cosine) at cosine ≥ `threshold` from `query`, best first (unit vectors),
        archived entries too (a warning repeats one even after it was archived)."""
        if not self.matrix.shape[0]:
            return []
        scores = self.matrix @ query
        hits = np.flatnonzero((scores >= threshold) & self.valid)
        hits = hits[np.argsort(-scores[hits], kind="stable")]
        return [(self.ids[int(i)], float(scores[i])) for i in hits]


class VectorIndex:
    """The writer of one vector space's index: `refresh(store)` reads what changed and publishes
    a new `current` snapshot. `refresh` takes a lock (two threads refreshing wait for each other);
    readers never do. The reading methods below are the current snapshot's, for callers that
    hold no snapshot of their own."""

    GROWTH = 1.5

    def __init__(self, info: EmbeddingInfo) -> None:
        self.info = info
        self._lock = threading.Lock()
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._buffer: NDArray[np.float32] = np.zeros((0, info.dim), dtype=np.float32)
        self._kind: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._category: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._sensitive: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._valid: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._live: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._categories: dict[str, int] = {c.value: i for i, c in enumerate(Category)}
        self._row_shared = False  # a published snapshot holds `_row`: copy it before changing a row
        self._watermark = -1
        self._live_watermark = -1
        self.current = IndexSnapshot.empty(info)
        self.published = 0  # snapshots published (the first load included)

    # -- the writer ------------------------------------------------------------------------

    def refresh(self, store: Grimoire) -> IndexSnapshot:
        """Read the vectors written and the entries changed since the last refresh, publish a new
        snapshot if anything changed, and return the current one."""
        with self._lock:
            if self._read_changes(store) or self.published == 0:
                self._publish()
            return self.current

    def headroom(self) -> int:
        """Rows that can be added before the buffer is replaced (`_room_for`: a copy of every
        row, or a compaction)."""
        return int(self._buffer.shape[0]) - len(self._ids)

    def _read_changes(self, store: Grimoire) -> bool:
        clause, params = model_clause(self.info)
        conn = store.connection
        changed = False
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
            self._watermark = max(self._watermark, int(created))
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] != self.info.dim:
                continue
            self._append(entry_id, vec, kind, category, sensitivity == "sensitive", bool(live))
            changed = True
        for entry_id, live, current, seq in conn.execute(
                f"SELECT id, archived = 0 AND status = 'active', embedding IS NOT NULL AND {clause}, live_seq "
                "FROM entries INDEXED BY entries_by_live_seq WHERE live_seq > ? ORDER BY live_seq",
                (*params, self._live_watermark)):
            self._live_watermark = max(self._live_watermark, int(seq))
            row = self._row.get(entry_id)
            if row is None:
                continue
            if not current:  # the vector was cleared, or replaced by another model's
                self._valid[row] = False
                self._own_rows()
                del self._row[entry_id]
                changed = True
            elif self._live[row] != bool(live):
                self._live[row] = bool(live)
                changed = True
        return changed

    def _append(self, entry_id: str, vec: NDArray[np.float32], kind: str, category: str | None, sensitive: bool,
                live: bool) -> None:
        """A new row for the entry's vector (a re-embedded entry's old row is masked out)."""
        old = self._row.get(entry_id)
        if old is not None:
            self._valid[old] = False
        self._room_for(len(self._ids) + 1)  # may compact: the new row's number comes after
        row = len(self._ids)
        if old is not None:
            self._own_rows()  # an existing id moves to a new row: published snapshots keep the old one
        self._ids.append(entry_id)
        self._row[entry_id] = row
        self._buffer[row] = vec
        self._kind[row] = _KIND_CODE.get(kind, -1)
        self._category[row] = _NO_CATEGORY if category is None else self._category_code(category)
        self._sensitive[row] = sensitive
        self._valid[row] = True
        self._live[row] = live

    def _room_for(self, rows: int) -> None:
        """Capacity for `rows` rows. A full buffer is replaced, never grown in place (published
        rows are never moved): compacted when a third of its rows are dead, else 1.5× larger."""
        if rows <= self._buffer.shape[0]:
            return
        n = len(self._ids)
        dead = n - len(self._row)
        if dead >= max(_COMPACT_MIN_DEAD, n // 3):
            keep = np.flatnonzero(self._valid[:n])
            self._resize(max(rows - dead, int(keep.shape[0] * self.GROWTH) + 64), keep)
            return
        self._resize(max(rows, int(self._buffer.shape[0] * self.GROWTH) + 64), np.arange(n))

    def _resize(self, size: int, keep: NDArray[np.intp]) -> None:
        """New arrays of `size` rows holding the rows `keep`, in order."""
        n = keep.shape[0]
        grown = np.zeros((size, self.info.dim), dtype=np.float32)
        grown[:n] = self._buffer[keep]
        self._buffer = grown
        for name in ("_kind", "_category", "_sensitive", "_valid", "_live"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[:n] = old[keep]
            setattr(self, name, new)
        if n != len(self._ids):  # compacted: fresh ids and map (the published ones stay as they were)
            self._ids = [self._ids[int(r)] for r in keep]
            self._row = {entry_id: row for row, entry_id in enumerate(self._ids)}
            self._row_shared = False

    def _own_rows(self) -> None:
        """Make `_row` the writer's own before an existing entry's row changes (copy on write)."""
        if self._row_shared:
            self._row = dict(self._row)
            self._row_shared = False

    def _publish(self) -> None:
        n = len(self._ids)
        valid = _frozen(self._valid[:n].copy())
        self.current = IndexSnapshot(
            self.info, _Ids(self._ids, n), _frozen(self._buffer[:n]), _frozen(self._kind[:n]),
            _frozen(self._category[:n]), _frozen(self._sensitive[:n]), valid,
            _frozen(self._live[:n].copy()), _Rows(self._row, self._ids, valid),
            dict(self._categories))
        self._row_shared = True
        self.published += 1

    def _category_code(self, category: str) -> int:
        code = self._categories.get(category)
        if code is None:  # a category this build does not know (a newer sibling's): its own code
            code = self._categories[category] = min(len(self._categories), 127)
        return code

    # -- the current snapshot's reads ------------------------------------------------------

    def __len__(self) -> int:
        return len(self.current)

    def live_count(self) -> int:
        return self.current.live_count()

    def as_mapping(self) -> dict[str, NDArray[np.float32]]:
        return self.current.as_mapping()

    def vector(self, entry_id: str) -> NDArray[np.float32] | None:
        return self.current.vector(entry_id)

    def nearest(self, query: NDArray[np.float32], k: int, *, eligible: Eligible = Eligible(),
                offset: int = 0) -> list[tuple[str, float]]:
        return self.current.nearest(query, k, eligible=eligible, offset=offset)

    def within(self, query: NDArray[np.float32], threshold: float) -> list[tuple[str, float]]:
        return self.current.within(query, threshold)
