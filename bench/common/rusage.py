"""What one measured step costs in a process of its own: its RSS over time, its peak RSS and its
CPU, for benches that run each step in a child (bench_vault).

`RssSampler` samples this process's RSS on a thread; `wait_child` runs a command under a tiny
launcher interpreter and returns its wall time, exit code and wait4 rusage (see `_LAUNCHER` for
why the launcher is needed for an honest peak RSS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .report import ROOT

__all__ = ["MIB", "RssSampler", "rss_bytes", "vm_hwm_bytes", "wait_child"]

MIB = 2**20


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def vm_hwm_bytes() -> int:
    """This process's peak RSS since exec (VmHWM), a cross-check on wait4's ru_maxrss."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Samples this process's RSS every `period_s` seconds on a thread (a context manager)."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.perf_counter(), rss_bytes()))
            if self._stop.wait(self.period_s):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def profile(self, start: float, end: float) -> dict[str, float]:
        """RSS (MiB) at 10/25/50/75/90% of [start, end] and its maximum over the samples."""
        inside = [(t, r) for t, r in self.samples if start <= t <= end] or self.samples
        out: dict[str, float] = {}
        for pct in (10, 25, 50, 75, 90):
            at = start + (end - start) * pct / 100
            out[f"p{pct}_time_mib"] = round(min(inside, key=lambda s: abs(s[0] - at))[1] / MIB, 1)
        out["sampled_max_mib"] = round(max(r for _, r in inside) / MIB, 1)
        out["samples"] = len(inside)
        return out


# Linux carries the peak RSS of the pre-exec address space into ru_maxrss at exec (the parent's
# RSS at fork or posix_spawn time): spawned straight from a ~300 MiB bench, every child would
# report at least that. So a small interpreter (-I -S, a few MiB) spawns the command and reports
# its wait4 rusage; the command's ru_maxrss then covers it and any process it waits for.
_LAUNCHER = """
import json, os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], dict(os.environ))
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as fh:
    json.dump({"wall": wall, "code": os.waitstatus_to_exitcode(status), "maxrss_kib": ru.ru_maxrss,
               "utime": ru.ru_utime, "stime": ru.ru_stime}, fh)
"""


def wait_child(argv: Sequence[str], workdir: Path) -> dict[str, Any]:
    """Run argv (inheriting stderr; from the repository root) under the launcher: its wall s,
    exit code and wait4 rusage {wall, code, maxrss_kib, utime, stime}; `workdir` holds the
    launcher's answer meanwhile."""
    out = workdir / "launcher.json"
    subprocess.run([sys.executable, "-I", "-S", "-c", _LAUNCHER, str(out), *argv], check=True, cwd=ROOT)
    usage: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return usage
