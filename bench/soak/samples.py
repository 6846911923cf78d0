"""bench_soak's samples: each running daemon's RSS, threads, open fds, store size and Styx
outbox depth, every `every` s."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common.machine import db_size, fd_kinds, open_fds, tree_status_kib
from bench.common.stats import least_squares_slope, quarter_medians, slope_per_hour
from daemon.testing.harness import Golem

from .load import Load, now

__all__ = ["HEAP_KEYS", "Sampler", "proc_figures", "resources"]

HEAP_KEYS = ("heap_in_use_mib", "heap_free_mib", "heap_mmapped_mib", "sqlite_mib", "sqlite_page_cache_mib",
             "python_blocks")


def proc_figures(pid: int) -> dict[str, float]:
    """The daemon's RSS with its child processes' (`rss_mib`: the embedding model runs in one)
    and alone (`own_rss_mib`; of it, anonymous memory `own_anon_mib` — heap, arenas, Python's
    objects, the vector index — and mapped files `own_file_mib` — libraries, models), its
    threads and open fds."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines() if ":" in line}
    kinds = fd_kinds(pid)  # files and pipes held apart from sockets, whose count follows connections in flight
    return {"rss_mib": tree_status_kib(pid, "VmRSS") / 1024, "own_rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
            "own_anon_mib": _kib(fields.get("RssAnon")) / 1024, "own_file_mib": _kib(fields.get("RssFile")) / 1024,
            "threads": float(fields["Threads"]), "fds": float(open_fds(pid)),
            "file_fds": float(kinds["file"] + kinds["pipe"] + kinds["anon_inode"]),
            "socket_fds": float(kinds["socket"])}


def _kib(field: str | None) -> float:
    """A /proc status size ("123 kB") in KiB; 0 where the kernel does not report it."""
    return float(field.split()[0]) if field else 0.0


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
                if isinstance(status.get("entries"), int):  # stored: live and archived (the index holds both)
                    figures["entries"] = float(status["entries"] + int(status.get("archived") or 0))
                memory = status.get("memory") or {}
                for key in HEAP_KEYS:  # where the daemon's own memory is: in use, kept free, mapped, SQLite
                    if isinstance(memory.get(key), (int, float)):
                        figures[key] = float(memory[key])
                # Connections to siblings, and siblings with more than one (a simultaneous dial's):
                # what the socket count should follow.
                peers = golem.call("GET", "/v1/peers").get("peers") or []
                counts = [int(p.get("connections") or 0) for p in peers if isinstance(p, dict)]
                figures["connections"] = float(sum(counts))
                figures["doubled_peers"] = float(sum(1 for c in counts if c > 1))
            except (RuntimeError, httpx.HTTPError, ValueError):
                pass
            self.samples.setdefault(golem.name, []).append(figures)

    def run(self, t0: float) -> None:
        while not self.stop.wait(self.every):
            self.sample(t0)


def resources(sampler: Sampler, *, warmup: float, settle: float, start: float = 0.0,
              until: float | None = None) -> dict[str, Any]:
    """Per daemon: first and last samples, and the slope per hour after the warm-up (`warmup` s
    from the start, or `settle` s after the daemon's last restart: a restarted daemon warms up
    again), so growth is told from warm-up. And the daemon's own RSS against the entries it
    stores after the warm-up (`own_rss_kib_per_entry`, least squares; its vector index alone
    is 1.5 KiB an entry): what a store that grows costs, told from growth with time. `start`,
    `until`: only the samples taken between them (s from the run's start; first and last are
    theirs)."""
    out: dict[str, Any] = {}
    for name, every in sampler.samples.items():
        rows = [r for r in every if r["t_s"] >= start and (until is None or r["t_s"] <= until)]
        if not rows:
            continue
        restarted = sampler.restarts.get(name)
        since = max(warmup, 0.0 if restarted is None else restarted + settle)
        late = [r for r in rows if r["t_s"] >= since]
        first, last = rows[0], rows[-1]
        out[name] = {
            "samples": len(rows),
            **{f"{k}_first_last": [round(first.get(k, 0), 1), round(last.get(k, 0), 1)]
               for k in ("rss_mib", "own_rss_mib", "own_anon_mib", "own_file_mib", "fds", "file_fds", "socket_fds",
                         "threads", "store_mib", "outbox", *HEAP_KEYS)},
            **{f"{k}_slope_pct_per_h": slope_per_hour([(r["t_s"], r[k]) for r in late if k in r])
               for k in ("rss_mib", "own_rss_mib", "own_anon_mib", "own_file_mib", "fds", "file_fds", "socket_fds",
                         "threads", *HEAP_KEYS)},
            # The later half of the window alone: a growth that slows there is a cache filling
            # to its bound (SQLite's pages), one that holds is steady.
            **{f"{k}_slope_pct_per_h_later_half": slope_per_hour(
                [(r["t_s"], r[k]) for r in late if k in r and r["t_s"] >= (since + rows[-1]["t_s"]) / 2])
               for k in ("rss_mib", "own_rss_mib")},
            "max_outbox": max((r.get("outbox", 0) for r in rows), default=0),
            "entries_first_last": [int(first.get("entries", 0)), int(last.get("entries", 0))],
        }
        # Sockets are connections: they follow the neighbourhood and whichever API clients are
        # connected at the sample (a burst's dozens), so a least-squares line through them reads
        # spikes as growth. Their median in each quarter of the window rises only if they leak.
        medians = quarter_medians([(r["t_s"], r["socket_fds"]) for r in late if "socket_fds" in r])
        out[name]["socket_fds_quarter_medians"] = [m for _, m in medians]
        out[name]["socket_fds_median_slope_pct_per_h"] = slope_per_hour(medians)
        per_entry = least_squares_slope([(r["entries"], r["own_rss_mib"]) for r in late if "entries" in r])
        per_hour = least_squares_slope([(r["t_s"] / 3600, r["entries"]) for r in late if "entries" in r])
        out[name]["own_rss_kib_per_entry"] = None if per_entry is None else round(per_entry * 1024, 2)
        out[name]["entries_per_h"] = None if per_hour is None else round(per_hour)
    return out
