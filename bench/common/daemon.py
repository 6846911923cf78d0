"""A `clade run` subprocess for benches that talk to one daemon, and /proc samples of it.

`Daemon` is the harness's `DaemonProcess` (daemon/testing/process.py) with its own fake systemd
`$NOTIFY_SOCKET` (daemon/testing/notify.py): `wait_ready` gives the seconds from Popen to
READY=1, `stop` how long SIGTERM took to exit.
`proc_sample` reads the daemon's CPU ticks, RSS, peak RSS, threads and context switches.
Used by bench_api and bench_recall_daemon.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.testing.notify import NotifySocket
from daemon.testing.process import CLADE, DaemonProcess

from .machine import CLK_TCK, proc_cpu_ticks, tree_status_kib
from .report import progress

__all__ = ["CLADE", "Daemon", "NotifySocket", "ProcSample", "cpu_seconds", "idle_window", "mib", "proc_sample",
           "switches_between"]


@dataclass(frozen=True)
class ProcSample:
    at: float  # time.perf_counter()
    cpu_ticks: int  # utime + stime of the process (all threads) and its child processes (proc_cpu_ticks)
    rss_kib: int  # the daemon process's own VmRSS (`tree_rss_kib`: with its embedding process)
    hwm_kib: int
    threads: int
    ctx_switches: dict[int, int]  # thread id -> voluntary + involuntary context switches
    tree_rss_kib: int = 0  # VmRSS of the daemon and its child processes (the embedding process)


def switches_between(a: ProcSample, b: ProcSample) -> int:
    """Context switches from `a` to `b` of threads alive at `b` (those that ended meanwhile are not counted)."""
    return sum(n - a.ctx_switches.get(tid, 0) for tid, n in b.ctx_switches.items())


def proc_sample(pid: int) -> ProcSample:
    at = time.perf_counter()
    ticks = proc_cpu_ticks(pid)  # with its child processes': the embedding model runs in one
    status: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    switches: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches[int(task.name)] = switches.get(int(task.name), 0) + int(line.split()[1])
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return ProcSample(at=at, cpu_ticks=ticks, rss_kib=int(status["VmRSS"].split()[0]),
                      hwm_kib=int(status["VmHWM"].split()[0]), threads=int(status["Threads"]),
                      ctx_switches=switches, tree_rss_kib=tree_status_kib(pid, "VmRSS"))


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def cpu_seconds(a: ProcSample, b: ProcSample) -> float:
    return round((b.cpu_ticks - a.cpu_ticks) / CLK_TCK, 2)


def idle_window(pid: int, seconds: float, label: str) -> dict[str, Any]:
    """Sample the daemon once a second for `seconds` while nothing talks to it."""
    progress(f"  idle window ({label}): {seconds:.0f} s")
    samples = [proc_sample(pid)]
    end = samples[0].at + seconds
    while (left := end - time.perf_counter()) > 0:
        time.sleep(min(1.0, left))
        samples.append(proc_sample(pid))
    first, last = samples[0], samples[-1]
    mid = samples[len(samples) // 2]
    wall = last.at - first.at
    rss = [s.rss_kib for s in samples]
    return {
        "seconds": round(wall, 2), "cpu_seconds": cpu_seconds(first, last),
        "cpu_pct": round((last.cpu_ticks - first.cpu_ticks) / CLK_TCK / wall * 100, 3),
        "cpu_pct_second_half": round((last.cpu_ticks - mid.cpu_ticks) / CLK_TCK / max(last.at - mid.at, 1e-9) * 100, 3),
        "cpu_tick_s": round(1 / CLK_TCK, 4),
        "ctx_switches_per_s": round(switches_between(first, last) / wall, 2),
        "rss_mib_start": mib(first.rss_kib), "rss_mib_end": mib(last.rss_kib),
        "rss_mib_min": mib(min(rss)), "rss_mib_max": mib(max(rss)), "hwm_mib": mib(last.hwm_kib),
        "threads": last.threads, "loadavg_1m_end": round(os.getloadavg()[0], 2),
    }


# -- the daemon -----------------------------------------------------------------------------------


class Daemon(DaemonProcess):
    """One `clade run` (daemon/testing/process.py) with its own fake notify socket, timed from Popen."""

    def __init__(self, data_dir: Path, notify_path: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, client_timeout=300)
        self.notify = NotifySocket(notify_path)
        self.spawn(env=env, notify=self.notify)
        self.started = self.spawned_at

    def alive(self) -> bool:
        return self.running

    def wait_ready(self, timeout: float = 120) -> float:  # type: ignore[override]
        """Seconds from Popen to READY=1; the stderr ready line is awaited too (it carries the socket)."""
        at = self.notify.first_at("READY", "1", after=self.started, timeout=timeout, alive=self.alive)
        if at is None:
            raise RuntimeError(f"no READY=1 within {timeout} s (exit code {self.proc and self.proc.poll()}): "
                               f"{self.stderr_tail()}")
        super().wait_ready(timeout=10)
        return at - self.started

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> dict[str, Any]:  # type: ignore[override]
        """SIGTERM, wait, then SIGKILL if needed; returns how long the exit took and how it went."""
        out: dict[str, Any] = {}
        try:
            if self.alive():
                sent = time.perf_counter()
                try:
                    out["exit_code"] = super().stop(sig, timeout)
                    out["sigterm_to_exit_s"] = round(time.perf_counter() - sent, 4)
                except subprocess.TimeoutExpired:
                    out["killed"] = True
                stopping = self.notify.times("STOPPING", "1")
                out["sigterm_to_stopping_s"] = round(stopping[0] - sent, 4) if stopping else None
            else:
                out["exit_code"] = super().stop()
                out["died_early"] = True
        finally:
            super().stop()
            self.notify.close()
        return out
