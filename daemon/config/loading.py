"""`Config`, the effective configuration, and `load_config`: `config.toml`, then `CLADE_*` overrides."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from daemon.errors import ConfigError

from .knowledge import CuratorConfig, DigestConfig, EmbeddingConfig, TrustConfig
from .sections import ApiConfig, BackupConfig, DeathConfig, LogConfig, P2PConfig, Section, StoreConfig, TuiConfig
from .styx import StyxConfig

__all__ = ["ENV_PREFIX", "Config", "load_config"]

ENV_PREFIX = "CLADE_"


class Config(Section):
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
