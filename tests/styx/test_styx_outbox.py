"""The Styx outbox is written with its cause, holds only what crosses, and loses nothing (daemon/styx/outbox.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdt import InvalidValue, Kind, Sensitivity
from crypto import Identity
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.crossing import promote_ready
from daemon.styx import outbox
from daemon.styx.outbox import OutboxWriter
from daemon.styx.wire import batch_body

ME = Identity(b"\x21" * 32)
T0 = 1_800_000_000_000


def _store(tmp_path: Path) -> Grimoire:
    store = Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0)
    store.outbox = OutboxWriter(layers=("clade",))
    return store


def test_a_warning_is_enqueued_in_its_own_transaction_and_private_never(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        w = store.remember(NewEntry(kind=Kind.WARNING, content="Never LP under $100K TVL"), identity=ME)
        store.remember(NewEntry(kind=Kind.WARNING, content="my wallet seed hint", sensitivity=Sensitivity.PRIVATE),
                       identity=ME)
        store.remember(NewEntry(kind=Kind.PREFERENCE, content="I like Curve"), identity=ME)
        with pytest.raises(InvalidValue):  # all or none: the good warning of a failed batch leaves no item
            store.remember_many([NewEntry(kind=Kind.WARNING, content="Avoid the old router"),
                                 NewEntry(kind=Kind.WARNING, content="x", confidence=7.0)], identity=ME)
        items = outbox.due(store.connection, now_ms=T0, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("warning", "clade")]
        doc = json.loads(items[0].item)
        seq = store.connection.execute("SELECT seq FROM ops WHERE entry_id = ? AND slot = 0", (w.id,)).fetchone()[0]
        assert doc["idempotency_key"] == f"{ME.peer_id}:{seq}" == items[0].key
        assert doc["id"] == w.id and doc["content"] == "Never LP under $100K TVL" and doc["layer"] == "clade"
        body = json.loads(batch_body(ME.peer_id, [items[0].item]))
        assert body["entries"][0] == doc  # the stored text is what is sent, every time


def test_an_insight_waits_for_its_promotion(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.remember(NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI", confidence=0.8, quality=0.6),
                       identity=ME)
        store.remember(NewEntry(kind=Kind.INSIGHT, content="Weak hunch", confidence=0.3, quality=0.6), identity=ME)
        assert outbox.due(store.connection, now_ms=T0, limit=10) == []
        assert len(promote_ready(store, ME, now_ms=T0, tick_seconds=10)) == 1
        items = outbox.due(store.connection, now_ms=T0, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("insight", "clade")]


def test_retry_park_unpark_and_delivery(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        for n in range(3):
            store.remember(NewEntry(kind=Kind.WARNING, content=f"warning {n}"), identity=ME)
        conn = store.connection
        a, b, c = outbox.due(conn, now_ms=T0, limit=10)
        with store.transaction():
            outbox.retry_later(conn, [a.n], next_ms=T0 + 5000, error="HTTP 503")
            outbox.park(conn, [b.n], now_ms=T0, reason="HTTP 403: token revoked")
        assert [i.n for i in outbox.due(conn, now_ms=T0, limit=10)] == [c.n]
        assert [i.n for i in outbox.due(conn, now_ms=T0 + 5000, limit=10)] == [a.n, c.n]
        st = outbox.status(conn, now_ms=T0 + 10_000)
        assert st["queue_depth"] == 2 and st["parked"] == 1 and st["oldest_age_s"] == 10.0
        assert st["parked_items"][0]["reason"] == "HTTP 403: token revoked"
        with store.transaction():
            assert outbox.unpark(conn, b.key) == 1
            outbox.delivered(conn, [a.n, c.n])
        assert [i.n for i in outbox.due(conn, now_ms=T0, limit=10)] == [b.n]


def test_the_spend_ledger_adds_up_per_month_and_a_playbook_is_queued_once_per_text(tmp_path: Path) -> None:
    from daemon.styx import ledger

    with _store(tmp_path) as store:
        with store.transaction() as conn:
            ledger.record(conn, "2026-11", 0.02, calls=1, items=2)
            ledger.record(conn, "2026-11", 0.01, queries=1)
            ledger.record(conn, "2026-12", 0.5, calls=1)
        assert ledger.summary(store.connection, "2026-11") == {
            "month": "2026-11", "usd": 0.03, "calls": 1, "items": 2, "queries": 1}
        assert ledger.spent(store.connection, "2027-01") == 0.0
        assert ledger.month_of(1_795_000_000_000) == "2026-11"
        with store.transaction() as conn:
            first = outbox.enqueue_playbook(conn, golem="G", text="# PLAYBOOK\n- a\n", now_ms=1, created_at="t")
            again = outbox.enqueue_playbook(conn, golem="G", text="# PLAYBOOK\n- a\n", now_ms=2, created_at="t")
            other = outbox.enqueue_playbook(conn, golem="G", text="# PLAYBOOK\n- b\n", now_ms=3, created_at="t")
        assert first == again != other and first.startswith("G:playbook-")
        items = outbox.due(store.connection, now_ms=10, limit=10)
        assert [(i.kind, i.layer) for i in items] == [("playbook", "vault")] * 2
        assert json.loads(items[0].item)["content"] == "# PLAYBOOK\n- a\n"
