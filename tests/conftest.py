"""Shared fixtures: real data directories in tmp_path, the CLI in-process and as a subprocess."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.cli.main import main
from daemon.datadir import DataDir
from daemon.testing.styx_server import StyxServer

REPO = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


CliRunner = Callable[..., CliResult]


@pytest.fixture
def data_dir(tmp_path: Path) -> DataDir:
    """An initialised data directory."""
    data = DataDir(tmp_path / "data")
    data.init()
    return data


@pytest.fixture
def cli(data_dir: DataDir, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """Run `clade --data-dir DATA ARGS…` in-process; `stdin=` feeds bytes to standard input."""

    def run(*args: str, stdin: bytes | None = None) -> CliResult:
        capsys.readouterr()
        if stdin is not None:
            fake = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
            monkeypatch.setattr(sys, "stdin", fake)
        try:
            code = main(["--data-dir", str(data_dir.root), *args])
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def clade_subprocess(
    args: Sequence[str], *, env: dict[str, str] | None = None, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """Run the real `clade` console script (argv bytes allowed through os.fsencode)."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("clade")), *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


STYX_TOKEN = "s" * 40


@pytest.fixture
def styx(tmp_path: Path) -> Iterator[StyxServer]:
    """The reference Styx server (daemon/testing/styx_server.py) on 127.0.0.1, bearer `STYX_TOKEN`."""
    server = StyxServer(tmp_path / "styx.db", token=STYX_TOKEN).start()
    yield server
    server.stop()
