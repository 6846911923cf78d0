"""bench_strangers' view of A during a phase: its RSS and open fds every second, and the size of
its peer book (strangers in it, strangers listed as members) every other sample."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from bench.common.clade import Api
from bench.common.machine import open_fds, proc_status_kib
from daemon.testing.harness import Golem

__all__ = ["Sampler"]


class Sampler:
    """A's RSS and open fds every `every` s, and the size of its peer book every other sample."""

    def __init__(self, a: Golem, api: Api, every: float = 1.0) -> None:
        assert a.proc is not None
        self.pid = a.proc.pid
        self.api = api
        self.every = every
        self.rss_kib: list[int] = []
        self.fds: list[int] = []
        self.peers: list[int] = []
        self.strangers: list[int] = []
        self.stranger_members: set[str] = set()
        self.member_ids: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, members: set[str]) -> Sampler:
        self.member_ids = members
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self.rss_kib.append(proc_status_kib(self.pid, "VmRSS"))
                self.fds.append(open_fds(self.pid))
                if i % 2 == 0:
                    self.note_peers(self.api.call("GET", "/v1/peers")["peers"])
            i += 1
            self._stop.wait(self.every)

    def note_peers(self, peers: list[dict[str, Any]]) -> None:
        self.peers.append(len(peers))
        self.strangers.append(sum(1 for p in peers if not p["member"] and p["peer_id"] not in self.member_ids))
        self.stranger_members.update(p["peer_id"] for p in peers if p["member"] and p["peer_id"] not in self.member_ids)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(10)
        self.api.close()
        return {"rss_mib_max": round(max(self.rss_kib, default=0) / 1024, 1),
                "fds_max": max(self.fds, default=0), "fds_min": min(self.fds, default=0),
                "peers_max": max(self.peers, default=0), "strangers_in_book_max": max(self.strangers, default=0),
                "samples": len(self.rss_kib)}
