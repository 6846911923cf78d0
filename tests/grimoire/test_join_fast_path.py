"""The catch-up join's fast path (daemon/grimoire/replication.py, `SqliteBackend(deferred=True)`
as `join_delta` drives it, through `ingest.apply_frames`) against the plain one (a statement
per op, as local writes use): on hypothesis-generated histories of several writers (this
replica among them, so some entries come back as its own) with confidence changes, retractions,
endorsements and evidence, split into small frames and pieces over a store that already holds a
prefix, both reach the same rows in every table joining writes — entries (with `live_seq`,
FTS), ops, the context, tallies — and refused ops are counted by reason either way."""

from __future__ import annotations

import random
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crdt import (
    AuthorValue,
    CausalContext,
    DeltaJoin,
    MemoryBackend,
    Op,
    SlotKind,
    Timestamp,
    apply_op,
    decode_delta,
    encode_delta,
    extract_deltas,
    make_op,
)
from crdt.replica import Delta
from crypto import signature_ok
from daemon.grimoire import Grimoire, ingest
from daemon.grimoire.ingest import apply_frames
from daemon.grimoire.replication import SqliteBackend
from tests.helpers.crdt_sim import IDENTITIES, SimReplica, random_op

ME = IDENTITIES[1]
_TABLES = ("ops", "causal_context", "endorsements", "evidence")


def history(rng: random.Random, steps: int) -> list[Op]:
    """`steps` random writes by three replicas (ME among them) that all see every op at once."""
    replicas = [SimReplica(IDENTITIES[i]) for i in (0, 1, 2)]
    made: list[Op] = []
    counter = [0]
    for _ in range(steps):
        ops = random_op(rng, rng.choice(replicas), counter)
        made.extend(ops)
        for other in replicas:
            for op in ops:
                apply_op(other.state, op)
    return made


def frames(ops: list[Op], have: CausalContext, max_ops: int) -> list[bytes]:
    source = MemoryBackend()
    for op in ops:
        apply_op(source, op)
    return [encode_delta(d) for d in extract_deltas(source, have, max_ops=max_ops)]


def join_plainly(store: Grimoire, data: list[bytes]) -> None:
    """The reference: each frame's ops in wire order (as the pipeline joins them: `crdt.DeltaJoin`)
    over a backend writing a statement per op. (`apply_delta` joins bodies first: another order,
    so other `live_seq` stamps among the entries one delta retracts.)"""
    conn = store.connection
    for frame in data:
        delta, dropped = decode_delta(frame, signature_ok)
        conn.execute("BEGIN IMMEDIATE")
        backend = SqliteBackend(conn, local_replica=ME.peer_id, stored_ms=0)
        join = DeltaJoin(backend)
        for reason, n in dropped.items():
            join.refuse(None, reason, n)
        join.add(delta.ops)
        join.finish(delta.context)
        backend.flush()
        conn.execute("COMMIT")


def rows(store: Grimoire) -> dict[str, list[tuple[object, ...]]]:
    """Every row the join writes, but the wall-clock stamps (`stored_ms`)."""
    conn = store.connection
    found = {}
    for table, order in (("entries", "rid"), *((t, None) for t in _TABLES)):
        columns = ", ".join(r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "stored_ms")
        picked = conn.execute(f"SELECT {columns} FROM {table}" + (f" ORDER BY {order}" if order else "")).fetchall()
        found[table] = picked if order else sorted(picked, key=repr)
    found["fts"] = conn.execute("SELECT rowid, content FROM entries_fts ORDER BY rowid").fetchall()
    return found


@contextmanager
def two_stores() -> Iterator[tuple[Grimoire, Grimoire]]:
    with tempfile.TemporaryDirectory() as tmp:
        fast = Grimoire.open(Path(tmp) / "fast.db", create=True)
        plain = Grimoire.open(Path(tmp) / "plain.db", create=True)
        try:
            yield fast, plain
        finally:
            fast.close()
            plain.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), steps=st.integers(1, 30), prefix=st.floats(0, 1),
       max_ops=st.integers(1, 9), piece=st.integers(1, 5))
def test_the_fast_join_writes_what_a_statement_per_op_writes(rng: random.Random, steps: int, prefix: float,
                                                             max_ops: int, piece: int) -> None:
    ops = history(rng, steps)
    first = ops[:int(len(ops) * prefix)]  # creation order: each writer's seqs are a prefix
    with two_stores() as (fast, plain), pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest, "PIECE_OPS", piece)
        start = frames(first, CausalContext(), max_ops=4096)
        join_plainly(fast, start)
        join_plainly(plain, start)
        rest = frames(ops, fast.causal_context(), max_ops=max_ops)
        reports = apply_frames(fast, rest, signature_ok, local_replica=ME.peer_id)
        join_plainly(plain, rest)
        assert not any(f.report.rejected for f in reports)
        assert rows(fast) == rows(plain)
        assert fast.state_digest() == plain.state_digest()


def test_an_own_entry_coming_back_is_folded_as_the_update_would_set_it(tmp_path: Path) -> None:
    """Own entries (provenance self): the author op folded into the new row re-anchors the
    forgetting curve exactly as `_PUT_AUTHOR` does; a retraction in the same delta is left to
    the UPDATE (its trigger stamps `live_seq`), and so is every author op after it."""
    me = SimReplica(ME)
    kept = me.create("own warning that comes back", confidence=0.8)
    gone = me.create("own warning retracted before it comes back", confidence=0.6)
    gone += me.retract(gone[0].entry_id)
    back = me.create("own warning retracted, then restored", confidence=0.6)
    back += me.retract(back[0].entry_id)
    back += me.local([me.mutator.set_author(me.body(back[0].entry_id), AuthorValue(confidence=0.3))])
    # Every op travels (a store sends only the op holding each slot; a hostile or old sender may not).
    data = [encode_delta(Delta((*kept, *gone, *back), CausalContext()))]
    fast, plain = (Grimoire.open(tmp_path / f"{n}.db", create=True) for n in ("fast", "plain"))
    apply_frames(fast, data, signature_ok, local_replica=ME.peer_id)
    join_plainly(plain, data)
    assert rows(fast) == rows(plain)
    conn = fast.connection
    row = conn.execute("SELECT provenance, confidence, local_confidence, decay_anchor_ms FROM entries WHERE id = ?",
                       (kept[0].entry_id,)).fetchone()
    assert row == ("self", 0.8, 0.8, kept[1].hlc.ms)
    retracted = conn.execute("SELECT status, live_seq FROM entries WHERE id = ?", (gone[0].entry_id,)).fetchone()
    assert retracted[0] == "retracted" and retracted[1] is not None
    # Once an update of a held-back row is queued, later author ops queue theirs behind it.
    restored = conn.execute("SELECT status, confidence FROM entries WHERE id = ?", (back[0].entry_id,)).fetchone()
    assert restored == ("active", 0.3)


def test_refused_ops_are_counted_by_reason_on_the_fast_path(tmp_path: Path) -> None:
    """An op whose signature fails, one from a writer that may not write its slot, and an
    orphan are each counted under their reason; the rest of the frame is joined."""
    writer, other = SimReplica(IDENTITIES[0]), SimReplica(IDENTITIES[2])
    good = writer.create("a warning that arrives", confidence=0.7)
    forged_body = writer.create("a warning whose signature breaks", confidence=0.5)
    orphan = writer.create("a warning whose body never comes", confidence=0.5)[1]
    intruder = make_op(writer=other.peer_id, seq=1, hlc=Timestamp(2_000_000), entry_id=good[0].entry_id,
                       slot=SlotKind.AUTHOR, value=AuthorValue(confidence=0.1), sign=other.identity.sign)
    frame = encode_delta(Delta((*good, *forged_body, orphan, intruder), CausalContext()))
    broken = forged_body[0].signature
    frame = frame.replace(broken, bytes([broken[0] ^ 1]) + broken[1:])
    store = Grimoire.open(tmp_path / "t.db", create=True)
    (joined,) = apply_frames(store, [frame], signature_ok, local_replica=ME.peer_id)
    assert joined.report.rejected == {"bad_signature": 1, "orphan": 2, "forbidden_slot": 1}
    assert joined.report.applied == 2 and store.counts().entries == 1
    assert sqlite3.connect(tmp_path / "t.db").execute("SELECT count(*) FROM ops").fetchone() == (2,)
