"""A death the clade hears: `POST /v1/death` and `clade die` on a real daemon, a real webhook
receiver on 127.0.0.1 and the reference Styx server (daemon/service/death.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from crdt import Kind
from crypto.vault import VaultKeys
from daemon.datadir import DataDir
from daemon.grimoire.curator.bequest import read_testament
from daemon.service.death_plan import (
    DeathRecord,
    DeathStateError,
    InsightCandidate,
    pick_insights,
    webhook_delays,
)
from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN, CliRunner, clade_subprocess
from tests.helpers.polling import eventually
from tests.helpers.seed import seed_one


class Webhook:
    """A webhook receiver: answers each POST with the next scripted behaviour (an HTTP status,
    or "hang": never answer until released), then 200; records every notice it was sent."""

    def __init__(self, script: list[int | str]) -> None:
        self.script = list(script)
        self.notices: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with hook.lock:
                    hook.notices.append(json.loads(body))
                    what = hook.script.pop(0) if hook.script else 200
                if what == "hang":
                    hook.release.wait()  # until the test ends
                    return
                self.send_response(int(what))
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/death"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def joined(cli: CliRunner, data_dir: DataDir, tmp_path: Path) -> DataDir:
    """The golem under test, a member of clade alpha (a testament and a backup need recipients)."""
    owner = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner), "--clade", "alpha").code == 0
    peer = clade_subprocess(["--data-dir", str(data_dir.root), "id"]).stdout.decode().strip()
    bundle = tmp_path / "golem.bundle"
    assert cli("owner", "admit", peer, "--owner-dir", str(owner), "--out", str(bundle)).code == 0
    done = clade_subprocess(["--data-dir", str(data_dir.root), "join", str(bundle)])
    assert done.returncode == 0, done.stderr
    return data_dir


def _env(hook: Webhook | None, **more: str) -> dict[str, str]:
    env = {"CLADE_P2P__LISTEN": '["/ip4/127.0.0.1/tcp/0"]', "CLADE_P2P__MDNS": "false",
           "CLADE_DEATH__WEBHOOK_TIMEOUT_S": "1", "CLADE_DEATH__WEBHOOK_BACKOFF_S": "0.05", **more}
    if hook is not None:
        env["CLADE_DEATH__WEBHOOK"] = hook.url
    return env


def _steps(doc: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in doc["steps"]}


def _remember(daemon: DaemonProc, content: str, kind: str, **fields: Any) -> str:
    answer = daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": kind, **fields})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


@pytest.fixture
def hook_200() -> Iterator[Webhook]:
    hook = Webhook([])
    yield hook
    hook.close()


def test_death_through_the_api_and_nothing_twice(joined: DataDir, hook_200: Webhook) -> None:
    daemon = DaemonProc(joined, env=_env(hook_200))
    try:
        assert daemon.request("GET", "/v1/status").json()["death"] is None
        insight = _remember(daemon, "Funding flips negative a day before CPI prints", "fact", confidence=0.9)
        outcome = _remember(daemon, "ETH/USDC 1850-2150: 40k USDC, +3,412 USDC", "strategy_outcome",
                            confidence=0.95)
        answer = daemon.request("POST", "/v1/death", json={"reflection": "I died chasing APY on an unaudited fork.",
                                                           "cause": "drawdown limit"})
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        assert _steps(doc) == {"reflection": "done", "gossip": "done", "styx": "skipped", "insights": "done",
                               "testament": "done", "backup": "done", "backup_push": "skipped", "event": "done",
                               "webhook": "done"}
        assert doc["complete"] and doc["promoted"] == [insight]
        path = Path(doc["testament_path"])
        assert path.parent == joined.root / "testament" and path.exists()
        reflection = daemon.request("GET", f"/v1/entries/{doc['reflection_id']}").json()
        assert reflection["kind"] == "death_reflection" and reflection["bloodstain"] is True
        assert Path(doc["backup_path"]).exists()
        (notice,) = hook_200.notices
        assert notice["event"] == "death" and notice["cause"] == "drawdown limit"
        assert notice["reflection_id"] == doc["reflection_id"] and notice["testament_path"] == str(path)
        status = daemon.request("GET", "/v1/status").json()["death"]
        assert status["dead"] and status["complete"] and status["failed"] == []

        again = daemon.request("POST", "/v1/death", json={"reflection": "A second, different reflection."}).json()
        assert again["reflection_id"] == doc["reflection_id"] and again["testament_path"] == doc["testament_path"]
        assert again["backup_path"] == doc["backup_path"] and again["cause"] == "drawdown limit"
        assert len(hook_200.notices) == 1  # no second notice
        listed = daemon.request("GET", "/v1/entries", params={"kind": "death_reflection"}).json()["entries"]
        assert [e["id"] for e in listed] == [doc["reflection_id"]]
        assert len(list((joined.root / "testament").iterdir())) == 1
    finally:
        assert daemon.stop() == 0
    clade_key = joined.load_keys()
    assert clade_key is not None
    testament = read_testament(path, VaultKeys(clade_key=clade_key[1].current.key))
    ids = [it.entry_id for it in testament.items]
    assert ids[0] == doc["reflection_id"] and insight in ids and outcome not in ids


def test_a_webhook_answering_500_then_200_is_retried_and_the_death_event_is_published(joined: DataDir) -> None:
    hook = Webhook([500, 503])
    daemon = DaemonProc(joined, env=_env(hook, CLADE_P2P__ENABLED="false"))
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.socket), base_url="http://clade",
                          timeout=30) as client, client.stream("GET", "/v1/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": connected"
            doc = daemon.request("POST", "/v1/death", json={"reflection": "Check audits first."}).json()
            for line in lines:
                if line == "event: death":
                    event = json.loads(next(lines).removeprefix("data: "))
                    break
        assert event["reflection_id"] == doc["reflection_id"] and event["golem"] == hook.notices[0]["golem"]
        webhook = next(s for s in doc["steps"] if s["name"] == "webhook")
        assert webhook["status"] == "done" and "after 3 attempt(s)" in webhook["detail"]
        assert len(hook.notices) == 3 and _steps(doc)["gossip"] == "skipped"
    finally:
        hook.close()
        assert daemon.stop() == 0


def test_a_hanging_webhook_is_bounded_then_only_it_is_retried(joined: DataDir) -> None:
    hook = Webhook(["hang", "hang", "hang"])
    daemon = DaemonProc(joined, env=_env(hook, CLADE_P2P__ENABLED="false"))
    try:
        # The receiver never answers until the test ends: the call returning at all (within the
        # test client's 60 s timeout) is the bound; each attempt gave up after its 1 s.
        first = daemon.request("POST", "/v1/death", json={"reflection": "Check audits first."}).json()
        webhook = next(s for s in first["steps"] if s["name"] == "webhook")
        assert webhook["status"] == "failed" and "no answer within 1 s" in webhook["detail"]
        assert not first["complete"] and len(hook.notices) == 3
        assert daemon.request("GET", "/v1/status").json()["death"]["failed"] == ["webhook"]
        backups = sorted(joined.backups_path.iterdir())
        before = DeathRecord.from_bytes((joined.root / "death.json").read_bytes())

        second = daemon.request("POST", "/v1/death", json={"reflection": "Check audits first."}).json()
        assert second["complete"] and len(hook.notices) == 4  # the receiver answers 200 now
        assert {k: v for k, v in _steps(second).items() if k != "webhook"} == \
               {k: v for k, v in _steps(first).items() if k != "webhook"}
        assert second["reflection_id"] == first["reflection_id"]
        assert second["testament_path"] == first["testament_path"]
        assert sorted(joined.backups_path.iterdir()) == backups  # no second backup
        after = DeathRecord.from_bytes((joined.root / "death.json").read_bytes())
        done = {n: s for n, s in before.steps.items() if s.status == "done"}
        assert {n: after.steps[n] for n in done} == done  # what succeeded did not run again (same times)
    finally:
        hook.close()
        assert daemon.stop() == 0


def test_bad_reflections_are_refused_and_nothing_dies(joined: DataDir) -> None:
    daemon = DaemonProc(joined, env=_env(None, CLADE_P2P__ENABLED="false"))
    try:
        huge = daemon.request("POST", "/v1/death", json={"reflection": "x" * (10 * 1024 * 1024)})
        assert huge.status_code == 413
        long = daemon.request("POST", "/v1/death", json={"reflection": "é" * 2049})
        assert long.status_code == 422 and "4096 bytes" in long.text
        for body in ({"reflection": "   "}, {}, {"reflection": 5}, {"reflection": "ok", "cause": ""},
                     {"reflection": "ok", "cause": "a\nb"}, {"reflection": "ok", "extra": 1}):
            refused = daemon.request("POST", "/v1/death", json=body)
            assert refused.status_code == 422, (body, refused.text)
        assert daemon.request("GET", "/v1/status").json()["death"] is None
        assert not (joined.root / "death.json").exists()
    finally:
        assert daemon.stop() == 0


def test_with_styx_on_the_reflection_reaches_the_archive_and_the_backup_the_vault(
        joined: DataDir, styx: StyxServer) -> None:
    env = _env(None, CLADE_P2P__ENABLED="false", CLADE_STYX__ENABLED="true", CLADE_STYX__URL=styx.url,
               CLADE_STYX__TOKEN=STYX_TOKEN, CLADE_STYX__BACKOFF_CAP_S="0.5", CLADE_STYX__BACKOFF_BASE_S="0.1")
    daemon = DaemonProc(joined, env=env)
    try:
        doc = daemon.request("POST", "/v1/death", json={"reflection": "I died chasing APY."}).json()
        steps = _steps(doc)
        assert steps["styx"] == "done" and steps["backup_push"] == "done" and steps["webhook"] == "skipped"
        eventually(lambda: any(i["id"] == doc["reflection_id"] for i in styx.items()), timeout=60, interval=0.1,
                   what="the reflection at Styx")
        (item,) = [i for i in styx.items() if i["id"] == doc["reflection_id"]]
        assert item["kind"] == "death_reflection" and item["layers"] == ["vault"]  # the clade layer is opt-in
        assert styx.stats()["vault_uploads"] == 2  # the backup, and the testament archive an heir boots from
        peer = daemon.request("GET", "/v1/status").json()["peer_id"]
        names = sorted(o["name"] for o in styx.vault_objects(peer))
        assert len(names) == 2 and names[1].startswith("testament-") and names[1].endswith(".archive")
    finally:
        assert daemon.stop() == 0


@pytest.mark.slow  # starts a daemon (or several CLI processes): make test-slow
def test_a_death_is_paid_for_from_its_reserve_when_the_month_is_spent(joined: DataDir, styx: StyxServer) -> None:
    """The month's ordinary budget is already spent (monthly less the death reserve): an ordinary
    warning waits, but the death protocol's reflection, backup and testament archive all reach
    Styx, paid from the ring-fenced reserve."""
    from daemon.grimoire import wall_clock_ms
    from daemon.grimoire.styx_store import Spend
    from daemon.styx import ledger

    config = joined.load_config()
    monthly, reserve = config.styx.budget.monthly, config.styx.budget.reserve()
    assert monthly is not None and 0 < reserve < monthly
    with joined.open_store() as store:
        store.styx_record_spend(Spend(ledger.month_of(wall_clock_ms()), monthly - reserve, calls=1))
    env = _env(None, CLADE_P2P__ENABLED="false", CLADE_STYX__ENABLED="true", CLADE_STYX__URL=styx.url,
               CLADE_STYX__TOKEN=STYX_TOKEN, CLADE_STYX__BACKOFF_CAP_S="0.5", CLADE_STYX__BACKOFF_BASE_S="0.1",
               CLADE_STYX__CLADE_ENABLED="true")  # the warning is queued for the clade layer
    daemon = DaemonProc(joined, env=env)
    try:
        ordinary = daemon.request("POST", "/v1/memory", json={"content": "The bridge at 0xabc pauses withdrawals",
                                                              "memory_type": "warning"}).json()["id"]
        doc = daemon.request("POST", "/v1/death", json={"reflection": "I died with the month spent."}).json()
        steps = _steps(doc)
        assert steps["backup_push"] == "done", doc
        eventually(lambda: any(i["id"] == doc["reflection_id"] for i in styx.items()), timeout=60, interval=0.1,
                   what="the reflection at Styx")
        assert styx.stats()["vault_uploads"] == 2  # the backup and the testament archive
        assert ordinary not in {i["id"] for i in styx.items()}  # ordinary pushes still wait
        status = daemon.request("GET", "/v1/styx/status").json()
        assert status["queue_depth"] >= 1 and monthly - reserve < status["spend_month_usd"] <= monthly
    finally:
        assert daemon.stop() == 0


@pytest.mark.slow  # starts a daemon: make test-slow
def test_the_styx_budget_follows_the_vitality_phase(joined: DataDir, styx: StyxServer) -> None:
    """Reported clocks that put the golem in terminal keep the whole month's cap for the death
    protocol: an ordinary warning waits (the pusher says the budget stops it); clocks back in
    health release the cap and the warning leaves."""
    env = _env(None, CLADE_P2P__ENABLED="false", CLADE_STYX__ENABLED="true", CLADE_STYX__URL=styx.url,
               CLADE_STYX__TOKEN=STYX_TOKEN, CLADE_STYX__BACKOFF_CAP_S="0.5", CLADE_STYX__BACKOFF_BASE_S="0.1",
               CLADE_STYX__CLADE_ENABLED="true")
    daemon = DaemonProc(joined, env=env)
    try:
        dying = daemon.request("PUT", "/v1/vitality", json={"economic": 0.1, "epistemic": 0.3})
        assert dying.json()["phase"] == "terminal" and dying.json()["reserve_share"] == 1
        waiting = daemon.request("POST", "/v1/memory", json={"content": "The vault at 0xdef halts redemptions",
                                                             "memory_type": "warning"}).json()["id"]
        eventually(lambda: daemon.request("GET", "/v1/styx/status").json()["paused_by_budget"],  # the marker
                   timeout=60, interval=0.1, what="the pusher saying the budget stops it")
        assert waiting not in {i["id"] for i in styx.items()}
        well = daemon.request("PUT", "/v1/vitality", json={"economic": 1.0, "epistemic": 1.0})
        assert well.json()["phase"] == "thriving" and well.json()["reserve_share"] == 0
        eventually(lambda: waiting in {i["id"] for i in styx.items()}, timeout=60, interval=0.1,
                   what="the warning leaving once the golem was well")
    finally:
        assert daemon.stop() == 0


def test_clade_die_needs_a_running_daemon_then_reports_each_step(joined: DataDir, tmp_path: Path,
                                                                 hook_200: Webhook) -> None:
    reflection = tmp_path / "reflection.md"
    reflection.write_text("I died chasing APY on an unaudited fork.")
    args = ["--data-dir", str(joined.root), "die", "--reflection", str(reflection)]
    refused = clade_subprocess(args)
    assert refused.returncode == 2 and b"no daemon runs" in refused.stderr and b"clade testament" in refused.stderr
    daemon = DaemonProc(joined, env=_env(hook_200, CLADE_P2P__ENABLED="false"))
    try:
        done = clade_subprocess([*args, "--cause", "liquidated", "--json"])
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["complete"] and doc["cause"] == "liquidated" and len(hook_200.notices) == 1
        text = clade_subprocess(args)
        assert text.returncode == 0 and b"testament" in text.stdout and b"every step done" in text.stdout
        assert len(hook_200.notices) == 1
    finally:
        assert daemon.stop() == 0


# -- the pure parts -------------------------------------------------------------------------


def test_pick_insights_takes_a_handful_of_the_best_that_may_cross() -> None:
    def c(i: int, kind: Kind, conf: float, *, cross: bool = True, promoted: bool = False) -> InsightCandidate:
        return InsightCandidate(f"{i:032x}", kind, conf, conf / 2, cross, promoted)

    cands = [c(1, Kind.INSIGHT, 0.9), c(2, Kind.STRATEGY_OUTCOME, 0.99), c(3, Kind.FACT, 0.95, cross=False),
             c(4, Kind.HEURISTIC, 0.8), c(5, Kind.CAUSAL_LINK, 0.7), c(6, Kind.INSIGHT, 0.99, promoted=True),
             c(7, Kind.FACT, 0.6), c(8, Kind.INSIGHT, 0.5), c(9, Kind.WARNING, 0.99), c(10, Kind.INSIGHT, 0.9)]
    assert pick_insights(cands) == [f"{i:032x}" for i in (1, 10, 4, 5, 7)]
    assert pick_insights(cands, n=0) == []
    refuted = InsightCandidate(f"{99:032x}", Kind.HEURISTIC, 0.99, 0.5, True, False, positive=1, negative=2)
    even = InsightCandidate(f"{98:032x}", Kind.HEURISTIC, 0.98, 0.5, True, False, positive=1, negative=1)
    assert pick_insights([refuted, even]) == [even.id]  # death waives the ticks, not the evidence


def test_the_record_resumes_what_is_not_done_and_reads_only_its_own_shape() -> None:
    record = DeathRecord(started_ms=5, cause=None)
    assert record.pending()[0] == "reflection" and len(record.pending()) == 9
    for name in record.pending():
        record.record(name, "done", "", now_ms=6)
    record.record("webhook", "failed", "HTTP 500 after 3 attempts", now_ms=7)
    record.record("backup_push", "skipped", "Styx's vault layer is off", now_ms=7)
    assert record.pending() == ["backup_push", "webhook"] and not record.complete
    again = DeathRecord.from_bytes(record.to_bytes())
    assert again == record and again.status()["failed"] == ["webhook"]
    for bad in (b"", b"[]", b'{"version": 2}', b'{"version": 1, "started_ms": "5"}',
                record.to_bytes().replace(b'"failed"', b'"lost"')):
        with pytest.raises(DeathStateError):
            DeathRecord.from_bytes(bad)
    assert webhook_delays(3, 0.5) == [0.5, 1.0] and webhook_delays(1, 1.0) == []


def test_grimoire_promote_takes_only_own_live_crossing_unpromoted_entries(tmp_path: Path) -> None:
    from crdt import Sensitivity
    from crypto import Identity
    from daemon.grimoire import Grimoire, NewEntry

    me, sibling = Identity(b"\x51" * 32), Identity(b"\x52" * 32)
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: 1_800_000_000_000) as store:
        good = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI"), identity=me).id
        private = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Our book is 40% ETH",
                                           sensitivity=Sensitivity.PRIVATE), identity=me).id
        soma = seed_one(store, NewEntry(kind=Kind.STRATEGY_OUTCOME, content="+3,412 USDC"), identity=me).id
        theirs = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Gas is cheap at 03:00"), identity=sibling).id
        gone = seed_one(store, NewEntry(kind=Kind.FACT, content="Pool X closed"), identity=me).id
        store.forget(gone)
        top = store.local_top(me.peer_id)
        ids = [good, private, soma, theirs, gone, "f" * 32]
        assert store.promote(ids, me, now_ms=1_800_000_001_000, reason="death") == [good]
        assert store.local_top(me.peer_id) > top  # re-emitted under fresh dots: siblings get it
        assert store.promote(ids, me, now_ms=1_800_000_002_000, reason="death") == []  # once
        (promoted_ms,) = store.connection.execute("SELECT promoted_ms FROM entries WHERE id = ?", (good,)).fetchone()
        assert promoted_ms == 1_800_000_001_000
