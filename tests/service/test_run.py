"""`clade run` (foreground placeholder until the daemon issue): ready line, clean stop."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.datadir import DataDir


@pytest.mark.xdist_group("default-p2p-port")  # `clade run` as shipped: tcp/4001 and mDNS, one at a time
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_reports_ready_and_stops_on_signal(data_dir: DataDir, signum: signal.Signals) -> None:
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("clade")), "--data-dir", str(data_dir.root), "--json", "run"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        ready = json.loads(proc.stderr.readline())  # blocks until the daemon says it is ready
        assert ready["event"] == "ready"
        assert ready["peer_id"] == data_dir.load_identity().peer_id
        assert json.loads(data_dir.run_path.read_text())["pid"] == proc.pid
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    assert json.loads(out)["stopped_by"] == signum.name
    assert not data_dir.run_path.exists()


def test_run_refuses_unsafe_identity(data_dir: DataDir) -> None:
    data_dir.identity_path.chmod(0o644)
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("clade")), "--data-dir", str(data_dir.root), "run"],
        capture_output=True, timeout=30, check=False,
    )
    assert proc.returncode == 1
    assert b"chmod 600" in proc.stderr
