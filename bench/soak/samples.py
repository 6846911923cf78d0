"""bench_soak's samples: each running daemon's RSS, threads, open fds, store size and Styx
outbox depth, every `every` s."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common.machine import db_size, fd_kinds, open_fds, tree_status_kib
from daemon.testing.harness import Golem

from .load import Load, now

__all__ = ["HEAP_KEYS", "Sampler", "proc_figures"]

HEAP_KEYS = ("heap_in_use_mib", "heap_free_mib", "heap_mmapped_mib", "sqlite_mib", "sqlite_page_cache_mib",
             "python_blocks")


def proc_figures(pid: int) -> dict[str, float]:
    """The daemon's RSS with its child processes' (`rss_mib`: the embedding model runs in one)
    and alone (`own_rss_mib`), its threads and open fds."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines() if ":" in line}
    kinds = fd_kinds(pid)  # files and pipes held apart from sockets, whose count follows connections in flight
    return {"rss_mib": tree_status_kib(pid, "VmRSS") / 1024, "own_rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
            "threads": float(fields["Threads"]), "fds": float(open_fds(pid)),
            "file_fds": float(kinds["file"] + kinds["pipe"] + kinds["anon_inode"]),
            "socket_fds": float(kinds["socket"])}


@dataclass
class Sampler:
    golems: Sequence[Golem]
    load: Load
    every: float
    samples: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    restarts: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def sample(self, t0: float) -> None:
        for golem in self.golems:
            if golem.name in self.load.down or not golem.running:
                continue
            try:
                figures = proc_figures(golem.pid)
            except (OSError, KeyError):
                continue
            figures["t_s"] = now() - t0
            figures["store_mib"] = db_size(golem.data.db_path) / 2**20
            try:
                status = golem.call("GET", "/v1/status")
                styx = status.get("styx") or {}
                figures["outbox"] = float(styx.get("queue_depth", 0) or 0)
                memory = status.get("memory") or {}
                for key in HEAP_KEYS:  # where the daemon's own memory is: in use, kept free, mapped, SQLite
                    if isinstance(memory.get(key), (int, float)):
                        figures[key] = float(memory[key])
            except (RuntimeError, httpx.HTTPError, ValueError):
                pass
            self.samples.setdefault(golem.name, []).append(figures)

    def run(self, t0: float) -> None:
        while not self.stop.wait(self.every):
            self.sample(t0)
