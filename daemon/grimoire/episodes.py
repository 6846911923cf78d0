"""Episodes: raw local observations in the LanceDB table `episodes` (never replicated).

Appends and updates (`verify`, `count_replays`) are atomic per call: each is one LanceDB
version commit, so a crash leaves the table at the previous version. LanceDB is imported
lazily: it costs over a second of start-up.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crdt.body import Category, Pad, check_content, check_unit, parse_enum
from daemon.errors import NotFound, StoreError, UsageError

from .records import iso_ms
from .short_ids import ID_LENGTH, SHOWN, checked_prefix, the_one

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["EMBEDDING_DIM", "MAX_PAYLOAD_BYTES", "Episode", "EpisodeLog", "has_episodes"]

EMBEDDING_DIM = 384
ANN_THRESHOLD = 100_000
ANN_NPROBES = 40
ANN_REFINE = 10
ANN_REINDEX_FRACTION = 0.1
MAX_PAYLOAD_BYTES = 64 * 1024
TABLE = "episodes"


@dataclass(frozen=True, slots=True, kw_only=True)
class Episode:
    """One observation. `payload_json` is a JSON document as text (≤ 64 KiB)."""

    summary: str
    observed_ms: int
    id: str = ""
    block_number: int | None = None
    category: Category | None = None
    protocol: str | None = None
    payload_json: str = "null"
    curiosity: float = 0.0
    importance: float = 0.5
    embedding: tuple[float, ...] | None = None
    pad: Pad | None = None
    quality_verified: bool = False
    replay_count: int = 0

    def __post_init__(self) -> None:
        s = object.__setattr__
        if not self.id:
            s(self, "id", secrets.token_hex(16))
        try:
            s(self, "summary", check_content(self.summary))
        except ValueError as exc:
            raise UsageError(str(exc).replace("content", "summary", 1)) from None
        if self.category is not None:
            s(self, "category", _usage(parse_enum, Category, "category", self.category))
        if self.block_number is not None and (type(self.block_number) is not int or self.block_number < 0):
            raise UsageError(f"block: must be a non-negative integer, got {self.block_number!r}")
        if self.protocol is not None and not (0 < len(self.protocol.strip()) <= 48):
            raise UsageError(f"protocol: must be 1..48 characters, got {self.protocol!r}")
        size = len(self.payload_json.encode("utf-8", "surrogatepass"))
        if size > MAX_PAYLOAD_BYTES:
            raise UsageError(f"payload: must be at most {MAX_PAYLOAD_BYTES} bytes of JSON, got {size}")
        try:
            json.loads(self.payload_json)
        except ValueError as exc:
            raise UsageError(f"payload: not valid JSON ({exc})") from None
        s(self, "curiosity", _usage(check_unit, "curiosity", self.curiosity))
        s(self, "importance", _usage(check_unit, "importance", self.importance))
        if self.embedding is not None and len(self.embedding) != EMBEDDING_DIM:
            raise UsageError(f"embedding: must have {EMBEDDING_DIM} dimensions, got {len(self.embedding)}")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "observed_ms": self.observed_ms,
            "observed_at": iso_ms(self.observed_ms),
            "block_number": self.block_number,
            "category": None if self.category is None else self.category.value,
            "protocol": self.protocol,
            "summary": self.summary,
            "payload": json.loads(self.payload_json),
            "curiosity": self.curiosity,
            "importance": self.importance,
            "pad": None if self.pad is None else list(self.pad.as_tuple()),
            "quality_verified": self.quality_verified,
            "replay_count": self.replay_count,
        }


def _usage(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("observed_ms", pa.int64(), nullable=False),
            pa.field("block_number", pa.int64()),
            pa.field("category", pa.string()),
            pa.field("protocol", pa.string()),
            pa.field("summary", pa.string(), nullable=False),
            pa.field("payload_json", pa.string(), nullable=False),
            pa.field("curiosity", pa.float32(), nullable=False),
            pa.field("importance", pa.float32(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), EMBEDDING_DIM)),
            pa.field("pad", pa.list_(pa.float32(), 3)),
            pa.field("quality_verified", pa.bool_(), nullable=False),
            pa.field("replay_count", pa.int32(), nullable=False),
        ]
    )


_SCAN_COLUMNS = [  # everything but the embedding, which listing never needs
    "id", "observed_ms", "block_number", "category", "protocol", "summary", "payload_json",
    "curiosity", "importance", "pad", "quality_verified", "replay_count",
]


def has_episodes(path: Path) -> bool:
    """Whether the episode table at `path` may hold a row, read from its directory without
    importing LanceDB (~70 MiB and a second of start-up): a table no episode was ever appended
    to has no data file (`<table>.lance/data/`). True when unsure (only an empty table is False)."""
    data = path / f"{TABLE}.lance" / "data"
    try:
        return any(data.iterdir())
    except FileNotFoundError:
        return not (path / f"{TABLE}.lance").is_dir()  # no table at all: let EpisodeLog say so
    except OSError:
        return True


class EpisodeLog:
    """The `episodes/` LanceDB directory."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        import lancedb

        if not create and not path.exists():
            raise StoreError(f"no episode table at {path}; run `clade init` first")
        try:
            self._db = lancedb.connect(str(path))
            self._table = self._db.create_table(TABLE, schema=_schema(), exist_ok=True)
        except (OSError, ValueError, RuntimeError) as exc:
            raise StoreError(f"cannot open episodes at {path}: {exc}") from None
        self.path = path

    def append(self, episodes: Sequence[Episode]) -> None:
        """Append all of `episodes` in one atomic commit."""
        if not episodes:
            return
        import pyarrow as pa

        rows = [
            {
                "id": e.id, "observed_ms": e.observed_ms, "block_number": e.block_number,
                "category": None if e.category is None else e.category.value,
                "protocol": e.protocol, "summary": e.summary, "payload_json": e.payload_json,
                "curiosity": e.curiosity, "importance": e.importance,
                "embedding": None if e.embedding is None else list(e.embedding),
                "pad": None if e.pad is None else list(e.pad.as_tuple()),
                "quality_verified": e.quality_verified, "replay_count": e.replay_count,
            }
            for e in episodes
        ]
        self._table.add(pa.Table.from_pylist(rows, schema=_schema()))

    def count(self) -> int:
        return int(self._table.count_rows())

    def scan(self, *, limit: int | None = 50) -> list[Episode]:
        """Episodes newest first (by observed time), without their embeddings."""
        import pyarrow.compute as pc

        table = self._table.search().select(_SCAN_COLUMNS).limit(None).to_arrow()
        if table.num_rows == 0:
            return []
        order = pc.sort_indices(table, sort_keys=[("observed_ms", "descending"), ("id", "ascending")])
        if limit is not None:
            order = order[:limit]
        return [_episode_from_row(r) for r in table.take(order).to_pylist()]

    def get(self, episode_id: str) -> Episode | None:
        """One episode (without its embedding), or None if no episode has this id."""
        query = self._table.search().where(f"id = {_quote(episode_id)}").select(_SCAN_COLUMNS).limit(1)
        rows = query.to_arrow().to_pylist()
        return _episode_from_row(rows[0]) if rows else None

    def resolve_id(self, text: str) -> str:
        """The full id an episode id or a unique prefix of one names (the rules: short_ids.py):
        a full id is returned as given; a prefix must start exactly one episode's id. Raises
        `NotFound` when nothing matches, `UsageError` when ambiguous (naming candidates) or too short."""
        given = checked_prefix(text, "episode")
        if len(given) == ID_LENGTH:
            return given
        query = self._table.search().where(f"id >= {_quote(given)} AND id < {_quote(given + 'g')}")
        rows = query.select(["id"]).limit(None).to_arrow().column("id").to_pylist()
        return the_one(given, sorted(str(r) for r in rows)[:SHOWN + 1], "episode")

    def verify(self, episode_id: str) -> tuple[Episode, bool]:
        """Mark an episode quality-verified (what consolidation replays); returns it and whether
        it changed. Idempotent. `episode_id` may be a unique prefix (`resolve_id`); raises
        `NotFound` for an unknown id, `UsageError` for an ambiguous or too short prefix."""
        episode_id = self.resolve_id(episode_id)
        episode = self.get(episode_id)
        if episode is None:
            raise NotFound(f"no episode {episode_id!r}")
        if episode.quality_verified:
            return episode, False
        self._table.update(where=f"id = {_quote(episode_id)}", values={"quality_verified": True})
        return replace(episode, quality_verified=True), True

    def count_replays(self, ids: Sequence[str]) -> int:
        """Add one to `replay_count` of each of these episodes, in one commit; returns how many
        rows changed (unknown ids are left out)."""
        if not ids:
            return 0
        quoted = ", ".join(_quote(i) for i in dict.fromkeys(ids))
        result = self._table.update(where=f"id IN ({quoted})", values_sql={"replay_count": "replay_count + 1"})
        return int(getattr(result, "rows_updated", 0))

    def replay_pool(self, *, verified_only: bool = False) -> list[tuple[str, int, str | None, float, float, bool]]:
        """(id, observed_ms, protocol, curiosity, importance, quality_verified) of every episode
        (`verified_only`: of the quality-verified ones): what replay chooses from, without the
        payloads (read only for the chosen: `payloads`)."""
        columns = ["id", "observed_ms", "protocol", "curiosity", "importance", "quality_verified"]
        query = self._table.search()
        if verified_only:
            query = query.where("quality_verified = true")
        rows = query.select(columns).limit(None).to_arrow().to_pylist()
        return [(r["id"], int(r["observed_ms"]), r["protocol"], float(r["curiosity"]), float(r["importance"]),
                 bool(r["quality_verified"])) for r in rows]

    def payloads(self, ids: Sequence[str], column: str = "payload_json") -> dict[str, str]:
        """id → payload_json (or another text column, e.g. "summary") for these episodes; unknown ids are left out."""
        if column not in ("payload_json", "summary", "protocol"):
            raise ValueError(f"not a text column of episodes: {column!r}")
        out: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            quoted = ", ".join(_quote(i) for i in ids[start:start + 500])
            query = self._table.search().where(f"id IN ({quoted})").select(["id", column]).limit(None)
            for r in query.to_arrow().to_pylist():
                out[r["id"]] = r[column]
        return out

    @property
    def version(self) -> int:
        return int(self._table.version)

    def search(self, vector: Sequence[float], *, k: int = 10, since_ms: int | None = None,
               until_ms: int | None = None, min_importance: float | None = None) -> list[tuple[Episode, float]]:
        """Nearest episodes by cosine (ANN once `ensure_index` built one); (episode, similarity).

        `since_ms` / `until_ms` (inclusive) bound the observed time and `min_importance` the
        importance; they filter before the cut (a LanceDB prefilter), so up to `k` matching
        episodes come back whenever they exist. Ranking them is episode_recall.py's."""
        # No `where embedding IS NOT NULL`: rows without a vector are never returned anyway
        # (bench/bench_recall.py checks it), and the prefilter made ANN search 5x slower.
        builder: Any = self._table.search(list(vector), vector_column_name="embedding")  # a vector query
        query = builder.distance_type("cosine").select([*_SCAN_COLUMNS, "_distance"]).limit(k)
        bounds = [f"observed_ms >= {int(since_ms)}" if since_ms is not None else "",
                  f"observed_ms <= {int(until_ms)}" if until_ms is not None else "",
                  f"importance >= {float(min_importance)!r}" if min_importance is not None else ""]
        if any(bounds):
            query = query.where(" AND ".join(b for b in bounds if b), prefilter=True)
        if self.has_vector_index():
            # IVF-PQ distances are approximate: probe more partitions and re-rank exactly.
            query = query.nprobes(ANN_NPROBES).refine_factor(ANN_REFINE)
        rows = query.to_arrow().to_pylist()
        return [(_episode_from_row(r), 1.0 - float(r["_distance"])) for r in rows]

    def has_vector_index(self) -> bool:
        return any("embedding" in getattr(i, "columns", []) for i in self._table.list_indices())

    def ensure_index(self, *, threshold: int = ANN_THRESHOLD) -> bool:
        """Build an IVF-PQ cosine index once the table passes `threshold` rows; True if built now.

        Below the threshold a flat scan is exact and fast enough; above it, ANN keeps
        searches in milliseconds (bench/bench_recall.py has the figures).
        """
        rows = self.count()
        if rows < threshold:
            return False
        if self.has_vector_index():
            # New rows are searched flat until merged into the index: merge once they pile up.
            stats = self._table.index_stats("embedding_idx")
            if stats is not None and stats.num_unindexed_rows > ANN_REINDEX_FRACTION * rows:
                self._table.optimize()
                return True
            return False
        partitions = max(16, int(rows**0.5) // 4)
        from lancedb.index import IvfPq

        self._table.create_index("embedding", config=IvfPq(distance_type="cosine", num_partitions=partitions,
                                                           num_sub_vectors=48))
        return True


def _quote(text: str) -> str:
    """A SQL string literal for a LanceDB filter."""
    return "'" + text.replace("'", "''") + "'"


def _episode_from_row(row: dict[str, Any]) -> Episode:
    pad = row["pad"]
    return Episode(
        id=row["id"], observed_ms=row["observed_ms"], block_number=row["block_number"],
        category=None if row["category"] is None else Category(row["category"]),
        protocol=row["protocol"], summary=row["summary"], payload_json=row["payload_json"],
        curiosity=round(row["curiosity"], 6), importance=round(row["importance"], 6),
        pad=None if pad is None else Pad(pleasure=pad[0], arousal=pad[1], dominance=pad[2]),
        quality_verified=row["quality_verified"], replay_count=row["replay_count"],
    )
