"""Catch-up frames joined while a verifier thread opens them (daemon/grimoire/ingest.py), on
real SQLite stores: the same state as applying them one by one, the same refusals, keyword
search over what arrived, and no verifier thread left behind whatever fails."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from crdt import Kind, RemoteProtocolError, decode_delta, encode_delta
from crypto import Identity, signature_ok
from daemon.errors import StoreError
from daemon.grimoire import Grimoire, NewEntry, ingest
from daemon.grimoire.ingest import apply_frames
from tests.helpers.crdt_sim import IDENTITIES
from tests.helpers.seed import seed

WRITER: Identity = IDENTITIES[0]
ME: Identity = IDENTITIES[1]


def verifier_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("clade-verify")]


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Grimoire]:
    """A writer's store with 700 warnings (1,400 ops), a third of them retracted."""
    store = Grimoire.open(tmp_path / "source.db", create=True)
    entries = seed(store, [NewEntry(kind=Kind.WARNING, content=f"Pool {i} drains below 100k TVL at block {i}")
                          for i in range(700)], identity=WRITER)
    for entry in entries[::3]:
        store.retract(entry.id, identity=WRITER)
    yield store
    store.close()


def frames_of(store: Grimoire, target: Grimoire, *, max_ops: int) -> list[bytes]:
    return [encode_delta(d) for d in store.iter_deltas(target.causal_context(), max_ops=max_ops)]


def open_store(path: Path) -> Grimoire:
    return Grimoire.open(path, create=True)


def test_frames_joined_through_the_pipe_equal_frames_applied_one_by_one(source: Grimoire, tmp_path: Path) -> None:
    piped, serial = open_store(tmp_path / "piped.db"), open_store(tmp_path / "serial.db")
    frames = frames_of(source, piped, max_ops=300)  # several frames, each several pieces of PIECE_OPS
    assert len(frames) >= 4 and max(len(decode_delta(f, signature_ok)[0].ops) for f in frames) > ingest.PIECE_OPS
    joined = apply_frames(piped, frames, signature_ok, local_replica=ME.peer_id, sender=WRITER.peer_id)
    one_by_one = []
    for frame in frames:
        delta, dropped = decode_delta(frame, signature_ok)
        one_by_one.append(serial.apply_delta(delta, rejected=dropped, local_replica=ME.peer_id, sender=WRITER.peer_id))
    assert [f.size for f in joined] == [len(f) for f in frames]
    # A body and the latest author op of each entry.
    assert sum(f.report.applied for f in joined) == sum(r.applied for r in one_by_one) == 1_400
    assert piped.state_digest() == serial.state_digest() == source.state_digest()
    assert piped.causal_context().missing_count(source.causal_context()) == 0
    # What arrived is found by keywords at once (its FTS rows were written in its transaction).
    assert len(piped.keyword_search("block 699 drains", k=5)) >= 1
    piped.connection.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
    assert not verifier_threads()


def test_a_bad_signature_is_counted_and_its_seq_asked_for_again(source: Grimoire, tmp_path: Path) -> None:
    target = open_store(tmp_path / "t.db")
    (frame,) = frames_of(source, target, max_ops=4096)
    message = msgpack.unpackb(frame)
    signed, signature = message[1][0][1][-1]  # an author op (bodies go first)
    message[1][0][1][-1] = [signed, bytes([signature[0] ^ 1]) + signature[1:]]
    (joined,) = apply_frames(target, [msgpack.packb(message, use_bin_type=True)], signature_ok,
                             local_replica=ME.peer_id, sender=WRITER.peer_id)
    assert joined.report.rejected == {"bad_signature": 1}
    # The writer's context row was not merged: the next pull asks for that seq again.
    assert target.causal_context().missing_count(source.causal_context()) >= 1
    (again,) = apply_frames(target, frames_of(source, target, max_ops=4096), signature_ok,
                            local_replica=ME.peer_id, sender=WRITER.peer_id)
    assert not again.report.rejected and target.state_digest() == source.state_digest()


def test_a_malformed_frame_stops_the_round_after_the_frames_before_it(source: Grimoire, tmp_path: Path) -> None:
    target = open_store(tmp_path / "t.db")
    frames = frames_of(source, target, max_ops=300)
    with pytest.raises(RemoteProtocolError) as caught:
        apply_frames(target, [frames[0], b"\x93\x07\x90\x90", *frames[1:]], signature_ok,
                     local_replica=ME.peer_id, sender=WRITER.peer_id)
    assert caught.value.reason == "unknown_version"
    assert target.counts().entries == len({op.entry_id for op in decode_delta(frames[0], signature_ok)[0].ops})
    assert not verifier_threads()


def test_a_store_failure_stops_the_verifier_even_with_the_pipe_full(source: Grimoire, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer cannot start its transaction (another connection holds the write lock): the
    error reaches the caller and the verifier, blocked on a full pipe, stops too."""
    monkeypatch.setattr(ingest, "DEPTH", 2)
    path = tmp_path / "t.db"
    target = Grimoire.open(path, create=True, busy_timeout_ms=50)
    frames = frames_of(source, target, max_ops=4096)
    assert len(decode_delta(frames[0], signature_ok)[0].ops) > ingest.PIECE_OPS * ingest.DEPTH
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError):
            apply_frames(target, frames, signature_ok, local_replica=ME.peer_id, sender=WRITER.peer_id)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert not verifier_threads()
    assert target.counts().entries == 0


def test_a_round_join_takes_frames_added_while_it_joins_and_never_waits_for_more(source: Grimoire,
                                                                                  tmp_path: Path) -> None:
    """`RoundJoin`: with nothing added, `join_added` returns at once; a frame added while the
    writer joins an earlier one is joined in the same call; once the added frames are joined
    it returns, though more may come; `close` ends the unpacker waiting for the next frame."""
    target = open_store(tmp_path / "t.db")
    frames = frames_of(source, target, max_ops=300)
    assert len(frames) >= 4
    round_join: ingest.RoundJoin

    def add_the_next(report: ingest.FrameReport) -> None:  # on the writer, after each commit
        if round_join.added < 3:
            round_join.add(frames[round_join.added])

    round_join = ingest.RoundJoin(signature_ok, local_replica=ME.peer_id, sender=WRITER.peer_id,
                                  on_frame=add_the_next)
    try:
        assert round_join.join_added(target) == [] and not round_join.pending
        round_join.add(frames[0])
        first = round_join.join_added(target)  # frames 2 and 3 were added while it ran
        assert [f.size for f in first] == [len(f) for f in frames[:3]] and not round_join.pending
        round_join.add(frames[3])
        assert [f.size for f in round_join.join_added(target)] == [len(frames[3])]
    finally:
        round_join.close()
    assert not verifier_threads()  # the unpacker, waiting for a fifth frame, was woken by close
    at_once = open_store(tmp_path / "at-once.db")
    apply_frames(at_once, frames[:4], signature_ok, local_replica=ME.peer_id, sender=WRITER.peer_id)
    assert target.state_digest() == at_once.state_digest() != source.state_digest()  # 4 frames, not all
