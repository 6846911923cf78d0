"""Crash safety of replication: SIGKILL a process joining sibling deltas, or writing locally.

The store's contract (daemon/grimoire/store.py): `Grimoire.apply_delta` joins a delta in one
transaction, and a local write commits its seqs together with its ops. So after any kill -9

- every delta is in the file wholly (its ops, the entries they materialise, the causal context it
  covers) or not at all, and the state is exactly the join of the deltas present: an in-memory
  reference fed those deltas has the same digest;
- a seq of the local writer is never given to two ops: the writer's ops hold seqs 1..n with no
  gap, the seq counter and causal context agree with them, and a persisted seq keeps its op.

Each delta here is written by its own writer, so which deltas a file holds can be read off it.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from functools import partial, reduce
from pathlib import Path

import pytest

from crdt import (
    CausalContext,
    Delta,
    Kind,
    MemoryBackend,
    SlotKind,
    apply_delta,
    digest,
    encode_delta,
    extract_deltas,
    join,
)
from crypto import Identity
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.crash import LINE_TIMEOUT, Child, run_until_killed
from tests.helpers.crdt_sim import IDENTITIES, SimReplica
from tests.helpers.seed import seed_one

KILLS = 20
BATCHES = 10

# argv: db, delta folder, comma-separated batch order. Prints "ready"; per batch, after decoding
# "start <i> <decode seconds>", after the commit "applied <i> <applied> <duplicate> <apply seconds>";
# then "done", and waits for stdin to close (or to be killed).
APPLIER = r"""
import sys
import time
from pathlib import Path
from crdt import decode_delta
from crypto import signature_ok
from daemon.grimoire.store import Grimoire

db, folder, order = Path(sys.argv[1]), Path(sys.argv[2]), [int(i) for i in sys.argv[3].split(",")]
store = Grimoire.open(db, create=True)
print("ready", flush=True)
for i in order:
    t0 = time.perf_counter()
    delta, rejected = decode_delta((folder / f"{i:02d}.delta").read_bytes(), signature_ok)
    if rejected:
        sys.exit(f"batch {i}: decoding refused {dict(rejected)}")
    t1 = time.perf_counter()
    print("start", i, f"{t1 - t0:.6f}", flush=True)
    report = store.apply_delta(delta, rejected=rejected)
    if report.rejected or report.superseded:
        sys.exit(f"batch {i}: {report}")
    print("applied", i, report.applied, report.duplicate, f"{time.perf_counter() - t1:.6f}", flush=True)
print("done", flush=True)
sys.stdin.read()
"""

# argv: db, run number. Prints "ready", then the id of every entry once its write returned.
LOCAL_WRITER = r"""
import sys
from pathlib import Path
from crdt import Kind
from daemon.grimoire.records import NewEntry
from daemon.grimoire.store import Grimoire
from tests.helpers.seed import seed_one
from tests.helpers.crdt_sim import IDENTITIES

db, run = Path(sys.argv[1]), int(sys.argv[2])
store = Grimoire.open(db, create=True)
print("ready", flush=True)
index = 0
while True:
    new = NewEntry(kind=Kind.INSIGHT, content=f"seq run{run} entry{index}: vault rebalances lag the oracle")
    print(seed_one(store, new, identity=IDENTITIES[0]).id, flush=True)
    index += 1
"""


@dataclass(frozen=True)
class Batch:
    """One encoded delta: every op of one writer, and that writer's whole context."""

    writer: str
    delta: Delta
    top: int                                # the writer's last seq (its vv once the batch is in)
    entries: dict[str, tuple[float, str]]   # entry id -> (confidence, status) it materialises
    state: MemoryBackend                    # the writer's own state


def make_batches(rng: random.Random, folder: Path) -> list[Batch]:
    """BATCHES writers each create entries and then update some (so some seqs are superseded)."""
    folder.mkdir()
    batches = []
    for i in range(BATCHES):
        sim = SimReplica(Identity(bytes([0xA0 + i]) * 32))
        ids = [
            sim.create(f"writer {i} entry {j}: {rng.choice(['curve', 'aave', 'uniswap'])} drifts {j}",
                       tags=(f"w{i}",))[0].entry_id
            for j in range(rng.randint(450, 1300))
        ]
        for _ in range(rng.randint(100, 500)):
            entry_id = rng.choice(ids)
            if rng.random() < 0.1:
                sim.retract(entry_id)
            else:
                sim.set_confidence(entry_id, rng.randint(0, 1000) / 1000)
        (delta,) = extract_deltas(sim.state, CausalContext())
        assert {op.writer for op in delta.ops} == {sim.peer_id}
        assert delta.context.to_rows() == [(sim.peer_id, sim.seq, [])]
        assert len(delta.ops) < sim.seq  # some seqs were superseded: only the context covers them
        (folder / f"{i:02d}.delta").write_bytes(encode_delta(delta))
        entries = {}
        for entry_id in ids:
            value = sim.author_value(entry_id)
            entries[entry_id] = (value.confidence, value.status.label)
        batches.append(Batch(sim.peer_id, delta, sim.seq, entries, sim.state))
    return batches


def inspect(db: Path, batches: list[Batch]) -> tuple[set[int], str]:
    """Check the file after a crash; returns the batches it holds and its state digest.

    Fails unless every batch is wholly present or wholly absent.
    """
    with Grimoire.open(db) as store:
        assert store.integrity_check() == "ok"
        context = store.causal_context()
        state = store.state_digest()
    with closing(sqlite3.connect(db, isolation_level=None)) as raw:
        raw.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
        op_counts: dict[str, int] = dict(raw.execute("SELECT writer, count(*) FROM ops GROUP BY writer").fetchall())
        entries: dict[str, dict[str, tuple[float, str]]] = {}
        for author, entry_id, confidence, status in raw.execute(
            "SELECT author, id, confidence, status FROM entries"
        ):
            entries.setdefault(author, {})[entry_id] = (confidence, status)
    writers = {b.writer for b in batches}
    assert set(op_counts) <= writers and set(entries) <= writers and set(context.replicas()) <= writers
    present = set()
    for i, batch in enumerate(batches):
        count = op_counts.get(batch.writer, 0)
        assert count in (0, len(batch.delta.ops)), f"batch {i}: {count} of {len(batch.delta.ops)} ops"
        seen = (context.vv(batch.writer), context.cloud(batch.writer))
        got = entries.get(batch.writer, {})
        if count:
            present.add(i)
            assert seen == (batch.top, frozenset()), f"batch {i}: ops in, context {seen}"
            assert got == batch.entries, f"batch {i}: ops in, entries differ"
        else:
            assert seen == (0, frozenset()), f"batch {i}: no ops, context {seen}"
            assert got == {}, f"batch {i}: no ops, {len(got)} entries"
    return present, state


def reference_digest(reference: MemoryBackend) -> str:
    return digest(reference.ops(), reference.context)


def wait_then_kill_point(child: Child, delay: float) -> None:
    """Let the child run for `delay` seconds: not synchronisation, the random kill point."""
    with pytest.raises(subprocess.TimeoutExpired):
        child.proc.wait(timeout=delay)


@dataclass
class Rates:
    """Seconds per op the child reported for decoding and for joining fresh batches."""

    decode: list[float]
    apply: list[float]

    @staticmethod
    def _recent(values: list[float], default: float) -> float:
        return sum(values[-3:]) / len(values[-3:]) if values else default

    def decode_s(self, ops: int) -> float:
        return ops * self._recent(self.decode, 1.2e-4)

    def apply_s(self, ops: int) -> float:
        return ops * self._recent(self.apply, 1.1e-4)


def drive(child: Child, plan: tuple[str, int, float], order: list[int], sizes: list[int], rates: Rates) -> list[str]:
    """Run the applier until the kill point of `plan`, SIGKILL it; returns every line it printed.

    - ("acks", n, _): kill as soon as n batches were acknowledged (the child is then decoding
      or joining the next one);
    - ("inflight", n, u): after n acknowledgements, wait for the next "start" line, then kill
      after u times the expected duration of that batch's transaction (so it lands mid-batch);
    - ("delay", _, u): kill at a random moment of the first batch's decode and join.
    """
    mode, n, u = plan
    assert child.line() == "ready"
    seen: list[str] = []

    def until(word: str, count: int) -> bool:
        got = 0
        while got < count:
            seen.append(child.line())
            if seen[-1] == "done":
                return False
            got += seen[-1].split()[0] == word
        return True

    if mode == "acks":
        until("applied", n)
    elif mode == "inflight":
        if until("applied", n) and until("start", 1):
            wait_then_kill_point(child, u * rates.apply_s(sizes[int(seen[-1].split()[1])]))
    else:
        first = sizes[order[0]]
        wait_then_kill_point(child, u * 1.5 * (rates.decode_s(first) + rates.apply_s(first)))
    return seen + child.kill()


@pytest.mark.slow
def test_delta_join_is_all_or_nothing_under_sigkill(tmp_path: Path) -> None:
    plan_rng, order_rng = random.Random(9001), random.Random(9002)
    batches = make_batches(random.Random(9000), tmp_path / "deltas")
    sizes = [len(b.delta.ops) for b in batches]
    db = tmp_path / "g.db"
    rates = Rates([], [])
    reference = MemoryBackend()
    present: set[int] = set()
    in_flight_kills = {"rolled back": 0, "committed": 0, "duplicate": 0}

    def run(order: list[int], name: str, body: Callable[[Child], list[str]]) -> tuple[list[int], list[int]]:
        """Run the applier with `order`; returns the batches started and acknowledged."""
        with Child(APPLIER, str(db), str(tmp_path / "deltas"), ",".join(map(str, order)),
                   stderr_path=tmp_path / f"{name}.err") as child:
            lines = body(child)
        started: list[int] = []
        acked: list[int] = []
        for line in lines:
            word, *fields = line.split()
            if word == "start":
                started.append(int(fields[0]))
                rates.decode.append(float(fields[1]) / sizes[started[-1]])
            elif word == "applied":
                i, applied, duplicate = (int(f) for f in fields[:3])
                assert i == started[-1] and i not in acked
                acked.append(i)
                if i in present:  # joined before (maybe committed by a run killed before its ack)
                    assert (applied, duplicate) == (0, sizes[i]), line
                else:
                    assert (applied, duplicate) == (sizes[i], 0), line
                    rates.apply.append(float(fields[3]) / sizes[i])
            else:
                assert (word, fields, len(started)) == ("done", [], len(order)), line
        assert started == order[: len(started)] and acked == started[: len(acked)]
        assert len(started) - len(acked) in (0, 1)
        return started, acked

    for kill in range(KILLS):
        mode = plan_rng.choices(["acks", "inflight", "delay"], weights=[3, 5, 2])[0]
        plan = (mode, plan_rng.randint(1, 2) if mode == "acks" else plan_rng.choice([0, 0, 1]),
                plan_rng.uniform(0.05, 0.9))
        pending = sorted(set(range(BATCHES)) - present)
        again = sorted(present)
        order_rng.shuffle(pending)
        order_rng.shuffle(again)
        order = pending + again  # fresh batches first, then re-joins (idempotent)
        started, acked = run(order, f"kill-{kill}", partial(drive, plan=plan, order=order, sizes=sizes, rates=rates))

        now, state = inspect(db, batches)
        assert present <= now, f"kill {kill}: batches {present - now} vanished"
        assert set(acked) <= now, f"kill {kill}: acknowledged batches {set(acked) - now} missing"
        in_flight = started[-1] if len(started) > len(acked) else None
        assert now - present <= set(acked) | {in_flight}, f"kill {kill}: batches {now - present} from nowhere"
        if in_flight is not None:
            kind = "duplicate" if in_flight in present else "committed" if in_flight in now else "rolled back"
            in_flight_kills[kind] += 1
        for i in sorted(now - present):
            apply_delta(reference, batches[i].delta)
        present = now
        # Exactly the join of the batches present: nothing half-joined, nothing else.
        assert state == reference_digest(reference), f"kill {kill}: digest differs from reference of {present}"

    print(f"\nkills with a batch in flight: {in_flight_kills}; batches in after the kills: {len(present)}")
    assert in_flight_kills["rolled back"] >= 4, in_flight_kills  # the kills did land mid-batch

    # A final run, uninterrupted, joins every batch (again, for those already in).
    order = list(range(BATCHES))
    order_rng.shuffle(order)

    def to_the_end(child: Child) -> list[str]:
        assert child.line() == "ready"
        lines = [child.line() for _ in range(2 * BATCHES + 1)]
        assert child.proc.stdin is not None
        child.proc.stdin.close()
        assert child.proc.wait(timeout=LINE_TIMEOUT) == 0, child.stderr()
        return lines

    started, acked = run(order, "final", to_the_end)
    assert acked == order
    now, state = inspect(db, batches)
    assert now == set(range(BATCHES))
    for i in sorted(now - present):
        apply_delta(reference, batches[i].delta)
    everything = reduce(join, (b.state for b in batches), MemoryBackend())
    assert state == reference_digest(reference) == reference_digest(everything)


def check_local(db: Path, writer: str, acked: set[str], history: dict[int, tuple[str, int, bytes]]) -> None:
    """The local writer's seqs after a crash: 1..n, no gap, counter and context in step, stable."""
    with Grimoire.open(db) as store:
        assert store.integrity_check() == "ok"
        context = store.causal_context()
    with closing(sqlite3.connect(db, isolation_level=None)) as raw:
        rows = raw.execute("SELECT seq, entry_id, slot, signed FROM ops WHERE writer = ? ORDER BY seq",
                           (writer,)).fetchall()
        (others,) = raw.execute("SELECT count(*) FROM ops WHERE writer != ?", (writer,)).fetchone()
        (local_seq,) = raw.execute("SELECT value FROM meta WHERE key = ?", (f"local_seq/{writer}",)).fetchone()
        (entries,) = raw.execute("SELECT count(*) FROM entries").fetchone()
    top = len(rows)
    assert others == 0 and top > 0
    assert [r[0] for r in rows] == list(range(1, top + 1))
    assert local_seq == top  # >= top: never reissued; == top: every seq drawn by a committed write is held
    assert context.replicas() == [writer] and (context.vv(writer), context.cloud(writer)) == (top, frozenset())
    slots: dict[str, dict[int, int]] = {}
    for seq, entry_id, slot, _ in rows:
        slots.setdefault(entry_id, {})[slot] = seq
    assert len(slots) == entries
    for entry_id, held in slots.items():  # each entry: body then author op, consecutive seqs
        assert set(held) == {SlotKind.BODY, SlotKind.AUTHOR}, entry_id
        assert held[SlotKind.AUTHOR] == held[SlotKind.BODY] + 1, entry_id
    assert acked <= set(slots), f"acknowledged entries missing: {acked - set(slots)}"
    # A seq persisted once keeps its op forever: no later run handed it out again.
    for seq, entry_id, slot, signed in rows:
        assert history.setdefault(seq, (entry_id, slot, signed)) == (entry_id, slot, signed), f"seq {seq} reused"
    assert set(history) == set(range(1, top + 1))


@pytest.mark.slow  # a crash loop: 12-20 children SIGKILLed mid-write, each reopened and checked
def test_local_seq_is_never_reused_across_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    writer = IDENTITIES[0].peer_id
    rng = random.Random(4242)
    acked: set[str] = set()
    history: dict[int, tuple[str, int, bytes]] = {}
    committed_unacked = 0
    for run in range(KILLS):
        with Child(LOCAL_WRITER, str(db), str(run), stderr_path=tmp_path / f"local-{run}.err") as child:
            lines = run_until_killed(child, rng, run, max_lines=150, max_delay=0.25)
        before = set(history)
        acked.update(lines)
        check_local(db, writer, acked, history)
        new_entries = {entry_id for seq, (entry_id, _, _) in history.items() if seq not in before}
        # Beyond the acknowledged writes, at most the one in flight at the kill was committed.
        assert len(new_entries - set(lines)) <= 1
        committed_unacked += len(new_entries - set(lines))
    print(f"\nkills after a commit but before its acknowledgement: {committed_unacked}")

    # After all that, the next local write takes the next two seqs.
    top = len(history)
    with Grimoire.open(db) as store:
        entry = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="after the crashes"), identity=IDENTITIES[0])
    check_local(db, writer, acked | {entry.id}, history)
    assert {seq for seq, (entry_id, _, _) in history.items() if entry_id == entry.id} == {top + 1, top + 2}
