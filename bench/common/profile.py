"""Sampling profiles of running daemons with py-spy, and a summary that says where the CPU went:
our code (crdt, crypto, daemon) against py-libp2p, trio, the embedding model and the rest; and
the top functions of an in-process `cProfile` run (`top_functions`, bench_crdt `--profile`).

`Profiles(out_dir).record(name, pid)` starts `py-spy record --pid PID` (raw collapsed stacks,
full file names, the process's own CPU only: idle threads are not sampled); `stop()` ends every
recording (SIGINT, as py-spy expects) and returns the files. `summarize(path)` reads one file.
py-spy samples from outside the process (ptrace), so the profiled daemon runs unmodified; its
figures are taken in a separate run from the ones quoted as CPU per message.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.report import ROOT, out, progress

__all__ = ["Profiles", "Summary", "pyspy_path", "start_profiles", "stop_profiles", "summarize", "top_functions"]

SAMPLE_RATE = 200  # per second
# Where a frame's file lives -> the group it is counted in (first match wins).
GROUPS: tuple[tuple[str, str], ...] = (
    ("/crdt/", "ours: crdt"), ("/crypto/", "ours: crypto"), ("/daemon/p2p/", "ours: daemon.p2p"),
    ("/daemon/grimoire/", "ours: daemon.grimoire"), ("/daemon/", "ours: daemon (other)"),
    ("/libp2p/", "py-libp2p"), ("/multiaddr/", "py-libp2p"), ("/trio/", "trio"),
    ("/onnxruntime/", "embedding model"), ("/fastembed/", "embedding model"), ("/tokenizers/", "embedding model"),
    ("/numpy/", "numpy"), ("/lancedb/", "lancedb"), ("/pyarrow/", "lancedb"), ("/nacl/", "pynacl"),
    ("/msgpack/", "msgpack"), ("/hypercorn/", "control API"), ("/fastapi/", "control API"),
    ("/starlette/", "control API"), ("/h11/", "control API"), ("/pydantic", "control API"),
    ("/sqlite3/", "sqlite3"), ("/google/protobuf/", "protobuf"), ("/Crypto/", "pycryptodome"),
    ("/coincurve/", "py-libp2p"), ("/noise/", "py-libp2p"),
)
OURS = ("/crdt/", "/crypto/", "/daemon/")


def pyspy_path() -> str | None:
    """The py-spy binary beside this interpreter, else on PATH."""
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


def group_of(frame: str) -> str:
    for needle, group in GROUPS:
        if needle in frame:
            return group
    return "other (stdlib, …)"


def _is_ours(frame: str) -> bool:
    return any(needle in frame for needle in OURS) and "/site-packages/" not in frame


def _short(frame: str) -> str:
    """`func (/…/daemon/p2p/broadcast.py:120)` -> `func (daemon/p2p/broadcast.py)`."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    for root in ("/site-packages/", "/work/", "/tmp/"):
        if root in path:
            path = path.split(root, 1)[1]
            break
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part in ("crdt", "crypto", "daemon", "libp2p", "trio"):
            path = "/".join(parts[i:])
            break
    return f"{name} ({path})"


@dataclass
class Summary:
    """One profile: `samples` in all; `self_by_group` (the leaf frame's group: where the CPU was
    spent); `by_our_caller` (for each sample, the innermost frame of ours on its stack: which of
    our functions caused the cost, wherever it was spent); `inclusive_ours` (every function of
    ours on the stack, counted once per sample)."""

    samples: int = 0
    self_by_group: Counter[str] = field(default_factory=Counter)
    by_our_caller: Counter[str] = field(default_factory=Counter)
    inclusive_ours: Counter[str] = field(default_factory=Counter)

    def share(self, n: int) -> float:
        return n / self.samples if self.samples else 0.0

    def lines(self, top: int = 12) -> list[str]:
        out = [f"{self.samples} samples at {SAMPLE_RATE}/s"]
        out.append("  where the CPU went (leaf frame):")
        out += [f"    {self.share(n):6.1%}  {g}" for g, n in self.self_by_group.most_common()]
        out.append("  our innermost function on the stack (what caused it; '-' = no frame of ours):")
        out += [f"    {self.share(n):6.1%}  {f}" for f, n in self.by_our_caller.most_common(top)]
        out.append("  our functions, inclusive:")
        out += [f"    {self.share(n):6.1%}  {f}" for f, n in self.inclusive_ours.most_common(top)]
        return out


def summarize(path: Path) -> Summary:
    """Read a py-spy raw file (`frame;frame;… count` per line, outermost first)."""
    summary = Summary()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        summary.samples += count
        summary.self_by_group[group_of(frames[-1])] += count
        ours = [_short(f) for f in frames if _is_ours(f)]
        summary.by_our_caller[ours[-1] if ours else "-"] += count
        for f in set(ours):
            summary.inclusive_ours[f] += count
    return summary


class Profiles:
    """py-spy recordings of running processes, written under `out_dir`."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.running: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.binary = pyspy_path()

    def record(self, name: str, pid: int) -> Path | None:
        """Start sampling `pid` into `out_dir/name.txt`; None if py-spy is not installed."""
        if self.binary is None:
            return None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{name}.txt"
        proc = subprocess.Popen([self.binary, "record", "--pid", str(pid), "--format", "raw", "--full-filenames",
                                 "--rate", str(SAMPLE_RATE), "--nonblocking", "--output", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.running.append((proc, path))
        return path

    def stop(self) -> list[Path]:
        """End every recording and wait for its file; the paths that were written."""
        done = []
        for proc, path in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if path.exists():
                done.append(path)
            else:
                print(f"py-spy wrote nothing to {path}: {err.decode(errors='replace')[-300:]}", file=sys.stderr)
        self.running = []
        return done


def start_profiles(out_dir: Path | None, procs: Mapping[str, subprocess.Popen[bytes] | None]) -> Profiles | None:
    """Sample each running process (name -> process) into `out_dir`; None when `out_dir` is None
    or py-spy is missing (said once, on stderr)."""
    if out_dir is None:
        return None
    profiles = Profiles(out_dir)
    for name, proc in procs.items():
        if proc is not None and profiles.record(name, proc.pid) is None:
            progress("  --profile: py-spy is not installed (make install puts it in .venv)")
            return None
    return profiles


def stop_profiles(profiles: Profiles | None) -> dict[str, Any]:
    """End the recordings, print where each process's CPU went; the summaries for the report."""
    if profiles is None:
        return {}
    found: dict[str, Any] = {}
    for path in profiles.stop():
        summary = summarize(path)
        out(f"  profile {path.name} (py-spy; these CPU figures are not the ones in the table):")
        for line in summary.lines():
            out(f"    {line}")
        found[path.stem] = {"file": str(path), "samples": summary.samples,
                            "self_by_group": dict(summary.self_by_group.most_common()),
                            "by_our_caller": dict(summary.by_our_caller.most_common(20))}
    return found


def top_functions(prof: cProfile.Profile, n: int, by: str, skip: str = "") -> list[dict[str, Any]]:
    """The n functions with the most `by` time ("cumulative" or "self"), leaving out the file
    `skip` (the bench's own) and lambdas; file names shortened to the repository's or Python's."""
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, func), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == skip or func in ("<lambda>",) or "disable" in func:
            continue
        name = filename
        for prefix in (str(ROOT) + "/", sys.prefix + "/", sys.base_prefix + "/"):
            if name.startswith(prefix):
                name = name[len(prefix):]
        rows.append({"function": f"{name}:{line}({func})" if line else func, "calls": calls,
                     "cumulative_s": round(cumulative, 3), "self_s": round(own, 3)})
    rows.sort(key=lambda r: -r[f"{by}_s"])
    return rows[:n]
