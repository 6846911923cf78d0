"""Testament export and inheritance over real stores and real vault files (curator/bequest.py)."""

from __future__ import annotations

from pathlib import Path

import nacl.public
import pytest

from crdt import Kind, Sensitivity
from crypto import Identity
from crypto.vault import VaultKeys
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator import testament as ts
from daemon.grimoire.curator.bequest import export_testament, inherit, read_testament, successor_document
from tests.helpers.seed import seed_one

A, B, C = (Identity(bytes([n]) * 32) for n in (0x41, 0x42, 0x43))
CLADE_KEY = b"\x07" * 32
OWNER = nacl.public.PrivateKey(b"\x09" * 32)
KEYS = VaultKeys(clade_key=CLADE_KEY)
T0 = 1_800_000_000_000


def _export(store: Grimoire, who: Identity, out: Path) -> ts.TestamentDocument:
    export_testament(store, who, clade_id="clade-x", clade_keys=[CLADE_KEY],
                     x25519_recipients=[bytes(OWNER.public_key)], out=out, now_ms=T0 + 1000)
    return read_testament(out, KEYS)


def test_three_generations_with_the_discount(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "a.db", create=True, wall_ms=lambda: T0) as a:
        warn = seed_one(a, NewEntry(kind=Kind.WARNING, content="Never LP under $100K TVL", confidence=0.9), identity=A)
        ins = seed_one(a, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI prints", confidence=0.8),
                          identity=A)
        low = seed_one(a, NewEntry(kind=Kind.INSIGHT, content="Maybe gas is cheap on Tuesdays", confidence=0.1),
                          identity=A)
        doc = _export(a, A, tmp_path / "a.testament")
    ids = [it.entry_id for it in doc.items]
    assert ids[0] == warn.id and ins.id in ids and low.id not in ids  # warnings first; below 0.3 stays behind
    assert all(it.generation == 1 for it in doc.items)
    # the owner can read it too
    assert read_testament(tmp_path / "a.testament", VaultKeys(x25519=OWNER)) == doc

    with Grimoire.open(tmp_path / "b.db", create=True, wall_ms=lambda: T0) as b:
        report = inherit(b, doc, clade_id="clade-x", local_replica=B.peer_id, now_ms=T0 + 2000)
        assert report.entries == 2 and report.generations == {1: 2}
        got = b.get(ins.id)
        assert got.provenance == "inherited" and got.local_confidence == pytest.approx(0.4)
        assert got.body.author == A.peer_id  # still the learner's signed entry
        doc_b = _export(b, B, tmp_path / "b.testament")
    assert {it.generation for it in doc_b.items} == {2}

    with Grimoire.open(tmp_path / "c.db", create=True, wall_ms=lambda: T0) as c:
        inherit(c, doc_b, clade_id="clade-x", local_replica=C.peer_id, now_ms=T0 + 3000)
        assert c.get(ins.id).local_confidence == pytest.approx(0.34)
        assert c.get(warn.id).local_confidence == pytest.approx(0.34)


def test_tampered_or_foreign_testaments_import_nothing(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "a.db", create=True, wall_ms=lambda: T0) as a:
        seed_one(a, NewEntry(kind=Kind.WARNING, content="Never bridge via the old router"), identity=A)
        doc = _export(a, A, tmp_path / "t")
    data = (tmp_path / "t").read_bytes()
    with Grimoire.open(tmp_path / "b.db", create=True, wall_ms=lambda: T0) as b:
        for i in range(0, len(data), max(1, len(data) // 97)):
            bad = bytearray(data)
            bad[i] ^= 0x20
            (tmp_path / "bad").write_bytes(bytes(bad))
            with pytest.raises(ts.TestamentError):
                read_testament(tmp_path / "bad", KEYS)
        (tmp_path / "short").write_bytes(data[:-1])
        with pytest.raises(ts.TestamentError):
            read_testament(tmp_path / "short", KEYS)
        with pytest.raises(ts.TestamentError, match="belongs to clade"):
            inherit(b, doc, clade_id="clade-y", local_replica=B.peer_id, now_ms=T0)
        with pytest.raises(ts.TestamentError, match="decrypt"):
            read_testament(tmp_path / "t", VaultKeys(clade_key=b"\x08" * 32))
        assert b.connection.execute("SELECT count(*) FROM entries").fetchone()[0] == 0


def _soma_and_germline(store: Grimoire, who: Identity) -> tuple[dict[str, str], dict[str, str]]:
    """A dying golem's store: what must die with it (by name) and what an heir must get."""
    soma = {
        "outcome": seed_one(store, NewEntry(kind=Kind.STRATEGY_OUTCOME, confidence=0.95, importance=1.0,
                                            content="ETH/USDC range 1850-2150: 40k USDC position, +3,412.18 USDC P&L"),
                                   identity=who).id,
        "preference": seed_one(store, NewEntry(kind=Kind.PREFERENCE, confidence=0.95, importance=1.0,
                                               content="Owner prefers max 25% of the book in one pool"),
                                      identity=who).id,
        "sensitive": seed_one(store, NewEntry(kind=Kind.FACT, confidence=0.95, importance=1.0,
                                              sensitivity=Sensitivity.SENSITIVE,
                                              content="max_position_usd: 50000"), identity=who).id,
        "private": seed_one(store, NewEntry(kind=Kind.WARNING, confidence=0.95, sensitivity=Sensitivity.PRIVATE,
                                            content="Never exceed 2x leverage on the owner's main account"),
                                   identity=who).id,
        "episode": seed_one(store, NewEntry(kind=Kind.EPISODE_SUMMARY, confidence=0.9,
                                            content="Episode: swapped 200k on Curve at 31 bps slippage"),
                                   identity=who).id,
    }
    germline = {
        "warning": seed_one(store, NewEntry(kind=Kind.WARNING, content="Never LP under $100K TVL", confidence=0.9),
                                   identity=who).id,
        "insight": seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI prints",
                                            confidence=0.8), identity=who).id,
    }
    return soma, germline


def test_the_soma_dies_with_the_golem_by_either_path(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "a.db", create=True, wall_ms=lambda: T0) as a:
        soma, germline = _soma_and_germline(a, A)
        reflection = seed_one(a, NewEntry(kind=Kind.DEATH_REFLECTION, content="I died chasing APY.", confidence=0.9,
                                          bloodstain=True), identity=A).id
        export_testament(a, A, clade_id="clade-x", clade_keys=[CLADE_KEY], x25519_recipients=[], out=tmp_path / "t",
                         now_ms=T0 + 1000, reflection_id=reflection)
    by_file = read_testament(tmp_path / "t", KEYS)
    with Grimoire.open(tmp_path / "a.db") as backup:  # what `restore --as-successor` reads from the backup
        by_backup = successor_document(backup, golem=A.peer_id, clade_id="clade-x", now_ms=T0 + 1000)
    for n, doc in enumerate((by_file, by_backup)):
        assert [it.entry_id for it in doc.items][:2] == [reflection, germline["warning"]]
        assert doc.reflection_id == reflection
        with Grimoire.open(tmp_path / f"heir{n}.db", create=True, wall_ms=lambda: T0) as heir:
            inherit(heir, doc, clade_id="clade-x", local_replica=B.peer_id, now_ms=T0 + 2000)
            held = {r[0] for r in heir.connection.execute("SELECT id FROM entries")}
            assert held == {reflection, *germline.values()}
            assert not held & set(soma.values())
            (ops,) = heir.connection.execute("SELECT count(*) FROM ops WHERE entry_id IN ({})".format(
                ", ".join("?" * len(soma))), list(soma.values())).fetchone()
            assert ops == 0  # not even an op of the soma crossed
            assert heir.get(reflection).body.bloodstain


def test_the_successor_path_is_capped_like_the_testament(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "a.db", create=True, wall_ms=lambda: T0) as a:
        for i in range(ts.MAX_ENTRIES + 40):
            seed_one(a, NewEntry(kind=Kind.INSIGHT, content=f"Pool {i} thins out on Sundays", confidence=0.8),
                        identity=A)
        doc = successor_document(a, golem=A.peer_id, clade_id="clade-x", now_ms=T0 + 1000)
    assert len(doc.items) == ts.MAX_ENTRIES and doc.reflection_id is None
