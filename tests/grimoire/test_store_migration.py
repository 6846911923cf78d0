"""Opening old, newer and broken files: schema migration and refusal.

Old files are built here by hand, with only migration v1 applied and rows written in the v1
form by plain SQL, so these tests do not lean on today's write path to make yesterday's data.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Sequence
from contextlib import ExitStack, closing
from pathlib import Path

import pytest

from crdt import EntryBody, Kind, Origin, Pad, Sensitivity, Timestamp
from crdt.body import Category
from crypto import Identity
from daemon.errors import StoreError
from daemon.grimoire import schema
from daemon.grimoire.records import NewEntry
from daemon.grimoire.schema import SCHEMA_VERSION
from daemon.grimoire.store import Grimoire
from tests.helpers.procs import Child
from tests.helpers.seed import seed, seed_one

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
AUTHOR = "12D3KooWOldGolem"
BASE_MS = 1_700_000_000_000
WRITER = Identity(bytes([3]) * 32)

V1_INSERT = """
INSERT INTO entries (
    id, author, kind, category, content, tokens, chains, protocols, tags, strategy_id,
    importance, quality, sensitivity, pad_pleasure, pad_arousal, pad_dominance, origin,
    generation, bloodstain, created_hlc, confidence, status, superseded_by, provenance,
    local_confidence, access_count, last_accessed_ms, archived, stored_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

OLD_BODIES = (
    EntryBody(
        author=AUTHOR, kind=Kind.INSIGHT, created=Timestamp(BASE_MS, 0),
        content="Slippage on thin pools exceeds two percent above 50k USDC",
        category=Category.SLIPPAGE, protocols=("uniswap-v3",), tags=("pools", "thin"), chains=(1, 8453),
    ),
    EntryBody(
        author=AUTHOR, kind=Kind.WARNING, created=Timestamp(BASE_MS, 1),
        content="Gas spikes right after the oracle update lands",
        category=Category.GAS_TIMING, tags=("sandwich",), importance=0.9, quality=0.8,
        pad=Pad(pleasure=-0.5, arousal=0.75, dominance=0.0),
    ),
    EntryBody(
        author="12D3KooWSibling", kind=Kind.HEURISTIC, created=Timestamp(BASE_MS + 5, 0),
        content="Rebalance ranges before the funding flip",
        protocols=("aerodrome",), strategy_id="lp-range-7", origin=Origin.CLADE, generation=2,
        sensitivity=Sensitivity.PUBLIC,
    ),
)


def _json(values: Sequence[object]) -> str:
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))


def v1_row(body: EntryBody, *, provenance: str) -> tuple[object, ...]:
    """The 29 v1 columns of a stored entry (as clade v1 wrote them)."""
    pad = body.pad.as_tuple() if body.pad is not None else (None, None, None)
    return (
        body.id, body.author, body.kind.value, None if body.category is None else body.category.value,
        body.content, _json(body.tokens), _json(body.chains), _json(body.protocols), _json(body.tags),
        body.strategy_id, body.importance, body.quality, body.sensitivity.value, *pad, body.origin.value,
        body.generation, int(body.bloodstain), body.created.pack(), 0.6, "active", None, provenance,
        0.6, 0, None, 0, BASE_MS,
    )


def make_v1_database(path: Path, bodies: Sequence[EntryBody], *, wal: bool = True) -> None:
    """A grimoire.db as clade v1 left it: WAL mode (unless told otherwise), v1 schema, rows."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        if wal:
            assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        assert schema.migrate(conn, target=1) == (0, 1)
        conn.execute("BEGIN")
        conn.executemany(V1_INSERT, [v1_row(b, provenance=b.origin.value) for b in bodies])
        if bodies:
            newest = max(b.created for b in bodies)
            conn.execute("INSERT INTO meta (key, value) VALUES ('last_hlc', ?)", (newest.pack(),))
        conn.execute("COMMIT")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "entries_fts" not in tables


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in `directory`: its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


# -- old files are migrated --------------------------------------------------------------


def test_v1_database_is_migrated_and_old_rows_stay_readable_and_searchable(tmp_path: Path) -> None:
    db = tmp_path / "grimoire.db"
    make_v1_database(db, OLD_BODIES)

    # The wall clock is far behind the old entries: new writes must still sort after them.
    with Grimoire.open(db, wall_ms=lambda: 1_000) as store:
        assert store.schema_version == SCHEMA_VERSION
        for body in OLD_BODIES:
            got = store.get(body.id)
            assert got.body == body
            assert got.provenance == body.origin.value
            assert got.confidence == 0.6
        assert store.counts().entries == len(OLD_BODIES)

        # The v2 FTS rebuild indexed the rows that existed before it: content, tags, protocols.
        def recalled(query: str) -> list[str]:
            return [h.entry.id for h in store.keyword_search(query)]

        assert recalled("slippage") == [OLD_BODIES[0].id]
        assert recalled("oracle") == [OLD_BODIES[1].id]
        assert recalled("sandwich") == [OLD_BODIES[1].id]  # a tag
        assert recalled("aerodrome") == [OLD_BODIES[2].id]  # a protocol
        assert recalled("funding") == [OLD_BODIES[2].id]

        # The v1 clock floor survived; the triggers index new rows.
        new = seed_one(store, NewEntry(kind=Kind.FACT, content="The oracle now updates every block"), identity=WRITER)
        assert new.body.created > max(b.created for b in OLD_BODIES)
        assert set(recalled("oracle")) == {OLD_BODIES[1].id, new.id}

    with closing(sqlite3.connect(db, isolation_level=None)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        raw.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")


def test_reopening_a_current_database_migrates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "grimoire.db"
    make_v1_database(db, OLD_BODIES)
    Grimoire.open(db).close()
    with closing(sqlite3.connect(db, isolation_level=None)) as raw:
        assert schema.migrate(raw) == (SCHEMA_VERSION, SCHEMA_VERSION)
    with Grimoire.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert [h.entry.id for h in store.keyword_search("slippage")] == [OLD_BODIES[0].id]


# -- newer and broken files are refused --------------------------------------------------


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_newer_schema_is_refused_and_file_left_alone(tmp_path: Path, journal_mode: str) -> None:
    # "delete": the version must be checked before switching to WAL rewrites the header.
    db = tmp_path / "grimoire.db"
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        assert conn.execute(f"PRAGMA journal_mode = {journal_mode}").fetchone()[0] == journal_mode
        conn.execute("CREATE TABLE entries (rid INTEGER PRIMARY KEY, future TEXT)")
        conn.execute("INSERT INTO entries (future) VALUES ('from clade 9')")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    before = snapshot(tmp_path)

    with pytest.raises(StoreError) as caught:
        Grimoire.open(db)
    message = str(caught.value)
    assert str(db) in message
    assert f"schema version {SCHEMA_VERSION + 7}" in message
    assert "upgrade clade" in message

    assert snapshot(tmp_path) == before


def _populated_database(path: Path) -> bytes:
    with Grimoire.open(path, create=True) as store:
        seed(store,
            [NewEntry(kind=Kind.INSIGHT, content=f"entry {i} " + "padding " * 40) for i in range(300)],
            identity=WRITER,
        )
        store.checkpoint()
    data = path.read_bytes()
    path.unlink()
    assert len(data) > 16 * 4096
    return data


@pytest.mark.parametrize(
    "kind",
    ["random-bytes", "text", "truncated-header", "truncated-one-page", "truncated-half", "truncated-last-page"],
)
def test_not_a_grimoire_is_refused(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "grimoire.db"
    if kind == "random-bytes":
        content = random.Random(5).randbytes(8192)
    elif kind == "text":
        content = b"[store]\nbusy_timeout_ms = 10000\n" * 20
    else:
        full = _populated_database(tmp_path / "full.db")
        cut = {
            "truncated-header": 50,
            "truncated-one-page": 4096,
            "truncated-half": len(full) // 2,
            "truncated-last-page": len(full) - 4096,
        }[kind]
        content = full[:cut]
    db.write_bytes(content)
    before = snapshot(tmp_path)

    with pytest.raises(StoreError) as caught:
        Grimoire.open(db)
    message = str(caught.value)
    assert message.startswith(f"{db}: ")
    assert "is it a clade Grimoire?" in message
    assert "\n" not in message

    assert snapshot(tmp_path) == before


def test_missing_file_is_refused_without_creating_it(tmp_path: Path) -> None:
    db = tmp_path / "grimoire.db"
    with pytest.raises(StoreError, match="clade init"):
        Grimoire.open(db)
    assert list(tmp_path.iterdir()) == []


# -- concurrent opens of an old file -----------------------------------------------------

# argv: db path, "create" or "open". Prints "ready", waits for a stdin line, opens
# (creating or migrating) the store and prints "<schema version> <entries> <hits for 'bulk'>".
OPENER = r"""
import sys
from pathlib import Path
from daemon.grimoire.store import Grimoire

print("ready", flush=True)
sys.stdin.readline()
with Grimoire.open(Path(sys.argv[1]), create=sys.argv[2] == "create") as store:
    print(store.schema_version, store.counts().entries, len(store.keyword_search("bulk", k=10**6)), flush=True)
"""


class Opener(Child):
    """Opens the store at a "go" on stdin and prints what it found."""

    def __init__(self, stack: ExitStack, db: Path, stderr_path: Path, *, create: bool = False) -> None:
        super().__init__(stack, OPENER, str(db), "create" if create else "open", stderr_path=stderr_path)

    def go(self) -> None:
        self.send("go\n")

    def finish_all(self) -> tuple[int, list[str], str]:
        code, stderr = self.finish()
        return code, self.rest(), stderr


BULK = 3000  # enough rows that the v2 FTS rebuild holds the write lock for a while


def bulk_bodies() -> list[EntryBody]:
    return [
        EntryBody(author=AUTHOR, kind=Kind.INSIGHT, created=Timestamp(BASE_MS + i, 0),
                  content=f"bulk entry {i} about liquidity depth {i % 97}")
        for i in range(BULK)
    ]


def run_openers(tmp_path: Path, db: Path, count: int, *, create: bool = False) -> list[str]:
    """Start `count` processes, release them at once to open `db`; returns what each printed."""
    with ExitStack() as stack:
        procs = [Opener(stack, db, tmp_path / f"{db.stem}-{n}.err", create=create) for n in range(count)]
        for p in procs:  # start barrier: all imported and waiting before any opens
            assert p.line() == "ready"
        for p in procs:
            p.go()
        printed = []
        for p in procs:
            code, lines, err = p.finish_all()
            assert (code, err) == (0, "")
            assert len(lines) == 1
            printed.append(lines[0])
    return printed


@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
@pytest.mark.parametrize("openers", [2, 3])
def test_concurrent_opens_of_old_database_migrate_once(tmp_path: Path, openers: int, wal: bool) -> None:
    bodies = bulk_bodies()
    for round_ in range(4):
        db = tmp_path / f"round{round_}.db"
        make_v1_database(db, bodies, wal=wal)
        assert run_openers(tmp_path, db, openers) == [f"{SCHEMA_VERSION} {BULK} {BULK}"] * openers
        with closing(sqlite3.connect(db, isolation_level=None)) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            (triggers,) = raw.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'entries_fts_%'"
            ).fetchone()
            assert triggers == 2  # delete and update; new rows are indexed by their transaction (v12)
            raw.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")


def test_concurrent_creates_of_a_new_database(tmp_path: Path) -> None:
    """`clade init` racing the daemon: the file starts empty, in rollback-journal mode."""
    for round_ in range(6):
        db = tmp_path / f"fresh{round_}.db"
        assert run_openers(tmp_path, db, 3, create=True) == [f"{SCHEMA_VERSION} 0 0"] * 3
        with closing(sqlite3.connect(db, isolation_level=None)) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
def test_open_waits_out_a_writer_then_says_locked(tmp_path: Path, wal: bool) -> None:
    """A lock is not corruption: wait the busy timeout, then say so (SQLite's busy handler
    does not cover the switch to WAL of a rollback-journal file: the store must retry)."""
    db = tmp_path / "grimoire.db"
    make_v1_database(db, OLD_BODIES, wal=wal)
    before = db.read_bytes()
    with closing(sqlite3.connect(db, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")  # another process mid-write
        with pytest.raises(StoreError) as caught:
            Grimoire.open(db, busy_timeout_ms=300)
        holder.execute("ROLLBACK")
    assert db.read_bytes() == before  # refused, not half-migrated
    message = str(caught.value)
    assert "locked" in message
    assert "backup" not in message
    with Grimoire.open(db) as store:  # once the writer is gone, the open succeeds
        assert store.schema_version == SCHEMA_VERSION


def test_zero_length_database_is_refused(tmp_path: Path) -> None:
    """An emptied grimoire.db is data loss, not a new store: refuse it and leave it alone."""
    db = tmp_path / "grimoire.db"
    db.write_bytes(b"")
    with pytest.raises(StoreError, match="empty"):
        Grimoire.open(db)
    assert db.read_bytes() == b""
