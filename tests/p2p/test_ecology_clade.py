"""The knowledge ecology on three real daemons: what crosses, when, and what dies with a golem.

A writes an insight with default fields (confidence 0.8): B and C have it after A's next
curator cycle. A heuristic at 0.8 with two positive outcomes crosses once its ticks have
passed, not before; one with more negative outcomes never does. A's strategy outcome and
sensitive fact never reach B. A dies through `POST /v1/death`: B has the reflection and the
pushed knowledge, a webhook receiver got the notice, and an heir built from A's testament
holds no soma. "Absent" is asserted only after a marker written later has arrived.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from daemon.grimoire import Grimoire
from daemon.testing.harness import CLADE, EventLog, Golem, LoopbackClade
from tests.helpers.clade import ids_on, write
from tests.helpers.polling import eventually

pytestmark = pytest.mark.slow

TICK_S = 0.5  # 10 ticks = 5 s: a heuristic may cross 5 s after it was written


class Webhook:
    """A local HTTP receiver that records each JSON POST body (the death notice's wire format)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                outer.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()
                outer.arrived.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/death"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def clade3(tmp_path: Path, webhook: Webhook) -> Iterator[LoopbackClade]:
    clade = LoopbackClade(tmp_path, 3)
    env = {"CLADE_CURATOR__TICK_SECONDS": str(TICK_S), "CLADE_CURATOR__CYCLE_TICKS": "100000",
           "CLADE_DEATH__WEBHOOK": webhook.url}
    try:
        for golem in clade.golems:
            clade.start(golem, env=env)
        clade.wait_connected(clade.golems)
        yield clade
    finally:
        clade.close()


def outcome(golem: Golem, entry_id: str, effect: str) -> None:
    golem.call("POST", f"/v1/entries/{entry_id}/outcome", json={"effect": effect, "metric": "pnl_sign"})


def arrived(logs: dict[str, EventLog], golems: tuple[Golem, ...], entry_id: str) -> None:
    for golem in golems:
        logs[golem.name].wait_for(lambda n, d: n == "entries_received" and entry_id in d["ids"], timeout=15)


def test_what_crosses_what_stays_and_a_death_the_clade_hears(clade3: LoopbackClade, webhook: Webhook,
                                                            tmp_path: Path) -> None:
    a, b, c = clade3.golems
    logs = {g.name: EventLog(g.socket).start() for g in (b, c)}
    try:
        # 1. An insight with default fields and confidence 0.8 that says something new.
        insight = write(a, "Curve stETH/ETH depth halves in the hour after Lido withdrawal queue spikes",
                        "insight", confidence=0.8)
        promoted = a.call("POST", "/v1/curator/run")
        assert promoted["entries_promoted"] >= 1
        arrived(logs, (b, c), insight)

        # 2. Heuristics: two positive outcomes, but not before 10 ticks; more negatives: never.
        good = write(a, "When Aave v3 utilisation on Base passes 92%, pause new borrows for an hour",
                     "heuristic", confidence=0.8)
        bad = write(a, "When GMX funding flips negative, double the perp hedge at once", "heuristic",
                    confidence=0.8)
        for effect in ("positive", "positive"):
            outcome(a, good, effect)
        for effect in ("positive", "negative", "negative"):
            outcome(a, bad, effect)
        strategy = write(a, "Closed Uniswap v3 ETH/USDC position: size 42k, P&L +3.1%", "strategy_outcome",
                         confidence=0.9)
        secret = write(a, "The hot signer holds 61 ETH", "fact", confidence=0.9, sensitivity="sensitive")
        early = a.call("POST", "/v1/curator/run")  # well inside 10 ticks of the heuristics' writing
        marker = write(a, "marker: written after the early curator cycle")
        arrived(logs, (b, c), marker)
        held_b = ids_on(b)
        assert good not in held_b and bad not in held_b, early
        assert strategy not in held_b and secret not in held_b

        def crossed() -> bool:
            a.call("POST", "/v1/curator/run")
            return good in ids_on(b)

        eventually(crossed, timeout=30, what="the validated heuristic on b")
        a.call("POST", "/v1/curator/run")  # the bad one had as many ticks, and another cycle
        marker2 = write(a, "marker: written after the heuristic crossed")
        arrived(logs, (b,), marker2)
        held_b = ids_on(b)
        assert bad not in held_b and strategy not in held_b and secret not in held_b

        # 3. A dies with the daemon running.
        legacy = write(a, "Balancer boosted pools on Arbitrum lose depth when Aura emissions drop",
                       "heuristic", confidence=0.85)  # no outcomes, no ticks yet: only death pushes it
        died = a.call("POST", "/v1/death", json={"reflection": "I over-hedged GMX funding flips; trust "
                                                               "depth signals over funding.",
                                                 "cause": "credits exhausted"})
        statuses = {s["name"]: s["status"] for s in died["steps"]}
        assert all(v == "done" for v in statuses.values() if v != "skipped"), died
        assert webhook.arrived.wait(15)
        notice = webhook.bodies[0]
        assert notice["event"] == "death" and notice["golem"] == a.peer_id
        reflection = next(e["id"] for e in a.call("GET", "/v1/entries", params={"limit": 10_000})["entries"]
                          if e["kind"] == "death_reflection")
        arrived(logs, (b,), reflection)
        eventually(lambda: legacy in ids_on(b), timeout=15, what="the pushed heuristic on b")
        b.call("POST", "/v1/sync", json={})  # a full round from a: what death pushed has all arrived
        assert bad not in ids_on(b)  # death pushes past the tick rule, never past negative outcomes
        assert a.call("POST", "/v1/death", json={"reflection": "again"})["steps"]  # idempotent: nothing new
        assert len(webhook.bodies) == 1
        testament = Path(died["testament_path"])
        assert testament.is_file()
    finally:
        for log in logs.values():
            log.close()

    # 4. An heir built from the testament holds no soma.
    heir = clade3.add_golem("heir")
    done = subprocess.run([CLADE, "--data-dir", str(heir.data.root), "inherit", str(testament)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with Grimoire.open(heir.data.db_path) as store:
        rows = store.connection.execute("SELECT id, kind, sensitivity FROM entries").fetchall()
    kinds = {r[1] for r in rows}
    assert "death_reflection" in kinds and insight in {r[0] for r in rows}
    assert not kinds & {"strategy_outcome", "preference", "episode_summary"}
    assert all(r[2] == "public" for r in rows)
    assert strategy not in {r[0] for r in rows} and secret not in {r[0] for r in rows}


def _digest_ids(golem: Golem, query: str) -> set[str]:
    doc = golem.call("POST", "/v1/digest", json={"query": query, "format": "json"})
    return {str(item["id"]) for item in json.loads(doc["document"])}


def _store_bytes(golem: Golem) -> bytes:
    """grimoire.db and its WAL as they are on disk (every op that came over the wire is in one)."""
    return b"".join(p.read_bytes() for p in golem.data.root.glob("grimoire.db*"))


def test_evidence_crosses_and_a_vouchers_failures_refute_an_entry_on_every_golem(clade3: LoopbackClade) -> None:
    """A's insight crosses to B and C; B (a voucher at A and C: its own insight earned two good
    outcomes at each) records two negative outcomes; A and C then show it refuted and out of
    their digests. B's and C's outcome rows (metric, value, note) are nowhere on A or C: not in
    the API, not in the store (every op that came over the wire is stored there)."""
    a, b, c = clade3.golems
    logs = {g.name: EventLog(g.socket).start() for g in (a, b, c)}
    try:
        earned = write(b, "Morpho Blue vaults on Base: utilisation above 92% precedes a borrow-rate spike",
                       "insight", confidence=0.8)
        assert b.call("POST", "/v1/curator/run")["entries_promoted"] >= 1
        arrived(logs, (a, c), earned)
        for golem in (a, c):
            for _ in range(2):
                golem.call("POST", f"/v1/entries/{earned}/outcome",
                           json={"effect": "positive", "metric": f"soma_metric_{golem.name}", "value": 1234.5,
                                 "note": f"soma note of {golem.name}"})
        topic = "Uniswap v3 0.05% pool on Arbitrum slippage at 100k"
        bad = write(a, "Uniswap v3 0.05% pool on Arbitrum never slips more than 1% at 100k, even in liquidations",
                    "insight", confidence=0.6)
        assert a.call("POST", "/v1/curator/run")["entries_promoted"] >= 1
        arrived(logs, (b, c), bad)
        assert bad in _digest_ids(a, topic) and not a.call("GET", f"/v1/entries/{bad}")["belief"]["refuted"]
        for value in (-137.25, -212.5):
            b.call("POST", f"/v1/entries/{bad}/outcome",
                   json={"effect": "negative", "metric": "slippage_bps_of_b", "value": value,
                         "note": "lost on trade 77, wallet 0xb0b"})
        for golem in (a, c):
            logs[golem.name].wait_for(lambda n, d: n == "entry_refuted" and d["id"] == bad, timeout=30)
            doc = golem.call("GET", f"/v1/entries/{bad}")
            assert doc["belief"]["refuted"] and doc["belief"]["clade"]["siblings"] == 1, doc["belief"]
            assert doc["status"] == "active"  # readable, never deleted
            assert bad not in _digest_ids(golem, topic)
        # The soma stayed home. (Checked after the refutation, which B's later evidence op carried.)
        for golem, foreign in ((a, (b"slippage_bps_of_b", b"0xb0b", b"soma_metric_C", b"soma note of C")),
                               (c, (b"slippage_bps_of_b", b"0xb0b", b"soma_metric_A", b"soma note of A"))):
            api = json.dumps(golem.call("GET", f"/v1/entries/{bad}")) + json.dumps(
                golem.call("GET", f"/v1/entries/{earned}"))
            raw = _store_bytes(golem)
            for soma in foreign:
                assert soma.decode() not in api and soma not in raw, (golem.name, soma)
            assert b"-137.25" not in raw and b"-212.5" not in raw
    finally:
        for log in logs.values():
            log.close()
