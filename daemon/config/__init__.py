"""Daemon configuration: a pydantic model read from `config.toml`, then `CLADE_*` overrides.

Every field has a safe default, so an empty or missing file is a valid config. Unknown
keys are refused (a typo must not silently fall back to a default). Environment overrides
name a field by section (and sub-section) and key joined with a double underscore:
`CLADE_P2P__MDNS=false`, `CLADE_LOG__LEVEL=debug`, `CLADE_STYX__BUDGET__MONTHLY=20`,
`CLADE_P2P__BOOTSTRAP='["/ip4/…"]'`.

    sections.py   `Section` (every section's base) and the daemon's own: store, p2p, api,
                  backup, death, log, tui
    knowledge.py  curator (and curator.llm), embedding, digest, trust
    styx.py       styx (and its budget, prices, injection) with the caps' and prices' defaults
    loading.py    `Config` (the whole file) and `load_config`
    template.py   `DEFAULT_CONFIG_TOML`, the file `clade init` writes

Import every name from here (`from daemon.config import Config`), not from the part it lives in.
"""

from .knowledge import (
    RETIRED_CAPACITY_KEYS,
    CuratorConfig,
    CuratorLlmConfig,
    DigestConfig,
    EmbeddingConfig,
    TrustConfig,
)
from .loading import ENV_PREFIX, Config, load_config
from .sections import (
    ApiConfig,
    BackupConfig,
    DeathConfig,
    LogConfig,
    P2PConfig,
    Section,
    StoreConfig,
    TuiConfig,
    check_multiaddr,
)
from .styx import (
    DEFAULT_DEATH_RESERVE_USD,
    DEFAULT_MAX_PER_TICK_USD,
    DEFAULT_MONTHLY_USD,
    DEFAULT_PRICE_PER_CALL,
    DEFAULT_PRICE_PER_ITEM,
    DEFAULT_PRICE_PER_MIB,
    DEFAULT_PRICE_PER_QUERY,
    DEFAULT_PRICE_PER_UPLOAD,
    StyxBudgetConfig,
    StyxConfig,
    StyxInjectionConfig,
    StyxPricesConfig,
)
from .template import DEFAULT_CONFIG_TOML

__all__ = [
    "DEFAULT_CONFIG_TOML",
    "DEFAULT_DEATH_RESERVE_USD",
    "DEFAULT_MAX_PER_TICK_USD",
    "DEFAULT_MONTHLY_USD",
    "DEFAULT_PRICE_PER_CALL",
    "DEFAULT_PRICE_PER_ITEM",
    "DEFAULT_PRICE_PER_MIB",
    "DEFAULT_PRICE_PER_QUERY",
    "DEFAULT_PRICE_PER_UPLOAD",
    "ENV_PREFIX",
    "RETIRED_CAPACITY_KEYS",
    "ApiConfig",
    "BackupConfig",
    "Config",
    "CuratorConfig",
    "CuratorLlmConfig",
    "DeathConfig",
    "DigestConfig",
    "EmbeddingConfig",
    "LogConfig",
    "P2PConfig",
    "Section",
    "StoreConfig",
    "StyxBudgetConfig",
    "StyxConfig",
    "StyxInjectionConfig",
    "StyxPricesConfig",
    "TrustConfig",
    "TuiConfig",
    "check_multiaddr",
    "load_config",
]
