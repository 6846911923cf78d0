"""Request drivers against one daemon (`bench.common.daemon.Daemon`): the same body list sent
by one client in turn (`run_sequential`) or by C concurrent asyncio clients sharing one pool
(`run_concurrent`), each timed per request, with the client's and the daemon's CPU and the
daemon's RSS around the run (`RunResult`); and `StatusProbe`, a `GET /v1/status` loop on its own
connection that shows how long other requests make it wait. The clients are
`daemon.client.Endpoint`'s. Used by bench_api."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from daemon.client import Endpoint

from .daemon import Daemon, cpu_seconds, mib, proc_sample
from .report import progress
from .stats import latency_summary

__all__ = ["REPORT_EVERY", "RunResult", "StatusProbe", "run_concurrent", "run_sequential"]

REPORT_EVERY = 500  # a progress line every this many requests


@dataclass
class RunResult:
    latencies_ns: list[int]
    wall_s: float
    statuses: Counter[int]
    client_cpu_s: float
    daemon_cpu_s: float
    rss_mib_before: float
    rss_mib_after: float
    results: list[int] = field(default_factory=list)  # search hits per request
    bad: list[str] = field(default_factory=list)  # first few unexpected responses

    def summary(self, expected: int) -> dict[str, Any]:
        n = len(self.latencies_ns)
        return {
            "requests": n, "wall_s": round(self.wall_s, 3), "req_per_s": round(n / self.wall_s, 1),
            "latency": latency_summary(self.latencies_ns),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "unexpected": n - self.statuses.get(expected, 0), "unexpected_samples": self.bad,
            "client_cpu_s": round(self.client_cpu_s, 2), "daemon_cpu_s": round(self.daemon_cpu_s, 2),
            "daemon_cpu_ms_per_req": round(self.daemon_cpu_s * 1000 / n, 3),
            "rss_mib_before": self.rss_mib_before, "rss_mib_after": self.rss_mib_after,
            "loadavg_1m_end": round(os.getloadavg()[0], 2),
            **({"mean_results": round(sum(self.results) / len(self.results), 2)} if self.results else {}),
        }


def _note(result: RunResult, response: httpx.Response, expected: int) -> None:
    result.statuses[response.status_code] += 1
    if response.status_code != expected and len(result.bad) < 5:
        result.bad.append(f"{response.status_code}: {response.text[:300]}")
    if response.status_code == 200 and response.request.url.path.endswith("/search"):
        result.results.append(len(response.json()["results"]))


def run_sequential(daemon: Daemon, path: str, bodies: Sequence[dict[str, Any]], expected: int,
                   label: str) -> RunResult:
    progress(f"  {label}: {len(bodies):,} requests, one client")
    before = proc_sample(daemon.pid)
    result = RunResult([], 0.0, Counter(), 0.0, 0.0, mib(before.rss_kib), 0.0)
    clock = time.perf_counter_ns
    cpu0 = time.process_time()
    with daemon.open_client() as client:
        started = clock()
        for i, body in enumerate(bodies, 1):
            t0 = clock()
            response = client.post(path, json=body)
            result.latencies_ns.append(clock() - t0)
            _note(result, response, expected)
            if i % REPORT_EVERY == 0:
                progress(f"    {i:,}/{len(bodies):,} ({(clock() - started) / 1e9:.1f}s)")
        result.wall_s = (clock() - started) / 1e9
    result.client_cpu_s = time.process_time() - cpu0
    after = proc_sample(daemon.pid)
    result.daemon_cpu_s, result.rss_mib_after = cpu_seconds(before, after), mib(after.rss_kib)
    return result


async def _concurrent(sock: str, path: str, bodies: Sequence[dict[str, Any]], expected: int, concurrency: int,
                      result: RunResult) -> None:
    clock = time.perf_counter_ns
    result.latencies_ns = [0] * len(bodies)
    jobs: Iterator[tuple[int, dict[str, Any]]] = enumerate(bodies)
    done = 0
    async with Endpoint(socket=Path(sock)).async_http_client(timeout_s=300, connections=concurrency) as client:
        started = clock()

        async def worker() -> None:
            nonlocal done
            for i, body in jobs:  # one shared iterator: each request is taken by one worker
                t0 = clock()
                response = await client.post(path, json=body)
                result.latencies_ns[i] = clock() - t0
                _note(result, response, expected)
                done += 1
                if done % REPORT_EVERY == 0:
                    progress(f"    {done:,}/{len(bodies):,} ({(clock() - started) / 1e9:.1f}s)")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.wall_s = (clock() - started) / 1e9


def run_concurrent(daemon: Daemon, path: str, bodies: Sequence[dict[str, Any]], expected: int, concurrency: int,
                   label: str) -> RunResult:
    progress(f"  {label}: {len(bodies):,} requests, {concurrency} concurrent clients (asyncio)")
    before = proc_sample(daemon.pid)
    result = RunResult([], 0.0, Counter(), 0.0, 0.0, mib(before.rss_kib), 0.0)
    cpu0 = time.process_time()
    asyncio.run(_concurrent(daemon.socket, path, bodies, expected, concurrency, result))
    result.client_cpu_s = time.process_time() - cpu0
    after = proc_sample(daemon.pid)
    result.daemon_cpu_s, result.rss_mib_after = cpu_seconds(before, after), mib(after.rss_kib)
    return result


class StatusProbe:
    """`GET /v1/status` in a loop on its own connection, to see how long other requests wait."""

    def __init__(self, daemon: Daemon, period: float = 0.2) -> None:
        self.daemon = daemon
        self.period = period
        self.latencies_ns: list[int] = []
        self.statuses: Counter[int] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> StatusProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=600)

    def _loop(self) -> None:
        with self.daemon.open_client() as client:
            while not self._stop.is_set():
                t0 = time.perf_counter_ns()
                try:
                    status = client.get("/v1/status").status_code
                except httpx.HTTPError:
                    status = -1
                self.latencies_ns.append(time.perf_counter_ns() - t0)
                self.statuses[status] += 1
                self._stop.wait(self.period)
