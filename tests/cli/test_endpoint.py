"""`clade tui` / `clade mcp`: one way to name the daemon (daemon/cli/endpoint.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from daemon.cli.endpoint import add_endpoint_args, endpoint_from
from daemon.datadir import DataDir
from daemon.errors import UsageError


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_endpoint_args(p)
    return p.parse_args(argv)


def test_the_endpoint_the_options_name(data_dir: DataDir, tmp_path: Path) -> None:
    assert endpoint_from(parse(), data_dir).data_dir == data_dir.root
    assert endpoint_from(parse("--socket", str(tmp_path / "s")), data_dir).socket == tmp_path / "s"
    remote = endpoint_from(parse("--url", "http://127.0.0.1:7410", "--token", "t0ken"), data_dir)
    assert (remote.url, remote.token) == ("http://127.0.0.1:7410", "t0ken")
    with pytest.raises(UsageError, match="--token goes with --url"):
        endpoint_from(parse("--token", "t0ken"), data_dir)
    with pytest.raises(SystemExit):  # argparse: --socket and --url exclude each other
        parse("--socket", "s", "--url", "http://x")
