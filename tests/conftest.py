"""Shared fixtures: real data directories in tmp_path, the CLI in-process, a reference Styx server.

Fixtures only: what tests import (CliRunner, clade_subprocess, STYX_TOKEN…) lives in tests/helpers/.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.cli.main import main
from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN, CliResult, CliRunner


@pytest.fixture
def data_dir(tmp_path: Path) -> DataDir:
    """An initialised data directory."""
    data = DataDir(tmp_path / "data")
    data.init()
    return data


@pytest.fixture
def daemon(data_dir: DataDir) -> Iterator[DaemonProc]:
    """`clade run` on `data_dir`, stopped after the test."""
    proc = DaemonProc(data_dir)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """One daemon for a module's tests (starting one costs ~2 s); it must stop with status 0."""
    data = DataDir(tmp_path_factory.mktemp("shared") / "data")
    data.init()
    proc = DaemonProc(data)
    yield proc
    assert proc.stop() == 0


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


@pytest.fixture
def styx(tmp_path: Path) -> Iterator[StyxServer]:
    """The reference Styx server (daemon/testing/styx_server.py) on 127.0.0.1, bearer `STYX_TOKEN`."""
    server = StyxServer(tmp_path / "styx.db", token=STYX_TOKEN).start()
    yield server
    server.stop()
