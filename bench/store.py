"""Benchmark the Grimoire's stores through their real APIs, on real files.

    .venv/bin/python bench/store.py [--entries N] [--episodes M] [--out DIR] [--seed S]

Measures, on a fresh data directory (a temporary one unless `--out` is given):

1. `Grimoire.remember`: N entries, one transaction (one fsync'd commit) each: entries/s and
   per-write latency percentiles.
2. `Grimoire.remember_many`: N entries in transactions of 500 and of 100 (fresh files each).
3. `Grimoire.recall(query, k=10)`: 1,000 keyword queries of 1-3 words over the N-entry store.
4. `EpisodeLog.append`: M rows in calls of 1,000 rows, then 1,000 single-row calls (into a
   separate table, so the M-row table keeps its fragment layout); then `count()` and
   `scan(limit=50)` on the M-row table.

Prints a table to stdout (progress goes to stderr), then one JSON line with every number.
All generated data comes from a seeded RNG, so two runs write the same contents.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

# `python bench/store.py` puts bench/ first on sys.path, where bench/crdt.py would shadow the
# `crdt` package: drop it and put the repository root there instead.
_BENCH_DIR = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH_DIR]
sys.path.insert(0, str(_BENCH_DIR.parent))

from crdt import Kind, Pad  # noqa: E402
from crdt.body import Category, Sensitivity  # noqa: E402
from crypto import Identity  # noqa: E402
from daemon.grimoire import Episode, EpisodeLog, Grimoire, NewEntry  # noqa: E402
from daemon.grimoire.episodes import EMBEDDING_DIM  # noqa: E402

IDENTITY = Identity(bytes(range(32)))  # a fixed key: every write is a signed op pair
RECALL_QUERIES = 1_000
RECALL_K = 10
EPISODE_BATCH = 1_000
EPISODE_SINGLES = 1_000
COUNT_REPEATS = 50
SCAN_REPEATS = 10
BATCH_SIZES = (500, 100)

# -- vocabulary ---------------------------------------------------------------------------

PROTOCOLS = (
    "uniswap", "aave", "curve", "gmx", "balancer", "compound", "lido", "maker", "sushiswap",
    "pendle", "morpho", "eigenlayer", "velodrome", "aerodrome", "convex", "yearn", "frax",
    "synthetix", "dydx", "hyperliquid", "camelot", "traderjoe", "radiant", "spark", "ethena",
)
AGGREGATORS = ("1inch", "cowswap", "paraswap", "0x", "odos", "kyberswap", "openocean")
BRIDGES = ("across", "stargate", "hop", "synapse", "celer", "wormhole", "layerzero")
RELAYS = ("flashbots", "mevblocker", "bloxroute", "merkle", "securerpc")
TOKENS = (
    "ETH", "WETH", "USDC", "USDT", "DAI", "WBTC", "stETH", "wstETH", "rETH", "cbETH", "ARB", "OP",
    "GMX", "CRV", "CVX", "AAVE", "UNI", "LINK", "PENDLE", "LDO", "MKR", "FRAX", "GHO", "USDe",
    "sUSDe", "weETH", "ezETH", "SOL", "MATIC", "PEPE",
)
CHAINS = {1: "mainnet", 10: "optimism", 42161: "arbitrum", 8453: "base", 137: "polygon", 56: "bsc"}
CHAIN_WEIGHTS = (30, 10, 25, 20, 8, 7)
TAGS = (
    "mev", "slippage", "gas", "liquidity", "rebalance", "sandwich", "frontrun", "backrun", "oracle",
    "twap", "lp", "perps", "lending", "stablecoin", "depeg", "l2", "bridge", "funding", "basis",
    "liquidation", "volatility", "jit", "range", "fees", "routing", "risk", "regime", "arbitrage",
    "yield", "restaking", "governance", "exploit",
)
FEE_TIERS = ("0.01%", "0.05%", "0.3%", "1%")
ERRORS = (
    "STF", "Too little received", "TRANSFER_FROM_FAILED", "SPL", "health factor too low",
    "execution reverted: slippage", "UniswapV2: K", "insufficient liquidity", "price impact too high",
)
ADVICE = (
    "tighten slippage tolerance before the next rebalance",
    "route through a private mempool to avoid sandwich bots",
    "split the order into smaller clips across blocks",
    "wait for base fee to drop below the 24h median",
    "widen the liquidity range during high volatility",
    "prefer the aggregator quote when price impact exceeds 30 bps",
    "reduce leverage until funding normalises",
    "pull liquidity ahead of the oracle update",
    "monitor the health factor every block while collateral is volatile",
    "avoid thin pools on weekends when liquidity dries up",
    "rebalance only when drift exceeds the fee budget",
    "use a TWAP execution window of at least ten minutes",
    "hedge delta on perps before adding concentrated liquidity",
    "skip the trade: expected MEV loss exceeds the edge",
)
FILLERS = (
    "Observed again in block {block}.",
    "Seen {n} times over the last {days} days.",
    "Confidence moderate; sample of {n} trades.",
    "Pattern held across {n} epochs on {chain}.",
    "Cost us {usd} USD before we noticed.",
    "Contradicts an older heuristic about {tag} timing.",
    "Sibling golems reported the same on {chain}.",
    "Backtest over {days} days agrees within {bps} bps.",
)
TEMPLATES = (
    "{proto} {pair} pool: a {size} {tok} swap saw {pct}% slippage at {gwei} gwei; {advice}.",
    "Sandwich attack on the {proto} router: a bot front-ran our {size} {tok} trade in block {block} "
    "and extracted {usd} USD of MEV; {advice}.",
    "Gas spikes above {gwei} gwei around {hour}:00 UTC on {chain}; defer the rebalance of the {pair} "
    "range position.",
    "{proto} {tok} lending utilization hit {pct}%, borrow APY jumped to {apy}%; health factor {hf} on "
    "our {tok2} collateral.",
    "{proto} {tok}/{tok2} pool imbalance at {pct}% weight: depeg risk, {advice}.",
    "{proto} funding rate on {tok} perps flipped to {rate}% per hour; the basis trade unwinds when open "
    "interest exceeds {usd} USD.",
    "{proto} v3 {pair} {fee} fee tier: a ±{pct}% range earned {apy}% APR but impermanent loss ate {il}% "
    "over {days} days.",
    "JIT liquidity detected on {proto} {pair}: {n} mint/burn pairs around our swap; {advice}.",
    "Routing {size} {tok} to {tok2} via {agg} beat the direct {proto} quote by {bps} bps.",
    "Oracle lag on {proto}: the TWAP deviated {pct}% from spot during volatility; liquidation cascade "
    "risk below health factor {hf}.",
    "Regime shift: {tok} realised volatility {vol}% annualised; widen ranges and rebalance every {hours}h "
    "instead of {hours2}h.",
    "Bridging {size} {tok} from {chain} to {chain2} via {bridge} took {mins} min and cost {usd} USD.",
    "Failed tx on {proto}: reverted with '{err}' after {gas} gas; {advice}.",
    "Private orderflow via {relay} avoided MEV on {n} of {m} trades at a cost of {bps} bps priority fee.",
    "{proto} {tok} restaking yield fell to {apy}% after the points program ended; {advice}.",
    "Liquidation bot competition on {proto} {chain}: won {n} of {m} auctions, median gas {gwei} gwei.",
)
KIND_WEIGHTS = {
    Kind.INSIGHT: 25, Kind.HEURISTIC: 20, Kind.WARNING: 15, Kind.FACT: 12, Kind.STRATEGY_OUTCOME: 8,
    Kind.CAUSAL_LINK: 5, Kind.REGIME_SHIFT: 4, Kind.ANTI_KNOWLEDGE: 3, Kind.EPISODE_SUMMARY: 3,
    Kind.PREFERENCE: 2, Kind.CONSTRAINT: 2, Kind.DEATH_REFLECTION: 1,
}


def _zipf(n: int, s: float = 1.0) -> list[float]:
    """Zipf-like weights, so some words are common and most are rare (as in real text)."""
    return [1.0 / (i + 1) ** s for i in range(n)]


_PROTO_W = _zipf(len(PROTOCOLS), 0.8)
_TOKEN_W = _zipf(len(TOKENS), 0.9)
_TAG_W = _zipf(len(TAGS), 0.6)


def _query_vocabulary() -> list[str]:
    """Single words that occur in generated entries (queries are drawn from these)."""
    words: set[str] = set()
    for group in (PROTOCOLS, AGGREGATORS, BRIDGES, RELAYS, TAGS, tuple(CHAINS.values())):
        words.update(w.lower() for w in group)
    words.update(t.lower() for t in TOKENS)
    for text in (*ADVICE, *TEMPLATES, *FILLERS):
        for w in text.replace("/", " ").split():
            w = w.strip(".,;:'()±%").lower()
            if w.isalpha() and len(w) > 3 and "{" not in w:
                words.add(w)
    return sorted(words)


class Generator:
    """Seeded DeFi-flavoured content for entries, episodes and queries."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = _query_vocabulary()

    def _fields(self) -> dict[str, Any]:
        r = self.rng
        tok, tok2 = r.choices(TOKENS, _TOKEN_W, k=2)
        chain, chain2 = r.sample(list(CHAINS.values()), 2)
        return {
            "proto": r.choices(PROTOCOLS, _PROTO_W)[0], "tok": tok, "tok2": tok2, "pair": f"{tok}/{tok2}",
            "chain": chain, "chain2": chain2, "agg": r.choice(AGGREGATORS), "bridge": r.choice(BRIDGES),
            "relay": r.choice(RELAYS), "fee": r.choice(FEE_TIERS), "err": r.choice(ERRORS),
            "advice": r.choice(ADVICE), "tag": r.choices(TAGS, _TAG_W)[0],
            "size": f"{r.lognormvariate(8, 2):,.0f}", "pct": f"{r.uniform(0.01, 40):.2f}",
            "gwei": f"{r.lognormvariate(3, 0.8):.1f}", "usd": f"{r.lognormvariate(7, 1.5):,.0f}",
            "apy": f"{r.uniform(0.5, 80):.1f}", "il": f"{r.uniform(0.1, 15):.2f}", "hf": f"{r.uniform(1.0, 2.5):.2f}",
            "rate": f"{r.uniform(-0.05, 0.05):+.4f}", "vol": f"{r.uniform(20, 180):.0f}",
            "block": r.randint(17_000_000, 21_000_000), "hour": r.randint(0, 23), "days": r.randint(1, 90),
            "hours": r.randint(1, 12), "hours2": r.randint(12, 72), "mins": r.randint(1, 45),
            "n": r.randint(2, 60), "m": r.randint(60, 400), "bps": r.randint(1, 120),
            "gas": f"{r.randint(21_000, 1_500_000):,}",
        }

    def sentence(self, extra: int) -> str:
        f = self._fields()
        parts = [self.rng.choice(TEMPLATES).format(**f)]
        parts.extend(self.rng.choice(FILLERS).format(**f) for _ in range(extra))
        return " ".join(parts)

    def entry(self) -> NewEntry:
        r = self.rng
        text = self.sentence(r.choices((0, 1, 2, 3), (4, 3, 2, 1))[0])
        return NewEntry(
            kind=r.choices(list(KIND_WEIGHTS), list(KIND_WEIGHTS.values()))[0],
            content=text,
            confidence=round(r.uniform(0.3, 0.95), 3),
            importance=round(r.betavariate(2, 3), 3),
            quality=round(r.betavariate(3, 2), 3),
            category=r.choice(list(Category)) if r.random() < 0.85 else None,
            tokens=tuple(r.choices(TOKENS, _TOKEN_W, k=r.randint(1, 3))),
            chains=tuple(r.choices(list(CHAINS), CHAIN_WEIGHTS, k=r.randint(1, 2))),
            protocols=tuple(r.choices(PROTOCOLS, _PROTO_W, k=r.randint(1, 2))),
            tags=tuple(r.choices(TAGS, _TAG_W, k=r.randint(1, 4))),
            strategy_id=f"strat-{r.randint(1, 40):03d}" if r.random() < 0.3 else None,
            sensitivity=r.choices(list(Sensitivity), (85, 10, 5))[0],
            pad=self.pad() if r.random() < 0.5 else None,
        )

    def pad(self) -> Pad:
        # `+ 0.0` turns a rounded -0.0 into 0.0: SQLite stores -0.0 as 0.0, so an entry written
        # with a -0.0 PAD component no longer hashes to its id when read back (get/recall raise).
        u = self.rng.uniform
        return Pad(
            pleasure=round(u(-1, 1), 3) + 0.0, arousal=round(u(-1, 1), 3) + 0.0, dominance=round(u(-1, 1), 3) + 0.0
        )

    def episode(self, observed_ms: int, embed: bool) -> Episode:
        r = self.rng
        f = self._fields()
        payload = {
            "tx": f"0x{r.getrandbits(256):064x}", "chain_id": r.choices(list(CHAINS), CHAIN_WEIGHTS)[0],
            "token_in": f["tok"], "token_out": f["tok2"], "amount_in": f["size"], "gas_used": f["gas"],
            "gas_price_gwei": f["gwei"], "slippage_pct": f["pct"],
        }
        return Episode(
            summary=self.sentence(0),
            observed_ms=observed_ms,
            block_number=int(f["block"]),
            category=r.choice(list(Category)) if r.random() < 0.8 else None,
            protocol=f["proto"],
            payload_json=json.dumps(payload, separators=(",", ":")),
            curiosity=round(r.random(), 4),
            importance=round(r.betavariate(2, 3), 4),
            embedding=tuple(r.gauss(0.0, 0.05) for _ in range(EMBEDDING_DIM)) if embed else None,
            pad=self.pad() if r.random() < 0.3 else None,
        )

    def query(self) -> str:
        return " ".join(self.rng.sample(self.vocab, self.rng.randint(1, 3)))


# -- measurement helpers --------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of an ascending sequence."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def latency_summary(ns: Sequence[int]) -> dict[str, float]:
    """p50 / p90 / p99 / max / mean of nanosecond samples, in milliseconds."""
    ms = sorted(v / 1e6 for v in ns)
    return {
        "p50_ms": round(percentile(ms, 50), 4),
        "p90_ms": round(percentile(ms, 90), 4),
        "p99_ms": round(percentile(ms, 99), 4),
        "max_ms": round(ms[-1], 4),
        "mean_ms": round(sum(ms) / len(ms), 4),
        "samples": len(ms),
    }


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def dir_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def db_size(path: Path) -> int:
    """The database file plus its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def timed_calls(calls: Iterator[Callable[[], object]], report_every: int, label: str, total: int) -> list[int]:
    """Run each call, timing it alone; returns the durations in ns."""
    out: list[int] = []
    clock = time.perf_counter_ns
    started = clock()
    for i, call in enumerate(calls, 1):
        t0 = clock()
        call()
        out.append(clock() - t0)
        if report_every and i % report_every == 0:
            elapsed = (clock() - started) / 1e9
            progress(f"  {label}: {i:,}/{total:,} ({elapsed:.1f}s elapsed)")
    return out


# -- machine information --------------------------------------------------------------------


def cpu_model() -> str:
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


def machine_info(workdir: Path) -> dict[str, Any]:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "lancedb": metadata.version("lancedb"),
        "pyarrow": metadata.version("pyarrow"),
        "disk": disk_info(workdir),
    }


# -- the benchmarks ---------------------------------------------------------------------------


def bench_remember_single(path: Path, news: Sequence[NewEntry]) -> dict[str, Any]:
    progress(f"[1/4] remember(): {len(news):,} entries, one transaction each -> {path.name}")
    with Grimoire.open(path, create=True) as store:
        t0 = time.perf_counter()
        calls = (partial(store.remember, n, identity=IDENTITY) for n in news)
        lat = timed_calls(calls, 5_000, "remember", len(news))
        seconds = time.perf_counter() - t0
        store.checkpoint()
    return {
        "entries": len(news), "seconds": round(seconds, 3), "entries_per_s": round(len(news) / seconds, 1),
        "latency": latency_summary(lat), "db_bytes": db_size(path),
    }


def bench_remember_many(path: Path, news: Sequence[NewEntry], batch: int) -> dict[str, Any]:
    progress(f"[2/4] remember_many(): {len(news):,} entries in transactions of {batch} -> {path.name}")
    batches = [news[i : i + batch] for i in range(0, len(news), batch)]
    with Grimoire.open(path, create=True) as store:
        t0 = time.perf_counter()
        calls = (partial(store.remember_many, b, identity=IDENTITY) for b in batches)
        lat = timed_calls(calls, max(1, len(batches) // 5), f"remember_many({batch})", len(batches))
        seconds = time.perf_counter() - t0
        store.checkpoint()
    return {
        "entries": len(news), "batch": batch, "transactions": len(batches), "seconds": round(seconds, 3),
        "entries_per_s": round(len(news) / seconds, 1), "per_transaction": latency_summary(lat),
        "db_bytes": db_size(path),
    }


def bench_recall(path: Path, queries: Sequence[str]) -> dict[str, Any]:
    progress(f"[3/4] recall(k={RECALL_K}): {len(queries):,} queries over {path.name}")
    hits: list[int] = []
    with Grimoire.open(path) as store:
        entries = store.counts().entries

        def one(query: str) -> None:
            hits.append(len(store.recall(query, k=RECALL_K)))

        lat = timed_calls((partial(one, q) for q in queries), 250, "recall", len(queries))
    return {
        "entries": entries, "queries": len(queries), "k": RECALL_K, "latency": latency_summary(lat),
        "mean_hits": round(sum(hits) / len(hits), 2), "zero_hit_queries": hits.count(0),
    }


def bench_episodes(root: Path, gen: Generator, total: int, embed: bool) -> dict[str, Any]:
    start_ms = 1_735_689_600_000  # 2025-01-01T00:00Z; one observation every ~2 s
    observed = start_ms

    def batch_of(n: int) -> list[Episode]:
        nonlocal observed
        out = []
        for _ in range(n):
            observed += gen.rng.randint(500, 3_500)
            out.append(gen.episode(observed, embed))
        return out

    # Batched appends (generation happens outside the timed call).
    path = root / "episodes"
    progress(f"[4/4] EpisodeLog.append(): {total:,} rows in calls of {EPISODE_BATCH:,} -> {path.name}")
    log = EpisodeLog(path, create=True)
    lat: list[int] = []
    done = 0
    clock = time.perf_counter_ns
    while done < total:
        rows = batch_of(min(EPISODE_BATCH, total - done))
        t0 = clock()
        log.append(rows)
        lat.append(clock() - t0)
        done += len(rows)
        if done % (EPISODE_BATCH * 20) == 0 or done == total:
            progress(f"  append({EPISODE_BATCH}): {done:,}/{total:,} rows ({sum(lat) / 1e9:.1f}s in append)")
    batched_s = sum(lat) / 1e9
    batched = {
        "rows": total, "rows_per_call": EPISODE_BATCH, "calls": len(lat), "seconds_in_append": round(batched_s, 3),
        "rows_per_s": round(total / batched_s, 1), "per_call": latency_summary(lat), "table_version": log.version,
        "bytes": dir_size(path),
    }

    # Single-row appends, into their own table: each is one LanceDB version and one fragment.
    single_path = root / "episodes-single"
    progress(f"  append(1 row) x {EPISODE_SINGLES:,} -> {single_path.name}")
    single_log = EpisodeLog(single_path, create=True)
    singles = batch_of(EPISODE_SINGLES)
    slat = timed_calls((partial(single_log.append, [e]) for e in singles), 250, "append(1)", len(singles))
    single_s = sum(slat) / 1e9
    edge = max(1, len(slat) // 10)
    single = {
        "rows": len(singles), "seconds_in_append": round(single_s, 3), "rows_per_s": round(len(singles) / single_s, 1),
        "per_call": latency_summary(slat),
        "first_10pct_mean_ms": round(sum(slat[:edge]) / edge / 1e6, 4),
        "last_10pct_mean_ms": round(sum(slat[-edge:]) / edge / 1e6, 4),
        "extrapolated_seconds_for_episodes": round(single_s / len(singles) * total, 1),
        "table_version": single_log.version, "bytes": dir_size(single_path),
    }
    single_scan = timed_calls((partial(single_log.scan, limit=50) for _ in range(SCAN_REPEATS)), 0, "scan", 0)
    single["scan_limit_50"] = latency_summary(single_scan)

    # Reads on the batched table, through a freshly opened log (as `clade episode list` does).
    progress(f"  count() x {COUNT_REPEATS}, scan(limit=50) x {SCAN_REPEATS} on {total:,} rows")
    reopened = EpisodeLog(path)
    counted: list[int] = []
    clat = timed_calls((lambda: counted.append(reopened.count()) for _ in range(COUNT_REPEATS)), 0, "count", 0)
    scanned: list[int] = []
    scan_lat = timed_calls(
        (lambda: scanned.append(len(reopened.scan(limit=50))) for _ in range(SCAN_REPEATS)), 0, "scan", 0
    )
    return {
        "embeddings": embed, "batched": batched, "single": single,
        "count": {"rows": counted[0], **latency_summary(clat)},
        "scan_limit_50": {"returned": scanned[0], **latency_summary(scan_lat)},
    }


# -- output -----------------------------------------------------------------------------------


def fmt_lat(lat: dict[str, float]) -> str:
    return f"p50 {lat['p50_ms']:.3f}  p99 {lat['p99_ms']:.3f}  max {lat['max_ms']:.3f} ms"


def print_report(res: dict[str, Any]) -> None:
    m = res["machine"]
    d = m["disk"]
    rows: list[tuple[str, str]] = [
        ("## machine", ""),
        ("CPU", f"{m['cpu_model']} ({m['cpu_count']} logical CPUs, {m['cpus_usable']} usable)"),
        ("kernel / Python", f"{m['kernel']} / {m['python']}"),
        ("SQLite / lancedb / pyarrow", f"{m['sqlite']} / {m['lancedb']} / {m['pyarrow']}"),
        ("work dir", d["path"]),
        ("disk", f"{d.get('device', '?')} ({d.get('fstype', '?')}) on {d.get('mount_point', '?')}, "
                 f"rotational={d.get('rotational', '?')} (as sysfs reports it), model={d.get('model') or '?'}, "
                 f"{d.get('free_gib', '?')} GiB free"),
    ]
    s = res["remember_single"]
    rows += [
        ("## Grimoire writes (SQLite WAL, synchronous=FULL)", ""),
        (f"remember() x {s['entries']:,} (1 txn each)",
         f"{s['entries_per_s']:,.0f} entries/s  ({s['seconds']:.1f} s)"),
        ("  per-write latency", fmt_lat(s["latency"])),
    ]
    for b in res["remember_many"]:
        rows += [
            (f"remember_many() x {b['entries']:,} (txn of {b['batch']})",
             f"{b['entries_per_s']:,.0f} entries/s  ({b['seconds']:.2f} s, {b['transactions']} txns)"),
            ("  per-transaction latency", fmt_lat(b["per_transaction"])),
        ]
    rows.append((f"grimoire.db size with {s['entries']:,} entries", f"{s['db_bytes'] / 2**20:.1f} MiB"))
    r = res["recall"]
    rows += [
        (f"## recall(k={r['k']}) over {r['entries']:,} entries (FTS5 BM25)", ""),
        (f"{r['queries']:,} queries of 1-3 words", fmt_lat(r["latency"]) + f"  (mean {r['latency']['mean_ms']:.3f})"),
        ("  mean hits / zero-hit queries", f"{r['mean_hits']} / {r['zero_hit_queries']}"),
    ]
    e = res["episodes"]
    bt, sg = e["batched"], e["single"]
    rows += [
        (f"## episodes (LanceDB, embeddings={'yes' if e['embeddings'] else 'none'})", ""),
        (f"append() {bt['rows']:,} rows, {bt['rows_per_call']:,}/call",
         f"{bt['rows_per_s']:,.0f} rows/s  ({bt['seconds_in_append']:.2f} s in {bt['calls']} calls)"),
        ("  per-call latency", fmt_lat(bt["per_call"])),
        (f"append() {sg['rows']:,} x 1 row (measured)",
         f"{sg['rows_per_s']:,.0f} rows/s  ({sg['seconds_in_append']:.2f} s)"),
        ("  per-call latency", fmt_lat(sg["per_call"])),
        ("  mean latency, first / last 10% of calls",
         f"{sg['first_10pct_mean_ms']:.3f} / {sg['last_10pct_mean_ms']:.3f} ms"),
        (f"  EXTRAPOLATED (linear): {bt['rows']:,} single-row calls",
         f"~{sg['extrapolated_seconds_for_episodes']:,.0f} s (measured mean x {bt['rows']:,}; not run)"),
        (f"count() on {e['count']['rows']:,} rows", fmt_lat(e["count"])),
        (f"scan(limit=50) on {e['count']['rows']:,} rows", fmt_lat(e["scan_limit_50"])),
        (f"scan(limit=50) on the {sg['rows']:,}-row single-append table", fmt_lat(sg["scan_limit_50"])),
        (f"table size: {bt['rows']:,} rows batched", f"{bt['bytes'] / 2**20:.1f} MiB (version {bt['table_version']})"),
        (f"table size: {sg['rows']:,} rows single-appended",
         f"{sg['bytes'] / 2**20:.1f} MiB (version {sg['table_version']})"),
        ("## total", ""),
        ("wall clock (incl. data generation)", f"{res['total_seconds']:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows) + 2
    print()
    for key, value in rows:
        if key.startswith("## "):
            print(f"\n{key[3:]}")
            print("-" * len(key[3:]))
        else:
            print(f"{key:<{width}}{value}")
    print()


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--entries", type=int, default=50_000, help="entries per store (default 50,000)")
    p.add_argument("--episodes", type=int, default=100_000, help="episode rows (default 100,000)")
    p.add_argument("--out", type=Path, default=None,
                   help="directory for the files (kept afterwards); default: a temporary one, removed")
    p.add_argument("--seed", type=int, default=20_240_601, help="RNG seed (default 20240601)")
    p.add_argument("--episode-embeddings", action="store_true",
                   help=f"give every episode a random {EMBEDDING_DIM}-d embedding (default: none)")
    args = p.parse_args(argv)
    if args.entries < 1 or args.episodes < 1:
        p.error("--entries and --episodes must be positive")
    return args


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {
        "machine": machine_info(workdir),
        "params": {"entries": args.entries, "episodes": args.episodes, "seed": args.seed,
                   "batch_sizes": list(BATCH_SIZES), "recall_queries": RECALL_QUERIES, "recall_k": RECALL_K,
                   "episode_batch": EPISODE_BATCH, "episode_singles": EPISODE_SINGLES},
    }
    gen = Generator(args.seed)
    progress(f"generating {args.entries:,} entries (seed {args.seed}) in {workdir}")
    news = [gen.entry() for _ in range(args.entries)]
    queries = [gen.query() for _ in range(RECALL_QUERIES)]

    res["remember_single"] = bench_remember_single(workdir / "grimoire-single.db", news)
    res["remember_many"] = [
        bench_remember_many(workdir / f"grimoire-batch{b}.db", news, b) for b in BATCH_SIZES
    ]
    res["recall"] = bench_recall(workdir / "grimoire-single.db", queries)
    res["recall"]["sample_queries"] = queries[:5]
    res["episodes"] = bench_episodes(workdir, gen, args.episodes, args.episode_embeddings)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.out is None:
        workdir = Path(tempfile.mkdtemp(prefix="clade-bench-"))
        cleanup = True
    else:
        workdir = args.out.expanduser().resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        clash = [n for n in ("grimoire-single.db", "episodes") if (workdir / n).exists()]
        if clash:
            print(f"error: {workdir} already holds {', '.join(clash)}; pick an empty directory", file=sys.stderr)
            return 2
        cleanup = False
    try:
        res = run(args, workdir)
    finally:
        if cleanup:
            shutil.rmtree(workdir, ignore_errors=True)
    print_report(res)
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
