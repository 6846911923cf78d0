"""Daemon configuration: a pydantic model read from `config.toml`, then `CLADE_*` overrides.

Every field has a safe default, so an empty or missing file is a valid config. Unknown
keys are refused (a typo must not silently fall back to a default). Environment overrides
name a field by section and key joined with a double underscore:
`CLADE_P2P__MDNS=false`, `CLADE_LOG__LEVEL=debug`, `CLADE_P2P__BOOTSTRAP='["/ip4/…"]'`.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError

__all__ = ["DEFAULT_CONFIG_TOML", "ENV_PREFIX", "Config", "load_config"]

ENV_PREFIX = "CLADE_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StoreConfig(_Section):
    busy_timeout_ms: int = Field(10_000, ge=100, le=600_000, description="how long a writer waits for the lock")


class P2PConfig(_Section):
    listen: list[str] = Field(default_factory=lambda: ["/ip4/0.0.0.0/tcp/4001"])
    bootstrap: list[str] = Field(default_factory=list)
    mdns: bool = True


class CuratorConfig(_Section):
    tick_seconds: float = Field(10.0, gt=0, le=3600)
    cycle_ticks: int = Field(50, ge=1, le=100_000)


class ApiConfig(_Section):
    tcp_port: int | None = Field(None, ge=1, le=65_535, description="also listen on 127.0.0.1:PORT (needs token)")
    token: str | None = Field(None, min_length=32, description="bearer token for the TCP listener")


class BackupConfig(_Section):
    keep: int = Field(7, ge=1, le=1000)
    interval_hours: float = Field(24.0, gt=0)


class StyxConfig(_Section):
    enabled: bool = False
    url: str | None = None


class EmbeddingConfig(_Section):
    model: str = "sentence-transformers/all-MiniLM-L6-v2"


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
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    log: LogConfig = Field(default_factory=LogConfig)


DEFAULT_CONFIG_TOML = """\
# clade configuration. Every key is optional; the values shown are the defaults.
# Environment variables override keys: CLADE_<SECTION>__<KEY>, e.g. CLADE_LOG__LEVEL=info.

[store]
# busy_timeout_ms = 10000

[p2p]
# listen = ["/ip4/0.0.0.0/tcp/4001"]
# bootstrap = []
# mdns = true

[curator]
# tick_seconds = 10.0
# cycle_ticks = 50

[api]
# tcp_port = 7410          # also serve on 127.0.0.1 (requires token)
# token = "…32+ chars…"

[backup]
# keep = 7
# interval_hours = 24.0

[styx]
# enabled = false
# url = "https://…"

[embedding]
# model = "sentence-transformers/all-MiniLM-L6-v2"

[log]
# level = "warning"
"""


def _describe(exc: ValidationError, source: str) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{source}: key {key}: {first['msg']}{more}"


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Split CLADE_SECTION__KEY variables into a nested dict; also map key path -> var name."""
    overrides: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
        value: Any = raw
        if raw[:1] in "[{":
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"environment {name}: not valid JSON: {exc.msg}") from None
        overrides.setdefault(section, {})[key] = value
        names[f"{section}.{key}"] = name
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
    for section, keys in overrides.items():
        if not isinstance(merged.get(section), dict):
            var = next(v for k, v in names.items() if k.startswith(section + "."))
            raise ConfigError(f"environment {var}: unknown section {section!r}")
        merged[section].update(keys)
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        loc = ".".join(str(p) for p in exc.errors()[0]["loc"])
        source = f"environment {names.get(loc, 'CLADE_*')}"
        raise ConfigError(_describe(exc, source)) from None
