"""Memory that answers: read-your-writes by meaning, no popularity loop, feedback from a
response's text, digests that fill their slots, pinned entries first, deterministic digests.

Real daemons (subprocesses on a unix socket), real SQLite, the real bundled model.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from crypto import Identity
from daemon.cli.main import main
from daemon.datadir import DataDir
from daemon.embedding.embedder import get_embedder
from daemon.grimoire.retrieval import RecallQuery, Retriever, apply_feedback
from daemon.grimoire.store import Grimoire
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner
from tests.helpers.daemon import search_by_meaning
from tests.helpers.seed import seed
from tests.helpers.semantic_corpus import ENTRIES, QUERIES

# (content, a query sharing no content word with it): the issue's own example first.
PAIRS = [
    ("Never LP in pools with less than $100K TVL", "minimum pool size for liquidity"),
    *((e.content, q.text) for q in QUERIES for e in ENTRIES if e.key == sorted(q.relevant)[0]),
]
ROUNDS = 200


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    data = DataDir(tmp_path_factory.mktemp("answers") / "data")
    data.init()
    proc = DaemonProc(data, env={
        "CLADE_DIGEST__PINNED_TAGS": '["risk-limits"]',
        "CLADE_DIGEST__PINNED_FACT_KEYS": '["max_position_usd"]',
    })
    try:
        search_by_meaning(proc, {"query": "warm up"})  # the model loads on first need; read-your-writes after
        yield proc
    finally:
        proc.stop()


def _found(results: list[dict[str, object]], entry_id: str) -> dict[str, object] | None:
    return next((r for r in results if r["id"] == entry_id), None)


# -- read-your-writes --------------------------------------------------------------------------


def test_the_issues_example_is_found_at_once(daemon: DaemonProc) -> None:
    written = daemon.request("POST", "/v1/memory", json={
        "content": "Never LP in pools with less than $100K TVL", "memory_type": "constraint"}).json()
    results = daemon.request("POST", "/v1/memory/search",
                             json={"query": "minimum pool size for liquidity", "top_k": 3}).json()["results"]
    # "both": it had a vector, and keyword search finds "pools" by the stem of "pool" too.
    assert results and results[0]["id"] == written["id"] and results[0]["via"] in ("vector", "both")


# Each round archives its entry once checked (forget), so the live store stays small and the
# new entry is always a candidate: the check is that it ranks *by meaning* (via "vector"),
# i.e. that it had a vector before the search ranked, not by chance of the corpus.


def test_read_your_writes_through_the_api_200_times(daemon: DaemonProc) -> None:
    for i in range(ROUNDS):
        content, query = PAIRS[i % len(PAIRS)]
        written = daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": "insight"})
        assert written.status_code == 201, written.text
        entry_id = written.json()["id"]
        results = daemon.request("POST", "/v1/memory/search", json={"query": query, "top_k": 100}).json()["results"]
        hit = _found(results, entry_id)
        assert hit is not None, f"round {i}: {entry_id} not found for {query!r}"
        assert hit["via"] in ("vector", "both"), f"round {i}: found only by {hit['via']}"
        digest = daemon.request("POST", "/v1/digest", json={"query": query, "k": 100, "budget_tokens": 200_000,
                                                             "format": "json"}).json()
        assert entry_id in digest["entries"], f"round {i}: not in the digest"
        assert daemon.request("DELETE", f"/v1/entries/{entry_id}").status_code == 200


@pytest.mark.slow  # ~50 s of CLI calls: `make test`'s longest test (the API form above stays there)
def test_read_your_writes_through_the_cli_200_times(daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    def cli(*args: str) -> dict[str, object]:
        capsys.readouterr()
        code = main(["--data-dir", str(daemon.data.root), "--json", *args])
        out, err = capsys.readouterr()
        assert code == 0, err
        doc: dict[str, object] = json.loads(out)
        return doc

    served_before = daemon.request("GET", "/v1/status").json()["counters"].get("event_entry_written", 0)
    for i in range(ROUNDS):
        content, query = PAIRS[(i * 7) % len(PAIRS)]
        entry_id = str(cli("remember", content)["id"])
        results = cli("recall", query, "--k", "100")["results"]
        assert isinstance(results, list)
        hit = _found(results, entry_id)
        assert hit is not None and hit["via"] in ("vector", "both"), f"round {i}: {hit}"
        cli("forget", entry_id)
    # The writes went through the daemon (the CLI's path while one runs), not around it.
    served = daemon.request("GET", "/v1/status").json()["counters"]["event_entry_written"]
    assert served - served_before == ROUNDS


def test_read_your_writes_without_a_daemon(cli: CliRunner) -> None:
    for i in range(ROUNDS // 4):
        content, query = PAIRS[i % len(PAIRS)]
        entry_id = cli("--json", "remember", content).json()["id"]
        hit = _found(cli("--json", "recall", query, "--k", "100").json()["results"], entry_id)
        assert hit is not None and hit["via"] in ("vector", "both"), f"round {i}: {hit}"
        assert cli("forget", entry_id).code == 0


def test_a_siblings_entry_is_found_by_meaning_once_committed(daemon: DaemonProc) -> None:
    """A sibling's op applied to the store (as the p2p service does: another writer on the same
    file here) is found by the next search, by meaning, without waiting for the background."""
    from crdt import CausalContext, Delta, EntryBody, Kind, Mutator, Timestamp

    sibling = Identity(b"\x44" * 32)
    seqs = iter(range(1, 100))
    now = Timestamp(int(time.time() * 1000))
    body = EntryBody(author=sibling.peer_id, kind=Kind.WARNING, created=now,
                     content="Stablecoin depegs spread to every Curve pool holding the coin within minutes")
    ops = Mutator(sibling.peer_id, sibling.sign, next_seq=lambda: next(seqs), now=lambda: now).create(body, 0.8)
    store = daemon.data.open_store()
    try:
        store.apply_delta(Delta(tuple(ops), CausalContext()), local_replica=daemon.data.load_identity().peer_id)
    finally:
        store.close()
    results = daemon.request("POST", "/v1/memory/search", json={
        "query": "what happens to dollar tokens losing their peg across AMM venues", "top_k": 100}).json()["results"]
    hit = _found(results, body.id)
    assert hit is not None and hit["via"] in ("vector", "both") and hit["provenance"] == "clade"


# -- no popularity loop ------------------------------------------------------------------------


def _recall_at_5(retriever: Retriever, key_of: dict[str, str]) -> float:
    hits = 0
    for q in QUERIES:
        top = [key_of[h.entry.id] for h in retriever.recall(RecallQuery(text=q.text, k=5))]
        hits += bool(q.relevant & set(top))
    return hits / len(QUERIES)


def test_two_hundred_sequential_queries_change_no_ranking(tmp_path: Path) -> None:
    """The measured loop: every recall bumped access counts, so the same entries topped every list."""
    store = Grimoire.open(tmp_path / "g.db", create=True)
    try:
        written = seed(store, [e.new_entry() for e in ENTRIES], identity=Identity(b"\x07" * 32))
        key_of = {w.id: e.key for w, e in zip(written, ENTRIES, strict=True)}
        retriever = Retriever(store, lambda: get_embedder(tmp_path / "embedder"))
        fresh = [[h.entry.id for h in retriever.recall(RecallQuery(text=q.text, k=5))] for q in QUERIES]
        for i in range(200):
            retriever.recall(RecallQuery(text=QUERIES[(i * 11) % len(QUERIES)].text, k=10))
        assert [[h.entry.id for h in retriever.recall(RecallQuery(text=q.text, k=5))] for q in QUERIES] == fresh
        assert _recall_at_5(retriever, key_of) > 0.5
    finally:
        store.close()


def test_two_hundred_queries_with_feedback_move_recall_only_a_little(tmp_path: Path) -> None:
    """A golem recalls all day and cites exactly the right answers. Uses raise importance
    (the importance composite's access term), so the answers it cites often can outrank near-miss neighbours of
    other queries: with the default model, measured −0.013 recall@5 on this corpus (one query;
    −0.04 with MiniLM+MPNet; −0.21 when a citation also multiplied the rank ×0.5..1.5)."""
    store = Grimoire.open(tmp_path / "g.db", create=True)
    try:
        written = seed(store, [e.new_entry() for e in ENTRIES], identity=Identity(b"\x07" * 32))
        key_of = {w.id: e.key for w, e in zip(written, ENTRIES, strict=True)}
        retriever = Retriever(store, lambda: get_embedder(tmp_path / "embedder"))
        fresh = _recall_at_5(retriever, key_of)
        for i in range(200):
            q = QUERIES[(i * 11) % len(QUERIES)]
            top = retriever.recall(RecallQuery(text=q.text, k=5))
            injected = [h.entry.id for h in top]
            cited = [h.entry.id for h in top if key_of[h.entry.id] in q.relevant]
            apply_feedback(store, cited=cited, injected=injected)
        used = sum(e.access_count for e in store.get_many(list(key_of)))
        assert used > 0  # the loop really counted uses
        after = _recall_at_5(retriever, key_of)
        print(f"\nrecall@5 fresh {fresh:.3f}, after 200 queries with feedback {after:.3f} ({used} uses)")
        assert abs(after - fresh) <= 0.02, (fresh, after)
    finally:
        store.close()


def test_search_results_are_not_accesses(daemon: DaemonProc) -> None:
    entry_id = daemon.request("POST", "/v1/memory", json={
        "content": "Morpho Blue markets isolate each collateral type", "memory_type": "fact"}).json()["id"]
    for _ in range(5):
        daemon.request("POST", "/v1/memory/search", json={"query": "isolated lending markets"})
        daemon.request("POST", "/v1/digest", json={"query": "isolated lending markets"})
    assert daemon.request("GET", f"/v1/entries/{entry_id}").json()["access_count"] == 0
    fed = daemon.request("POST", "/v1/feedback", json={"cited": [entry_id]})
    assert fed.status_code == 200, fed.text
    assert daemon.request("GET", f"/v1/entries/{entry_id}").json()["access_count"] == 1


def test_feedback_from_the_response_text(daemon: DaemonProc) -> None:
    ids = [daemon.request("POST", "/v1/memory", json={"content": c, "memory_type": "insight"}).json()["id"]
           for c in ("Aave v3 on Arbitrum lets you borrow USDC against wstETH at 80% LTV",
                     "Pendle PT-eETH trades at a discount in the week before maturity",
                     "GMX v2 funding rates turn negative after large liquidations")]
    response = ("Plan: keep the loop small. Aave v3 on Arbitrum lets you borrow USDC against wstETH at up to 80% "
                "LTV, so I will borrow at 50% to keep a margin.\nNo other changes today!")
    fed = daemon.request("POST", "/v1/feedback", json={"injected": ids, "response": response}).json()
    assert fed["matched_by_response"] == [ids[0]] and fed["cited"] == [ids[0]]
    assert fed["weights"][ids[0]] > 1.0 > fed["weights"][ids[1]] == fed["weights"][ids[2]]
    entries = [daemon.request("GET", f"/v1/entries/{i}").json() for i in ids]
    assert [e["access_count"] for e in entries] == [1, 0, 0]
    bad = daemon.request("POST", "/v1/feedback", json={"injected": ids, "response": "   "})
    assert bad.status_code == 422  # a blank response breaks the schema's pattern (was 400 from the handler)
    unknown = daemon.request("POST", "/v1/feedback", json={"cited": ["0" * 32]})
    assert unknown.status_code == 404 and "no entry" in unknown.json()["detail"]  # an unknown id (was 400)


# -- digests -----------------------------------------------------------------------------------

LIQUIDITY = [
    "Uniswap v3 ETH/USDC 0.05% pool depth halves on weekends; size LP adds for the thin hours",
    "Curve tricrypto liquidity migrates to the new pool within a week of a gauge change",
    "Balancer weighted pools lose depth fast when BAL emissions drop",
    "Thin pools under $1M TVL move 2% on a $20k swap; split orders there",
    "Pool liquidity on Base memecoins is mostly one LP: check concentration before entering",
    "Concentrated liquidity near the price thins out during volatility spikes",
    "Aerodrome vote incentives pull liquidity from Velodrome-style forks each epoch",
    "Pool depth on Arbitrum for ARB/ETH doubled after the STIP incentives",
    "JIT liquidity appears in ETH/USDC only for swaps above $500k",
    "Liquidity providers leave stable pools when T-bill yields beat LP fees",
    "Maverick boosted positions concentrate liquidity that vanishes when the boost ends",
    "New pools with one large LP are rug risks: check LP token lock",
    "Pool liquidity measured by TVL overstates depth for wide-range positions",
    "Uniswap v4 hooks pools fragment liquidity across many fee tiers",
    "Liquidity in Curve stable pools stays deep even during market stress",
]


def test_digest_fills_its_slots_within_budget(daemon: DaemonProc) -> None:
    for content in LIQUIDITY:
        daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": "insight"})
    doc = daemon.request("POST", "/v1/digest", json={"query": "pool liquidity", "budget_tokens": 3000}).json()
    memories = ET.fromstring(doc["document"])
    assert len(memories) == 10 == len(doc["entries"])  # the gateway spec's top-K 10
    assert doc["tokens"] <= 3000
    again = daemon.request("POST", "/v1/digest", json={"query": "pool liquidity", "budget_tokens": 3000}).json()
    assert again["document"] == doc["document"]  # deterministic for the same store and query


def test_pinned_entries_enter_first(daemon: DaemonProc) -> None:
    def write(content: str, kind: str, tags: list[str], sensitivity: str = "public") -> str:
        resp = daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": kind,
                                                          "metadata": {"tags": tags}, "sensitivity": sensitivity})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["id"])

    limit = write("Never hold more than 20% of the book in one token", "constraint", ["risk-limits"])
    fact = write("max_position_usd: 50000", "fact", [])
    decoy = write("max_position_usd_note is not a key: ignore", "insight", [])
    secret = write("Keep the hot wallet under $5k", "constraint", ["risk-limits"], "sensitive")
    doc = daemon.request("POST", "/v1/digest", json={"query": "weekend gas prices on Arbitrum", "k": 10,
                                                      "format": "json"}).json()
    listed = json.loads(doc["document"])
    assert {item["id"] for item in listed[:2]} == {limit, fact} == set(doc["pinned"])
    assert all(item["pinned"] for item in listed[:2]) and not any(item["pinned"] for item in listed[2:])
    assert decoy not in doc["pinned"] and secret not in doc["entries"]
    with_secret = daemon.request("POST", "/v1/digest", json={"query": "weekend gas", "include_sensitive": True,
                                                              "format": "json"}).json()
    assert secret in with_secret["pinned"]
    small = daemon.request("POST", "/v1/digest", json={"query": "weekend gas", "budget_tokens": 60}).json()
    assert small["tokens"] <= 60  # pinned entries still respect the budget
