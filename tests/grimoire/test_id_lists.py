"""Lists of ids in SQL as one JSON parameter (daemon/grimoire/id_lists.py), on a real store:
the same rows as before, and one prepared statement whatever the list's length, so SQLite's
memory does not grow with the lengths a daemon meets (each `IN (?, ?, …)` of another length
was another statement in every connection's cache: the soak's SQLite memory grew for hours)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdt import Kind
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.id_lists import IN_LIST, as_list
from daemon.native_memory import heap
from tests.helpers.crdt_sim import IDENTITIES
from tests.helpers.seed import seed


@pytest.fixture
def store(tmp_path: Path) -> Grimoire:
    s = Grimoire.open(tmp_path / "g.db", create=True)
    seed(s, [NewEntry(kind=Kind.WARNING, content=f"pool {i} drained through a reentrancy") for i in range(300)],
         identity=IDENTITIES[0])
    return s


def test_a_json_list_matches_what_it_lists(store: Grimoire) -> None:
    ids = sorted(r[0] for r in store.connection.execute("SELECT id FROM entries"))
    asked = [*ids[:7], "no such id", "it's \"quoted\" — ünïcode"]
    found = store.connection.execute(f"SELECT id FROM entries WHERE id IN {IN_LIST}", (as_list(asked),)).fetchall()
    assert sorted(r[0] for r in found) == ids[:7]
    assert store.connection.execute(f"SELECT count(*) FROM entries WHERE id IN {IN_LIST}",
                                    (as_list([]),)).fetchone()[0] == 0
    assert [e.id for e in sorted(store.get_many(ids[:5]), key=lambda e: e.id)] == ids[:5]


def test_every_length_of_list_is_one_statement(store: Grimoire) -> None:
    ids = sorted(r[0] for r in store.connection.execute("SELECT id FROM entries"))
    store.get_many(ids[:1])
    before = heap().sqlite
    for n in range(1, 301):  # 300 lengths: as `IN (?, …)` they were 300 statements, ~8 MiB in one cache
        assert len(store.get_many(ids[:n])) == n
    assert heap().sqlite - before < 1 << 20, (heap().sqlite - before) / 2**20
