"""Every id the control API and the CLI take is a full id or a unique prefix of one
(daemon/grimoire/short_ids.py): each id route, against a live daemon, resolves a prefix and
answers with the full id, refuses an ambiguous prefix with a 400 naming the candidates, a
too short one with a 400 stating the minimum, and an unknown one with a 404; the CLI sends the
prefix as typed and the daemon resolves it in the same call (no lookup first).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from crdt import Kind
from crypto import Identity
from daemon.cli.backends import DaemonBackend
from daemon.cli.ids import entry_id
from daemon.client import DaemonClient
from daemon.datadir import DataDir
from daemon.grimoire import Episode, NewEntry
from daemon.grimoire.write_door import Prepared, write_entries
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner

Route = tuple[str, str, dict[str, Any] | None]  # method, path ({} the id), body
ENTRY_ROUTES: tuple[Route, ...] = (
                ("GET", "/v1/entries/{}", None), ("POST", "/v1/entries/{}/forget", None),
                ("POST", "/v1/entries/{}/unarchive", None), ("DELETE", "/v1/entries/{}", None),
                ("POST", "/v1/entries/{}/retract", {}), ("POST", "/v1/entries/{}/endorse", {}),
                ("POST", "/v1/entries/{}/outcome", {"effect": "positive"}))
TWIN_EPISODES = ("abcd" + "0" * 28, "abcd" + "1" * 28)


@dataclass(frozen=True)
class Ids:
    mine: list[str]  # sorted; among them two that share their first 4 hex characters
    twins: tuple[str, str]
    theirs: str  # a sibling's entry (endorsable)

    def unknown_prefix(self) -> str:
        """4 hex characters no entry id starts with."""
        every = [*self.mine, self.theirs]
        return next(p for p in (f"{n:04x}" for n in range(65536)) if not any(i.startswith(p) for i in every))


def _seed(data: DataDir) -> Ids:
    """1,500 own entries (4 hex characters collide among that many), a sibling's entry, two episodes."""
    me, other = data.load_identity(), Identity.generate()
    with data.open_store(identity=me) as store:
        news = [NewEntry(kind=Kind.FACT, content=f"fact number {n} about pool {n}") for n in range(1500)]
        made = write_entries(store, me, Prepared.unembedded(news), now_ms=1_700_000_000_000).created
        mine = sorted(e.id for e in made)
        theirs = write_entries(store, other, Prepared.unembedded(
            [NewEntry(kind=Kind.WARNING, content="a sibling's warning")]), now_ms=1_700_000_000_000).created[0].id
    data.open_episodes().append([Episode(id=i, summary=f"episode {i[-1]}", observed_ms=1_700_000_000_000)
                                 for i in TWIN_EPISODES])
    twins = next((a, b) for a, b in itertools.pairwise(mine) if a[:4] == b[:4])
    return Ids(mine=mine, twins=twins, theirs=theirs)


@pytest.fixture
def seeded(data_dir: DataDir) -> Iterator[tuple[DaemonProc, Ids]]:
    ids = _seed(data_dir)
    daemon = DaemonProc(data_dir)
    try:
        yield daemon, ids
    finally:
        assert daemon.stop() == 0


def _target(ids: Ids, path: str, n: int) -> str:
    """The entry a route acts on: the sibling's for endorse, else an own one that is no twin."""
    if path.endswith("/endorse"):
        return ids.theirs
    return next(i for i in ids.mine[n:] if i not in ids.twins)


def test_every_entry_route_takes_a_unique_prefix_and_answers_with_the_full_id(
        seeded: tuple[DaemonProc, Ids]) -> None:
    daemon, ids = seeded
    for n, (method, path, body) in enumerate(ENTRY_ROUTES):
        full = _target(ids, path, n)
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        answer = daemon.request(method, path.format(full[:8].upper()), **kwargs)
        assert answer.status_code == 200, (method, path, answer.text)
        assert answer.json()["id"] == full, (method, path)


def test_an_ambiguous_prefix_is_a_400_naming_the_candidates_on_every_entry_route(
        seeded: tuple[DaemonProc, Ids]) -> None:
    daemon, ids = seeded
    for method, path, body in ENTRY_ROUTES:
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        answer = daemon.request(method, path.format(ids.twins[0][:4]), **kwargs)
        assert answer.status_code == 400, (method, path, answer.text)
        detail = answer.json()["detail"]
        assert "ambiguous" in detail and ids.twins[0] in detail and ids.twins[1] in detail, (method, path)
    for method, path, body in ENTRY_ROUTES:  # and nothing was written by the refused calls
        short = daemon.request(method, path.format(ids.twins[0][:3]), **({} if body is None else {"json": body}))
        assert short.status_code == 400 and "at least 4" in short.json()["detail"], (method, path, short.text)
    shown = daemon.request("GET", f"/v1/entries/{ids.twins[0]}").json()
    assert shown["archived"] is False and shown["status"] == "active" and shown["outcomes"]["positive"] == 0


def test_an_unknown_prefix_is_a_404_on_every_entry_route(seeded: tuple[DaemonProc, Ids]) -> None:
    daemon, ids = seeded
    for method, path, body in ENTRY_ROUTES:
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        answer = daemon.request(method, path.format(ids.unknown_prefix()), **kwargs)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"] == "not_found"


def test_ids_in_bodies_take_prefixes_too(seeded: tuple[DaemonProc, Ids]) -> None:
    daemon, ids = seeded
    old, new = [i for i in ids.mine if i not in ids.twins][:2]
    retracted = daemon.request("POST", f"/v1/entries/{old[:6]}/retract", json={"superseded_by": new[:10]})
    assert retracted.status_code == 200, retracted.text
    assert retracted.json()["id"] == old and retracted.json()["superseded_by"] == new
    fed = daemon.request("POST", "/v1/feedback", json={"cited": [new[:8]], "injected": [old[:8]]})
    assert fed.status_code == 200, fed.text
    assert set(fed.json()["weights"]) == {new, old} and fed.json()["cited"] == [new]
    twin = daemon.request("POST", "/v1/feedback", json={"cited": [ids.twins[0][:4]]})
    assert twin.status_code == 400 and ids.twins[1] in twin.json()["detail"]
    unknown = daemon.request("POST", "/v1/feedback", json={"cited": [ids.unknown_prefix()]})
    assert unknown.status_code == 404


def test_the_episode_route_takes_a_unique_prefix(seeded: tuple[DaemonProc, Ids]) -> None:
    daemon, _ = seeded
    verified = daemon.request("POST", f"/v1/episodes/{TWIN_EPISODES[1][:6]}/verify")
    assert verified.status_code == 200, verified.text
    assert verified.json()["id"] == TWIN_EPISODES[1] and verified.json()["changed"] is True
    ambiguous = daemon.request("POST", "/v1/episodes/abcd/verify")
    assert ambiguous.status_code == 400
    assert all(i in ambiguous.json()["detail"] for i in TWIN_EPISODES)
    assert daemon.request("POST", "/v1/episodes/abc/verify").status_code == 400
    assert daemon.request("POST", "/v1/episodes/ffff/verify").status_code == 404


def test_the_cli_sends_the_prefix_as_typed_and_the_daemon_resolves_it(
        seeded: tuple[DaemonProc, Ids], cli: CliRunner) -> None:
    daemon, ids = seeded
    client = DaemonClient.for_data_dir(daemon.data)
    assert client is not None
    assert entry_id(DaemonBackend(client), "AbCd12") == "AbCd12"  # sent as typed: no lookup first
    target = next(i for i in ids.mine if i not in ids.twins)
    forgot = cli("forget", target[:7], "--json")
    assert forgot.code == 0, forgot.err
    assert forgot.json() == {"id": target, "archived": True, "changed": True}
    endorsed = cli("endorse", ids.theirs[:7], "--json")
    assert endorsed.code == 0 and endorsed.json()["id"] == ids.theirs, endorsed.err
    ambiguous = cli("outcome", ids.twins[0][:4], "positive")
    assert ambiguous.code != 0 and "ambiguous" in ambiguous.err and ids.twins[1] in ambiguous.err
    unknown = cli("retract", ids.unknown_prefix())
    assert unknown.code != 0 and "no entry" in unknown.err
    verified = cli("episode", "verify", TWIN_EPISODES[0][:5], "--json")
    assert verified.code == 0 and verified.json()["id"] == TWIN_EPISODES[0], verified.err
