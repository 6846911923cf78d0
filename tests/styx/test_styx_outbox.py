"""The Styx outbox is written with its cause, holds only what crosses, and loses nothing (daemon/styx/outbox.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdt import InvalidValue, Kind, Sensitivity
from crypto import Identity
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.crossing import promote_ready
from daemon.grimoire.styx_store import Spend
from daemon.styx import outbox
from daemon.styx.outbox import OutboxWriter
from daemon.styx.wire import batch_body
from tests.helpers.seed import seed, seed_one

ME = Identity(b"\x21" * 32)
T0 = 1_800_000_000_000


def _store(tmp_path: Path) -> Grimoire:
    store = Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0)
    store.outbox = OutboxWriter(layers=("clade",))
    return store


def test_a_warning_is_enqueued_in_its_own_transaction_and_private_never(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        w = seed_one(store, NewEntry(kind=Kind.WARNING, content="Never LP under $100K TVL"), identity=ME)
        seed_one(store, NewEntry(kind=Kind.WARNING, content="my wallet seed hint", sensitivity=Sensitivity.PRIVATE),
                        identity=ME)
        seed_one(store, NewEntry(kind=Kind.PREFERENCE, content="I like Curve"), identity=ME)
        with pytest.raises(InvalidValue):  # all or none: the good warning of a failed batch leaves no item
            seed(store, [NewEntry(kind=Kind.WARNING, content="Avoid the old router"),
                        NewEntry(kind=Kind.WARNING, content="x", confidence=7.0)], identity=ME)
        items = store.outbox_due(now_ms=T0, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("warning", "clade")]
        doc = json.loads(items[0].item)
        seq = store.connection.execute("SELECT seq FROM ops WHERE entry_id = ? AND slot = 0", (w.id,)).fetchone()[0]
        assert doc["idempotency_key"] == f"{ME.peer_id}:{seq}" == items[0].key
        assert doc["id"] == w.id and doc["content"] == "Never LP under $100K TVL" and doc["layer"] == "clade"
        body = json.loads(batch_body(ME.peer_id, [items[0].item]))
        assert body["entries"][0] == doc  # the stored text is what is sent, every time


def test_an_insight_waits_for_its_promotion(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI", confidence=0.8, quality=0.6),
                        identity=ME)
        seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Weak hunch", confidence=0.3, quality=0.6), identity=ME)
        assert store.outbox_due(now_ms=T0, limit=10) == []
        assert len(promote_ready(store, ME, now_ms=T0, tick_seconds=10)) == 1
        items = store.outbox_due(now_ms=T0, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("insight", "clade")]


def test_retry_park_unpark_and_delivery(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        for n in range(3):
            seed_one(store, NewEntry(kind=Kind.WARNING, content=f"warning {n}"), identity=ME)
        a, b, c = store.outbox_due(now_ms=T0, limit=10)
        free = Spend("2026-11", 0.0)
        store.outbox_retry_later([a.n], free, next_ms=T0 + 5000, error="HTTP 503")
        store.outbox_park([b.n], free, now_ms=T0, reason="HTTP 403: token revoked")
        assert [i.n for i in store.outbox_due(now_ms=T0, limit=10)] == [c.n]
        assert [i.n for i in store.outbox_due(now_ms=T0 + 5000, limit=10)] == [a.n, c.n]
        st = store.outbox_status(now_ms=T0 + 10_000)
        assert st["queue_depth"] == 2 and st["parked"] == 1 and st["oldest_age_s"] == 10.0
        assert st["parked_items"][0]["reason"] == "HTTP 403: token revoked"
        assert store.outbox_unpark(b.key) == 1
        store.outbox_delivered([a.n, c.n], free)
        assert [i.n for i in store.outbox_due(now_ms=T0, limit=10)] == [b.n]


def test_the_spend_ledger_adds_up_per_month_and_a_playbook_is_queued_once_per_text(tmp_path: Path) -> None:
    from daemon.styx import ledger

    with _store(tmp_path) as store:
        store.styx_record_spend(Spend("2026-11", 0.02, calls=1, items=2))
        store.styx_record_spend(Spend("2026-11", 0.01, queries=1))
        store.styx_record_spend(Spend("2026-12", 0.5, calls=1))
        assert store.styx_spend_summary("2026-11") == {
            "month": "2026-11", "usd": 0.03, "calls": 1, "items": 2, "queries": 1}
        assert store.styx_spent("2027-01") == 0.0
        assert ledger.month_of(1_795_000_000_000) == "2026-11"
        first = outbox.enqueue_playbook(store, golem="G", text="# PLAYBOOK\n- a\n", now_ms=1, created_at="t")
        again = outbox.enqueue_playbook(store, golem="G", text="# PLAYBOOK\n- a\n", now_ms=2, created_at="t")
        other = outbox.enqueue_playbook(store, golem="G", text="# PLAYBOOK\n- b\n", now_ms=3, created_at="t")
        assert first == again != other and first.startswith("G:playbook-")
        items = store.outbox_due(now_ms=10, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("playbook", "vault")] * 2
        assert json.loads(items[0].item)["content"] == "# PLAYBOOK\n- a\n"
