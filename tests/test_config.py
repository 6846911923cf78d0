"""Config: defaults, TOML file, CLADE_* overrides, and refusals that name file, key, reason."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from daemon.config import DEFAULT_CONFIG_TOML, Config, load_config
from daemon.errors import ConfigError


def test_missing_file_and_default_template_are_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "none.toml", {}) == Config()
    path = tmp_path / "c.toml"
    path.write_text(DEFAULT_CONFIG_TOML)
    assert load_config(path, {}) == Config()
    assert tomllib.loads(DEFAULT_CONFIG_TOML) is not None


def test_file_values_and_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    peer = "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWMbbPVGsZYh3ChQjue712NHHGNybRRXwnuSpezYjGbCDS"
    path.write_text(f'[p2p]\nmdns = false\nbootstrap = ["{peer}"]\n[log]\nlevel = "info"\n')
    config = load_config(path, {"CLADE_LOG__LEVEL": "debug", "CLADE_STORE__BUSY_TIMEOUT_MS": "2500",
                                "CLADE_P2P__LISTEN": '["/ip4/127.0.0.1/tcp/0"]', "CLADE_DATA_DIR": "/ignored"})
    assert config.p2p.mdns is False
    assert config.p2p.bootstrap == [peer]
    assert config.log.level == "debug"
    assert config.store.busy_timeout_ms == 2500
    assert config.p2p.listen == ["/ip4/127.0.0.1/tcp/0"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[p2p]\nmdns = 3\n", "key p2p.mdns"),
        ("[p2p]\nmdnss = true\n", "key p2p.mdnss"),
        ("[nonsense]\n", "key nonsense"),
        ("[log]\nlevel = 'loud'\n", "key log.level"),
        ("[store]\nbusy_timeout_ms = 5\n", "key store.busy_timeout_ms"),
        ("[p2p\n", "not valid TOML"),
    ],
)
def test_invalid_file_names_file_key_reason(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert str(path) in str(info.value) and needle in str(info.value)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"CLADE_P2P__MDNS": "maybe"}, "CLADE_P2P__MDNS"),
        ({"CLADE_BOGUS__X": "1"}, "CLADE_BOGUS__X"),
        ({"CLADE_P2P__LISTEN": "[broken"}, "CLADE_P2P__LISTEN"),
        ({"CLADE_LOG__COLOUR": "red"}, "log.colour"),
    ],
)
def test_invalid_env_names_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match="environment") as info:
        load_config(None, env)
    assert needle in str(info.value)
