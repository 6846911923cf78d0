"""The machine a bench ran on, and what else used it meanwhile.

`machine_info` is the `machine` object of every result (see bench/common/__init__.py);
`Sections` and `HostLoad` report the CPU other processes took during a measured section
(on a shared 2-core machine that moves every figure); the `proc_*` readers sample a
process (a daemon) from /proc: its CPU with its child processes' by default (the daemon's
embedding model runs in one: daemon/embedding/remote.py), `tree_status_kib` its RSS with theirs.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from .report import out

__all__ = [
    "CLK_TCK",
    "HostLoad",
    "Sections",
    "child_pids",
    "cpu_busy_seconds",
    "cpu_model",
    "disk_info",
    "machine_info",
    "open_fds",
    "own_cpu_seconds",
    "proc_cpu_ticks",
    "proc_status_kib",
    "rss_kib",
    "tree_rollup_kib",
    "tree_status_kib",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[2]  # the repository


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def disk_info(path: Path) -> dict[str, Any]:
    """The mount holding `path` (from /proc/self/mountinfo) and what sysfs says of its device."""
    info: dict[str, Any] = {"path": str(path)}
    real = os.path.realpath(path)
    best = ""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            mount_point = left.split()[4].replace("\\040", " ")
            prefix = mount_point.rstrip("/") + "/"
            if (real == mount_point or real.startswith(prefix) or mount_point == "/") and len(mount_point) > len(best):
                best = mount_point
                fstype, source = right.split()[:2]
                info.update(mount_point=mount_point, fstype=fstype, device=source)
    except (OSError, IndexError, ValueError):
        return info
    st = os.statvfs(real)
    info["free_gib"] = round(st.f_bavail * st.f_frsize / 2**30, 1)
    device = str(info.get("device", ""))
    if device.startswith("/dev/"):
        name = Path(os.path.realpath(device)).name
        block = Path("/sys/class/block") / name
        if (block / "partition").exists():  # a partition: the disk is its parent
            block = block.resolve().parent
        for key, rel in (("rotational", "queue/rotational"), ("model", "device/model"),
                         ("scheduler", "queue/scheduler")):
            try:
                info[key] = (block / rel).read_text().strip()
            except OSError:
                continue
        if "rotational" in info:
            info["rotational"] = info["rotational"] == "1"
    return info


def _code() -> dict[str, Any]:
    """git HEAD of the code measured, and the files modified under the measured packages."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        modified = [line[3:] for line in subprocess.run(
            [*git, "status", "--porcelain", "--", "daemon", "crdt", "crypto"], capture_output=True, text=True,
            check=True).stdout.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        return {"head": None, "modified": []}
    return {"head": head, "modified": modified}


def _mem_gib() -> dict[str, float]:
    mem: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = round(int(rest.split()[0]) / 2**20, 1)
    return mem


def machine_info(workdir: Path | None = None, packages: Sequence[str] = ()) -> dict[str, Any]:
    """The `machine` object of a result: CPU, kernel, Python, SQLite, package versions, memory,
    load average at start, the code measured, and the disk holding `workdir` (if given)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    versions: dict[str, str | None] = {}
    for pkg in packages:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    info: dict[str, Any] = {
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cpus_usable": usable,
        "kernel": platform.release(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "versions": versions, "mem_gib": _mem_gib(), "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "code": _code(),
    }
    if workdir is not None:
        info["disk"] = disk_info(workdir)
    return info


# -- this process and others ------------------------------------------------------------------------


def rss_kib(field_name: str = "VmRSS", pid: int | str = "self") -> int:
    """A /proc/<pid>/status memory field (VmRSS, VmHWM, ...) in KiB; -1 if absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return -1


def proc_status_kib(pid: int, key: str) -> int:
    """A /proc/<pid>/status field in KiB; 0 if absent."""
    return max(0, rss_kib(key, pid))


def open_fds(pid: int) -> int:
    """How many files process `pid` holds open (the entries of /proc/<pid>/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """Process `pid`'s open files by kind: `socket`, `pipe`, `anon_inode`, `file` (a path)."""
    kinds = {"socket": 0, "pipe": 0, "anon_inode": 0, "file": 0}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        kind = target.split(":", 1)[0]
        kinds[kind if kind in kinds else "file"] += 1
    return kinds


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # fields[0] is stat's field 3


def child_pids(pid: int) -> list[int]:
    """Every live process below `pid` (children, theirs, ...): a daemon's embedding process."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parent[int(entry.name)] = int(_stat_fields(int(entry.name))[1])
    found, todo = [], [pid]
    while todo:
        above = todo.pop()
        kids = [c for c, pp in parent.items() if pp == above]
        found.extend(kids)
        todo.extend(kids)
    return found


def proc_cpu_ticks(pid: int, *, children: bool = True) -> int:
    """CPU time of process `pid` (all its threads), in clock ticks; with `children` (the default)
    also its child processes': live ones (the daemon's embedding process, where the model runs)
    and those it has reaped (an unloaded model's). `children=False`: the process's own."""
    fields = _stat_fields(pid)
    own = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    if not children:
        return own
    reaped = int(fields[13]) + int(fields[14])  # cutime, cstime: waited-for children (their own reaped included)
    live = 0
    for kid in child_pids(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            kid_fields = _stat_fields(kid)
            live += int(kid_fields[11]) + int(kid_fields[12])  # its reaped children are in `reaped` once it is
    return own + reaped + live


def tree_status_kib(pid: int, key: str = "VmRSS") -> int:
    """A /proc/<pid>/status field in KiB summed over `pid` and every live process below it (the
    daemon with its embedding process); 0 where absent."""
    total = proc_status_kib(pid, key)
    for kid in child_pids(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += proc_status_kib(kid, key)
    return total


def tree_rollup_kib(pid: int, key: str = "Pss") -> int:
    """A /proc/<pid>/smaps_rollup field in KiB summed over `pid` and every live process below
    it. `Pss` counts a page mapped by n processes as 1/n in each: the daemon and its embedding
    process share the interpreter's, numpy's and the C library's pages, which a sum of their
    VmRSS counts twice (pages shared with unrelated processes are divided too, so on a busy
    machine this is a little under what the pair alone would hold); 0 where absent."""
    total = 0
    for proc in (pid, *child_pids(pid)):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{proc}/smaps_rollup").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
    return total


def _busy_ticks() -> int:
    """Busy time of the whole machine (all CPUs) from /proc/stat, in clock ticks."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal


def cpu_busy_seconds() -> float:
    """All CPUs' busy time (user+nice+system+irq+softirq+steal) from /proc/stat, in seconds."""
    return _busy_ticks() / CLK_TCK


def own_cpu_seconds() -> float:
    """This process's CPU time (all threads) plus its waited-for children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class Sections:
    """Wall time, own CPU and other processes' CPU (average cores) per benchmark section."""

    log: dict[str, dict[str, float]] = field(default_factory=dict)

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Time the block as section `name`."""
        w0, b0, o0 = time.perf_counter(), cpu_busy_seconds(), own_cpu_seconds()
        try:
            yield
        finally:
            wall = time.perf_counter() - w0
            busy, own = cpu_busy_seconds() - b0, own_cpu_seconds() - o0
            self.log[name] = {"wall_s": round(wall, 1), "own_cpu_cores": round(own / max(wall, 1e-9), 2),
                              "other_cpu_cores": round(max(0.0, busy - own) / max(wall, 1e-9), 2)}


def finish(res: dict[str, Any], started: float, sections: Sections) -> dict[str, Any]:
    """Close a sectioned run's result: the sections, the load average at the end, this process's
    peak RSS, and the wall clock since `started` (a `time.perf_counter()`)."""
    res["sections"] = sections.log
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["parent_peak_rss_mib"] = round(rss_kib("VmHWM") / 1024, 1)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def _descendant_ticks() -> dict[int, int]:
    """utime+stime+cutime+cstime of every live process below this one (a bench's daemons)."""
    ticks: dict[int, int] = {}
    for pid in child_pids(os.getpid()):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat_fields(pid)
            # its own and its reaped children's (a daemon's stopped embedding process): each tick once
            ticks[pid] = sum(int(f) for f in fields[11:15])
    return ticks


class HostLoad:
    """CPU time used on this machine by anything but this benchmark and its child processes
    (daemons included, live or reaped), during a section."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.busy0 = _busy_ticks()
        self.times0 = os.times()
        self.kids0 = _descendant_ticks()

    def report(self, section: str, *, quiet: bool = False) -> dict[str, float]:
        """Seconds, this bench's CPU-s, others' CPU-s and share of the machine, 1-min load average."""
        elapsed = time.monotonic() - self.t0
        busy = (_busy_ticks() - self.busy0) / CLK_TCK
        times1 = os.times()
        kids1 = _descendant_ticks()
        reaped = (times1.children_user + times1.children_system) - (self.times0.children_user
                                                                    + self.times0.children_system)
        own = (times1.user + times1.system) - (self.times0.user + self.times0.system)
        live = sum(t - self.kids0.get(pid, 0) for pid, t in kids1.items())
        gone_before = sum(t for pid, t in self.kids0.items() if pid not in kids1)  # counted whole in `reaped`
        bench = own + reaped + (live - gone_before) / CLK_TCK
        other = max(0.0, busy - bench)
        cores = len(os.sched_getaffinity(0))
        res = {"seconds": round(elapsed, 1), "bench_cpu_s": round(bench, 1), "other_cpu_s": round(other, 1),
               "other_share_of_machine": round(other / (elapsed * cores), 3) if elapsed else 0.0,
               "loadavg_1m": float(Path("/proc/loadavg").read_text().split()[0])}
        if not quiet:
            out(f"  [host] {section}: {elapsed:.0f} s; this benchmark and its daemons used {bench:.1f} CPU-s, "
                f"everything else {other:.1f} CPU-s ({res['other_share_of_machine']:.0%} of the {cores} cores); "
                f"load average {res['loadavg_1m']:.2f}")
        return res


# -- files ------------------------------------------------------------------------------------------


def dir_size(path: Path) -> int:
    """Bytes of a file, or of every file below a directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def db_size(path: Path) -> int:
    """A SQLite database file plus its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())
