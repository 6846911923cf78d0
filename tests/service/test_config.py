"""Config: defaults, TOML file, CLADE_* overrides, and refusals that name file, key, reason."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from daemon.config import DEFAULT_CONFIG_TOML, DEFAULT_PRICE_PER_CALL, Config, load_config
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
        ("[curator]\ndecay_windows = {insite = 5.0}\n", "'insite' is not a kind (one of insight"),
        ("[curator]\ndecay_windows = {fact = 0}\n", "fact: the window must be more than 0 days"),
        ("[curator]\ndecay_windows = {fact = 1e9}\n", "fact: at most 36500 days"),
        ("[curator]\nwindow_days = -1\n", "key curator.window_days"),
        ("[digest]\nkind_caps = {warnings = 2}\n", "'warnings' is no kind (one of anti_knowledge"),
        ("[digest]\nkind_caps = {warning = 101}\n", "the cap of warning must be 0..100, not 101"),
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


def test_env_overrides_reach_sub_sections_and_name_a_wrong_one(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[styx.budget]\nmonthly = 5.0\nmax_per_tick = 0.5\n[curator.llm]\nmodel = "claude-x"\n')
    config = load_config(path, env={"CLADE_STYX__BUDGET__MONTHLY": "20", "CLADE_CURATOR__LLM__ENABLED": "true",
                                    "CLADE_STYX__INJECTION__MAX_TOKENS": "250"})
    assert config.styx.budget.monthly == 20.0 and config.styx.budget.max_per_tick == 0.5  # the file's other key
    assert config.curator.llm.enabled and config.curator.llm.model == "claude-x"
    assert config.styx.injection.max_tokens == 250 and config.styx.prices.per_call == DEFAULT_PRICE_PER_CALL
    with pytest.raises(ConfigError, match=r"CLADE_STYX__BUDGT__MONTHLY: unknown section 'styx.budgt'"):
        load_config(path, env={"CLADE_STYX__BUDGT__MONTHLY": "1"})
    with pytest.raises(ConfigError, match=r"CLADE_STYX__BUDGET__MONTHLY: key styx.budget.monthly"):
        load_config(path, env={"CLADE_STYX__BUDGET__MONTHLY": "-1"})
    with pytest.raises(ConfigError, match=r"CLADE_STYX____X: an empty key"):
        load_config(path, env={"CLADE_STYX____X": "1"})


def test_decay_windows_per_kind_over_the_defaults_and_window_days(tmp_path: Path) -> None:
    from crdt import Kind
    from daemon.grimoire.curator.decay import DEFAULT_WINDOW_DAYS
    from daemon.service.curation import settings_for

    assert settings_for(Config().curator).windows == dict(DEFAULT_WINDOW_DAYS)
    path = tmp_path / "c.toml"
    path.write_text("[curator]\ndecay_windows = {fact = 120.0, regime_shift = 2}\n")
    windows = settings_for(load_config(path, {}).curator).windows
    assert windows[Kind.FACT] == 120.0 and windows[Kind.REGIME_SHIFT] == 2.0
    assert windows[Kind.CONSTRAINT] == DEFAULT_WINDOW_DAYS[Kind.CONSTRAINT]
    every = load_config(path, {"CLADE_CURATOR__WINDOW_DAYS": "10", "CLADE_CURATOR__DECAY_WINDOWS__INSIGHT": "3"})
    windows = settings_for(every.curator).windows
    assert windows[Kind.CONSTRAINT] == 10.0 and windows[Kind.FACT] == 120.0 and windows[Kind.INSIGHT] == 3.0
