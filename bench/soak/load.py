"""bench_soak's load: each golem's realistic rates (writes, searches, digests), bursts and
backups, every request on a fresh client of the golem (`DaemonProcess.open_client`, a
`daemon.client.Endpoint` client) and its outcome counted in a `Tally`."""

from __future__ import annotations

import argparse
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from daemon.testing.harness import Golem
from daemon.testing.process import DaemonExited

__all__ = ["Ack", "Load", "Tally", "now"]


def now() -> float:
    return time.monotonic()


@dataclass
class Ack:
    golem: str
    entry_id: str
    kind: str
    at: float


@dataclass
class Tally:
    """Every request's outcome, and every acknowledged write."""

    outcomes: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, golem: str, route: str, res: httpx.Response | None, error: str | None = None) -> None:
        with self.lock:
            if res is None:
                kind = "timeout" if error and "timed out" in error.lower() else "unreachable"
                self.outcomes[kind] += 1
                if kind == "timeout":
                    self.timeouts.append(f"{golem} {route}: {error}"[:200])
                return
            if res.status_code < 400:
                self.outcomes["ok"] += 1
            elif res.status_code >= 500 and res.status_code not in (503, 507):
                self.outcomes["server_error"] += 1
                self.server_errors.append(f"{golem} {route}: {res.status_code} {res.text[:160]}")
            elif res.status_code in (503, 507):
                self.outcomes["refused"] += 1
                try:
                    reason = str(res.json().get("error"))
                except ValueError:
                    reason = "(no JSON body)"
                self.refusals[f"{res.status_code} {reason}"] += 1
            else:
                self.outcomes[f"client_error_{res.status_code}"] += 1


class Load:
    """A golem's realistic rates, one thread per golem plus bursts and backups."""

    def __init__(self, golems: Sequence[Golem], args: argparse.Namespace, tally: Tally) -> None:
        self.golems = list(golems)
        self.args = args
        self.tally = tally
        self.down: set[str] = set()
        self.stop = threading.Event()
        self.rng = random.Random(args.seed)
        self.serial = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def text(self, kind: str, golem: str) -> str:
        with self.lock:
            self.serial += 1
            n = self.serial
        topic = self.rng.choice(["Uniswap v3 pool", "Aave market", "Curve gauge", "GMX vault", "Balancer pool"])
        chain = self.rng.choice(["Arbitrum", "Base", "Optimism", "Ethereum", "Polygon"])
        return f"{kind} {n} from {golem}: {topic} on {chain} moved {self.rng.randint(2, 999)} bps at block {n * 7919}"

    def request(self, golem: Golem, method: str, path: str, *, timeout: float | None = None,
                **kw: Any) -> httpx.Response | None:
        if golem.name in self.down:
            return None
        try:
            with golem.open_client(timeout=timeout or self.args.request_timeout) as client:
                res = client.request(method, path, **kw)
        except httpx.TimeoutException as exc:
            self.tally.record(golem.name, path, None, f"timed out: {exc}")
            return None
        except (httpx.HTTPError, DaemonExited) as exc:  # DaemonExited: its socket is gone
            if golem.name not in self.down:
                self.tally.record(golem.name, path, None, str(exc))
            return None
        self.tally.record(golem.name, path, res)
        return res

    def write(self, golem: Golem, kind: str, content: str | None = None) -> str | None:
        res = self.request(golem, "POST", "/v1/memory",
                           json={"content": content or self.text(kind, golem.name), "memory_type": kind})
        if res is not None and res.status_code == 201:
            entry_id = str(res.json()["id"])
            with self.tally.lock:
                self.tally.acks.append(Ack(golem.name, entry_id, kind, now()))
            return entry_id
        return None

    def _golem_loop(self, golem: Golem, seed: int, writes: bool) -> None:
        rng = random.Random(seed)
        next_write = now() + rng.expovariate(self.args.writes_per_min / 60) if writes else math.inf
        next_read = now() + rng.uniform(0, self.args.read_every)
        reads = 0
        while not self.stop.is_set():
            due = min(next_write, next_read)
            if self.stop.wait(max(0.0, due - now())):
                return
            if now() >= next_write:
                self.write(golem, rng.choice(["insight", "warning", "fact", "heuristic", "warning"]))
                next_write = now() + rng.expovariate(self.args.writes_per_min / 60)
            if now() >= next_read:
                reads += 1
                query = rng.choice(["pool drained", "oracle stale", "gas spike", "liquidity moved", "bps at block"])
                if reads % 2:
                    self.request(golem, "POST", "/v1/memory/search", json={"query": query, "top_k": 5})
                else:
                    self.request(golem, "POST", "/v1/digest", json={"query": query, "budget_tokens": 600})
                next_read = now() + self.args.read_every

    def _extras_loop(self, writes: bool) -> None:
        next_burst = now() + self.args.burst_every if writes else math.inf
        next_backup = now() + self.args.backup_every / 2
        while not self.stop.is_set():
            if self.stop.wait(max(0.0, min(next_burst, next_backup) - now())):
                return
            up = [g for g in self.golems if g.name not in self.down]
            if not up:
                continue
            if now() >= next_burst:
                golem = self.rng.choice(up)
                for _ in range(50):
                    self.write(golem, "warning")
                next_burst = now() + self.args.burst_every
            if now() >= next_backup:  # it waits for the vault upload (up to max(60 s, [styx] timeout_s))
                self.request(self.rng.choice(up), "POST", "/v1/backup", timeout=90.0)
                next_backup = now() + self.args.backup_every

    def start(self, *, writes: bool = True) -> None:
        """Run the load; `writes=False`: everything but writes and bursts (searches, digests,
        backups), for a phase where the stores stop growing."""
        for i, golem in enumerate(self.golems):
            t = threading.Thread(target=self._golem_loop, args=(golem, self.args.seed * 100 + i, writes), daemon=True)
            t.start()
            self.threads.append(t)
        t = threading.Thread(target=self._extras_loop, args=(writes,), daemon=True)
        t.start()
        self.threads.append(t)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=self.args.request_timeout + 5)
