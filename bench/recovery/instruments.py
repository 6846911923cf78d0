"""bench_recovery's instruments: the open-loop writer and the clade's event record.

`Writer` writes warnings at a fixed offered rate, round-robin on the golems marked up, each
request on a kept `daemon.client.DaemonClient` of this thread for that run of the golem (a
restart makes a new one); `Events` follows every daemon run's event stream and stderr and says
when each id first showed on each golem.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.clade import content
from daemon.client import ApiError, DaemonClient
from daemon.testing.harness import EventLog, Golem

__all__ = ["LOG_PROBLEMS", "Ack", "Events", "Writer", "ids_on", "now_ms"]

LOG_PROBLEMS = ("Traceback", "internal error")


def now_ms() -> float:
    return time.time() * 1000


def ids_on(golem: Golem) -> set[str]:
    entries = golem.call("GET", "/v1/entries", params={"limit": 10_000, "archived": "true"})["entries"]
    return {str(e["id"]) for e in entries}


@dataclass
class Ack:
    entry_id: str
    golem: str
    sent_ms: float
    acked_ms: float


@dataclass
class Writer:
    """Open-loop warnings at `rate`/s for `seconds`, round-robin on the golems marked up."""

    golems: dict[str, Golem]
    rate: float
    seconds: float
    seed: int
    acked: list[Ack] = field(default_factory=list)
    failed: list[tuple[float, str, str]] = field(default_factory=list)  # (t s, golem, error)
    offered: int = 0
    worst_lag_ms: float = 0.0
    up: set[str] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)
    t0: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _local: threading.local = field(default_factory=threading.local)
    _clients: list[DaemonClient] = field(default_factory=list)

    def set_up(self, name: str, up: bool) -> None:
        with self._lock:
            (self.up.add if up else self.up.discard)(name)

    def start(self, t0: float) -> threading.Thread:
        self.t0 = t0
        self.up = set(self.golems)
        thread = threading.Thread(target=self._run, daemon=True, name="writer")
        thread.start()
        return thread

    def _client(self, golem: Golem) -> DaemonClient:
        """This thread's kept client for this run of `golem` (a restart makes a new one)."""
        clients: dict[str, tuple[str, int, DaemonClient]] = self._local.__dict__.setdefault("clients", {})
        pid = golem.proc.pid if golem.proc is not None else -1
        have = clients.get(golem.name)
        if have is not None and have[:2] == (golem.socket, pid):
            return have[2]
        if have is not None:
            have[2].close()
        client = DaemonClient(Path(golem.socket), timeout_s=30).__enter__()
        clients[golem.name] = (golem.socket, pid, client)
        with self._lock:
            self._clients.append(client)
        return client

    def _write(self, i: int, name: str) -> None:
        golem = self.golems[name]
        sent = now_ms()
        try:
            text = content(random.Random(f"{self.seed}-{i}"), "recovery", i)
            made = self._client(golem).call("POST", "/v1/memory", body={"content": text, "memory_type": "warning"})
            entry_id = str(made["id"])
        except (ApiError, OSError, ValueError, KeyError) as exc:
            with self._lock:
                self.failed.append((round(time.monotonic() - self.t0, 2), name, f"{type(exc).__name__}: {exc}"[:200]))
            return
        ack = Ack(entry_id, name, sent, now_ms())
        with self._lock:
            self.acked.append(ack)

    def _run(self) -> None:
        with ThreadPoolExecutor(8) as pool:
            i = 0
            while True:
                due = self.t0 + i / self.rate
                if due - self.t0 >= self.seconds:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    self.worst_lag_ms = max(self.worst_lag_ms, -wait * 1000)
                with self._lock:
                    up = [n for n in self.golems if n in self.up]
                if up:
                    pool.submit(self._write, i, up[i % len(up)])
                    self.offered += 1
                i += 1
        self.done.set()  # every request has returned (the pool's shutdown waited for them)

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()


@dataclass
class Events:
    """Each daemon run's event stream (B gets a new one per restart), its stderr lines, and when
    each id first showed on each golem: the `committed_ms` of its `entries_received`, the writer's
    acknowledgement, or (upper bound) the moment a new stream connected and the id was already
    there (a restarted B may pull before its stream is up)."""

    streams: list[tuple[str, int, EventLog]] = field(default_factory=list)  # (golem, run, log)
    stderr: list[tuple[str, int, list[str]]] = field(default_factory=list)
    seen_at_connect: dict[tuple[str, str], float] = field(default_factory=dict)  # (golem, id) -> wall ms

    def follow(self, golem: Golem, run: int) -> None:
        self.streams.append((golem.name, run, EventLog(golem.socket).start()))
        self.stderr.append((golem.name, run, golem.stderr_lines))  # the list the harness appends to
        at = now_ms()
        for entry_id in ids_on(golem):
            self.seen_at_connect.setdefault((golem.name, entry_id), at)

    def all(self) -> list[tuple[float, str, int, str, dict[str, Any]]]:
        """(wall ms, golem, run, event, data), in time order."""
        rows = [(at, name, run, event, data) for name, run, log in self.streams for at, event, data in list(log.events)]
        return sorted(rows, key=lambda r: r[0])

    def arrivals(self, acked: list[Ack]) -> tuple[dict[tuple[str, str], tuple[float, str]], int]:
        """(golem, id) -> (wall ms it was first there, how: "gossip", "sync", "own" or "before the
        stream"); and how many events listed fewer ids than entries (the daemon caps `ids` at 100)."""
        first = {key: (at, "before the stream") for key, at in self.seen_at_connect.items()}
        truncated = 0

        def note(key: tuple[str, str], at: float, via: str) -> None:
            if key not in first or at < first[key][0]:
                first[key] = (at, via)

        for a in acked:
            note((a.golem, a.entry_id), a.acked_ms, "own")
        for _, name, _, event, data in self.all():
            if event != "entries_received":
                continue
            truncated += int(data.get("entries", 0)) > len(data.get("ids", ()))
            for entry_id in data.get("ids", ()):
                note((name, str(entry_id)), float(data["committed_ms"]), str(data.get("via")))
        return first, truncated

    def problems(self) -> list[str]:
        return [f"{name} (run {run}): {line[:300]}" for name, run, lines in self.stderr for line in list(lines)
                if any(p in line for p in LOG_PROBLEMS)]

    def close(self) -> None:
        for _, _, log in self.streams:
            log.close()
