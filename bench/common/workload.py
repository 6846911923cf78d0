"""Seeded, DeFi-flavoured workloads: the vocabulary, entries, episodes, entry bodies, queries;
and their ops in the wire form (`encode_batches`, `encoded_size`).

Every bench draws its data from `Generator`, so two runs with the same seed write the same
contents. The draw order of each method is part of its contract: changing it changes what
every bench measures (and bench/RESULTS.md's figures were measured with this order).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from crdt import CausalContext, Delta, EntryBody, Kind, Op, Pad, Timestamp, encode_delta
from crdt.body import Category, Sensitivity
from crdt.codec import DELTA_VERSION, encode_context
from crdt.replica import MAX_BATCH_BYTES, MAX_BATCH_OPS
from crdt.seals import Seal
from daemon.grimoire import Episode, NewEntry
from daemon.grimoire.episodes import EMBEDDING_DIM

__all__ = [
    "CHAINS",
    "ERRORS",
    "PROTOCOLS",
    "TOKENS",
    "Generator",
    "defi_texts",
    "encode_batches",
    "encoded_size",
    "short_queries",
]

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
# Short phrases a golem would ask (bench_recall, bench_recall_options, bench_recall_daemon).
QUERY_PATTERNS = (
    "{tag} on {proto}", "{proto} {tok} {tag}", "avoid {tag} when swapping {tok}", "{pair} slippage on {chain}",
    "{tok} lending health factor", "gas spike on {chain}", "{proto} oracle lag", "bridge {tok} to {chain2}",
    "{tag} risk for {pair} liquidity", "why did the {proto} swap revert", "best route for {tok} to {tok2}",
    "{proto} funding rate flip", "impermanent loss {pair} range",
)
MIN_CHARS, MAX_CHARS = 60, 1_500  # `Generator.content` (the CRDT bench's entry bodies)


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
    """Seeded DeFi-flavoured content for entries, entry bodies, episodes and queries.

    Args:
        seed: an int seed, or a `random.Random` to share with the caller (the CRDT workload
            draws its schedule and its bodies from one stream).
    """

    def __init__(self, seed: int | random.Random) -> None:
        self.rng = seed if isinstance(seed, random.Random) else random.Random(seed)
        self.vocab = _query_vocabulary()

    def fields(self) -> dict[str, Any]:
        """One draw of every template field (protocol, tokens, sizes, gas, ...)."""
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
        """One template sentence and `extra` filler sentences on the same fields."""
        f = self.fields()
        parts = [self.rng.choice(TEMPLATES).format(**f)]
        parts.extend(self.rng.choice(FILLERS).format(**f) for _ in range(extra))
        return " ".join(parts)

    def entry(self) -> NewEntry:
        """A `NewEntry` for `Grimoire.remember` (0-3 filler sentences, half with a PAD)."""
        r = self.rng
        text = self.sentence(r.choices((0, 1, 2, 3), (4, 3, 2, 1))[0])
        return NewEntry(
            kind=r.choices(list(KIND_WEIGHTS), list(KIND_WEIGHTS.values()))[0],
            content=text,
            confidence=round(r.uniform(0.3, 0.95), 3),
            importance=round(r.betavariate(2, 3), 3),
            quality=round(r.betavariate(3, 2), 3),
            **self._labels(least=1),
            sensitivity=r.choices(list(Sensitivity), (85, 10, 5))[0],
            pad=self.pad() if r.random() < 0.5 else None,
        )

    def _labels(self, least: int) -> dict[str, Any]:
        """Category, tokens, chains, protocols, tags and strategy of an entry, drawn in that order
        (at least `least` protocols and tags)."""
        r = self.rng
        return {
            "category": r.choice(list(Category)) if r.random() < 0.85 else None,
            "tokens": tuple(r.choices(TOKENS, _TOKEN_W, k=r.randint(1, 3))),
            "chains": tuple(r.choices(list(CHAINS), CHAIN_WEIGHTS, k=r.randint(1, 2))),
            "protocols": tuple(r.choices(PROTOCOLS, _PROTO_W, k=r.randint(least, 2))),
            "tags": tuple(r.choices(TAGS, _TAG_W, k=r.randint(least, 4))),
            "strategy_id": f"strat-{r.randint(1, 40):03d}" if r.random() < 0.3 else None,
        }

    def pad(self) -> Pad:
        """A PAD triple rounded to 3 places."""
        # `+ 0.0` turns a rounded -0.0 into 0.0: SQLite stores -0.0 as 0.0, so an entry written
        # with a -0.0 PAD component no longer hashes to its id when read back (get/recall raise).
        u = self.rng.uniform
        return Pad(
            pleasure=round(u(-1, 1), 3) + 0.0, arousal=round(u(-1, 1), 3) + 0.0, dominance=round(u(-1, 1), 3) + 0.0
        )

    def episode(self, observed_ms: int, embed: bool) -> Episode:
        """An `Episode` observed at `observed_ms`, with a random 384-d embedding if `embed`."""
        r = self.rng
        f = self.fields()
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
        """1-3 words of the vocabulary, space-separated."""
        return " ".join(self.rng.sample(self.vocab, self.rng.randint(1, 3)))

    def content(self) -> str:
        """A paragraph of log-normally distributed length (median ~320), clipped to 60..1,500 chars."""
        r = self.rng
        target = int(min(MAX_CHARS, max(MIN_CHARS, r.lognormvariate(math.log(320), 0.75))))
        f = self.fields()
        text = r.choice(TEMPLATES).format(**f)
        while len(text) < target:
            if r.random() < 0.6:
                text += " " + r.choice(FILLERS).format(**f)
            else:
                f = self.fields()
                text += " " + r.choice(TEMPLATES).format(**f)
        if len(text) > target:
            cut = text.rfind(" ", MIN_CHARS, target)
            short = text[: cut if cut > 0 else target].rstrip(" ,;:") + "."
            text = short if MIN_CHARS <= len(short) <= MAX_CHARS else text[:target]
        return text

    def body(self, author: str, created: Timestamp) -> EntryBody:
        """An `EntryBody` by `author` with a `content()` paragraph (the CRDT bench's ops)."""
        r = self.rng
        pad = self.pad() if r.random() < 0.5 else None
        return EntryBody(
            author=author,
            kind=r.choices(list(KIND_WEIGHTS), list(KIND_WEIGHTS.values()))[0],
            content=self.content(),
            created=created,
            **self._labels(least=0),
            importance=round(r.betavariate(2, 3), 3),
            quality=round(r.betavariate(3, 2), 3),
            sensitivity=r.choices(list(Sensitivity), (85, 10, 5))[0],
            pad=pad,
        )


def short_queries(gen: Generator, n: int) -> list[str]:
    """Short queries: half 1-3 vocabulary words, half short phrases a golem would ask."""
    out: list[str] = []
    while len(out) < n:
        if gen.rng.random() < 0.5:
            out.append(gen.query())
        else:
            out.append(gen.rng.choice(QUERY_PATTERNS).format(**gen.fields()))
    return out


def defi_texts(gen: Generator, n: int, lo: int = 50, hi: int = 300) -> list[str]:
    """`n` generated sentences whose length is within [lo, hi] characters."""
    out: list[str] = []
    while len(out) < n:
        text = gen.sentence(gen.rng.choice((0, 0, 1, 1, 2)))
        if lo <= len(text) <= hi:
            out.append(text)
    return out


def encode_batches(ops: Sequence[Op], *, max_bytes: int = MAX_BATCH_BYTES,
                   seals: Callable[[Sequence[Op]], Sequence[Seal]] | None = None) -> list[tuple[int, bytes]]:
    """Encoded gossip deltas in the given order, cut at 4,096 ops or ~`max_bytes`, whichever comes
    first (the codec's caps): (ops in the delta, `encode_delta` bytes) each; with `seals`, each
    delta carries `seals(its ops)` (sync v3's form)."""
    budget = max_bytes - 16 * 1024  # room for the per-writer group headers
    out: list[tuple[int, bytes]] = []
    batch: list[Op] = []
    size = 0
    for op in [*ops, None]:
        if op is None or len(batch) >= MAX_BATCH_OPS or size + op.wire_size > budget:
            if batch:
                delta = Delta(tuple(batch), CausalContext())
                out.append((len(batch), encode_delta(delta, None if seals is None else seals(batch))))
            batch, size = [], 0
        if op is not None:
            batch.append(op)
            size += op.wire_size
    return out


def encoded_size(delta: Delta) -> int:
    """len(encode_delta(delta)) without its 1 MiB check (extract_deltas can overshoot the cap)."""
    groups: dict[str, list[list[bytes]]] = {}
    for op in delta.ops:
        groups.setdefault(op.writer, []).append([op.signed, op.signature])
    return len(msgpack.packb([DELTA_VERSION, [[w, g] for w, g in groups.items()], encode_context(delta.context)],
                             use_bin_type=True))
