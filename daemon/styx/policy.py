"""When to try a Styx call again, pure: full-jitter backoff, Retry-After, what an answer means.

The anchors lose data by default (Vector drops answers other than 429/5xx without honouring
Retry-After; Fluent Bit gives up after one retry; restic retries a 403 that can never
succeed). Here:

- 2xx: delivered;
- 408, 429 and every 5xx, a timeout or a broken connection: retried with no attempt limit,
  after max(Retry-After, full-jitter backoff) — backoff = uniform(0, min(cap, base·2ⁿ))
  (AWS "Exponential Backoff and Jitter"; base 1 s, cap 60 s);
- any other 4xx (400, 401, 403, 404, 409, 413, 422 …): retrying cannot help, so the item is
  *parked* in the dead-letter list with the status and the server's reason, until an
  operator runs `clade styx retry`;
- an answer retrying is unlikely to fix — a 3xx (redirects are not followed: the URL is
  wrong), 501 Not Implemented, 505 HTTP Version Not Supported, or a status outside 100-599 —
  is retried with backoff for `HOPELESS_ATTEMPTS` (5) consecutive failures (a proxy flapping
  during a deploy), then parked the same way; it never retries forever while the outbox grows;
- Retry-After in both forms (RFC 9110 §10.2.3): delay-seconds or an HTTP-date; a date in the
  past means now; garbage is ignored (the backoff applies); values are capped at one day.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

# The spend caps' defaults belong to the configuration ([styx.budget]); the policy reads them there.
from daemon.config import DEFAULT_MAX_PER_TICK_USD, DEFAULT_MONTHLY_USD

if TYPE_CHECKING:
    from daemon.config import StyxConfig

__all__ = ["HOPELESS_ATTEMPTS", "Budget", "Outcome", "backoff_s", "budget_for", "classify", "retry_after_s",
           "upload_cost"]

MAX_RETRY_AFTER_S = 86_400.0
RETRYABLE_4XX = frozenset({408, 429})
UNFIXABLE_5XX = frozenset({501, 505})
HOPELESS_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Outcome:
    """What to do with the items of a call: deliver, retry after `delay_s`, or park with `reason`."""

    action: str  # "delivered" | "retry" | "park"
    delay_s: float = 0.0
    reason: str = ""


def backoff_s(failures: int, rng: random.Random, *, base_s: float = 1.0, cap_s: float = 60.0) -> float:
    """Full jitter: uniform(0, min(cap, base·2^(failures−1))) for the n-th consecutive failure."""
    if failures <= 0:
        return 0.0
    return rng.uniform(0.0, min(cap_s, base_s * 2.0 ** min(failures - 1, 60)))


def retry_after_s(value: str | None, *, now_s: float) -> float | None:
    """Seconds to wait from a Retry-After header (`now_s`: wall-clock epoch seconds), or None."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(int(text)), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    return min(max(0.0, when.timestamp() - now_s), MAX_RETRY_AFTER_S)


def classify(status: int | None, *, failures: int, rng: random.Random, retry_after: str | None = None,
             now_s: float = 0.0, reason: str = "", base_s: float = 1.0, cap_s: float = 60.0) -> Outcome:
    """The outcome of one call; `status` None means no answer (timeout, reset, DNS, TLS)."""
    if status is not None and 200 <= status < 300:
        return Outcome("delivered")
    if status is not None and 400 <= status < 500 and status not in RETRYABLE_4XX:
        return Outcome("park", reason=f"HTTP {status}" + (f": {reason}" if reason else ""))
    if status is not None and (status < 200 or 300 <= status < 400 or status in UNFIXABLE_5XX or status >= 600) \
            and failures >= HOPELESS_ATTEMPTS:
        hint = " (redirects are not followed: check [styx] url)" if 300 <= status < 400 else ""
        return Outcome("park", reason=f"HTTP {status} after {failures} attempts{hint}"
                                      + (f": {reason}" if reason else ""))
    delay = backoff_s(failures, rng, base_s=base_s, cap_s=cap_s)
    hinted = retry_after_s(retry_after, now_s=now_s) if status is not None else None
    why = reason or (f"HTTP {status}" if status is not None else "no answer")
    return Outcome("retry", delay_s=max(delay, hinted or 0.0), reason=why)


@dataclass(slots=True)
class Budget:
    """Spend caps on Styx calls (USD): per tick (a window of `tick_s` seconds) and per calendar
    month (UTC). `charge` records a call; `allows` says whether the next one fits. Reaching a
    cap stops pushing (items keep waiting in the outbox) until the window or the month turns.
    The caps default to the architecture's $0.01 a tick and $5 a month; None means no cap."""

    price_per_call: float = 0.0
    price_per_item: float = 0.0
    price_per_query: float = 0.0
    price_per_upload: float = 0.0
    price_per_mib: float = 0.0
    max_per_tick: float | None = DEFAULT_MAX_PER_TICK_USD
    monthly: float | None = DEFAULT_MONTHLY_USD
    tick_s: float = 10.0
    death_reserve: float = 0.0  # of `monthly`, only the death protocol's uploads may spend (USD)
    reserve_share: float = 0.0  # of `monthly`, kept for the death protocol by the vitality phase (mortality.py)
    month: str = ""
    spent_month: float = 0.0
    tick_start: float = 0.0
    spent_tick: float = 0.0

    def cost(self, items: int) -> float:
        return self.price_per_call + self.price_per_item * items

    def cap(self, *, death: bool = False) -> float | None:
        """The month's cap for ordinary spending — `monthly` less the ring-fenced reserve, the
        larger of `death_reserve` and the phase's `reserve_share` of `monthly` — or, for the death
        protocol's uploads (`death`), all of `monthly`: ordinary pushes, queries and uploads can
        never spend the reserve, so it is there when the golem dies."""
        if self.monthly is None:
            return None
        reserved = max(self.death_reserve, min(1.0, max(0.0, self.reserve_share)) * self.monthly)
        return self.monthly if death else max(0.0, self.monthly - reserved)

    def transfer_cost(self, size: int) -> float:
        """One vault upload or download of `size` bytes: `per_upload` + `per_mib` for each started MiB."""
        return self.price_per_upload + self.price_per_mib * -(-max(0, size) // (1024 * 1024))

    def affordable_bytes(self, ceiling: int, *, month: str) -> int:
        """The most bytes one vault download may move within the month's cap (at most `ceiling`):
        a download is charged by its real size once it arrived (`transfer_cost`), so the fetch
        is bounded to what the rest of the month's budget pays for; 0 when not even one started
        MiB fits."""
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        cap = self.cap()
        if cap is None:
            return ceiling
        left = cap + 1e-12 - self.spent_month - self.price_per_upload
        if left < self.price_per_mib:
            return 0
        if self.price_per_mib <= 0:
            return ceiling
        return min(ceiling, int(left // self.price_per_mib) * 1024 * 1024)

    def _roll(self, now_s: float, month: str) -> None:
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        if now_s - self.tick_start >= self.tick_s:
            self.tick_start, self.spent_tick = now_s, 0.0

    def allows(self, items: int, *, now_s: float, month: str, death: bool = False) -> bool:
        """Whether a push of `items` fits this tick and the month (`death`: a death reflection's
        push, which may spend the death reserve, `cap`)."""
        self._roll(now_s, month)
        c = self.cost(items)
        cap = self.cap(death=death)
        if cap is not None and self.spent_month + c > cap + 1e-12:
            return False
        return self.max_per_tick is None or self.spent_tick + c <= self.max_per_tick + 1e-12

    def charge(self, items: int, *, now_s: float, month: str) -> float:
        self._roll(now_s, month)
        c = self.cost(items)
        self.spent_month += c
        self.spent_tick += c
        return c

    def allows_upload(self, usd: float, *, month: str, death: bool = False) -> bool:
        """Whether a vault upload (or download) of cost `usd` fits the month's cap (`cap`: with
        `death`, the death reserve too). The per-tick cap does not apply: a file cannot be split,
        and a backup larger than a tick's budget could otherwise never leave."""
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        cap = self.cap(death=death)
        return cap is None or self.spent_month + usd <= cap + 1e-12

    def charge_upload(self, usd: float, *, month: str) -> float:
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        self.spent_month += usd
        return usd

    def resume(self, month: str, spent: float) -> None:
        """Start from a month's recorded spend (the ledger), e.g. after a restart."""
        self.month, self.spent_month = month, max(self.spent_month if month == self.month else 0.0, spent)

    def allows_query(self, *, month: str) -> bool:
        """Whether one query fits the monthly cap (queries count toward the month, not the tick)."""
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        cap = self.cap()
        return cap is None or self.spent_month + self.price_per_query <= cap + 1e-12

    def charge_query(self, *, month: str) -> float:
        if month != self.month:
            self.month, self.spent_month = month, 0.0
        self.spent_month += self.price_per_query
        return self.price_per_query


def upload_cost(styx: StyxConfig, size: int) -> float:
    """What one vault transfer of `size` bytes costs (`Budget.transfer_cost`)."""
    return budget_for(styx).transfer_cost(size)


def budget_for(styx: StyxConfig) -> Budget:
    """The daemon's budget from `[styx.prices]` and `[styx.budget]` (caps on by default)."""
    return Budget(price_per_call=styx.prices.per_call, price_per_item=styx.prices.per_item,
                  price_per_query=styx.prices.per_query, price_per_upload=styx.prices.per_upload,
                  price_per_mib=styx.prices.per_mib, max_per_tick=styx.budget.max_per_tick,
                  monthly=styx.budget.monthly, tick_s=styx.budget.tick_s, death_reserve=styx.budget.reserve())
