"""The sections of the knowledge side: [curator] (and [curator.llm]), [embedding], [digest],
[trust]."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from crdt import Kind
from daemon.embedding.check_plan import CLEARANCE, CLEARED_RATE
from daemon.grimoire.trust import TrustPolicy

from .sections import Section

__all__ = ["RETIRED_CAPACITY_KEYS", "CuratorConfig", "CuratorLlmConfig", "DigestConfig", "EmbeddingConfig",
           "TrustConfig"]

RETIRED_CAPACITY_KEYS = ("capacity_rules", "capacity_knowledge", "capacity_summaries")


class CuratorLlmConfig(Section):
    enabled: bool = Field(False, description="ask a small model about related clusters (needs an Anthropic key)")
    model: str = Field("claude-haiku-4-5", min_length=1, max_length=100)
    api_key_file: Path | None = Field(None, description="else ANTHROPIC_API_KEY from the environment")
    base_url: str | None = Field(None, max_length=500, description="the Messages API's base URL (tests, proxies)")
    max_tokens: int = Field(2048, ge=64, le=32_000)
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_clusters: int = Field(32, ge=1, le=256)
    usd_per_mtok_in: float = Field(1.0, ge=0)
    usd_per_mtok_out: float = Field(5.0, ge=0)


class CuratorConfig(Section):
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


class EmbeddingConfig(Section):
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
                                  description="unload the model (stop the embedding process, which holds MiniLM and "
                                              "its runtime) after this many seconds unused; it loads again on the "
                                              "next need (~1-2 s, searches meanwhile answer from keywords). 0: keep "
                                              "it loaded once loaded")
    ship_vectors: bool = Field(True, description="gossip own entries with their vector (int8) when every connected "
                                                 "sibling can take it, and use siblings' shipped vectors of the same "
                                                 "space instead of embedding their entries here")
    check_shipped: float = Field(0.125, ge=0.0, le=1.0,
                                 description="the share of siblings' shipped vectors this golem re-embeds at idle "
                                             "priority to check them (a fixed draw per entry); one that does not "
                                             "match its text is replaced and makes its author suspect. 1: check "
                                             "every one (costs what embedding them here did)")
    check_shipped_clearance: int = Field(CLEARANCE, ge=1, le=1_000_000,
                                         description="after this many checks in a row of one author's shipped "
                                                     "vectors have matched here, its vectors are checked at "
                                                     "`check_shipped_cleared` instead; a mismatch starts the count "
                                                     "again (a continuous sampling plan, CSP-1)")
    check_shipped_cleared: float = Field(CLEARED_RATE, ge=0.0, le=1.0,
                                         description="the share checked of a cleared author's shipped vectors (never "
                                                     "more than `check_shipped`; equal to it: no clearing)")

    @property
    def space(self) -> str:
        """The vector space's name: the model, or `model@path` for files of the operator's own."""
        return self.model if self.model_path is None else f"{self.model}@{self.model_path}"


class DigestConfig(Section):
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


class TrustConfig(Section):
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
