"""Daemon configuration: a pydantic model read from `config.toml`, then `CLADE_*` overrides.

Every field has a safe default, so an empty or missing file is a valid config. Unknown
keys are refused (a typo must not silently fall back to a default). Environment overrides
name a field by section (and sub-section) and key joined with a double underscore:
`CLADE_P2P__MDNS=false`, `CLADE_LOG__LEVEL=debug`, `CLADE_STYX__BUDGET__MONTHLY=20`,
`CLADE_P2P__BOOTSTRAP='["/ip4/…"]'`.
"""

from __future__ import annotations

import json
import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from crdt import Kind
from daemon.errors import ConfigError
from daemon.grimoire.trust import TrustPolicy

__all__ = ["DEFAULT_CONFIG_TOML", "DEFAULT_MAX_PER_TICK_USD", "DEFAULT_MONTHLY_USD", "ENV_PREFIX", "Config",
           "check_multiaddr", "load_config"]

ENV_PREFIX = "CLADE_"
RETIRED_CAPACITY_KEYS = ("capacity_rules", "capacity_knowledge", "capacity_summaries")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StoreConfig(_Section):
    busy_timeout_ms: int = Field(10_000, ge=100, le=600_000, description="how long a writer waits for the lock")


class P2PConfig(_Section):
    enabled: bool = Field(True, description="sync with siblings (needs a clade membership)")
    listen: list[str] = Field(default_factory=lambda: ["/ip4/0.0.0.0/tcp/4001"], max_length=16)
    bootstrap: list[str] = Field(default_factory=list, max_length=256,
                                 description="siblings to dial: /ip4/…/tcp/…/p2p/PEERID")
    mdns: bool = True
    sync_interval_s: float = Field(30.0, ge=1.0, le=3600.0, description="anti-entropy with a random sibling")
    max_skew_ms: int = Field(60_000, ge=1_000, le=86_400_000, description="refuse ops stamped further ahead")
    key_grace_s: float = Field(86_400.0, ge=0.0, le=30 * 86_400.0,
                               description="after installing a rotated clade key, keep accepting gossip sealed "
                                           "with the previous one for this long (siblings not rotated yet)")

    @field_validator("listen", "bootstrap")
    @classmethod
    def _addrs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for addr in value:  # a bootstrap address names the sibling: it ends in /p2p/PEERID
            check_multiaddr(addr, peer=info.field_name == "bootstrap")
        return value


def check_multiaddr(text: str, *, peer: bool) -> str:
    """Raise `ValueError` unless `text` is a TCP multiaddr (ending in /p2p/PEERID if `peer`)."""
    import multiaddr  # cheap (~20 ms); libp2p itself is imported only by the p2p service

    try:
        addr = multiaddr.Multiaddr(text)
    except Exception as exc:  # noqa: BLE001 - the parser raises several types
        raise ValueError(f"{text!r} is not a multiaddr: {exc}") from None
    protocols = [p.name for p in addr.protocols()]
    if "tcp" not in protocols:
        raise ValueError(f"{text!r} has no /tcp/PORT (clade speaks TCP)")
    if peer and protocols[-1] != "p2p":
        raise ValueError(f"{text!r} must end in /p2p/PEERID (the sibling's peer id)")
    if not peer and "p2p" in protocols:
        raise ValueError(f"{text!r}: a listen address has no /p2p/ part")
    return text


class CuratorLlmConfig(_Section):
    enabled: bool = Field(False, description="ask a small model about related clusters (needs an Anthropic key)")
    model: str = Field("claude-haiku-4-5", min_length=1, max_length=100)
    api_key_file: Path | None = Field(None, description="else ANTHROPIC_API_KEY from the environment")
    base_url: str | None = Field(None, max_length=500, description="the Messages API's base URL (tests, proxies)")
    max_tokens: int = Field(2048, ge=64, le=32_000)
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_clusters: int = Field(32, ge=1, le=256)
    usd_per_mtok_in: float = Field(1.0, ge=0)
    usd_per_mtok_out: float = Field(5.0, ge=0)


class CuratorConfig(_Section):
    tick_seconds: float = Field(10.0, gt=0, le=3600)
    cycle_ticks: int = Field(50, ge=1, le=100_000)
    window_days: float | None = Field(None, gt=0, le=36_500,
                                      description="one forgetting-curve window (days) for every kind; unset: "
                                                  "each kind's default (constraint 90 … regime_shift 5)")
    decay_windows: dict[str, float] = Field(default_factory=dict, max_length=32,
                                            description="kind -> window in days, over the defaults and "
                                                        "window_days, e.g. {fact = 120, insight = 7}")
    eviction_threshold: float = Field(0.05, ge=0, le=1, description="archive below this local confidence")
    capacity: int = Field(50_000, ge=1, le=10_000_000,
                          description="live knowledge entries at most; the excess is archived (reversibly), "
                                      "strategy outcomes and summaries first, rules and warnings last")
    replay_budget: int = Field(500, ge=0, le=100_000, description="episodes replayed per cycle")
    playbook_keep: int = Field(20, ge=1, le=10_000, description="PLAYBOOK.md versions kept under playbook/")
    llm: CuratorLlmConfig = Field(default_factory=CuratorLlmConfig)

    @model_validator(mode="before")
    @classmethod
    def _retired_capacity_keys(cls, data: Any) -> Any:
        """`capacity_rules`, `capacity_knowledge`, `capacity_summaries` (per-tier limits before
        the one budget) are accepted, ignored and warned about: an old config file still loads."""
        if isinstance(data, dict) and any(k in data for k in RETIRED_CAPACITY_KEYS):
            data = dict(data)
            old = {k: data.pop(k) for k in RETIRED_CAPACITY_KEYS if k in data}
            logging.getLogger("clade.config").warning(
                "[curator] %s no longer apply (ignored): the Grimoire has one budget of live entries, "
                "[curator] capacity (default 50000); remove them from the config file",
                ", ".join(f"{k} = {v!r}" for k, v in old.items()))
        return data

    @field_validator("decay_windows")
    @classmethod
    def _known_kinds(cls, value: dict[str, float]) -> dict[str, float]:
        from daemon.grimoire.curator.decay import windows_with

        for name, days in value.items():
            if days > 36_500:
                raise ValueError(f"{name}: at most 36500 days, got {days!r}")
        windows_with(value)  # raises ValueError naming an unknown kind or a window <= 0
        return value


class ApiConfig(_Section):
    tcp_port: int | None = Field(None, ge=1, le=65_535, description="also listen on 127.0.0.1:PORT (needs token)")
    token: SecretStr | None = Field(None, min_length=32, description="bearer token for the TCP listener "
                                    "(or CLADE_API__TOKEN); shown as ********, never logged")

    def secret_token(self) -> str | None:
        """The bearer token's text: only for the listener's check and the client's header."""
        return None if self.token is None else self.token.get_secret_value()


class BackupConfig(_Section):
    keep: int = Field(7, ge=1, le=1000)
    interval_hours: float = Field(24.0, gt=0)
    share_with_clade: bool = Field(False, description="also seal backups to the clade key: any member (a "
                                                      "compromised one too) can then read this golem's soma — "
                                                      "private entries, outcomes, episodes, config; off: the "
                                                      "owner and this golem only")


# The architecture's spend caps, on unless configured otherwise (daemon/styx/policy.py applies them).
DEFAULT_MAX_PER_TICK_USD = 0.01
DEFAULT_MONTHLY_USD = 5.0
# A tenth of the month, ring-fenced for dying: a death's backup and testament archive cost
# ~$0.001 + $0.0001 a MiB each at the default prices, so $0.50 pays for thousands of MiB.
DEFAULT_DEATH_RESERVE_USD = 0.50


class StyxBudgetConfig(_Section):
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


class StyxPricesConfig(_Section):
    """What Styx charges (USD); every call's cost is recorded in the month's spend. The defaults
    are stated and sourced in daemon/config.py (the architecture gives caps, not prices)."""

    per_call: float = Field(DEFAULT_PRICE_PER_CALL, ge=0, description="one push call")
    per_item: float = Field(DEFAULT_PRICE_PER_ITEM, ge=0, description="one pushed item")
    per_query: float = Field(DEFAULT_PRICE_PER_QUERY, ge=0, description="one query (the search fan-in)")
    per_upload: float = Field(DEFAULT_PRICE_PER_UPLOAD, ge=0,
                              description="one vault upload or download (a backup, a testament archive)")
    per_mib: float = Field(DEFAULT_PRICE_PER_MIB, ge=0, description="each MiB uploaded to the vault")


class StyxInjectionConfig(_Section):
    """How much of Styx's answer may enter a digest (the golem's next LLM call)."""

    max_tokens: int = Field(500, ge=0, le=200_000, description="Styx's share of the digest budget at most")
    min_confidence: float = Field(0.5, ge=0, le=1, description="results below this confidence stay out")


class StyxConfig(_Section):
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


class EmbeddingConfig(_Section):
    model: str = Field("sentence-transformers/all-MiniLM-L6-v2", min_length=1, max_length=200,
                       description="\"all-MiniLM-L6-v2+all-mpnet-base-v2\" fuses MiniLM and MPNet: better recall, "
                                   "~8x the CPU per entry, 2x the memory, a one-time 404 MB fetch")
    model_path: Path | None = Field(None, description="a directory of the configured model's files (model.onnx, "
                                    "tokenizer.json, config.json, …) to use instead of the bundled or downloaded ones "
                                    "(a model of your own, an air-gapped copy); not hash-pinned: the drift check "
                                    "watches it")
    drift_check_hours: float = Field(168.0, gt=0, le=8_760.0,
                                     description="re-embed the 20 reference documents this often (and at every model "
                                                 "load) to catch a model that maps text differently than when the "
                                                 "stored vectors were made")
    unload_after_s: float = Field(300.0, ge=0.0, le=86_400.0,
                                  description="unload the model (~110 MiB of MiniLM) after this many seconds unused; "
                                              "it loads again on the next need (~1 s, searches meanwhile answer from "
                                              "keywords). 0: keep it loaded once loaded")

    @property
    def space(self) -> str:
        """The vector space's name: the model, or `model@path` for files of the operator's own."""
        return self.model if self.model_path is None else f"{self.model}@{self.model_path}"


class DigestConfig(_Section):
    pinned_tags: list[str] = Field(default_factory=list, max_length=64,
                                   description="entries with one of these tags always enter the digest first")
    pinned_fact_keys: list[str] = Field(default_factory=list, max_length=64,
                                        description="facts whose content starts with `KEY:` or `KEY =` enter first")
    episode_tokens: int = Field(0, ge=0, le=20_000,
                                description="the digest's episodic section: at most this many tokens of this golem's "
                                            "own episodes most like the query, after the entries (0: off; the "
                                            "architecture's episodic block is ~800). Off by default: episodes are "
                                            "raw, unconsolidated observations, and the section costs an episode "
                                            "search per digest")
    episode_k: int = Field(3, ge=1, le=50, description="at most this many episodes in that section")

    kind_caps: dict[str, int] = Field(
        default_factory=dict,
        description="how many ranked hits of a kind enter before other kinds get their turn, by kind name "
                    "(e.g. `{ warning = 6 }`); kinds not named keep the default (warning 4, insight 4, "
                    "anti_knowledge 3, heuristic 3, fact 3, the rest 2). Caps never leave a slot empty: the hits "
                    "they held back fill what is left")

    @field_validator("pinned_tags", "pinned_fact_keys")
    @classmethod
    def _labels(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value.strip() or len(value) > 48:
                raise ValueError(f"{value!r} must be 1..48 characters")
        return values

    @field_validator("kind_caps")
    @classmethod
    def _caps(cls, caps: dict[str, int]) -> dict[str, int]:
        kinds = {k.value for k in Kind}
        for kind, cap in caps.items():
            if kind not in kinds:
                raise ValueError(f"{kind!r} is no kind (one of {', '.join(sorted(kinds))})")
            if not 0 <= cap <= 100:
                raise ValueError(f"the cap of {kind} must be 0..100, not {cap}")
        return caps


class TrustConfig(_Section):
    """Per-author trust and quarantine of siblings' entries (daemon/grimoire/trust.py)."""

    enabled: bool = Field(True, description="quarantine siblings' entries until corroborated or aged; off: every "
                                            "sibling entry ranks as before")
    prior: float = Field(0.5, gt=0, lt=1, description="trust of an author nothing is known of (the Beta prior's mean)")
    strength: float = Field(4.0, gt=0, le=100, description="how many pieces of evidence weigh as much as the prior")
    low_trust: float = Field(0.35, ge=0, le=1, description="below this an author is suspect: its entries stop "
                                                           "aging out of quarantine and its warnings are withheld")
    low_trust_evidence: int = Field(4, ge=0, le=1_000_000, description="… once at least this much evidence about "
                                                                      "the author is in (fewer: not yet suspect)")
    vouch_trust: float = Field(0.65, ge=0, le=1, description="an author's confirmations corroborate others' entries "
                                                            "only once its trust from local evidence reaches this")
    quarantine_age_s: int = Field(86_400, ge=0, le=90 * 86_400,
                                  description="a sibling's uncontradicted entry is released after this long here "
                                              "(local arrival time, never the author's clock)")
    budget_entries: int = Field(100, ge=1, le=1_000_000,
                                description="fresh entries (authored near their arrival) an author may have arrive "
                                            "per window; more makes it suspect (nothing is dropped)")
    budget_window_s: int = Field(3_600, ge=60, le=7 * 86_400, description="the write budget's window")
    catchup_entries: int = Field(5_000, ge=1, le=10_000_000,
                                 description="all arrivals (catch-up included) an author may have per window")
    max_author_share: float = Field(0.3, gt=0, le=1, description="at most this share of a digest's k slots from "
                                                                 "one sibling (at least one)")
    unverified_per_author: int = Field(1, ge=0, le=100, description="unverified entries per sibling per digest")
    release_vouched: bool = Field(True, description="an author's entries are released on arrival, not after "
                                                    "quarantine_age_s, when its record here is good (release_trust)")
    release_trust: float = Field(0.55, ge=0, le=1, description="the trust here an author's entries are released "
                                                               "on arrival from (with release_vouched)")
    release_outcomes: int = Field(4, ge=0, le=1_000_000, description="… on at least this much evidence about it")
    trial: bool = Field(True, description="a member's unverified entries enter digests and "
                                          "searches at once, marked unverified, so outcomes here can bear them "
                                          "out or refute them; off: only its warnings")

    def policy(self) -> TrustPolicy:
        """The pure policy trust.py applies."""
        return TrustPolicy(enabled=self.enabled, prior=self.prior, strength=self.strength, low_trust=self.low_trust,
                           low_trust_evidence=self.low_trust_evidence,
                           vouch_trust=self.vouch_trust, quarantine_age_ms=self.quarantine_age_s * 1000,
                           budget_entries=self.budget_entries, budget_window_ms=self.budget_window_s * 1000,
                           catchup_entries=self.catchup_entries, max_author_share=self.max_author_share,
                           unverified_per_author=self.unverified_per_author, release_vouched=self.release_vouched,
                           release_trust=self.release_trust, release_outcomes=self.release_outcomes,
                           trial=self.trial)


class TuiConfig(_Section):
    """`clade tui`: its keys (binding id -> keys, Textual's keymap) and its colours."""

    keymap: dict[str, str] = Field(default_factory=dict, max_length=64,
                                   description='binding id -> comma-separated keys, e.g. {"quit" = "x,ctrl+q"}; '
                                               "`?` in the TUI lists the ids")
    theme: Literal["auto", "truecolor", "256", "16", "mono"] = Field(
        "auto", description="auto: from $COLORTERM/$TERM (truecolor, 256 or 16 colours; NO_COLOR: mono)")
    poll_s: float = Field(1.0, ge=0.2, le=60.0, description="how often the status, peers and stats are read")

    @field_validator("keymap")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for binding_id, keys in value.items():
            if not binding_id.strip() or not keys.strip() or len(keys) > 100:
                raise ValueError(f"{binding_id!r} = {keys!r}: name a binding id and 1..100 characters of keys")
        return value


class DeathConfig(_Section):
    """`POST /v1/death` (`clade die`): who hears of it besides the clade and Styx."""

    webhook: str | None = Field(None, max_length=500, pattern=r"^https?://[^\s]+$",
                                description="POST a JSON notice here when the golem dies")
    webhook_timeout_s: float = Field(5.0, gt=0, le=60, description="one attempt at most this long")
    webhook_attempts: int = Field(3, ge=1, le=10, description="then the step is recorded failed")
    webhook_backoff_s: float = Field(1.0, ge=0, le=60, description="wait before attempt n+1: this × 2^(n-1)")


class LogConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "warning"


class Config(_Section):
    """The effective configuration of one daemon."""

    store: StoreConfig = Field(default_factory=StoreConfig)
    p2p: P2PConfig = Field(default_factory=P2PConfig)
    curator: CuratorConfig = Field(default_factory=CuratorConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    styx: StyxConfig = Field(default_factory=StyxConfig)
    death: DeathConfig = Field(default_factory=DeathConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    digest: DigestConfig = Field(default_factory=DigestConfig)
    trust: TrustConfig = Field(default_factory=TrustConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    tui: TuiConfig = Field(default_factory=TuiConfig)


DEFAULT_CONFIG_TOML = """\
# clade configuration. Every key is optional; the values shown are the defaults.
# Environment variables override keys: CLADE_<SECTION>__<KEY>, e.g. CLADE_LOG__LEVEL=info.

[store]
# busy_timeout_ms = 10000

[p2p]
# enabled = true
# listen = ["/ip4/0.0.0.0/tcp/4001"]
# bootstrap = []           # "/ip4/10.0.0.2/tcp/4001/p2p/12D3KooW…"
# mdns = true
# sync_interval_s = 30.0
# max_skew_ms = 60000
# key_grace_s = 86400.0    # old-epoch gossip accepted this long after a key rotation

[curator]
# tick_seconds = 10.0
# cycle_ticks = 50
# window_days = 10.0       # one window for every kind (unset: per-kind defaults; 0.7 fades after ~2 windows)
# decay_windows = { constraint = 90.0, preference = 90.0, fact = 60.0, causal_link = 60.0,
#                   anti_knowledge = 60.0, death_reflection = 60.0, heuristic = 30.0, warning = 14.0,
#                   strategy_outcome = 14.0, insight = 10.0, episode_summary = 10.0, regime_shift = 5.0 }
# eviction_threshold = 0.05
# capacity = 50000         # live entries at most: strategy outcomes and summaries archived first, rules last
# replay_budget = 500
# playbook_keep = 20

[curator.llm]
# enabled = false          # needs ANTHROPIC_API_KEY (or api_key_file)
# model = "claude-haiku-4-5"
# max_tokens = 2048
# timeout_s = 30.0

[api]
# tcp_port = 7410          # also serve on 127.0.0.1 (requires token)
# token = "…32+ chars…"

[backup]
# keep = 7
# interval_hours = 24.0

[styx]
# enabled = false
# url = "https://…"
# token_file = "/etc/clade/styx.token"   # or CLADE_STYX__TOKEN in the environment; never logged
# clade_enabled = false                  # opt-in: push what crosses to the clade layer
# lethe_enabled = false                  # opt-in: anonymised warnings to the public layer
# vault_enabled = true                   # the owner's archive
# batch = 100
# backoff_base_s = 1.0
# backoff_cap_s = 60.0
# timeout_s = 10.0
# outbox_warn = 10000
# query_enabled = false                  # true: send search and digest text to Styx and merge its answer
# query_deadline_ms = 300                # a slow Styx never delays them past this
# query_layers = ["vault", "clade"]
#
# [styx.budget]                          # USD; at a cap pushing pauses (the outbox keeps filling)
# max_per_tick = 0.01                    # on by default: the architecture's $0.01 a tick
# monthly = 5.0                          # and $5 a month; raise them to spend more
# tick_s = 10.0
#
# [styx.prices]                          # USD; every call's cost is recorded per month
# per_call = 0.001                       # x402's example price of a request
# per_item = 0.00001
# per_query = 0.001
# per_upload = 0.001                     # a vault upload or download
# per_mib = 0.0001                       # each MiB uploaded
#
# [styx.injection]                       # Styx's share of a digest
# max_tokens = 500
# min_confidence = 0.5

[death]
# webhook = "https://…"    # POST a JSON notice when the golem dies (`clade die`)
# webhook_timeout_s = 5.0
# webhook_attempts = 3
# webhook_backoff_s = 1.0  # then 2.0, 4.0 …

[embedding]
# model = "sentence-transformers/all-MiniLM-L6-v2"
#   or "all-MiniLM-L6-v2+all-mpnet-base-v2": better recall, ~8x the CPU per entry, MemoryMax=2G
# unload_after_s = 300.0   # the model leaves memory after this long unused (0: never)

[digest]
# pinned_tags = []         # e.g. ["risk-limits"]: tagged entries always enter the digest first
# pinned_fact_keys = []    # e.g. ["max_position_usd"]: facts written "max_position_usd: 50000"
# episode_tokens = 0       # the episodic section's share of the budget (e.g. 800); 0: off
# episode_k = 3            # at most this many of this golem's own episodes in it

[trust]
# enabled = true
# quarantine_age_s = 86400 # a sibling's entry with no evidence either way is released after a day here
# budget_entries = 100     # fresh entries per author per budget_window_s before it is suspect
# budget_window_s = 3600
# max_author_share = 0.3   # of a digest's slots from one sibling
# release_vouched = true   # an author with a good record here (release_trust) has its entries released at once
# trial = true             # a sibling's new entry is shown at once, marked unverified, until outcomes decide

[log]
# level = "warning"

[tui]
# theme = "auto"           # or "truecolor", "256", "16", "mono"
# poll_s = 1.0
# keymap = { quit = "q,ctrl+q", "action.backup" = "B" }   # binding id -> keys; `?` lists the ids
"""


def _describe(exc: ValidationError, source: str) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{source}: key {key}: {first['msg']}{more}"


def _env_overrides(env: Mapping[str, str]) -> tuple[list[tuple[tuple[str, ...], Any]], dict[str, str]]:
    """CLADE_SECTION__KEY (or CLADE_SECTION__SUB__KEY) variables as (key path, value); also key path -> var name."""
    overrides: list[tuple[tuple[str, ...], Any]] = []
    names: dict[str, str] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = tuple(name[len(ENV_PREFIX):].lower().split("__"))
        if any(not part for part in path):
            raise ConfigError(f"environment {name}: an empty key between '__' separators")
        value: Any = raw
        if raw[:1] in "[{":
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"environment {name}: not valid JSON: {exc.msg}") from None
        overrides.append((path, value))
        names[".".join(path)] = name
    return overrides, names


def load_config(path: Path | None, env: Mapping[str, str] | None = None) -> Config:
    """Read `path` (missing file = all defaults) and apply `CLADE_*__*` overrides.

    Raises `ConfigError` naming the file or variable, the key and the reason.
    """
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    if path is not None and path.exists():
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path))) from None
    overrides, names = _env_overrides(env)
    if not overrides:
        return config
    merged = config.model_dump()
    for keys, value in overrides:
        node = merged
        for depth, part in enumerate(keys[:-1]):
            if not isinstance(node.get(part), dict):
                section = ".".join(keys[: depth + 1])
                raise ConfigError(f"environment {names['.'.join(keys)]}: unknown section {section!r}")
            node = node[part]
        node[keys[-1]] = value
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        loc = ".".join(str(p) for p in exc.errors()[0]["loc"])
        source = f"environment {names.get(loc, 'CLADE_*')}"
        raise ConfigError(_describe(exc, source)) from None
