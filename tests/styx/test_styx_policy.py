"""Styx retry policy: full jitter, Retry-After in both forms, what is retried and what is parked."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from daemon.styx.policy import backoff_s, classify, retry_after_s

NOW = 1_800_000_000.0


def test_full_jitter_stays_within_the_doubling_window_and_the_cap() -> None:
    rng = random.Random(7)
    assert backoff_s(0, rng) == 0.0
    for failures, bound in ((1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (10_000, 60.0)):
        draws = [backoff_s(failures, rng) for _ in range(2000)]
        assert min(draws) >= 0.0 and max(draws) <= bound
        assert max(draws) > 0.9 * bound  # the whole window is used, not a fixed delay


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    assert retry_after_s("120", now_s=NOW) == 120.0
    later = format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)
    assert retry_after_s(later, now_s=NOW) == pytest.approx(30.0)
    earlier = format_datetime(datetime.fromtimestamp(NOW - 30, UTC), usegmt=True)
    assert retry_after_s(earlier, now_s=NOW) == 0.0
    assert retry_after_s("99999999", now_s=NOW) == 86_400.0
    for junk in (None, "", "soon", "-5", "1.5", "Mon, 99 Foo 2026 25:61:61 GMT", "\x00"):
        assert retry_after_s(junk, now_s=NOW) is None


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_any_2xx_is_delivered(status: int) -> None:
    assert classify(status, failures=0, rng=random.Random(1)).action == "delivered"


@pytest.mark.parametrize("status", [None, 408, 429, 500, 502, 503, 504, 599])
def test_transient_answers_retry_without_limit(status: int | None) -> None:
    out = classify(status, failures=1_000_000, rng=random.Random(1))
    assert out.action == "retry" and 0 <= out.delay_s <= 60


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 413, 422, 451])
def test_other_4xx_park_with_the_reason(status: int) -> None:
    out = classify(status, failures=1, rng=random.Random(1), reason="token revoked")
    assert out.action == "park" and out.reason == f"HTTP {status}: token revoked"


@pytest.mark.parametrize("status", [301, 302, 307, 308, 501, 505, 199, 600, 999])
def test_answers_retrying_cannot_fix_park_after_a_bounded_number_of_attempts(status: int) -> None:
    from daemon.styx.policy import HOPELESS_ATTEMPTS

    for failures in range(1, HOPELESS_ATTEMPTS):
        assert classify(status, failures=failures, rng=random.Random(1)).action == "retry"
    out = classify(status, failures=HOPELESS_ATTEMPTS, rng=random.Random(1), reason="moved")
    assert out.action == "park" and out.reason.startswith(f"HTTP {status} after {HOPELESS_ATTEMPTS} attempts")
    assert ("check [styx] url" in out.reason) == (300 <= status < 400)


def test_retry_after_wins_over_a_shorter_backoff_but_not_a_longer_one() -> None:
    out = classify(429, failures=1, rng=random.Random(1), retry_after="30", now_s=NOW)
    assert out.delay_s == 30.0
    out = classify(503, failures=30, rng=random.Random(3), retry_after="0", now_s=NOW)
    assert out.delay_s == backoff_s(30, random.Random(3))


# -- wire ----------------------------------------------------------------------------------

import json  # noqa: E402

from crdt import Kind  # noqa: E402
from daemon.styx.wire import batch_body, item_json, layers_for, parse_query, public_item_json  # noqa: E402


def test_fan_out_follows_the_layer_table() -> None:
    for kind in (Kind.WARNING, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT):
        assert layers_for(kind, "public") == ("clade", "lethe")
    assert layers_for(Kind.REGIME_SHIFT, "public", enabled=("clade",)) == ("clade",)
    assert layers_for(Kind.DEATH_REFLECTION, "public") == ("vault", "clade")
    assert layers_for(Kind.DEATH_REFLECTION, "public", enabled=("vault",)) == ("vault",)
    for kind in (Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK, Kind.HEURISTIC, Kind.CONSTRAINT):
        assert layers_for(kind, "public") == ("clade",)  # once promoted: the outbox asks that
        assert layers_for(kind, "public", enabled=("vault", "lethe")) == ()
    for kind in (Kind.PREFERENCE, Kind.STRATEGY_OUTCOME, Kind.EPISODE_SUMMARY):
        assert layers_for(kind, "public") == ()
    for sensitivity in ("private", "sensitive"):
        assert layers_for(Kind.WARNING, sensitivity) == ()


def test_the_public_item_is_anonymised_and_a_private_item_lists_its_layers() -> None:
    entry = {**ENTRY, "author": "12D3KooWabc", "metadata": {"tokens": ["ETH"], "chains": [8453], "protocols": [],
                                                             "strategy_id": "owner-book-7", "tags": ["alice"]},
             "provenance": "inherited", "confidence": 0.8333}
    key = b"k" * 32
    public = json.loads(public_item_json(secret=key, writer="12D3KooWabc", seq=42, entry=entry))
    text = json.dumps(public)
    for secret in ("12D3KooWabc", str(ENTRY["id"]), "owner-book-7", "alice", "inherited", "03:00"):
        assert secret not in text, secret
    assert public["layers"] == ["lethe"] and public["layer"] == "lethe" and public["confidence"] == 0.8
    assert public["metadata"] == {"tokens": ["ETH"], "chains": [8453], "protocols": []}
    assert public["created_at"] == "2026-11-23" and public["content"] == ENTRY["content"]
    assert public["importance"] == 0.5 and json.loads(public_item_json(
        secret=key, writer="w", seq=1, entry={**entry, "importance": 0.7349}))["importance"] == 0.7  # coarsened
    again = json.loads(public_item_json(secret=key, writer="12D3KooWabc", seq=42, entry=entry))["idempotency_key"]
    assert public["idempotency_key"] == again != json.loads(public_item_json(
        secret=key, writer="12D3KooWabc", seq=43, entry=entry))["idempotency_key"]  # stable per cause
    other = public_item_json(secret=b"o" * 32, writer="12D3KooWabc", seq=42, entry=entry)
    assert json.loads(other)["idempotency_key"] != again  # the key is keyed: without the secret, no link
    with pytest.raises(ValueError, match="32 bytes"):
        public_item_json(secret=b"short", writer="w", seq=1, entry=entry)
    private = json.loads(item_json(writer="12D3KooWabc", seq=42, layers=["vault", "clade"], entry=entry))
    assert private["layers"] == ["vault", "clade"] and private["layer"] == "vault"
    assert private["idempotency_key"] == "12D3KooWabc:42" and private["metadata"]["strategy_id"] == "owner-book-7"
    with pytest.raises(ValueError, match="lethe"):
        item_json(writer="w", seq=1, layers=["clade", "lethe"], entry=entry)


ENTRY = {"id": "e" * 32, "kind": "warning", "content": "Never LP under $100K TVL — «thin»", "confidence": 0.8,
         "importance": 0.5, "category": None, "metadata": {"tags": ["lp"], "chains": [1]}, "provenance": "self",
         "created_at": "2026-11-23T03:00:00.000Z", "status": "active"}


def test_an_item_is_byte_identical_every_time_and_the_batch_is_the_wire_body() -> None:
    a = item_json(writer="12D3KooWabc", seq=42, layers=["clade"], entry=ENTRY)
    assert a == item_json(writer="12D3KooWabc", seq=42, layers=["clade"], entry=dict(reversed(ENTRY.items())))
    body = json.loads(batch_body("12D3KooWabc", [a, a]))
    assert body["golem"] == "12D3KooWabc" and len(body["entries"]) == 2
    item = body["entries"][0]
    assert set(item) == {"idempotency_key", "id", "kind", "layer", "layers", "content", "confidence", "importance",
                         "category", "metadata", "provenance", "created_at"}
    assert item["idempotency_key"] == "12D3KooWabc:42" and item["content"] == ENTRY["content"]


def test_query_results_are_discounted_by_layer_and_hostile_ones_dropped() -> None:
    answer = {"results": [
        {"id": "a", "kind": "insight", "content": "x", "confidence": 0.9, "layer": "lethe", "score": 1.0},
        {"id": "b", "kind": "insight", "content": "y", "confidence": 0.9, "layer": "vault", "score": 0.6},
        {"id": "c", "kind": "insight", "content": "z", "confidence": 7, "layer": "vault", "score": 0.9},
        {"id": "d", "kind": "insight", "content": "z", "confidence": 0.5, "layer": "mars", "score": 0.9},
        {"id": "e", "layer": "vault"}, "junk", {"id": "f", "kind": "k", "content": "c" * 10_000,
                                               "confidence": 0.5, "layer": "clade", "score": "nan"}]}
    results, bad = parse_query(answer, k=10)
    assert [(r.id, r.score) for r in results] == [("b", 0.6), ("a", 0.5)] and bad == 5
    assert results[0].provenance == "styx:vault"
    assert parse_query({"results": "no"}, k=3) == ([], 1) and parse_query(None, k=3) == ([], 1)


def test_budget_caps_per_tick_and_per_month_and_resumes() -> None:
    from daemon.styx.policy import Budget

    b = Budget(price_per_call=0.01, price_per_item=0.001, max_per_tick=0.03, monthly=0.05, tick_s=10)
    assert b.allows(10, now_s=0, month="2026-11") and b.charge(10, now_s=0, month="2026-11") == 0.02
    assert not b.allows(1, now_s=5, month="2026-11")  # 0.02 + 0.011 > 0.03 this tick
    assert b.allows(1, now_s=10, month="2026-11")  # the next tick
    b.charge(10, now_s=10, month="2026-11")  # 0.04 this month
    assert not b.allows(1, now_s=30, month="2026-11")  # 0.04 + 0.011 > 0.05 this month
    assert b.allows(1, now_s=30, month="2026-12") and b.spent_month == 0.0  # a new month


def test_a_restart_resumes_the_months_spend_and_queries_count_toward_the_month() -> None:
    from daemon.styx.policy import Budget

    budget = Budget(price_per_query=0.01, monthly=0.03)
    budget.resume("2026-11", 0.02)  # what the ledger recorded before the restart
    assert budget.allows_query(month="2026-11")
    assert budget.charge_query(month="2026-11") == 0.01
    assert not budget.allows_query(month="2026-11")  # 0.03 spent: the cap is reached
    assert budget.allows_query(month="2026-12")  # a new month starts from zero
    assert budget.spent_month == 0.0
    budget.resume("2026-12", 0.0)
    budget.charge_query(month="2026-12")
    budget.resume("2026-12", 0.0)  # a stale ledger read never lowers what this process has counted
    assert budget.spent_month == 0.01


def test_spend_caps_are_on_by_default_at_the_architectures_figures_and_stop_spending() -> None:
    from daemon.config import Config, load_config
    from daemon.errors import ConfigError
    from daemon.styx.policy import Budget, budget_for

    assert Budget().max_per_tick == 0.01 and Budget().monthly == 5.0
    styx = Config().styx
    assert (styx.budget.max_per_tick, styx.budget.monthly) == (0.01, 5.0)
    priced = load_config(None, {"CLADE_STYX__PRICES__PER_CALL": "0.002", "CLADE_STYX__PRICES__PER_ITEM": "0.001",
                                "CLADE_STYX__PRICES__PER_QUERY": "0.001"}).styx
    b = budget_for(priced)
    assert (b.max_per_tick, b.monthly, b.tick_s, b.death_reserve) == (0.01, 5.0, 10.0, 0.5)
    month = "2026-11"
    assert not b.allows(9, now_s=0, month=month)  # 0.011 USD: over a tick's cent
    assert b.allows(8, now_s=0, month=month) and b.charge(8, now_s=0, month=month) == 0.01
    assert not b.allows(1, now_s=9.9, month=month)  # the tick's cent is spent
    tick = 10.0
    while b.allows(8, now_s=tick, month=month):  # a cent a tick until the living's $4.50 of the five are gone
        b.charge(8, now_s=tick, month=month)
        tick += 10.0
    assert tick == 10.0 * 450 and abs(b.spent_month - 4.5) < 1e-9
    assert not b.allows(1, now_s=tick + 10, month=month) and not b.allows_query(month=month)
    assert b.allows(8, now_s=tick + 10, month=month, death=True)  # the death reserve is still there
    assert b.allows_upload(0.5, month=month, death=True) and not b.allows_upload(0.5001, month=month, death=True)
    assert b.allows(1, now_s=tick + 10, month="2026-12")  # next month
    with pytest.raises(ConfigError, match="nothing could ever be pushed"):
        load_config(None, {"CLADE_STYX__PRICES__PER_CALL": "0.02"})  # over the default tick cap
