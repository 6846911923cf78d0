"""Seals on disk (schema `_V20_SEALS`; what a seal is: crdt/seals.py).

- `seal_own_blocks`: in the write that completes one of our blocks of 256 seqs, seal it over
  the ops we hold of it (a seq whose slot was written again since has no op left: its leaf is
  empty). Blocks completed before seals existed are sealed by the next own write, at most
  `SEAL_PER_WRITE` at a time.
- `put_seals`: keep checked seals a sibling sent (the first of a block wins: a writer seals a
  block once; another seal of it could only come from the writer sealing twice).
- `seals_covering`: the seals a delta being served should carry: of the blocks it holds at
  least `SEAL_MIN_OPS` ops of and whose seal went with no earlier delta of the round, those
  with the most ops first, at most `limit` (a writer's bodies are extracted before its other
  ops, so a round brings most blocks in two deltas).
- `seal_asks` / `seals_after`: the asker's "which writers' seals I lack" and the responder's
  answer (sync v3's want).
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence

from crdt import CausalContext, Op
from crdt.replica import MAX_BATCH_BYTES
from crdt.seals import BLOCK_OPS, SEAL_WIRE_BYTES, Seal, block_of, leaf, make_seal

__all__ = ["SEALED_OPS_BYTES", "SEALS_PER_DELTA", "SEAL_ASKS", "SEAL_MIN_OPS", "SEAL_PER_WRITE", "blocks_to_seal",
           "put_seals", "seal_asks", "seal_own_blocks", "seals_after", "seals_covering"]

SEAL_PER_WRITE = 64  # own blocks sealed by one write at most (an upgraded store catches up over a few)
SEAL_MIN_OPS = 16  # a seal (4.2 kB) rides with a delta only for a block it carries this many ops of
SEAL_ASKS = 16  # writers a want asks seals of, at most
# Seals in a served delta: at most this many (~4.2 kB each), within the delta's byte cap, which
# leaves its ops SEALED_OPS_BYTES.
SEALS_PER_DELTA = 32
SEALED_OPS_BYTES = MAX_BATCH_BYTES - SEALS_PER_DELTA * SEAL_WIRE_BYTES


def seal_own_blocks(conn: sqlite3.Connection, writer: str, top_seq: int, sign: Callable[[bytes], bytes]) -> int:
    """Seal our complete blocks up to `top_seq` that have no seal yet; how many were sealed."""
    complete = top_seq // BLOCK_OPS  # blocks 0 … complete - 1 are complete
    row = conn.execute("SELECT max(block) FROM seals WHERE writer = ?", (writer,)).fetchone()
    first = 0 if row[0] is None else row[0] + 1
    sealed = 0
    for block in range(first, min(complete, first + SEAL_PER_WRITE)):
        lo, hi = block * BLOCK_OPS + 1, (block + 1) * BLOCK_OPS
        leaves = {seq: leaf(signed, signature) for seq, signed, signature in conn.execute(
            "SELECT seq, signed, signature FROM ops WHERE writer = ? AND seq BETWEEN ? AND ?", (writer, lo, hi))}
        seal = make_seal(writer, block, leaves, sign)
        conn.execute("INSERT OR IGNORE INTO seals (writer, block, leaves, signature) VALUES (?, ?, ?, ?)",
                     (writer, block, seal.leaves, seal.signature))
        sealed += 1
    return sealed


def put_seals(conn: sqlite3.Connection, seals: Iterable[Seal]) -> int:
    """Keep seals whose signatures were checked; how many were new."""
    before = conn.total_changes
    conn.executemany("INSERT OR IGNORE INTO seals (writer, block, leaves, signature) VALUES (?, ?, ?, ?)",
                     [(s.writer, s.block, s.leaves, s.signature) for s in seals])
    return conn.total_changes - before


def _load(rows: Iterable[tuple[str, int, bytes, bytes]]) -> list[Seal]:
    return [Seal(writer, block, leaves, signature) for writer, block, leaves, signature in rows]


def blocks_to_seal(ops: Sequence[Op], *, sent: Collection[tuple[str, int]] = ()) -> list[tuple[str, int]]:
    """(writer, block) of the blocks `ops` bring at least SEAL_MIN_OPS ops of, most ops first,
    but those in `sent` (sent earlier in the round: the asker still holds them). Pure."""
    counts = Counter((op.writer, block_of(op.seq)) for op in ops)
    return [key for key, n in counts.most_common() if n >= SEAL_MIN_OPS and key not in sent]


def seals_covering(conn: sqlite3.Connection, ops: Sequence[Op], *, limit: int,
                   sent: Collection[tuple[str, int]] = ()) -> list[Seal]:
    """The seals we hold of `blocks_to_seal(ops, sent=sent)`, at most `limit` (the module doc)."""
    seals: list[Seal] = []
    for writer, block in blocks_to_seal(ops, sent=sent):
        if len(seals) == limit:
            break
        seals += _load(conn.execute("SELECT writer, block, leaves, signature FROM seals WHERE writer = ? AND block = ?",
                                    (writer, block)))
    return seals


def seal_asks(conn: sqlite3.Connection, context: CausalContext, *, me: str | None, skip: Callable[[str, int], bool],
              rng: random.Random | None = None) -> list[tuple[str, int, int]]:
    """(writer, first block we have no seal above, complete blocks we hold) for writers but `me`
    of whom we hold complete blocks above our last seal of theirs, at most SEAL_ASKS of them at
    random; `skip(writer, complete)` leaves out a writer asked in vain at that many complete
    blocks (the caller remembers)."""
    last = dict(conn.execute("SELECT writer, max(block) FROM seals GROUP BY writer").fetchall())
    asks: list[tuple[str, int, int]] = []
    for writer, vv, _ in context.to_rows():
        if writer == me:
            continue
        complete = vv // BLOCK_OPS
        first = last[writer] + 1 if writer in last else 0
        if complete > first and not skip(writer, complete):
            asks.append((writer, first, complete))
    if len(asks) > SEAL_ASKS:
        asks = (rng or random).sample(asks, SEAL_ASKS)
    return asks


def seals_after(conn: sqlite3.Connection, asks: Iterable[tuple[str, int]], *, limit: int) -> list[Seal]:
    """The seals we hold of each asked writer from its asked block on, oldest first, `limit` in all."""
    seals: list[Seal] = []
    for writer, first in asks:
        if len(seals) >= limit:
            break
        seals += _load(conn.execute(
            "SELECT writer, block, leaves, signature FROM seals WHERE writer = ? AND block >= ? ORDER BY block LIMIT ?",
            (writer, first, limit - len(seals))))
    return seals
