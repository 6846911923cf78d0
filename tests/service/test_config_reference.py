"""The configuration reference page is generated from the config model and committed in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon import config_reference
from daemon.config import Config

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_is_what_the_model_renders() -> None:
    """Edit a Field description in daemon/config.py and this fails until `make docs` runs."""
    page = (ROOT / config_reference.PAGE).read_text(encoding="utf-8")
    assert page == config_reference.render()


def test_every_key_its_environment_variable_and_its_description_are_on_the_page() -> None:
    page = config_reference.render()
    assert "| `busy_timeout_ms` | `int` | `10000` | `CLADE_STORE__BUSY_TIMEOUT_MS` | how long a writer waits" in page
    assert "`CLADE_STYX__BUDGET__MONTHLY`" in page
    assert "## [curator.llm]" in page
    described = [(section, key, info.description) for section, sinfo in Config.model_fields.items()
                 if sinfo.annotation is not None and hasattr(sinfo.annotation, "model_fields")
                 for key, info in sinfo.annotation.model_fields.items() if info.description]
    assert len(described) > 20
    for _section, key, description in described:
        assert f"| `{key}` |" in page
        assert description.replace("|", "\\|").replace("\n", " ") in page


def test_check_reports_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "config-reference.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert config_reference.main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert config_reference.main(["--write", str(stale)]) == 0
    assert config_reference.main(["--check", str(stale)]) == 0
