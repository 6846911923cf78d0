"""Drain the Styx outbox: batches over httpx, retried with no attempt limit, parked when hopeless.

One task. Each round takes up to `batch` due items (oldest first), POSTs them to
`{url}/v1/styx/entries` with `Authorization: Bearer …`, `Idempotency-Key` (a hash of the
batch's item keys: a retried batch keeps it) and the stored item texts spliced verbatim, and
acts on `policy.classify`: delivered → removed; retry → every item of the batch waits
max(Retry-After, full-jitter backoff); park → each item parked with the status and reason
until `clade styx retry`. Between rounds it sleeps until the next item is due or a local write
wakes it. Timers run on `trio.current_time()`; the wall clock only stamps items.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import trio

from daemon.grimoire import Grimoire
from daemon.grimoire.styx_store import Spend

from . import ledger
from .policy import Budget, classify
from .vault import VaultPushError, push_backup
from .wire import ANONYMOUS, PUBLIC_LAYERS, QueryResult, batch_body, parse_query

__all__ = ["Pusher", "PusherStats", "query"]

log = logging.getLogger("clade.styx")
T = TypeVar("T")
IDLE_S = 30.0


class Db(Protocol):
    """Run a function on the store's writer thread (`DaemonState.on_writer`)."""

    def __call__(self, fn: Callable[[Grimoire], T], /) -> Awaitable[T]: ...


@dataclass(slots=True)
class PusherStats:
    delivered: int = 0
    failures: int = 0
    parked: int = 0
    last_success_ms: int | None = None
    last_error: str | None = None
    consecutive_failures: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Pusher:
    """The outbox's drain; `wake()` after a local write, `run()` in the daemon's nursery."""

    def __init__(self, db: Db, *, url: str, token: str | None,
                 golem: str, wall_ms: Callable[[], int], batch: int = 100, base_s: float = 1.0,
                 cap_s: float = 60.0, timeout_s: float = 10.0, rng: random.Random | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, budget: Budget | None = None,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None, outbox_warn: int = 10_000) -> None:
        self._db = db
        self.url = url.rstrip("/")
        self.token = token  # for the query fan-in; never logged
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        self.golem = golem
        self._wall_ms = wall_ms
        self.batch = batch
        self.base_s, self.cap_s, self.timeout_s = base_s, cap_s, timeout_s
        self._rng = rng or random.Random()
        self._transport = transport
        self._wake = trio.Event()
        self.stats = PusherStats()
        self.budget = budget or Budget()
        self.paused_by_budget = False
        self.outbox_warn = outbox_warn
        self.over_warn = False
        self._on_event = on_event or (lambda name, data: None)
        self._asker: httpx.AsyncClient | None = None

    def wake(self) -> None:
        self._wake.set()

    async def load_spend(self) -> None:
        """Take up this month's recorded spend (so a restart does not reset the monthly cap)."""
        month = ledger.month_of(self._wall_ms())
        self.budget.resume(month, await self._db(lambda s: s.styx_spent(month)))

    async def ask(self, text: str, *, k: int, layers: tuple[str, ...], deadline_s: float
                  ) -> tuple[list[QueryResult], str | None]:
        """Styx's answer to a search (see `query`), within the monthly budget; its cost is recorded."""
        month = ledger.month_of(self._wall_ms())
        if not self.budget.allows_query(month=month):
            return [], "the monthly Styx budget is reached; Styx is asked again next month"
        cost = self.budget.charge_query(month=month)
        answer = await query(self.url, self.token, text, k=k, layers=layers, deadline_s=deadline_s,
                             transport=self._transport, client=self._asker)
        if cost:
            await self._db(lambda s: s.styx_record_spend(Spend(month, cost, queries=1)))
        return answer

    def _budget_reached(self, what: str) -> None:
        """Say once that the budget pauses Styx: the flag (status, metric), a log line, an event."""
        if not self.paused_by_budget:
            self.paused_by_budget = True
            log.warning("styx: the spend budget is reached; %s", what)
            self._on_event("styx_budget_reached", {"spend_month_usd": round(self.budget.spent_month, 6)})

    async def upload(self, path: Path, *, peer: str, timeout_s: float, attempts: int = 6, base_s: float = 1.0,
                     cap_s: float = 60.0, death: bool = False) -> dict[str, object]:
        """Upload a file to the vault layer (vault.push_backup, on a thread), charged and capped like a push:
        its cost (`per_upload` + `per_mib`) is recorded before the transfer (an upload is charged
        whether or not it succeeded, its retries included) and refused past the monthly cap (the
        per-tick cap does not apply: a file cannot be split); `death`: the death protocol's, which
        may spend the ring-fenced death reserve (`Budget.cap`). Raises `VaultPushError`."""
        month = ledger.month_of(self._wall_ms())
        size = path.stat().st_size
        cost = self.budget.transfer_cost(size)
        if not self.budget.allows_upload(cost, month=month, death=death):
            self._budget_reached("vault uploads wait for next month")
            raise VaultPushError(f"the monthly Styx budget is reached ({self.budget.spent_month:.4f} of "
                                 f"{self.budget.monthly:g} USD): {path.name} was not uploaded; it is kept at {path}")
        self.budget.charge_upload(cost, month=month)
        if cost:
            await self._db(lambda s: s.styx_record_spend(Spend(month, cost, calls=1)))
        # Abandoned when cancelled (the daemon stopping): a hanging Styx must not hold the stop for
        # minutes; the thread ends with the process and the backup stays where it was written.
        return await trio.to_thread.run_sync(lambda: push_backup(
            path, url=self.url, token=self.token, peer=peer, timeout_s=timeout_s, attempts=attempts, base_s=base_s,
            cap_s=cap_s), abandon_on_cancel=True)  # type: ignore[call-arg]

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.load_spend()
        async with httpx.AsyncClient(timeout=self.timeout_s, transport=self._transport, verify=True) as client, \
                httpx.AsyncClient(transport=self._transport, verify=True) as asker:
            self._asker = asker  # one client for every search's query: its TLS context is built once
            task_status.started()
            while True:
                self._wake = trio.Event()
                pause = await self.round(client)
                if pause > 0:
                    with trio.move_on_after(pause):
                        await self._wake.wait()

    async def round(self, client: httpx.AsyncClient) -> float:
        """Push one batch if any is due; returns how long to wait before the next round (0: at once)."""
        now = self._wall_ms()
        items = await self._db(lambda s: s.outbox_due(now_ms=now, limit=self.batch))
        if len(items) == self.batch:  # only a full batch can mean a long queue: count it then
            depth = await self._db(lambda s: s.outbox_depth())
            if depth > self.outbox_warn and not self.over_warn:
                log.warning("styx: %d items wait in the outbox (over outbox_warn %d); nothing is dropped, but Styx "
                            "is not keeping up: check its health and the budget", depth, self.outbox_warn)
                self._on_event("styx_outbox_warning", {"queue_depth": int(depth)})
            self.over_warn = depth > self.outbox_warn
        elif self.over_warn:
            self.over_warn = False
        if not items:
            nxt = await self._db(lambda s: s.outbox_next_due_ms())
            return IDLE_S if nxt is None else max(0.05, min(IDLE_S, (nxt - now) / 1000))
        # A public (lethe) item travels alone with its kind, in a request that names no golem: in
        # one batch with this golem's clade items, the request would tie it to its writer.
        public = items[0].layer in PUBLIC_LAYERS
        items = [i for i in items if (i.layer in PUBLIC_LAYERS) == public]
        # A death reflection is pushed first and on its own, and may spend the death reserve.
        dying = [i for i in items if i.kind == "death_reflection"]
        death = bool(dying) and not public
        items = dying if death else items
        month = ledger.month_of(now)
        while items and not self.budget.allows(len(items), now_s=trio.current_time(), month=month, death=death):
            items = items[: len(items) // 2]  # a smaller batch may still fit this tick
        if not items:
            self._budget_reached("pushing resumes next tick or month (items keep waiting in the outbox)")
            return max(0.05, self.budget.tick_s)
        self.paused_by_budget = False
        cost = self.budget.charge(len(items), now_s=trio.current_time(), month=month)
        key = hashlib.sha256("\n".join(i.key for i in items).encode()).hexdigest()[:32]
        status: int | None = None
        retry_after: str | None = None
        reason = ""
        try:
            body = batch_body(ANONYMOUS if public else self.golem, [i.item for i in items])
            answer = await client.post(f"{self.url}/v1/styx/entries", content=body,
                                       headers={**self._headers, "Idempotency-Key": key})
            status, retry_after = answer.status_code, answer.headers.get("Retry-After")
            if status >= 400:
                reason = answer.text[:200]
        except (httpx.TransportError, httpx.InvalidURL) as exc:  # timeouts, resets, refused, DNS, TLS
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        failures = self.stats.consecutive_failures + 1
        out = classify(status, failures=failures, rng=self._rng, retry_after=retry_after, now_s=now / 1000,
                       reason=reason, base_s=self.base_s, cap_s=self.cap_s)
        ns = [i.n for i in items]

        spend = Spend(month, cost, calls=1, items=len(ns))  # the call's cost, recorded with its outcome
        if out.action == "delivered":
            await self._db(lambda s: s.outbox_delivered(ns, spend))
            self.stats.delivered += len(ns)
            self.stats.last_success_ms = now
            self.stats.consecutive_failures = 0
            return 0.0
        self.stats.failures += 1
        self.stats.last_error = out.reason
        if out.action == "park":
            await self._db(lambda s: s.outbox_park(ns, spend, now_ms=now, reason=out.reason))
            self.stats.parked += len(ns)
            log.warning("styx: %d item(s) parked (%s); fix the cause, then `clade styx retry --all`", len(ns),
                        out.reason)
            return 0.0
        self.stats.consecutive_failures = failures
        next_ms = now + int(out.delay_s * 1000)
        await self._db(lambda s: s.outbox_retry_later(ns, spend, next_ms=next_ms, error=out.reason))
        return out.delay_s


async def query(url: str, token: str | None, text: str, *, k: int, layers: tuple[str, ...], deadline_s: float,
                transport: httpx.AsyncBaseTransport | None = None, client: httpx.AsyncClient | None = None
                ) -> tuple[list[QueryResult], str | None]:
    """Styx's answer to a recall (discounted by layer), or ([], why) — never later than `deadline_s`.
    `client`: a long-lived one to reuse (else one is made for this call)."""
    params = {"q": text, "k": str(k), **({"layers": ",".join(layers)} if layers else {})}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    target = f"{url.rstrip('/')}/v1/styx/query"
    with trio.move_on_after(deadline_s) as scope:
        try:
            if client is not None:
                answer = await client.get(target, params=params, headers=headers, timeout=deadline_s)
            else:
                async with httpx.AsyncClient(timeout=deadline_s, transport=transport, verify=True) as own:
                    answer = await own.get(target, params=params, headers=headers)
            if answer.status_code != 200:
                return [], f"HTTP {answer.status_code}"
            results, bad = parse_query(answer.json(), k=k)
            return results, (f"{bad} malformed result(s) dropped" if bad else None)
        except (httpx.HTTPError, ValueError) as exc:
            return [], f"{type(exc).__name__}: {str(exc)[:200]}"
    assert scope.cancelled_caught
    return [], f"no answer within {deadline_s * 1000:.0f} ms"
