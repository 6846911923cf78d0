"""Crash safety of the Grimoire: SIGKILL a writer process at random points, then check the file.

The store's contract (daemon/grimoire/store.py): a write returns only after COMMIT, and a
write is one transaction. So after any kill -9, every write the child acknowledged (printed
after `remember` returned) is present with its exact content, at most the one transaction
in flight when the kill landed is also present (wholly: row, FTS index, signed ops, causal
context and seq counter together), and the file passes SQLite's and FTS5's integrity checks.
"""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from crdt.ops import SlotKind
from daemon.datadir import DataDir
from daemon.grimoire.records import Entry
from daemon.grimoire.store import Grimoire
from tests.helpers.crash import Child, run_until_killed

REPO = Path(__file__).resolve().parents[2]

# argv: data dir, run number, content template. Prints "ready", then one line per
# committed entry: "<id> <index>". Writes until killed.
SINGLE_WRITER = r"""
import sys
from pathlib import Path
from crdt import Kind
from daemon.datadir import DataDir
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.seed import seed_one

data, run, template = DataDir(Path(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
identity = data.load_identity()
store = Grimoire.open(data.db_path)
print("ready", flush=True)
index = 0
while True:
    content = template.format(run=run, index=index)
    entry = seed_one(store, NewEntry(kind=Kind.INSIGHT, content=content), identity=identity)
    print(entry.id, index, flush=True)
    index += 1
"""

# argv: data dir, run number, batch size, content template. Prints "ready", then one line
# per committed batch: "<batch> <id> <id> ...". Writes until killed.
BATCH_WRITER = r"""
import sys
from pathlib import Path
from crdt import Kind
from daemon.datadir import DataDir
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.seed import seed

data, run, size, template = DataDir(Path(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
identity = data.load_identity()
store = Grimoire.open(data.db_path)
print("ready", flush=True)
batch = 0
while True:
    news = [
        NewEntry(kind=Kind.INSIGHT, content=template.format(run=run, batch=batch, item=item))
        for item in range(size)
    ]
    entries = seed(store, news, identity=identity)
    print(batch, *(e.id for e in entries), flush=True)
    batch += 1
"""

SINGLE_TEMPLATE = "crash run{run} entry{index}: thin pools slip above {index} USDC"
BATCH_TEMPLATE = "batch run{run} b{batch} item{item}: gas spikes after block {batch}"


def check_store(db: Path, author: str, acked: dict[str, str]) -> list[Entry]:
    """Check the file after a crash; returns all its entries."""
    with Grimoire.open(db) as store:
        assert store.integrity_check() == "ok"
        entries = store.list_entries(limit=10**9, include_archived=True)  # every row round-trips
        assert len(entries) == store.counts().entries
        assert len({e.id for e in entries}) == len(entries)
        for entry_id, content in acked.items():
            got = store.get(entry_id)
            assert got.body.content == content
            assert got.body.author == author
        context = store.causal_context()
    with closing(sqlite3.connect(db, isolation_level=None)) as raw:
        # FTS5 index agrees with the entries table (the trigger ran in the same transaction).
        raw.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
        # The clock floor was committed together with the newest entry.
        (last_hlc,) = raw.execute("SELECT value FROM meta WHERE key = 'last_hlc'").fetchone()
        (newest,) = raw.execute("SELECT max(created_hlc) FROM entries").fetchone()
        assert last_hlc >= newest
        # Each entry row was committed with its signed ops, and no op without its row.
        (bare,) = raw.execute(
            "SELECT count(*) FROM entries e WHERE "
            "NOT EXISTS (SELECT 1 FROM ops o WHERE o.entry_id = e.id AND o.slot = ?) OR "
            "NOT EXISTS (SELECT 1 FROM ops o WHERE o.entry_id = e.id AND o.slot = ? AND o.writer = e.author)",
            (int(SlotKind.BODY), int(SlotKind.AUTHOR)),
        ).fetchone()
        assert bare == 0
        (orphans,) = raw.execute("SELECT count(*) FROM ops WHERE entry_id NOT IN (SELECT id FROM entries)").fetchone()
        assert orphans == 0
        # The writer's seqs have no gap, and the causal context and seq counter match them.
        seqs = [r[0] for r in raw.execute("SELECT seq FROM ops WHERE writer = ? ORDER BY seq", (author,))]
        assert seqs == list(range(1, len(seqs) + 1))
        assert (context.vv(author), context.cloud(author)) == (len(seqs), frozenset())
        row = raw.execute("SELECT value FROM meta WHERE key = ?", (f"local_seq/{author}",)).fetchone()
        assert (0 if row is None else row[0]) == len(seqs)
    return entries


def count_recalled(db: Path, word: str) -> int:
    with Grimoire.open(db) as store:
        return len(store.keyword_search(word, k=10**6))


@pytest.mark.slow  # a crash loop: 12-20 children SIGKILLed mid-write, each reopened and checked
def test_acknowledged_remember_survives_sigkill(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    author = data.init().peer_id
    rng = random.Random(20240611)
    acked: dict[str, str] = {}
    known: set[str] = set()  # every id in the file after the previous check
    for run in range(20):
        with Child(
            SINGLE_WRITER, str(data.root), str(run), SINGLE_TEMPLATE,
            stderr_path=tmp_path / f"single-{run}.err",
        ) as child:
            lines = run_until_killed(child, rng, run)
        indexes = []
        for line in lines:
            entry_id, index = line.split()
            indexes.append(int(index))
            acked[entry_id] = SINGLE_TEMPLATE.format(run=run, index=int(index))
        assert indexes == list(range(len(indexes)))

        entries = check_store(data.db_path, author, acked)
        new = {e.id: e for e in entries if e.id not in known}
        assert set(acked) <= {e.id for e in entries}
        # Beyond what was acknowledged, at most the one write in flight was committed, and
        # it is the next entry in sequence, whole.
        unacked = [e for eid, e in new.items() if eid not in acked]
        assert len(unacked) <= 1
        for entry in unacked:
            assert entry.body.content == SINGLE_TEMPLATE.format(run=run, index=len(indexes))
        assert count_recalled(data.db_path, f"run{run}") == len(new)
        known = {e.id for e in entries}


@pytest.mark.slow  # a crash loop: 12-20 children SIGKILLed mid-write, each reopened and checked
def test_remember_many_batch_is_all_or_nothing_after_sigkill(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    author = data.init().peer_id
    rng = random.Random(77)
    acked: dict[str, str] = {}
    known: set[str] = set()
    for run in range(12):
        size = rng.randint(2, 64)
        with Child(
            BATCH_WRITER, str(data.root), str(run), str(size), BATCH_TEMPLATE,
            stderr_path=tmp_path / f"batch-{run}.err",
        ) as child:
            lines = run_until_killed(child, rng, run, max_lines=25, max_delay=0.08)
        batches = []
        for line in lines:
            batch, *ids = line.split()
            assert len(ids) == size
            batches.append(int(batch))
            for item, entry_id in enumerate(ids):
                acked[entry_id] = BATCH_TEMPLATE.format(run=run, batch=int(batch), item=item)
        assert batches == list(range(len(batches)))

        entries = check_store(data.db_path, author, acked)
        assert set(acked) <= {e.id for e in entries}
        unacked = sorted(e.body.content for e in entries if e.id not in known and e.id not in acked)
        # The batch in flight at the kill is either wholly absent or wholly present.
        next_batch = len(batches)
        whole = sorted(BATCH_TEMPLATE.format(run=run, batch=next_batch, item=i) for i in range(size))
        assert unacked in ([], whole)
        assert count_recalled(data.db_path, f"run{run}") == len(batches) * size + len(unacked)
        known = {e.id for e in entries}
