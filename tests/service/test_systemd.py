"""The systemd unit verifies, scores ≤ 2.0 on `systemd-analyze security`, and its
MemoryDenyWriteExecute=yes holds for everything the daemon loads (checked with the
kernel's PR_SET_MDWE, the same W^X rule, in a subprocess)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "clade.service"

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None and "CI" not in __import__("os").environ,
                                   reason="systemd-analyze not installed (.ci/run installs it)")


@needs_analyze
def test_unit_verifies(tmp_path: Path) -> None:
    # Point ExecStart at this checkout's console script so the command check is real.
    unit = tmp_path / "clade.service"
    clade = Path(sys.executable).with_name("clade")
    unit.write_text(UNIT.read_text().replace("/opt/clade/venv/bin/clade", str(clade)))
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "clade.service" not in proc.stderr, proc.stderr  # no warnings about our unit


@needs_analyze
def test_security_exposure_is_at_most_2() -> None:
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(UNIT)], capture_output=True,
                          text=True, check=False)
    found = re.search(r"Overall exposure level for clade.service: ([0-9.]+) (\w+)", proc.stdout)
    assert found, proc.stdout[-500:] + proc.stderr
    assert float(found.group(1)) <= 2.0 and found.group(2) == "OK"


def test_unit_has_the_required_settings() -> None:
    text = UNIT.read_text()
    for setting in ("Type=notify", "NotifyAccess=main", "WatchdogSec=30", "Restart=on-failure", "User=clade",
                    "Group=clade", "StateDirectory=clade", "RuntimeDirectory=clade", "ConfigurationDirectory=clade",
                    "Environment=CLADE_DATA_DIR=/var/lib/clade", "ExecReload=/bin/kill -HUP $MAINPID",
                    "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                    "PrivateDevices=yes", "ProtectKernelTunables=yes", "ProtectKernelModules=yes",
                    "ProtectControlGroups=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                    "RestrictNamespaces=yes", "LockPersonality=yes", "MemoryDenyWriteExecute=yes",
                    "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n", "UMask=0077", "MemoryMax="):
        assert setting in text, setting
    # @resources is refused, then setpriority alone let back in (lowering a thread's own priority: the
    # background embedder's nice +10); the order matters, a later line amends the earlier ones
    filters = [line for line in text.splitlines() if line.startswith("SystemCallFilter=")]
    assert filters == ["SystemCallFilter=@system-service", "SystemCallFilter=~@privileged @resources",
                       "SystemCallFilter=setpriority"], filters


MDWE_PROBE = """
import ctypes, mmap, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
    print("unsupported"); sys.exit(0)
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    print("not enforced"); sys.exit(1)
except OSError:
    pass
from pathlib import Path
from daemon.embedding.embedder import get_embedder
import libp2p, lancedb, nacl.signing, zstandard, fastapi, hypercorn.trio, trio
from daemon.embedding.embedder import DIM
assert get_embedder(Path(sys.argv[1])).embed(["gas on arbitrum"]).shape == (1, DIM)
# The daemon runs the model in a child process: PR_SET_MDWE is inherited across fork and exec, as
# the unit's seccomp filter is, so the embedding process runs under the same rule.
from daemon.embedding.remote import ModelHost
host = ModelHost(Path(sys.argv[1]))
try:
    assert host.embedder("sentence-transformers/all-MiniLM-L6-v2").embed(["gas on arbitrum"]).shape == (1, DIM)
finally:
    host.stop()
print("ok")
"""


def test_memory_deny_write_execute_holds_for_the_daemons_libraries(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", MDWE_PROBE, str(tmp_path / "embedder")], capture_output=True,
                          text=True, cwd=REPO, timeout=300, check=False)
    if proc.stdout.strip() == "unsupported":
        pytest.skip("this kernel has no PR_SET_MDWE (Linux < 6.3)")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
