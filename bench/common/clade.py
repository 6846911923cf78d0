"""A clade of real daemons driven from threads: the multi-daemon benches' harness.

bench_clade, bench_strangers and bench_recovery start their golems with
`daemon.testing.harness.LoopbackClade` and drive them with what is here:

- `Api`: kept control-API clients for one golem (`daemon.client.DaemonClient`, one per thread);
- `content`: a seeded warning's words; `paced`: open-loop sends at a fixed offered rate;
- `Watch`: deliveries (`entries_received`, `probe_received`) from the siblings' event streams;
- `wait_embedded`: until every daemon's embedder has caught up; `DaemonCpu`: the daemons' CPU
  over a section; `odd_counters` / `report_odd`: counters that signal trouble;
- `start_clade`: `start_all`, saying who lacks whom when it times out.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.client import ApiError, DaemonClient
from daemon.testing.harness import EventLog, Golem, LoopbackClade

from .machine import CLK_TCK, proc_cpu_ticks
from .report import out

__all__ = ["WORDS", "Api", "DaemonCpu", "Watch", "content", "odd_counters", "paced", "report_odd",
           "start_clade", "wait_embedded", "writes_by_day_count"]

WORDS = (
    "gas", "spike", "slippage", "oracle", "lag", "depeg", "liquidation", "cascade", "bridge", "delay", "mev",
    "sandwich", "frontrun", "reorg", "funding", "flip", "basis", "blowout", "pool", "drain", "stale", "price",
    "withdrawal", "queue", "rate", "kink", "utilization", "cap", "governance", "vote", "timelock", "exploit", "rug",
    "vault", "pause", "keeper", "outage", "sequencer", "halt", "peg", "drift", "rebase", "eth", "usdc", "usdt",
    "dai", "wbtc", "steth", "arb", "op", "base", "curve", "aave", "uniswap", "compound", "maker", "lido",
    "balancer", "gmx",
)


def content(rng: random.Random, tag: str, i: int) -> str:
    """A seeded warning text, `tag` and `i` in front so each is unique and says where it came from."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24)))
    return f"[{tag} #{i}] {words}: hedge before {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} UTC"


def paced(count: int, rate: float, send: Callable[[int], None], workers: int = 8) -> dict[str, float]:
    """Open loop: submit `send(i)` to a pool of `workers` threads at t0 + i/rate, whether or not
    earlier calls have returned (the offered rate holds while the daemon is slower than it)."""
    t0 = time.monotonic()
    worst_lag = 0.0
    with ThreadPoolExecutor(workers) as pool:
        futures = []
        for i in range(count):
            due = t0 + i / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            else:
                worst_lag = max(worst_lag, now - due)
            futures.append(pool.submit(send, i))
        offered = time.monotonic() - t0
        for f in futures:
            f.result()
    elapsed = time.monotonic() - t0
    return {"seconds": round(elapsed, 2), "offered_per_s": round(count / offered, 1) if offered else 0.0,
            "achieved_per_s": round(count / elapsed, 1) if elapsed else 0.0,
            "worst_lag_ms": round(worst_lag * 1000, 1)}


def writes_by_day_count(t0: float, finished: Sequence[float], window: int = 100) -> dict[str, float] | None:
    """Writes/s of the first `window` completions (from `t0`) and of the last `window`, and
    last/first: whether warning writes slow down as the day's count grows (None if too few)."""
    if len(finished) < 2 * window:
        return None
    done = sorted(finished)
    first = window / (done[window - 1] - t0)
    last = (window - 1) / (done[-1] - done[-window]) if done[-1] > done[-window] else float("inf")
    return {"first_100": round(first, 1), "last_100": round(last, 1), "ratio": round(last / first, 2)}


def wait_embedded(golems: Sequence[Golem], timeout: float) -> tuple[float, bool]:
    """Until every daemon's embedder has caught up (counters entries_embedded + gossip_vectors_used
    >= its entries, which holds for daemons that wrote or received every entry in this run: a
    warning embedded on its write path, for the repeat check, and a sibling's vector shipped with
    its entry count too) and has checked every shipped vector it drew (status
    `vector_checks_pending` 0, so the checks' CPU is in the figures); (seconds, drained)."""
    t0 = time.monotonic()
    apis = [Api(g) for g in golems]
    try:
        while apis and time.monotonic() - t0 < timeout:
            still = []
            for api in apis:
                st = api.call("GET", "/v1/status")
                counters = st["counters"]
                have = int(counters.get("entries_embedded", 0)) + int(counters.get("gossip_vectors_used", 0))
                if have < int(st["entries"]) + int(st["archived"]) or int(st.get("vector_checks_pending", 0)):
                    still.append(api)
            apis = still
            if apis:
                time.sleep(0.5)
    finally:
        for api in apis:
            api.close()
    return time.monotonic() - t0, not apis


class Api:
    """Kept control-API clients for one golem, one `DaemonClient` per thread (a new client per
    request, as `Golem.call` makes, costs ~40 ms of client CPU each). `call` gives the answer's
    JSON and raises RuntimeError naming the golem when the daemon refuses, fails or is not there."""

    def __init__(self, golem: Golem, timeout_s: float = 120) -> None:
        self.golem = golem
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._clients: list[DaemonClient] = []
        self._lock = threading.Lock()

    def call(self, method: str, path: str, *, json: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None) -> Any:
        try:
            client: DaemonClient | None = getattr(self._local, "client", None)
            if client is None:
                client = DaemonClient(Path(self.golem.socket), timeout_s=self.timeout_s).__enter__()
                self._local.client = client
                with self._lock:
                    self._clients.append(client)
            return client.call(method, path, body=json, params=params)
        except ApiError as exc:
            raise RuntimeError(f"{self.golem.name}: {method} {path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()


def odd_counters(counters: dict[str, int]) -> dict[str, int]:
    """Counters that signal trouble (drops, rejections, failures)."""
    bad = ("dropped", "rejected", "failed", "refused", "malformed", "errors", "backlog")
    return {k: v for k, v in sorted(counters.items()) if v and any(b in k for b in bad)}


def report_odd(golems: Sequence[Golem], where: str) -> dict[str, dict[str, int]]:
    """The running golems' `odd_counters`, by golem; printed, with what their logs said about it."""
    found: dict[str, dict[str, int]] = {}
    for g in golems:
        if not g.running:
            continue
        odd = odd_counters(g.call("GET", "/v1/status")["counters"])
        if odd:
            found[g.name] = odd
    if found:
        out(f"  !! counters signalling trouble ({where}): " + "; ".join(
            f"{name}: {', '.join(f'{k}={v}' for k, v in c.items())}" for name, c in found.items()))
        for g in golems:  # what the daemons logged about it (CLADE_LOG__LEVEL=info shows rejections)
            said = [line for line in g.stderr_lines if any(w in line for w in ("rejected", "failed", "refused"))]
            for line in said[-5:]:
                out(f"     {g.name}: {line[:300]}")
    return found


@dataclass
class Watch:
    """Follows the SSE logs of the siblings, indexing deliveries by message id."""

    logs: dict[str, EventLog]
    cursors: dict[str, int] = field(default_factory=dict)
    # (sibling, id) -> (daemon wall ms, via)
    entries: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)
    probes: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)  # -> (sent, received)
    truncated: int = 0

    def scan(self) -> None:
        for name, log in self.logs.items():
            start = self.cursors.get(name, 0)
            events = log.events[start:]
            self.cursors[name] = start + len(events)
            for _, event, data in events:
                if event == "entries_received":
                    if int(data.get("entries", 0)) > len(data.get("ids", ())):
                        self.truncated += 1
                    for entry_id in data.get("ids", ()):
                        self.entries.setdefault((name, entry_id), (float(data["committed_ms"]), str(data["via"])))
                elif event == "probe_received":
                    self.probes.setdefault((name, str(data["id"])),
                                           (float(data["sent_ms"]), float(data["received_ms"])))

    def wait(self, keys: set[tuple[str, str]], table: str, timeout: float) -> int:
        """Until every key is in `table` or `timeout`; returns how many are missing."""
        deadline = time.monotonic() + timeout
        while True:
            self.scan()
            have = self.entries if table == "entries" else self.probes
            missing = sum(1 for k in keys if k not in have)
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.05)


class DaemonCpu:
    """CPU % (of one core) of each daemon between construction and `report()`; golem 0 = writer.
    Each daemon's figure includes its child processes' (the embedding model runs in one:
    `machine.proc_cpu_ticks`); `report()["own"]` holds the same figures for the daemon
    processes alone."""

    def __init__(self, golems: Sequence[Golem]) -> None:
        self.pids = [g.proc.pid for g in golems if g.proc is not None]
        self.t0 = time.monotonic()
        self.ticks0 = [proc_cpu_ticks(p) for p in self.pids]
        self.own0 = [proc_cpu_ticks(p, children=False) for p in self.pids]

    @staticmethod
    def _figures(used: list[float], elapsed: float, messages: int) -> dict[str, float]:
        pct = [u / elapsed * 100 for u in used]
        return {"writer": round(pct[0], 1), "median": round(statistics.median(pct[1:] or [0.0]), 1),
                "max": round(max(pct[1:] or [0.0]), 1), "sum": round(sum(pct), 1),
                "sibling_cpu_ms_per_msg": round(statistics.median(used[1:] or [0.0]) * 1000 / max(1, messages), 1),
                "writer_cpu_ms_per_msg": round(used[0] * 1000 / max(1, messages), 1)}

    def report(self, messages: int) -> dict[str, Any]:
        elapsed = time.monotonic() - self.t0
        used = [(proc_cpu_ticks(p) - t) / CLK_TCK for p, t in zip(self.pids, self.ticks0, strict=True)]
        own = [(proc_cpu_ticks(p, children=False) - t) / CLK_TCK for p, t in zip(self.pids, self.own0, strict=True)]
        return {**self._figures(used, elapsed, messages), "own": self._figures(own, elapsed, messages)}


def start_clade(clade: LoopbackClade, timeout: float) -> float:
    """`clade.start_all`; on a timeout, print who does not count whom as a connected member, and why."""
    t0 = time.monotonic()
    try:
        clade.start_all(timeout=timeout)
    except TimeoutError as exc:
        names = {g.peer_id: g.name for g in clade.golems}
        out(f"  !! not all connected after {timeout:g} s: {exc}")
        for g in clade.golems:
            if not g.running:
                out(f"     {g.name}: not running")
                continue
            missing = [p for p in g.peers() if p["peer_id"] in names and not (p["member"] and p["connected"])]
            counters = g.call("GET", "/v1/status")["counters"]
            interesting = {k: v for k, v in counters.items() if any(w in k for w in ("hello", "dial", "refused",
                                                                                         "held"))}
            out(f"     {g.name}: lacks " + (", ".join(
                f"{names[p['peer_id']]} (connected={p['connected']} member={p['member']} refused={p['refused']})"
                for p in missing) or "nobody") + f"; counters {interesting}")
            for line in g.stderr_lines[-5:]:
                out(f"       log: {line[:240]}")
        raise
    return time.monotonic() - t0

