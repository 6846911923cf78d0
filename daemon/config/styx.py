"""The [styx] section (and [styx.budget], [styx.prices], [styx.injection]) with the spend
caps' and the prices' defaults."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from daemon.errors import ConfigError

from .sections import Section

__all__ = ["DEFAULT_DEATH_RESERVE_USD", "DEFAULT_MAX_PER_TICK_USD", "DEFAULT_MONTHLY_USD", "DEFAULT_PRICE_PER_CALL",
           "DEFAULT_PRICE_PER_ITEM", "DEFAULT_PRICE_PER_MIB", "DEFAULT_PRICE_PER_QUERY", "DEFAULT_PRICE_PER_UPLOAD",
           "StyxBudgetConfig", "StyxConfig", "StyxInjectionConfig", "StyxPricesConfig"]

# The architecture's spend caps, on unless configured otherwise (daemon/styx/policy.py applies them).
DEFAULT_MAX_PER_TICK_USD = 0.01
DEFAULT_MONTHLY_USD = 5.0
# A tenth of the month, ring-fenced for dying: a death's backup and testament archive cost
# ~$0.001 + $0.0001 a MiB each at the default prices, so $0.50 pays for thousands of MiB.
DEFAULT_DEATH_RESERVE_USD = 0.50


class StyxBudgetConfig(Section):
    """Spend caps (USD): reaching one stops pushing (never writing to the outbox) until the period
    turns. On by default at the architecture's figures: $0.01 a tick, $5 a month."""

    max_per_tick: float | None = Field(DEFAULT_MAX_PER_TICK_USD, ge=0, allow_inf_nan=False,
                                       description="stop pushing for the rest of a tick (USD)")
    monthly: float | None = Field(DEFAULT_MONTHLY_USD, ge=0, allow_inf_nan=False,
                                  description="stop pushing (and querying) for the rest of the month (USD)")
    tick_s: float = Field(10.0, gt=0, le=86_400, description="the length of a tick")
    death_reserve: float = Field(DEFAULT_DEATH_RESERVE_USD, ge=0, allow_inf_nan=False,
                                 description="of monthly, ring-fenced for the death protocol's uploads (backup, "
                                             "testament archive): ordinary pushes, queries and uploads stop "
                                             "before it (USD; at most half of monthly)")

    def reserve(self) -> float:
        """The reserve in force: `death_reserve`, at most half of `monthly` (a small month keeps
        half for the living), 0 without a monthly cap."""
        return 0.0 if self.monthly is None else min(self.death_reserve, self.monthly / 2)


# Default prices (USD). The architecture names the caps, not prices: a request is priced at
# x402's example, $0.001 (the x402-express quickstart's `GET /weather`, `price: "$0.001"`); an
# item pushed in a batch at a hundredth of that; vault storage at $0.0001 a started MiB (S3
# Standard's $0.023 a GB-month, rounded up). With them the caps bind: a batch of 100 costs
# $0.002, five such a tick; $5 a month is about 5,000 queries (docs/operator/styx.md).
DEFAULT_PRICE_PER_CALL = 0.001
DEFAULT_PRICE_PER_ITEM = 0.00001
DEFAULT_PRICE_PER_QUERY = 0.001
DEFAULT_PRICE_PER_UPLOAD = 0.001
DEFAULT_PRICE_PER_MIB = 0.0001


class StyxPricesConfig(Section):
    """What Styx charges (USD); every call's cost is recorded in the month's spend. The defaults
    are stated and sourced in daemon/config/styx.py (the architecture gives caps, not prices)."""

    per_call: float = Field(DEFAULT_PRICE_PER_CALL, ge=0, description="one push call")
    per_item: float = Field(DEFAULT_PRICE_PER_ITEM, ge=0, description="one pushed item")
    per_query: float = Field(DEFAULT_PRICE_PER_QUERY, ge=0, description="one query (the search fan-in)")
    per_upload: float = Field(DEFAULT_PRICE_PER_UPLOAD, ge=0,
                              description="one vault upload or download (a backup, a testament archive)")
    per_mib: float = Field(DEFAULT_PRICE_PER_MIB, ge=0, description="each MiB uploaded to the vault")


class StyxInjectionConfig(Section):
    """How much of Styx's answer may enter a digest (the golem's next LLM call)."""

    max_tokens: int = Field(500, ge=0, le=200_000, description="Styx's share of the digest budget at most")
    min_confidence: float = Field(0.5, ge=0, le=1, description="results below this confidence stay out")


class StyxConfig(Section):
    enabled: bool = False
    url: str | None = Field(None, max_length=500, pattern=r"^https?://[^\s]+$",
                            description="the Styx endpoint, e.g. https://styx.example/ (TLS verified)")
    token: SecretStr | None = Field(None, min_length=1, max_length=4096,
                                    description="prefer token_file or CLADE_STYX__TOKEN; shown as ********")
    token_file: Path | None = None
    clade_enabled: bool = Field(False, description="push to the clade layer (opt-in: Styx relays to siblings)")
    lethe_enabled: bool = Field(False, description="push anonymised warnings to the public lethe layer (opt-in)")
    vault_enabled: bool = Field(True, description="the owner's archive: backups, testaments, death reflections")
    batch: int = Field(100, ge=1, le=1000)
    backoff_base_s: float = Field(1.0, gt=0, le=600)
    backoff_cap_s: float = Field(60.0, gt=0, le=3600)
    timeout_s: float = Field(10.0, gt=0, le=600)
    backup_wait_s: float = Field(20.0, ge=0, le=600, description="how long `POST /v1/backup` waits for the vault "
                                                                 "upload before answering `styx_pending` (the "
                                                                 "upload goes on; `backup_pushed` or "
                                                                 "`backup_push_failed` follows)")
    outbox_warn: int = Field(10_000, ge=1, description="say so (status, event, log) past this many waiting items")
    budget: StyxBudgetConfig = Field(default_factory=StyxBudgetConfig)
    prices: StyxPricesConfig = Field(default_factory=StyxPricesConfig)
    injection: StyxInjectionConfig = Field(default_factory=StyxInjectionConfig)
    query_enabled: bool = Field(False, description="send the text of searches and digests to Styx and merge its "
                                                   "answer (off: the text of a search never leaves the golem; "
                                                   "a request that includes sensitive entries never asks)")
    query_deadline_ms: int = Field(300, ge=10, le=10_000, description="a slow Styx never delays a search past this")
    query_layers: list[str] = Field(default_factory=lambda: ["vault", "clade"], max_length=8)

    @model_validator(mode="after")
    def _affordable(self) -> StyxConfig:
        """A cap below the price of the smallest call would stop Styx for good: refuse it."""
        smallest = self.prices.per_call + self.prices.per_item
        cap = self.budget.max_per_tick
        if cap is not None and smallest > cap + 1e-12:
            raise ValueError(f"one push of one item costs {smallest:g} USD (prices.per_call + per_item), more than "
                             f"budget.max_per_tick {cap:g}: nothing could ever be pushed; raise max_per_tick")
        monthly = self.budget.monthly
        if monthly is not None and max(smallest, self.prices.per_query) > monthly + 1e-12:
            raise ValueError(f"one call costs more than budget.monthly {monthly:g} USD: nothing could ever be "
                             "pushed or asked; raise monthly")
        return self

    def bearer(self) -> str | None:
        """The token (from `token_file` when set, else `token`); raises `ConfigError` if the file is unreadable."""
        if self.token_file is not None:
            try:
                return self.token_file.read_text().strip() or None
            except OSError as exc:
                raise ConfigError(f"[styx] token_file {self.token_file}: {exc.strerror}") from None
        return None if self.token is None else self.token.get_secret_value()
