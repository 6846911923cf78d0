"""A `clade run` subprocess for benches that talk to one daemon, and /proc samples of it.

`Daemon` starts `clade --data-dir D run` with its own fake systemd `$NOTIFY_SOCKET`
(`NotifyListener`), collects stderr, waits for READY=1 and the ready line (which names the
control socket), hands out `httpx` clients over that unix socket, and stops it with SIGTERM.
`proc_sample` reads the daemon's CPU ticks, RSS, peak RSS, threads and context switches.
Used by bench_api and bench_recall_daemon.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .machine import CLK_TCK
from .report import progress

__all__ = ["CLADE", "Daemon", "NotifyListener", "ProcSample", "cpu_seconds", "idle_window", "mib", "proc_sample",
           "switches_between"]

CLADE = str(Path(sys.executable).with_name("clade"))



@dataclass(frozen=True)
class ProcSample:
    at: float  # time.perf_counter()
    cpu_ticks: int  # utime + stime of the whole process (all threads)
    rss_kib: int
    hwm_kib: int
    threads: int
    ctx_switches: dict[int, int]  # thread id -> voluntary + involuntary context switches


def switches_between(a: ProcSample, b: ProcSample) -> int:
    """Context switches from `a` to `b` of threads alive at `b` (those that ended meanwhile are not counted)."""
    return sum(n - a.ctx_switches.get(tid, 0) for tid, n in b.ctx_switches.items())


def proc_sample(pid: int) -> ProcSample:
    at = time.perf_counter()
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is the state
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
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
                      ctx_switches=switches)


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


class NotifyListener:
    """A fake systemd `$NOTIFY_SOCKET`: collects (perf_counter time, fields) of every datagram."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            at = time.perf_counter()
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self._cond:
                self.messages.append((at, fields))
                self._cond.notify_all()

    def wait_for(self, key: str, value: str, *, after: float, timeout: float,
                 alive: Callable[[], bool]) -> float | None:
        """The time of the first `key=value` datagram received after `after`, or None."""
        deadline = time.perf_counter() + timeout
        with self._cond:
            while True:
                for at, fields in self.messages:
                    if at >= after and fields.get(key) == value:
                        return at
                left = deadline - time.perf_counter()
                if left <= 0 or not alive():
                    return None
                self._cond.wait(min(left, 0.2))

    def times(self, key: str, value: str) -> list[float]:
        with self._cond:
            return [at for at, fields in self.messages if fields.get(key) == value]

    def close(self) -> None:
        self._closed = True
        self._thread.join(timeout=2)
        self.sock.close()
        self.path.unlink(missing_ok=True)


class Daemon:
    """One `clade run` subprocess with its own fake notify socket; stderr collected as it comes."""

    def __init__(self, data_dir: Path, notify_path: Path, env: dict[str, str] | None = None) -> None:
        self.notify = NotifyListener(notify_path)
        self.stderr_lines: list[str] = []
        self.ready_line_at: float | None = None
        self.ready: dict[str, Any] = {}
        full_env = {**os.environ, "NOTIFY_SOCKET": str(notify_path), **(env or {})}
        for key in ("WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "RUNTIME_DIRECTORY"):
            if env is None or key not in env:
                full_env.pop(key, None)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([CLADE, "--data-dir", str(data_dir), "run"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=full_env)
        self._pump = threading.Thread(target=self._read_stderr, daemon=True)
        self._pump.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.stderr_lines.append(line)
            if self.ready_line_at is None and '"event": "ready"' in line:
                self.ready = json.loads(line)
                self.ready_line_at = time.perf_counter()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 120) -> float:
        """Seconds from Popen to READY=1; the stderr ready line is awaited too (it carries the socket)."""
        at = self.notify.wait_for("READY", "1", after=self.started, timeout=timeout, alive=self.alive)
        if at is None:
            raise RuntimeError(f"no READY=1 within {timeout} s (exit code {self.proc.poll()}): "
                               f"{self.stderr_lines[-20:]}")
        deadline = time.perf_counter() + 10
        while self.ready_line_at is None and time.perf_counter() < deadline and self.alive():
            time.sleep(0.005)
        if not self.ready:
            raise RuntimeError(f"READY=1 came but no ready line on stderr: {self.stderr_lines[-20:]}")
        if self.ready.get("pid") != self.proc.pid:
            raise RuntimeError(f"ready line names pid {self.ready.get('pid')}, the child is {self.proc.pid}")
        return at - self.started

    @property
    def socket(self) -> str:
        return str(self.ready["socket"])

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=self.socket), base_url="http://clade", timeout=300)

    def stop(self, timeout: float = 30) -> dict[str, Any]:
        """SIGTERM, wait, then SIGKILL if needed; returns how long the exit took and how it went."""
        out: dict[str, Any] = {}
        try:
            if self.alive():
                sent = time.perf_counter()
                self.proc.send_signal(signal.SIGTERM)
                try:
                    out["exit_code"] = self.proc.wait(timeout=timeout)
                    out["sigterm_to_exit_s"] = round(time.perf_counter() - sent, 4)
                except subprocess.TimeoutExpired:
                    out["killed"] = True
                stopping = self.notify.times("STOPPING", "1")
                out["sigterm_to_stopping_s"] = round(stopping[0] - sent, 4) if stopping else None
            else:
                out["exit_code"] = self.proc.returncode
                out["died_early"] = True
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._pump.join(timeout=5)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.notify.close()
        return out

    def log_problems(self) -> list[str]:
        """Stderr lines at level error/critical, or tracebacks."""
        bad = []
        for line in self.stderr_lines:
            try:
                level = json.loads(line).get("level", "")
            except (ValueError, AttributeError):
                level = "error" if "Traceback" in line else ""
            if level in ("error", "critical"):
                bad.append(line[:400])
        return bad
