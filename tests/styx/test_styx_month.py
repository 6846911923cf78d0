"""Spend never exceeds its caps over a 30-day simulated month at the default prices.

The real pusher (daemon/styx/pusher.py) and its budget, on trio's MockClock, drain a real
store's outbox into an in-process Styx answering the wire format (every call's time and cost
logged) while the golem writes and searches far more than $5 a month can pay for. Checked: no
tick window and no month spends past its cap, the pause is said (event, flag), and every item
written is delivered or still waiting: none lost, none twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
import trio
import trio.testing

from daemon.config import StyxConfig
from daemon.grimoire import Grimoire
from daemon.styx import outbox
from daemon.styx.policy import budget_for
from daemon.styx.pusher import Pusher

T = TypeVar("T")
START_MS = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1000)
DAYS = 30
STEP_S = 3600.0  # the golem's activity comes in hourly bursts
WRITES_PER_STEP = 200  # 144,000 items in the month
QUERIES_PER_STEP = 10  # 7,200 searches: $7.20 at the default price, past the $5 cap with the pushes


@pytest.mark.slow  # about 1.5 minutes: a month of hourly bursts through the real pusher
def test_thirty_days_at_default_prices_never_pass_a_cap(tmp_path: Path) -> None:
    config = StyxConfig(enabled=True, url="http://styx.invalid")
    budget = budget_for(config)
    assert budget.price_per_call > 0 and budget.price_per_query > 0  # the defaults bind
    calls: list[tuple[float, float, bool]] = []  # (trio time, USD, a push?) of every call Styx saw
    received: Counter[str] = Counter()
    events: list[str] = []
    paused_seen = False

    def styx(request: httpx.Request) -> httpx.Response:
        now = trio.current_time()
        if request.url.path == "/v1/styx/entries":
            keys = [e["idempotency_key"] for e in json.loads(request.content)["entries"]]
            received.update(keys)
            calls.append((now, budget.cost(len(keys)), True))
            return httpx.Response(200, json={"stored": len(keys)})
        calls.append((now, budget.price_per_query, False))
        return httpx.Response(200, json={"results": []})

    transport = httpx.MockTransport(styx)
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: START_MS) as store:
        async def on_writer(fn: Callable[[Grimoire], T]) -> T:
            return fn(store)

        async def month() -> None:
            nonlocal paused_seen
            pusher = Pusher(on_writer, url="http://styx.invalid", token=None, golem="G",
                            wall_ms=lambda: START_MS + int(trio.current_time() * 1000), transport=transport,
                            budget=budget, on_event=lambda name, data: events.append(name))
            written = 0
            async with httpx.AsyncClient(transport=transport) as client:
                for step in range(int(DAYS * 86_400 / STEP_S)):
                    now_ms = START_MS + int(trio.current_time() * 1000)
                    for _ in range(WRITES_PER_STEP):
                        written += 1
                        entry = {"id": f"{written:032x}", "kind": "warning", "content": f"warning {written}",
                                 "confidence": 0.7, "importance": 0.5, "category": None, "metadata": {},
                                 "provenance": "self", "created_at": "2027-01-01T00:00:00.000Z"}
                        outbox.enqueue_entry(store, writer="G", seq=written, kind="warning", layers=["clade"],
                                             entry=entry, created_ms=now_ms)
                    for _ in range(QUERIES_PER_STEP):
                        await pusher.ask("slippage", k=5, layers=("clade",), deadline_s=5)
                    spent_step = 0.0
                    while spent_step < STEP_S:  # the pusher's own pacing within the step
                        pause = await pusher.round(client)
                        paused_seen |= pusher.paused_by_budget
                        if pause >= 30 and not pusher.paused_by_budget:
                            break  # idle: nothing due
                        if budget.spent_month + budget.cost(1) > (budget.cap() or 0):
                            break  # paused for the rest of the month: nothing to simulate until it turns
                        wait = max(pause, 0.001)
                        trio.testing.MockClock.jump(clock, wait)
                        spent_step += wait
                    trio.testing.MockClock.jump(clock, max(0.0, (step + 1) * STEP_S - trio.current_time()))
            waiting = store.outbox_status(now_ms=START_MS)["queue_depth"]
            assert sum(received.values()) + waiting == written  # none lost
            assert max(received.values()) == 1  # none twice

        clock = trio.testing.MockClock()
        trio.run(month, clock=clock)
        recorded = store.styx_spend_summary("2027-01")

    monthly, per_tick = config.budget.monthly, config.budget.max_per_tick
    assert monthly is not None and per_tick is not None
    total = sum(usd for _, usd, _ in calls)
    ordinary = monthly - config.budget.reserve()  # the death reserve is never spent by pushes or queries
    assert total <= ordinary + 1e-9 and abs(recorded["usd"] - total) < 1e-6
    assert total > 0.9 * ordinary  # the month was spent up to its cap, not stopped early
    pushes = sorted(c for c in calls if c[2])  # the tick cap is on pushes (queries count toward the month)
    worst, start, acc = 0.0, None, 0.0  # the budget's own windows: one opens at the first call past the last
    for t, usd, _ in pushes:
        if start is None or t - start >= config.budget.tick_s:
            start, acc = t, 0.0
        acc += usd
        worst = max(worst, acc)
    assert worst <= per_tick + 1e-9
    assert paused_seen and "styx_budget_reached" in events
    print(f"30 days at default prices: {len(calls)} calls, {total:.4f} USD of {monthly:g}; max in any "
          f"{config.budget.tick_s:g} s tick {worst:.4f} USD of {per_tick:g}; {sum(received.values())} items delivered")

