"""Vectors shipped with gossip, against a real `clade run` victim: a member (mallory, whose
libp2p host runs in this process) publishes two of her warnings on the vectors topic, one with
her true vector and one with a vector of another text, plus a vector for an entry that is not
hers. The victim must use the vectors of her own entries at once, keep none for the other
entry, and — checking every shipped vector (`[embedding] check_shipped = 1`) with its own
model — keep the true one (checked), replace the forged one with its own embedding and make
mallory suspect (`forged_vector`). A malformed section refuses the whole message.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import trio

from crdt import CausalContext, Delta
from crdt.codec import encode_delta
from daemon.embedding.catalogue import MINILM
from daemon.embedding.embedder import expected_info, get_embedder
from daemon.embedding.shipped import encode_section, space_name
from daemon.p2p.gossip import WITH_VECTORS
from daemon.p2p.node import topic_of
from daemon.testing.harness import LoopbackClade
from tests.helpers.mallory import VICTIM_ENV, Mallory, now_ms
from tests.helpers.stranger import call, counters, wait_until

pytestmark = pytest.mark.slow


def stored(db: Path, entry_id: str) -> tuple[Any, np.ndarray | None]:
    """(embedding_source, vector) of an entry in the victim's store (a read-only connection)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT embedding_source, embedding FROM entries WHERE id = ?", (entry_id,)).fetchone()
    assert row is not None, f"{entry_id} is not in the victim's store"
    return row[0], None if row[1] is None else np.frombuffer(row[1], dtype=np.float32)


async def test_shipped_vectors_are_used_checked_and_a_forged_one_makes_its_author_suspect(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 1)
    (victim,) = clade.golems
    mallory_dir = clade.add_golem("mallory")
    embedder = get_embedder(tmp_path / "model", MINILM)
    info = expected_info(MINILM)
    assert info is not None
    try:
        env = {**VICTIM_ENV, "CLADE_EMBEDDING__CHECK_SHIPPED": "1"}
        await trio.to_thread.run_sync(lambda: clade.start(victim, bootstrap=[], env=env))
        mallory = Mallory(mallory_dir, victim)
        async with mallory.running():
            await mallory.connect()
            topic = topic_of(mallory.membership.clade_id, vectors=True)
            honest, honest_ops = mallory.entry("Base sequencer stalls for minutes: delay swaps until blocks resume")
            forged, forged_ops = mallory.entry("Curve stETH pool imbalance above 70%: exit before the depeg")
            elsewhere = "e" * 64  # an entry that is not in her message (nor hers)
            true_vecs = embedder.embed([honest.content, forged.content, "A recipe for lemon cake with poppy seeds"])
            section = encode_section(space_name(info), {honest.id: true_vecs[0], forged.id: true_vecs[2],
                                                         elsewhere: true_vecs[2]})
            data = mallory.codec.seal(Delta((*honest_ops, *forged_ops), CausalContext()), now_ms=now_ms(),
                                      vectors=section)
            await mallory.pubsub.publish(topic, data)

            async def checked() -> bool:
                c = await counters(victim)
                return c.get("shipped_vectors_checked", 0) >= 2
            await wait_until("the victim checks both shipped vectors", checked)
            seen = await counters(victim)
            assert seen.get("gossip_vectors_used") == 2 and seen.get("gossip_vectors_not_senders") == 1, seen
            assert seen.get("shipped_vectors_forged") == 1, seen

            source, vec = stored(victim.data.db_path, honest.id)
            assert source == "checked" and vec is not None and float(vec @ true_vecs[0]) > 0.999
            source, vec = stored(victim.data.db_path, forged.id)
            assert source is None and vec is not None and float(vec @ true_vecs[1]) > 0.999  # its own, not hers
            authors = {a["author"]: a for a in (await call(victim, "GET", "/v1/trust"))["authors"]}
            assert authors[mallory.me]["suspect"] and "forged_vector" in authors[mallory.me]["reasons"]

            # A malformed section refuses the whole message: its ops are not joined.
            bad, bad_ops = mallory.entry("Aave oracle on Base drifted 40 bps: check before borrowing")
            batch = msgpack.packb([WITH_VECTORS, encode_delta(Delta(tuple(bad_ops), CausalContext())),
                                   ["space", [["x", float("nan"), b"\x01"]]]], use_bin_type=True)
            await mallory.pubsub.publish(topic, mallory.seal_raw(batch))

            async def refused() -> bool:
                return (await counters(victim)).get("gossip_rejected_malformed_vectors", 0) == 1
            await wait_until("the malformed section is refused", refused)
            assert bad.id not in {e["id"] for e in (await call(victim, "GET", "/v1/entries"))["entries"]}
        assert victim.running
        assert not mallory.errors, mallory.errors
    finally:
        await trio.to_thread.run_sync(clade.close)
