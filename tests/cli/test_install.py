"""A plain `pip install` gives a complete daemon: semantic recall works with no extra step.

Builds the wheel from this checkout, installs it with its declared dependencies into a
fresh virtual environment (pip's cache makes that minutes, not gigabytes), and runs the
installed `clade` from a directory outside the checkout, so nothing can come from the
source tree. Slow by nature.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def test_pip_install_of_the_wheel_gives_working_semantic_recall(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info into the tree it builds.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", ".clade", "__pycache__", ".*_cache", ".hypothesis"))
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, source, cwd=tmp_path)
    (wheel,) = wheels.glob("clade-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json", "LICENSE",
                 "NOTICE"):
        assert f"daemon/embedding/model_files/all-MiniLM-L6-v2/{name}" in names, name

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    _run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    clade = venv / "bin" / "clade"
    work = tmp_path / "elsewhere"
    work.mkdir()
    data = ["--data-dir", str(work / "data")]
    _run(clade, *data, "init", cwd=work)
    written = json.loads(_run(clade, *data, "--json", "remember", "Never LP in pools with less than $100K TVL",
                              "--kind", "constraint", cwd=work).stdout)
    _run(clade, *data, "remember", "Gas on Arbitrum spikes after 14:00 UTC", "--kind", "warning", cwd=work)
    found = json.loads(_run(clade, *data, "--json", "recall", "minimum pool size for liquidity", "--k", "1",
                            cwd=work).stdout)
    assert [r["id"] for r in found["results"]] == [written["id"]]
    assert found["results"][0]["via"] in ("vector", "both")
    check = json.loads(_run(clade, *data, "--json", "embeddings", "check", cwd=work).stdout)
    assert check["ok"] and check["missing"] == 0 and check["current"] == 2
