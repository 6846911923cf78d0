"""Several processes on one grimoire.db: two writers and a reader, all at once.

WAL lets the reader run while a writer commits; writers queue on the write lock
(`BEGIN IMMEDIATE` + the default busy timeout) instead of failing.
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack, closing
from pathlib import Path

from crdt import Kind
from crypto import Identity
from daemon.datadir import DataDir
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.procs import Child
from tests.helpers.seed import seed_one

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
PER_WRITER = 300
HALF = PER_WRITER // 2
IDENTITIES = {tag: Identity(bytes([n]) * 32) for n, tag in enumerate(("alpha", "beta"), start=1)}

# argv: db path, identity seed (hex), tag, total, pause_at. Prints "ready <peer id>", waits
# for a stdin line, writes entries printing "<id>" after each commit; after `pause_at` of
# them prints "paused" and waits for another stdin line; prints "done" at the end.
WRITER = r"""
import sys
from pathlib import Path
from crdt import Kind
from crypto import Identity
from crypto import Identity
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.seed import seed_one

path, seed, tag, total, pause_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
identity = Identity(bytes.fromhex(seed))
with Grimoire.open(Path(path)) as store:
    print("ready", identity.peer_id, flush=True)
    sys.stdin.readline()
    for i in range(total):
        if i == pause_at:
            print("paused", flush=True)
            sys.stdin.readline()
        new = NewEntry(kind=Kind.INSIGHT, content=f"concurrent {tag} entry {i}", tags=(tag,))
        print(seed_one(store, new, identity=identity).id, flush=True)
print("done", flush=True)
"""

# argv: db path, then the entry counts to report. Prints "ready", waits for a stdin line,
# then loops over the read API; prints "saw <n>" the first time the count reaches each
# target, and exits after the last. Fails (exit 1) if a count ever goes down, a read returns
# something inconsistent, or the last target is not reached in time.
READER = r"""
import sys, time
from pathlib import Path
from daemon.grimoire.store import Grimoire

path, targets = sys.argv[1], [int(t) for t in sys.argv[2:]]
with Grimoire.open(Path(path)) as store:
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + 60
    previous = 0
    while targets:
        if time.monotonic() > deadline:
            sys.exit(f"timed out at {previous} entries waiting for {targets[0]}")
        counts = store.counts()
        if counts.entries < previous:
            sys.exit(f"count went down from {previous} to {counts.entries}")
        if counts.by_kind.get("insight", 0) != counts.entries:
            sys.exit(f"inconsistent counts: {counts}")
        previous = counts.entries
        listed = store.list_entries(limit=50, include_archived=True)
        if len(listed) < min(50, counts.entries):  # writers only add, so never fewer
            sys.exit(f"listed {len(listed)} after counting {counts.entries}")
        stamps = [e.body.created for e in listed]
        if stamps != sorted(stamps, reverse=True):
            sys.exit("list_entries is not newest first")
        for hit in store.keyword_search("concurrent alpha", k=5):
            if not hit.entry.body.content.startswith("concurrent "):
                sys.exit(f"recall returned {hit.entry.body.content!r}")
        while targets and counts.entries >= targets[0]:
            print("saw", counts.entries, flush=True)
            targets.pop(0)
"""


def test_two_writers_and_a_reader_at_once(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    data.init()
    db = str(data.db_path)
    with ExitStack() as stack:
        writers = {
            tag: Child(stack, WRITER, db, IDENTITIES[tag].seed.hex(), tag, str(PER_WRITER), str(HALF),
                       stderr_path=tmp_path / f"writer-{tag}.err")
            for tag in IDENTITIES
        }
        reader = Child(stack, READER, db, str(2 * HALF), str(2 * PER_WRITER), stderr_path=tmp_path / "reader.err")
        children = [*writers.values(), reader]

        # Start barrier: everyone has the store open before anyone touches it.
        for tag, w in writers.items():
            assert w.line() == f"ready {IDENTITIES[tag].peer_id}"
        assert reader.line() == "ready"
        for child in children:
            child.send("go\n")

        # Halfway rendezvous: both writers stop at HALF; the reader, running all along,
        # must see exactly 2*HALF entries (no lost or phantom commits mid-run).
        printed = {tag: w.lines_until("paused") for tag, w in writers.items()}
        assert reader.line() == f"saw {2 * HALF}"
        for w in writers.values():
            w.send("go\n")
        for tag, w in writers.items():
            printed[tag] += w.lines_until("done")
        assert reader.line() == f"saw {2 * PER_WRITER}"

        for child in children:
            code, err = child.finish()
            assert code == 0, err
            assert err == ""

    for tag, ids in printed.items():
        assert len(ids) == PER_WRITER, tag
        assert len(set(ids)) == PER_WRITER, tag
    with Grimoire.open(data.db_path) as store:
        assert store.counts().entries == 2 * PER_WRITER
        assert store.integrity_check() == "ok"
        for tag, ids in printed.items():
            for i, entry_id in enumerate(ids):
                entry = store.get(entry_id)
                assert entry.body.content == f"concurrent {tag} entry {i}"
                assert entry.body.author == IDENTITIES[tag].peer_id
            assert {h.entry.id for h in store.keyword_search(tag, k=10 * PER_WRITER)} == set(ids)
    with closing(sqlite3.connect(data.db_path, isolation_level=None)) as raw:
        raw.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
        # One clock per file: the HLC floor in meta kept every timestamp distinct across processes.
        (distinct,) = raw.execute("SELECT count(DISTINCT created_hlc) FROM entries").fetchone()
        assert distinct == 2 * PER_WRITER


def test_counts_is_one_snapshot(tmp_path: Path) -> None:
    """A commit landing between counts()'s two SELECTs must not make them disagree."""
    db = tmp_path / "grimoire.db"
    with Grimoire.open(db, create=True) as counting, Grimoire.open(db) as other:
        committed: list[str] = []

        def commit_between(sql: str) -> None:
            # Runs as counts() starts its second statement: another connection commits then.
            if "GROUP BY kind" in sql and not committed:
                new = NewEntry(kind=Kind.WARNING, content="in between")
                committed.append(seed_one(other, new, identity=IDENTITIES["beta"]).id)

        counting._conn.set_trace_callback(commit_between)  # white-box: the only way to hit the gap
        try:
            counts = counting.counts()
        finally:
            counting._conn.set_trace_callback(None)
        assert len(committed) == 1
        assert sum(counts.by_kind.values()) == counts.entries - counts.archived
