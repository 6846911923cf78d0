"""Clade sync end to end: real `clade run` daemons on 127.0.0.1 talking real libp2p.

Each test builds its own clade (owner + golems in tmp_path) with `daemon.testing.harness.LoopbackClade`
and waits on events or polled state with deadlines, never on fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crdt import Kind
from crypto import OwnerKey, RevocationList
from daemon.grimoire import Grimoire, NewEntry
from daemon.testing.harness import EventLog, Golem, LoopbackClade
from tests.helpers.clade import ids_on, running_clade, write
from tests.helpers.polling import eventually
from tests.helpers.seed import seed

pytestmark = pytest.mark.slow


@pytest.fixture
def clade3(tmp_path: Path) -> Iterator[LoopbackClade]:
    with running_clade(tmp_path, 3) as clade:
        yield clade


def shared_digest(golem: Golem) -> str:
    return str(golem.call("GET", "/v1/state-digest")["shared"])


def converged(golems: list[Golem]) -> bool:
    """One anti-entropy round everywhere, then: do all shared digests agree?"""
    for golem in golems:
        golem.call("POST", "/v1/sync", json={})
    return len({shared_digest(g) for g in golems}) == 1


def counters(golem: Golem) -> dict[str, int]:
    return dict(golem.call("GET", "/v1/status")["counters"])


def test_warning_and_promoted_insight_reach_every_sibling_and_state_converges(clade3: LoopbackClade) -> None:
    a, b, c = clade3.golems
    logs = {g.name: EventLog(g.socket).start() for g in clade3.golems}
    try:
        warning = write(a, "ETH gas above 80 gwei at 14:00 UTC: delay swaps")
        for sibling in (b, c):
            logs[sibling.name].wait_for(lambda n, d: n == "entries_received" and warning in d["ids"], timeout=10)
            entry = sibling.call("GET", f"/v1/entries/{warning}")
            assert entry["provenance"] == "clade" and entry["author"] == a.peer_id
            assert entry["local_confidence"] == pytest.approx(0.4)
            # It came with a's own vector (the vectors topic: every sibling is on it), used at once.
            assert counters(sibling).get("gossip_vectors_used", 0) >= 1
            with sqlite3.connect(f"file:{sibling.data.db_path}?mode=ro", uri=True) as conn:
                source, = conn.execute("SELECT embedding_source FROM entries WHERE id = ?", (warning,)).fetchone()
            assert source in ("author", "to_check", "checked"), source

        insight = write(b, "0.05% pools beat 0.3% pools in quiet weeks", "insight", confidence=0.8, quality=0.7)
        # A warning written after it crosses at once, in the same gossip batch or a later one than
        # the insight's ops would: once it has arrived, the insight would have too, were it let out.
        marker = write(b, "marker: b's warning written after the insight")
        for sibling in (a, c):
            logs[sibling.name].wait_for(lambda n, d: n == "entries_received" and marker in d["ids"], timeout=10)
        assert insight not in ids_on(a) | ids_on(c)  # not promoted yet: stays home
        assert b.call("POST", "/v1/curator/run")["entries_promoted"] == 1
        for sibling in (a, c):
            logs[sibling.name].wait_for(lambda n, d: n == "entries_received" and insight in d["ids"], timeout=10)
    finally:
        for log in logs.values():
            log.close()
    eventually(lambda: converged(clade3.golems), what="identical shared digests")
    assert ids_on(a) == ids_on(b) == ids_on(c) == {warning, marker, insight}
    for golem in clade3.golems:  # the per-peer positions are those of the last sync: one more round
        golem.call("POST", "/v1/sync", json={})
    for golem in clade3.golems:
        peers = [p for p in golem.peers() if p["member"]]
        assert len(peers) == 2 and all(p["connected"] and p["behind"] == 0 for p in peers), peers


def test_private_sensitive_unpromoted_and_episodes_never_leave(clade3: LoopbackClade) -> None:
    a, b, c = clade3.golems
    private = write(a, "wallet 0xabc rotates keys on Fridays", sensitivity="private")
    sensitive = write(a, "api key lives in vault slot 3", sensitivity="sensitive")
    preference = write(a, "prefer Arbitrum for small swaps", "preference")
    weak = write(a, "maybe LST yields lag ETH by a day", "insight", confidence=0.3)
    episode = a.call("POST", "/v1/episodes", json={"summary": "swapped 2 ETH for USDC at block 100"})["id"]
    marker = write(a, "marker warning written last")
    a.call("POST", "/v1/curator/run")  # the weak insight stays below the gate
    eventually(lambda: all(marker in ids_on(g) for g in (b, c)), what="the marker on b and c")
    eventually(lambda: converged(clade3.golems), what="identical shared digests")
    for golem in clade3.golems:  # the per-peer positions are those of the last sync: one more round
        golem.call("POST", "/v1/sync", json={})
    for sibling in (b, c):
        got = ids_on(sibling)
        assert got.isdisjoint({private, sensitive, preference, weak})
        assert sibling.data.open_episodes().count() == 0
        # the withheld seqs are covered by context: nobody is "behind" a's private entries
        assert all(p["behind"] == 0 for p in sibling.peers() if p["peer_id"] == a.peer_id)
    assert episode and {private, sensitive, preference, weak} <= ids_on(a) and a.data.open_episodes().count() == 1


def test_catch_up_after_restart_without_new_writes(clade3: LoopbackClade) -> None:
    """c catches up 520 ops on restart. a and b have each written a block of 256 ops, sealed
    (sync v3): c checks a signature per sealed block, not per op, and a and b, which got each
    other's ops by gossip (no seal), ask each other for the seals at their next pull."""
    a, b, c = clade3.golems
    c.stop()
    for i in range(130):  # 2 ops each: 260 on a, 260 on b
        write(a, f"a warning {i} while c is down")
        write(b, f"b warning {i} while c is down")
    clade3.start(c, bootstrap=[a])
    LoopbackClade.wait_connected(clade3.golems)
    eventually(lambda: len(ids_on(c)) == 260, what="all 260 entries on c")
    eventually(lambda: converged(clade3.golems), what="identical shared digests")
    got = counters(c)  # GossipSub's message cache may replay the last seconds of gossip on reconnect
    assert got["sync_ops_applied"] > 0 and got["sync_ops_applied"] + got.get("gossip_ops_applied", 0) == 520
    assert got["sync_ops_sealed"] > 0 and got["sync_seals_received"] >= 1
    assert got.get("sync_rejected_bad_seal", 0) == 0
    for relay in (a, b):  # the other's seal, asked for (converged() pulled everywhere once more)
        assert counters(relay)["sync_seals_received"] >= 1, counters(relay)


def test_catch_up_survives_sigkill_mid_sync(clade3: LoopbackClade) -> None:
    """c is SIGKILLed while pulling a backlog from a, restarts, and gets all of it.

    The cut falls inside the sync by construction, not by timing: the backlog (3000 entries of
    3.5 KB, over 10 MiB) takes at least three rounds of at most 4 MiB, c asks for a round only
    once it has applied the one before, and a is frozen (SIGSTOP) as soon as c has applied its
    first delta; a alone holds the backlog (b is down, and a, restarted after the write, never
    gossips it). So c cannot hold it all when it is killed, however fast it is."""
    a, b, c = clade3.golems
    for golem in (c, b, a):
        golem.stop()
    identity = a.data.load_identity()
    with Grimoire.open(a.data.db_path) as store:
        seed(store, [NewEntry(kind=Kind.WARNING, content=f"bulk warning {i} " + "x" * 3500)
                    for i in range(3000)], identity=identity)
    same_port = a.p2p_addrs[0].split("/p2p/")[0]  # c remembers a there (peers.json), and dials it first
    a.p2p_addrs = []
    clade3.start(a, bootstrap=[], args=["--listen", same_port])
    frozen = a.proc
    assert frozen is not None
    clade3.start(c, bootstrap=[a])
    log = EventLog(c.socket).start()
    try:  # the first delta is applied: the sync is under way
        log.wait_for(lambda n, d: n == "sync_progress" and d["applied"] > 0, timeout=60)
        os.kill(frozen.pid, signal.SIGSTOP)  # from here on nothing more reaches c
        c.stop(signal.SIGKILL)
    finally:
        log.close()
        os.kill(frozen.pid, signal.SIGCONT)
    with Grimoire.open(c.data.db_path) as store:
        partial = store.counts().entries
    assert 0 < partial < 3000, partial
    clade3.start(c, bootstrap=[a])
    eventually(lambda: len(ids_on(c)) == 3000, timeout=120, what="all 3000 entries on c after the kill")
    eventually(lambda: converged([a, c]), what="identical shared digests")


def test_partition_then_heal_converges(clade3: LoopbackClade) -> None:
    a, b, c = clade3.golems
    for other in (b, c):  # a refuses b and c both ways: the partition a | b, c
        a.call("POST", "/v1/peers/disconnect", json={"peer_id": other.peer_id, "hold_s": 3600})
    eventually(lambda: not a.members_connected() and a.peer_id not in b.members_connected() | c.members_connected(),
               what="the partition")
    left = [write(a, f"left side warning {i}") for i in range(5)]
    right = [write(b, f"right side warning {i}") for i in range(5)] + [write(c, "right side from c")]
    eventually(lambda: set(right) <= ids_on(b) & ids_on(c), what="gossip within b, c")
    assert ids_on(a).isdisjoint(right) and ids_on(b).isdisjoint(left) and ids_on(c).isdisjoint(left)
    for other in (b, c):  # heal: a dials them again (lifts its hold)
        a.call("POST", "/v1/peers/connect", json={"addr": other.p2p_addrs[0]})
    LoopbackClade.wait_connected(clade3.golems)
    eventually(lambda: all(set(left + right) <= ids_on(g) for g in clade3.golems), what="both sides everywhere")
    eventually(lambda: converged(clade3.golems), what="identical shared digests")


STARTUP_TROUBLE = ("hello_failed", "hello_incomplete", "sync_failed", "sync_serve_failed", "known_save_failed",
                   "internal_errors")


def startup_trouble(golems: list[Golem]) -> dict[str, dict[str, int]]:
    """The counters no clean startup may raise, by golem (empty if none did)."""
    found: dict[str, dict[str, int]] = {}
    for golem in golems:
        got = counters(golem)
        bad = {k: got[k] for k in STARTUP_TROUBLE if got.get(k)}
        if bad:
            found[golem.name] = bad
    return found


def test_siblings_admitted_together_fail_no_hello_and_no_sync(tmp_path: Path) -> None:
    """A golem that learns several siblings at once (from its bootstrap's hello, or by dialing
    them all) admits them within milliseconds of each other, and each admission saves
    peers.json. Those saves used to race on one temp file (the second `os.replace` raised
    FileNotFoundError), which failed that sibling's hello: it was dropped and redialed, the
    hellos in flight to it failed too, and so did the pull it had started (`hello_failed`,
    `hello_incomplete`, `sync_failed` at startup in the benchmark, with no fault anywhere).

    The race is a matter of timing, so the startup happens four times: four golems started
    as the benchmark starts them (each bootstraps from g0 and learns the others from its
    hello), then three newcomers, each dialing every golem already running at once. Nobody
    is stopped (a sibling going away is a real failure), and every pull after a connection is
    counted before the counters are read: 3 per sibling (at once, after 2 and 6 s)."""
    clade = LoopbackClade(tmp_path, 4)
    newcomers = [clade.add_golem(f"n{i}") for i in range(3)]
    no_timer = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}  # only the pulls after connecting run
    settle_pulls = 3  # at once, then admission.SETTLE_PULLS_S

    def pulls(golem: Golem) -> int:
        return counters(golem).get("sync_pulls", 0)

    running = list(clade.golems)
    try:
        for golem in clade.golems:
            clade.start(golem, env=no_timer)
        LoopbackClade.wait_connected(running)
        eventually(lambda: all(pulls(g) >= settle_pulls * (len(running) - 1) for g in running), timeout=60,
                   what="every golem's pulls after connecting", state=lambda: startup_trouble(running))
        assert startup_trouble(running) == {}
        for newcomer in newcomers:
            siblings = list(running)
            before = {g.name: pulls(g) for g in siblings}
            clade.start(newcomer, bootstrap=siblings, env=no_timer)
            running.append(newcomer)
            LoopbackClade.wait_connected(running)
            eventually(lambda: pulls(newcomer) >= settle_pulls * len(siblings)  # noqa: B023 - read in this round
                       and all(pulls(g) >= before[g.name] + settle_pulls for g in siblings),  # noqa: B023
                       timeout=60, what=f"the pulls after {newcomer.name} connected",
                       state=lambda: startup_trouble(running))
            assert startup_trouble(running) == {}
            known = json.loads((newcomer.data.root / "peers.json").read_text())
            assert set(known) == {g.peer_id for g in siblings}
    finally:
        for newcomer in newcomers:
            newcomer.stop()
        clade.close()


def test_a_sibling_restarting_fails_no_hello_on_the_others(tmp_path: Path) -> None:
    """A stopping daemon closes its listeners before its connections: its siblings redial it
    within ~0.3 s of losing it, and were accepted, then cut off mid-hello (`hello_failed`,
    `hello_incomplete` on each sibling at every restart). A refused dial is not a failed hello.
    Three restarts of b; every pull after each reconnection is counted before reading."""
    clade = LoopbackClade(tmp_path, 3)
    a, b, c = clade.golems
    no_timer = {"CLADE_P2P__SYNC_INTERVAL_S": "3600"}  # only the pulls after connecting run
    settle_pulls = 3  # at once, then admission.SETTLE_PULLS_S

    def pulls(golem: Golem) -> int:
        return counters(golem).get("sync_pulls", 0)

    try:
        for golem in clade.golems:
            clade.start(golem, env=no_timer)
        LoopbackClade.wait_connected(clade.golems)
        eventually(lambda: all(pulls(g) >= settle_pulls * 2 for g in clade.golems), timeout=60,
                   what="every golem's pulls after connecting", state=lambda: startup_trouble(clade.golems))
        for restart in range(3):
            before = {g.name: pulls(g) for g in (a, c)}
            b.stop()
            clade.start(b, bootstrap=[a], env=no_timer)
            LoopbackClade.wait_connected(clade.golems)
            eventually(lambda: all(pulls(g) >= before[g.name] + settle_pulls for g in (a, c)),  # noqa: B023
                       timeout=60, what=f"the pulls after restart {restart + 1}",
                       state=lambda: startup_trouble([a, c]))
            assert startup_trouble([a, c]) == {}, f"restart {restart + 1}"
    finally:
        clade.close()


def test_other_clade_and_revoked_golems_get_nothing_and_inject_nothing(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 3)
    a, b, r = clade.golems
    stranger_owner = OwnerKey.create(tmp_path / "other-owner", "other")
    x = clade.add_golem("x", owner=stranger_owner)
    try:
        clade.start_all()
        before = write(a, "warning r still sees")
        eventually(lambda: before in ids_on(r), what="r, still a member, gets entries")

        # another clade's golem dials a: refused both ways, learns nothing, injects nothing
        clade.start(x, bootstrap=[a])
        write(x, "x's warning must not cross")
        eventually(lambda: any(p["peer_id"] == x.peer_id and "other_clade" in (p["refused"] or "")
                               for p in a.peers()), what="a refusing x", state=lambda: (a.peers(), counters(a)))
        # whichever hello lands first: a refuses x's certificate, or x refuses a's (and a hears why)
        got = counters(a)
        assert got.get("hello_refused_other_clade", 0) + got.get("hello_refused_by_peer_other_clade", 0) >= 1
        assert x.peer_id not in a.members_connected()

        # the owner revokes r; installed on a, it reaches b through a, and r is dropped by both
        revocations = RevocationList.issue(clade.owner, version=1, revoked=[r.peer_id], issued_at=int(time.time()))
        res = a.call_bytes("POST", "/v1/revocations", revocations.to_bytes())
        assert res["adopted"] is True
        eventually(lambda: r.peer_id not in a.members_connected() | b.members_connected(), what="r dropped")
        eventually(lambda: (b.call("GET", "/v1/status")["p2p"] or {}).get("revocations_version") == 1,
                   what="the revocation list on b")
        after = write(a, "warning r must not see")
        r_write = write(r, "r's warning after its revocation")
        marker = write(b, "marker: b's writes reach a")
        eventually(lambda: {after, marker} <= ids_on(a) & ids_on(b), what="members keep working")
        for golem in (a, b):
            golem.call("POST", "/v1/sync", json={})
        # r pulls from every sibling it still counts as connected: had a or b kept it, this
        # sync (it returns once done) would have brought both entries.
        r.call("POST", "/v1/sync", json={})
        assert after not in ids_on(r) and marker not in ids_on(r)
        assert r_write not in ids_on(a) | ids_on(b)
        assert ids_on(x) == {e for e in ids_on(x) if e not in ids_on(a)}  # x has none of the clade's entries
        assert (tmp_path / "g0" / "revocations.bin").exists() and (tmp_path / "g1" / "revocations.bin").exists()
    finally:
        x.stop()
        clade.close()


def test_bad_listen_and_bootstrap_arguments_are_refused(tmp_path: Path) -> None:
    from tests.helpers.cli import clade_subprocess

    clade_subprocess(["--data-dir", str(tmp_path / "d"), "init"])
    for args in (["--listen", "nonsense"], ["--bootstrap", "/ip4/127.0.0.1/tcp/4001"],
                 ["--listen", "/ip4/127.0.0.1/udp/4001"]):
        res = clade_subprocess(["--data-dir", str(tmp_path / "d"), "run", *args])
        assert res.returncode == 2, res.stderr
        assert b"clade: error:" in res.stderr or b"error: argument" in res.stderr
