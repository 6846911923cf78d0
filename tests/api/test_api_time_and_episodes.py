"""Event time and episode recall through a real daemon: `occurred_at` on every write that takes
it (validated: a 422 that says what is wrong, nothing written), `since`/`until` on search and
digest, the digest's date, `POST /v1/episodes/search` and the `episode_search` agent tool, and
episodes staying soma (an append changes no replicated state)."""

from __future__ import annotations

import json
import signal
from typing import Any

from daemon.testing.process import DaemonProc

MAY_8 = "2023-05-08T13:56:00Z"


def post(daemon: DaemonProc, path: str, body: dict[str, Any], status: int = 200) -> Any:
    res = daemon.request("POST", path, json=body)
    assert res.status_code == status, res.text
    return res.json()


def ids(found: dict[str, Any]) -> list[str]:
    return [r["id"] for r in found["results"]]


def test_occurred_at_is_stored_shown_and_bounds_search_and_digest(shared: DaemonProc) -> None:
    made = post(shared, "/v1/memory", {"content": "Aave v3 WETH borrow rate spiked to 9% after the unlock",
                                       "memory_type": "fact", "occurred_at": "2023-05-08T15:56:00+02:00"}, 201)
    assert made["entry"]["occurred_at"] == "2023-05-08T13:56:00.000Z"  # the offset honoured, shown in UTC
    assert shared.request("GET", f"/v1/entries/{made['id']}").json()["occurred_at"] == "2023-05-08T13:56:00.000Z"
    now = post(shared, "/v1/memory", {"content": "Aave v3 WETH borrow rate spiked to 7% on the ETF news",
                                      "memory_type": "fact"}, 201)
    assert now["entry"]["occurred_at"] is None
    post(shared, "/v1/memory/flush", {"session": "import-1", "facts": [
        {"content": "Aave v3 WETH borrow rate spiked to 12% in the May liquidations", "memory_type": "fact",
         "occurred_at": "2023-05-20"}]})
    lessons = post(shared, "/v1/lessons", {"lessons": [{"content": "Aave v3 WETH borrow rate spikes follow unlocks",
                                                         "occurred_at": "2023-06-01T00:00:00Z"}]})
    assert lessons

    query = "Aave WETH borrow rate spike"
    everything = post(shared, "/v1/memory/search", {"query": query, "top_k": 10})
    assert {made["id"], now["id"]} <= set(ids(everything))
    may = post(shared, "/v1/memory/search", {"query": query, "since": "2023-05-01", "until": "2023-05-31"})
    contents = {r["content"] for r in may["results"]}
    assert contents == {"Aave v3 WETH borrow rate spiked to 9% after the unlock",
                        "Aave v3 WETH borrow rate spiked to 12% in the May liquidations"}, contents
    before = post(shared, "/v1/memory/search", {"query": query, "until": "2023-05-08T13:56:00Z"})
    assert ids(before) == [made["id"]]  # inclusive
    assert post(shared, "/v1/memory/search", {"query": query, "since": "2024-02-01", "until": "2024-01-01"})[
        "results"] == []  # since after until: an empty window
    recent = post(shared, "/v1/memory/search", {"query": query, "since": "2024-01-01"})
    assert now["id"] in ids(recent) and made["id"] not in ids(recent)  # no event time: its written time

    digest = post(shared, "/v1/digest", {"query": query, "format": "json", "until": "2023-05-10"})
    document = digest["document"]
    pieces = json.loads(document) if isinstance(document, str) else document
    assert [(d["id"], d["date"]) for d in pieces] == [(made["id"], "2023-05-08")]
    xml = post(shared, "/v1/digest", {"query": query, "since": "2024-01-01"})["document"]
    assert now["id"] in xml and made["id"] not in xml and 'date="20' in xml


def test_bad_times_are_refused_saying_what_is_wrong_and_nothing_is_written(shared: DaemonProc) -> None:
    cases = [("/v1/memory", {"content": "garbage time one", "occurred_at": "last tuesday"}, "ISO 8601"),
             ("/v1/memory", {"content": "garbage time two", "occurred_at": "2023-02-30"}, "calendar"),
             ("/v1/episodes", {"summary": "garbage time three", "occurred_at": "1969-07-20"}, "1971"),
             ("/v1/memory/flush", {"session": "bad", "facts": [{"content": "garbage time four",
                                                                "occurred_at": "soon"}]}, "ISO 8601"),
             ("/v1/episodes/search", {"query": "x", "since": "yesterday"}, "ISO 8601")]
    for path, body, says in cases:
        res = shared.request("POST", path, json=body)
        assert res.status_code == 422, (path, res.text)
        assert says in res.text, (path, res.text)
    # Nothing was written: checked after a later write arrived.
    marker = post(shared, "/v1/memory", {"content": "marker after the garbage times"}, 201)
    listed = shared.request("GET", "/v1/entries", params={"limit": 1000}).json()["entries"]
    contents = {e["content"] for e in listed}
    assert marker["entry"]["content"] in contents and not {c for c in contents if c.startswith("garbage time")}


def test_episode_search_is_local_ranked_and_time_bounded(shared: DaemonProc) -> None:
    before = shared.request("GET", "/v1/state-digest").json()
    old = post(shared, "/v1/episodes", {"summary": "Swapped 3 ETH for USDC on Uniswap v3 and paid 11 bps slippage",
                                        "protocol": "uniswap-v3", "occurred_at": MAY_8,
                                        "pad": {"pleasure": -0.5, "arousal": 0.7, "dominance": -0.2}}, 201)
    assert old["episode"]["observed_ms"] == 1_683_554_160_000 and old["episode"]["observed_at"] == \
        "2023-05-08T13:56:00.000Z"
    new = post(shared, "/v1/memory", {"content": "Swapped 1 ETH for USDC on Uniswap v3 with 4 bps slippage",
                                      "memory_type": "episode", "occurred_at": "2023-06-01"}, 201)
    post(shared, "/v1/episodes", {"summary": "Claimed CRV rewards from the Curve gauge"}, 201)
    # Episodes are soma: the appends changed no replicated state (checked after a later write).
    assert shared.request("GET", "/v1/state-digest").json() == before
    post(shared, "/v1/memory", {"content": "a write that does change the replicated state"}, 201)
    assert shared.request("GET", "/v1/state-digest").json() != before

    query = {"query": "how much slippage did my ETH to USDC swaps cost"}
    found = post(shared, "/v1/episodes/search", query)
    assert {r["id"] for r in found["results"][:2]} == {old["id"], new["id"]}
    assert all(set(r) >= {"similarity", "score", "summary", "observed_at"} for r in found["results"])
    may = post(shared, "/v1/episodes/search", {**query, "until": "2023-05-31"})
    assert ids(may) == [old["id"]]
    june = post(shared, "/v1/episodes/search", {**query, "since": "2023-05-09", "top_k": 1})
    assert ids(june) == [new["id"]]
    tense = post(shared, "/v1/episodes/search", {**query, "pad": {"pleasure": -0.5, "arousal": 0.7,
                                                                   "dominance": -0.2}})
    assert tense["results"][0]["pad"] is not None

    tool = shared.request("POST", "/v1/tools/episode_search", json={"input": {**query, "until": "2023-05-31"}})
    assert tool.status_code == 200, tool.text
    assert [r["id"] for r in json.loads(tool.json()["content"][0]["text"])["results"]] == [old["id"]]


def test_the_digest_episodic_section_is_off_by_default_and_on_after_a_reload(shared: DaemonProc) -> None:
    """Last in the module: it changes the shared daemon's config."""
    post(shared, "/v1/episodes", {"summary": "Bridged 5,000 USDC to Base through Across in 40 seconds"}, 201)
    query = {"query": "how long does bridging USDC to Base take", "format": "xml"}
    off = post(shared, "/v1/digest", query)
    assert off["episodes"] == [] and "<episode" not in off["document"]
    config = shared.data.config_path
    config.write_text(config.read_text().replace("[digest]\n", "[digest]\nepisode_tokens = 300\nepisode_k = 2\n", 1))
    shared.proc.send_signal(signal.SIGHUP)
    assert "digest.episode_tokens" in shared.wait_for("config reloaded")
    on = post(shared, "/v1/digest", query)
    assert 1 <= len(on["episodes"]) <= 2 and "Bridged 5,000 USDC to Base" in on["document"]
    assert on["tokens"] <= on["budget_tokens"]
