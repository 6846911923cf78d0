"""What is pushed where (docs/operator/styx.md's table): every row against the reference Styx server.

A real store with the outbox hook, drained by the real pusher over HTTP into
daemon/testing/styx_server.py; what the server holds is what Styx was sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import trio

from crdt import Kind, Sensitivity
from crypto import Identity
from daemon.config import StyxConfig
from daemon.grimoire import Grimoire, NewEntry
from daemon.styx import outbox
from daemon.styx.outbox import OutboxWriter, writer_for
from daemon.styx.pusher import Pusher
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN
from tests.helpers.seed import raw_write, seed_one

ME = Identity(b"\x33" * 32)
T0 = 1_800_000_000_000
T = TypeVar("T")
PROMOTED = (Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK, Kind.HEURISTIC, Kind.CONSTRAINT)
AT_ONCE = (Kind.WARNING, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT)
NEVER = (Kind.PREFERENCE, Kind.STRATEGY_OUTCOME, Kind.EPISODE_SUMMARY)


def _write_every_kind(store: Grimoire) -> dict[str, str]:
    """One entry of each kind (promotable ones promoted, as the curator does), plus private and
    sensitive ones and a PLAYBOOK snapshot; returns content → kind label."""
    written: dict[str, str] = {}
    for kind in (*AT_ONCE, *PROMOTED, *NEVER, Kind.DEATH_REFLECTION):
        content = f"the {kind.value} about ETH on Base"
        entry = seed_one(store, NewEntry(kind=kind, content=content, confidence=0.9, tokens=("ETH",), chains=(8453,),
                                         strategy_id="owner-book-7", tags=("alice",)), identity=ME)
        if kind in PROMOTED:
            assert store.promote([entry.id], ME, now_ms=T0, reason="admitted") == [entry.id]
        written[content] = kind.value
    for sensitivity in (Sensitivity.PRIVATE, Sensitivity.SENSITIVE):
        content = f"a {sensitivity.value} warning"
        seed_one(store, NewEntry(kind=Kind.WARNING, content=content, sensitivity=sensitivity), identity=ME)
        written[content] = f"{sensitivity.value} warning"
    if isinstance(store.outbox, OutboxWriter) and "vault" in store.outbox.layers:  # as StyxLink.queue_playbook
        outbox.enqueue_playbook(store, golem=ME.peer_id, text="# PLAYBOOK\n- never LP under $100K TVL\n",
                                now_ms=T0, created_at="2027-01-15T08:00:00.000Z")
    return written


def _drain(store: Grimoire, styx: StyxServer) -> None:
    async def on_writer(fn: Callable[[Grimoire], T]) -> T:
        return fn(store)

    async def main() -> None:
        pusher = Pusher(on_writer, url=styx.url, token=STYX_TOKEN, golem=ME.peer_id, wall_ms=lambda: T0 + 1)
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(20):
                await pusher.round(client)
                if store.outbox_status(now_ms=T0)["queue_depth"] == 0:
                    return
        raise AssertionError("the outbox did not drain")

    trio.run(main)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as opened:
        yield opened


def _arrived(styx: StyxServer) -> dict[str, list[dict[str, Any]]]:
    by_content: dict[str, list[dict[str, Any]]] = {}
    for item in styx.items():
        by_content.setdefault(item["content"].split("\n")[0], []).append(item)
    return by_content


def test_every_row_of_the_table_with_every_layer_on(store: Grimoire, styx: StyxServer) -> None:
    store.outbox = OutboxWriter(layers=("vault", "clade", "lethe"))
    written = _write_every_kind(store)
    _drain(store, styx)
    arrived = _arrived(styx)
    for content, label in written.items():
        items = arrived.get(content, [])
        if label in {k.value for k in AT_ONCE}:  # clade with its metadata, and an anonymised public copy
            private, public = sorted(items, key=lambda i: i["layer"])
            assert private["layers"] == ["clade"] and private["metadata"]["strategy_id"] == "owner-book-7"
            assert private["idempotency_key"].startswith(ME.peer_id + ":")
            assert public["layers"] == ["lethe"] and public["provenance"] == "lethe"
            assert ME.peer_id not in json.dumps(public) and "owner-book-7" not in json.dumps(public)
            assert "alice" not in json.dumps(public) and public["metadata"]["tokens"] == ["ETH"]
        elif label == "death_reflection":
            assert [i["layers"] for i in items] == [["vault", "clade"]]
        elif label in {k.value for k in PROMOTED}:
            assert [i["layers"] for i in items] == [["clade"]], label
        else:  # never: soma kinds, private and sensitive entries
            assert items == [], label
    assert [i["layers"] for i in arrived["# PLAYBOOK"]] == [["vault"]]
    assert styx.stats()["entries"] == 3 * 2 + 1 + 5 + 1  # nothing else left


def test_with_every_shared_layer_off_nothing_leaves_but_the_vault(store: Grimoire, styx: StyxServer) -> None:
    config = StyxConfig(enabled=True, url=styx.url)  # the defaults: clade and lethe are opt-in
    assert (config.vault_enabled, config.clade_enabled, config.lethe_enabled) == (True, False, False)
    store.outbox = writer_for(config)
    written = _write_every_kind(store)
    _drain(store, styx)
    layers = {item["content"].split("\n")[0]: item["layers"] for item in styx.items()}
    assert layers == {"the death_reflection about ETH on Base": ["vault"], "# PLAYBOOK": ["vault"]}
    assert set(written) >= {"the warning about ETH on Base", "the insight about ETH on Base"}


def test_the_public_layer_alone_gets_only_anonymised_warnings(store: Grimoire, styx: StyxServer) -> None:
    store.outbox = OutboxWriter(layers=("lethe",))
    _write_every_kind(store)
    _drain(store, styx)
    items = styx.items()
    assert sorted(i["kind"] for i in items) == sorted(k.value for k in AT_ONCE)
    for item in items:
        assert item["layers"] == ["lethe"] and item["id"] == item["idempotency_key"].removeprefix("lethe:")
        assert ME.peer_id not in json.dumps(item) and set(item["metadata"]) == {"tokens", "chains", "protocols"}
    found = httpx.get(f"{styx.url}/v1/styx/query", params={"q": "warning ETH", "layers": "lethe", "k": "10"},
                      headers={"Authorization": f"Bearer {STYX_TOKEN}"}).json()["results"]
    assert found and {r["layer"] for r in found} == {"lethe"}
    none = httpx.get(f"{styx.url}/v1/styx/query", params={"q": "warning ETH", "layers": "clade", "k": "10"},
                     headers={"Authorization": f"Bearer {STYX_TOKEN}"}).json()["results"]
    assert none == []


def test_a_reader_of_the_public_layer_cannot_link_an_item_to_its_golem(store: Grimoire, styx: StyxServer) -> None:
    """Every layer on, so clade and public items wait side by side: the public ones leave in
    requests of their own naming no golem, and a reader who knows every peer id (siblings, LAN
    peers, Styx) and tries the unkeyed hash of `peer:seq` for the first 5,000 seqs — the key
    step 23 used — matches none; the clade items still name their golem."""
    store.outbox = OutboxWriter(layers=("vault", "clade", "lethe"))
    _write_every_kind(store)
    _drain(store, styx)
    senders = styx.senders()
    public = {k: v for k, v in senders.items() if k.startswith("lethe:")}
    assert public and set(public.values()) == {"lethe"}  # sent anonymously, apart from the clade's items
    assert ME.peer_id in set(senders.values())  # the private layers still say whose they are
    known = [ME.peer_id, Identity(b"\x02" * 32).peer_id, Identity(b"\x03" * 32).peer_id]
    guesses = {"lethe:" + hashlib.blake2b(f"{peer}:{seq}".encode(), digest_size=16, person=b"clade.lethe").hexdigest()
               for peer in known for seq in range(5000)}
    assert not guesses & set(public)
    for item in (i for i in styx.items() if i["layers"] == ["lethe"]):
        text = json.dumps(item)
        assert all(peer not in text for peer in known)
        assert item["importance"] == round(item["importance"], 1)


def test_a_refuted_or_held_entry_is_never_queued(store: Grimoire) -> None:
    store.outbox = OutboxWriter(layers=("vault", "clade", "lethe"))
    insight = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="refuted hunch", confidence=0.9), identity=ME)
    with raw_write(store) as conn:  # the clade's evidence turned it refuted (evidence_store.date_refuted)
        from daemon.grimoire.evidence_store import date_refuted

        date_refuted(conn, [insight.id], [], now_ms=T0)
    assert store.promote([insight.id], ME, now_ms=T0, reason="legacy") == [insight.id]
    sentinel = seed_one(store, NewEntry(kind=Kind.WARNING, content="a later warning"), identity=ME)
    keys = [i.key for i in store.outbox_due(now_ms=T0, limit=10)]
    assert len(keys) == 2 and all(sentinel.id not in k for k in keys)  # the warning's two items, nothing else
    kinds = {i.kind for i in store.outbox_due(now_ms=T0, limit=10)}
    assert kinds == {"warning"}
