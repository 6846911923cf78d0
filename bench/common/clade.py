"""A clade of real daemons driven from threads: the multi-daemon benches' harness.

bench_clade, bench_strangers and bench_recovery start their golems with
`daemon.testing.harness.LoopbackClade` and drive them with what is here:

- `Api`: kept control-API clients for one golem (`daemon.client.DaemonClient`, one per thread);
- `content`: a seeded warning's words; `paced`: open-loop sends at a fixed offered rate;
- `Watch`: deliveries (`entries_received`, `probe_received`) from the siblings' event streams;
- `wait_embedded`: until every daemon's embedder has caught up; `DaemonCpu`: the daemons' CPU
  over a section; `odd_counters` / `report_odd`: counters that signal trouble;
- `SyncWatch`: a catching-up golem's pulls from its event stream (`sync_complete`, synced commits);
- `sample_steady`: every daemon's CPU % and RSS over a window, idle or under a light write load;
- `start_clade`: `start_all`, saying who lacks whom when it times out.
"""

from __future__ import annotations

import functools
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

from .machine import CLK_TCK, proc_cpu_ticks, proc_status_kib, tree_status_kib
from .report import out

__all__ = ["WORDS", "Api", "DaemonCpu", "SyncWatch", "Watch", "content", "odd_counters", "paced", "report_odd",
           "sample_steady", "start_clade", "wait_embedded", "writes_by_day_count"]

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


def _write_warning(writer: Api, rng: random.Random, tag: str, base: int, i: int) -> None:
    writer.call("POST", "/v1/memory", json={"content": content(rng, tag, base + i), "memory_type": "warning"})


def clear_for_checks(writer: Api, siblings: Sequence[Golem], rng: random.Random, *, rate: float,
                     timeout: float) -> dict[str, Any]:
    """Warnings from `writer` at `rate`/s until every sibling checks its shipped vectors at the
    cleared share (status `vector_check_authors_cleared` ≥ 1: the writer's last checks there
    all matched, daemon/embedding/check_plan.py), so a measured phase sees the siblings of an
    established author, not a new one's screening; at most `timeout` s. Returns the warnings
    written, the seconds and whether all cleared."""
    apis = [Api(g) for g in siblings]
    waiting = list(apis)
    t0 = time.monotonic()
    written = 0
    try:
        while waiting and time.monotonic() - t0 < timeout:
            second = max(1, int(rate))
            paced(second, rate, functools.partial(_write_warning, writer, rng, "clearance", written))
            written += second
            waiting = [a for a in waiting
                       if int(a.call("GET", "/v1/status").get("vector_check_authors_cleared", 0)) < 1]
    finally:
        for api in apis:
            api.close()
    return {"warnings": written, "seconds": round(time.monotonic() - t0, 1), "cleared": not waiting}


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


@dataclass
class SyncWatch:
    """Follows a catching-up golem's event stream: each pull it ran (`sync_complete`: wall ms,
    data), each synced entry's commit (`entries_received` via sync: its `committed_ms`) and each
    delta's commit (`sync_progress`: wall ms)."""

    log: EventLog
    syncs: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    committed: list[float] = field(default_factory=list)
    progress_at: list[float] = field(default_factory=list)
    seen: int = 0

    @property
    def applied(self) -> int:
        """Ops applied, as the pulls' `sync_complete` events report them."""
        return sum(int(s["applied"]) for _, s in self.syncs)

    def scan(self) -> None:
        events = self.log.events[self.seen:]
        self.seen += len(events)
        for at, name, data in events:
            if name == "sync_complete":
                self.syncs.append((at, data))
            elif name == "entries_received" and data.get("via") == "sync":
                self.committed.append(float(data["committed_ms"]))
            elif name == "sync_progress":
                self.progress_at.append(at)

    def wait(self, expected: int, timeout: float, *, caught_up: Callable[[], bool] | None = None,
             quiet_s: float = 1.0) -> int:
        """Until the pulls report `expected` ops applied, or `caught_up()`, or `timeout`; returns
        the ops applied by the pulls. Ops that gossip replayed to the restarted golem arrive
        outside the pulls, which then never count `expected`: `caught_up()` settles that, but
        only once the pulls have gone quiet (a `sync_complete` after the last `sync_progress`, or
        no event for `quiet_s`). It is asked of the daemon being measured (a state digest reads
        every op, ~0.1 s of its CPU and the GIL at 10,000 ops), so it must not run during the
        catch-up it would slow."""
        deadline = time.monotonic() + timeout
        last_event = asked = time.monotonic()
        while time.monotonic() < deadline:
            seen = self.seen
            self.scan()
            now = time.monotonic()
            if self.seen > seen:
                last_event = now
            if self.applied >= expected:
                break
            ended = bool(self.syncs) and (not self.progress_at or self.syncs[-1][0] >= self.progress_at[-1])
            if caught_up is not None and (ended or now - last_event >= quiet_s) and now - asked >= 0.5:
                asked = now
                if caught_up():
                    self.scan()
                    break
            time.sleep(0.02)
        return self.applied


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


def sample_steady(golems: Sequence[Golem], seconds: float, load: float, rng: random.Random) -> dict[str, Any]:
    """Every daemon's CPU % (of one core) and RSS (VmRSS, sampled each second) over `seconds`, both
    with its child processes' (the embedding process) and, as `own_*`, the daemon's alone; golem 0
    takes `load` warnings/s meanwhile (0: idle)."""
    pids = {g.name: g.proc.pid for g in golems if g.proc is not None}
    ticks0 = {n: proc_cpu_ticks(p) for n, p in pids.items()}  # with the daemon's embedding process
    own0 = {n: proc_cpu_ticks(p, children=False) for n, p in pids.items()}
    rss: dict[str, list[int]] = {n: [] for n in pids}
    own_rss: dict[str, list[int]] = {n: [] for n in pids}
    stop = threading.Event()
    writes = [0]
    api = Api(golems[0])

    def writer() -> None:
        i = 0
        t0 = time.monotonic()
        while not stop.is_set():
            api.call("POST", "/v1/memory", json={"content": content(rng, "steady", i), "memory_type": "warning"})
            writes[0] += 1
            i += 1
            stop.wait(max(0.0, t0 + i / load - time.monotonic()))

    thread = threading.Thread(target=writer, daemon=True) if load > 0 else None
    t0 = time.monotonic()
    if thread is not None:
        thread.start()
    while time.monotonic() - t0 < seconds:
        for n, p in pids.items():
            rss[n].append(tree_status_kib(p, "VmRSS"))
            own_rss[n].append(proc_status_kib(p, "VmRSS"))
        time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - t0))))
    elapsed = time.monotonic() - t0
    ticks1 = {n: proc_cpu_ticks(p) for n, p in pids.items()}
    own1 = {n: proc_cpu_ticks(p, children=False) for n, p in pids.items()}
    stop.set()
    if thread is not None:
        thread.join(10)
    api.close()
    per = {n: {"cpu_pct": round((ticks1[n] - ticks0[n]) / CLK_TCK / elapsed * 100, 2),
               "rss_mib_mean": round(statistics.fmean(rss[n]) / 1024, 1),
               "rss_mib_max": round(max(rss[n]) / 1024, 1),
               "own_cpu_pct": round((own1[n] - own0[n]) / CLK_TCK / elapsed * 100, 2),
               "own_rss_mib_mean": round(statistics.fmean(own_rss[n]) / 1024, 1)} for n in pids}
    cpus = [v["cpu_pct"] for v in per.values()]
    rsss = [v["rss_mib_mean"] for v in per.values()]
    return {"seconds": round(elapsed, 1), "load_per_s": load, "writes": writes[0], "per_daemon": per,
            "cpu_pct_median": round(statistics.median(cpus), 2), "cpu_pct_max": max(cpus),
            "cpu_pct_total": round(sum(cpus), 1), "rss_mib_median": round(statistics.median(rsss), 1),
            "rss_mib_max": max(v["rss_mib_max"] for v in per.values())}


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

