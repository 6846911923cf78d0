"""A small DeFi Grimoire for measuring semantic recall (used by test_semantic_recall.py).

ENTRIES are knowledge a trading golem would write (112 entries over the twelve categories
and all twelve kinds). QUERIES are paraphrased questions a golem would ask (77 of them),
each with the keys of the one or two entries that answer it; no other entry answers it.
Many entries are near-misses of others (same protocol, chain or mechanism, a different
question answered), so a retriever matching on topic alone ranks the wrong neighbour.
A query shares no content word, nor a word stem, with the entries that answer it (their
content, tags and protocols: everything the FTS5 index sees); `shared_words` defines
"shares" and the tests enforce it. Keyword search can therefore reach an answer only by
accident, through function words the query and the answer both happen to use.

Rules for editing: never copy a query's words into its answers (the test fails); keep
explicit importance uncorrelated with relevance (the test checks the means), so that the
recall measured is the retriever's and not the corpus author's ranking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crdt import Kind
from crdt.body import Category
from daemon.grimoire.records import NewEntry

__all__ = ["ENTRIES", "QUERIES", "STOPWORDS", "CorpusEntry", "CorpusQuery", "content_words", "shared_words"]

MAINNET, OPTIMISM, BASE, ARBITRUM = 1, 10, 8453, 42161

K, C = Kind, Category


@dataclass(frozen=True, slots=True)
class CorpusEntry:
    key: str
    kind: Kind
    category: Category
    content: str
    protocols: tuple[str, ...] = ()
    chains: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    confidence: float = 0.7

    @property
    def searchable(self) -> str:
        """Everything the keyword index sees (content, tags, protocols)."""
        return " ".join((self.content, *self.tags, *self.protocols))

    def new_entry(self) -> NewEntry:
        return NewEntry(
            kind=self.kind, content=self.content, confidence=self.confidence, importance=self.importance,
            category=self.category, chains=self.chains, protocols=self.protocols, tags=self.tags,
        )


@dataclass(frozen=True, slots=True)
class CorpusQuery:
    text: str
    relevant: frozenset[str]


def _q(text: str, *keys: str) -> CorpusQuery:
    return CorpusQuery(text, frozenset(keys))


ENTRIES: tuple[CorpusEntry, ...] = (
    # --- slippage -------------------------------------------------------------------------
    CorpusEntry(
        "slip-split-orders", K.HEURISTIC, C.SLIPPAGE,
        "Slippage on big orders: breaking a $500k ETH/USDC swap on Arbitrum Uniswap v3 into five pieces, one per "
        "block, cut it from 1.8% to 0.4%.",
        ("uniswap-v3",), (ARBITRUM,), ("orders",), 0.5, 0.8,
    ),
    CorpusEntry(
        "slip-tolerance-sandwich", K.WARNING, C.SLIPPAGE,
        "Sandwich bots on mainnet steal up to the full slippage tolerance of every public swap; use 0.5% tolerance "
        "and a private mempool RPC.",
        ("uniswap-v3",), (MAINNET,), ("sandwich",), 0.7, 0.85,
    ),
    CorpusEntry(
        "slip-curve-stables", K.FACT, C.SLIPPAGE,
        "Curve 3pool moves $1M of USDC into USDT with under 0.02% price impact; the Uniswap v3 0.01% "
        "USDC/USDT pool is only comparable below $250k.",
        ("curve", "uniswap-v3"), (MAINNET,), ("stables",), 0.6, 0.8,
    ),
    CorpusEntry(
        "slip-quote-vs-fill", K.INSIGHT, C.SLIPPAGE,
        "On Base, realised slippage on memecoin pairs averaged three times the router's estimate during US "
        "trading hours; widen the budget or trade them in the Asian session.",
        ("1inch",), (BASE,), ("memecoins",), 0.5, 0.6,
    ),
    # --- gas timing -----------------------------------------------------------------------
    CorpusEntry(
        "gas-weekend-nights", K.INSIGHT, C.GAS_TIMING,
        "Mainnet base fee averages 40% lower between 02:00 and 06:00 UTC on Saturdays and Sundays; schedule "
        "non-urgent rebalances and approvals for those hours.",
        (), (MAINNET,), ("basefee",), 0.6, 0.8,
    ),
    CorpusEntry(
        "gas-l2-blobs", K.CAUSAL_LINK, C.GAS_TIMING,
        "Since EIP-4844 blobs, execution on Arbitrum and Base is priced by L2 congestion rather than L1 "
        "calldata: a popular NFT mint on Base spikes fees more than anything happening on mainnet.",
        (), (ARBITRUM, BASE), ("eip4844",), 0.6, 0.7,
    ),
    CorpusEntry(
        "gas-arbitrum-tip", K.HEURISTIC, C.GAS_TIMING,
        "Tipping more does not speed up Arbitrum transactions: its sequencer processes them in arrival order, so a "
        "priority fee is wasted money under normal load.",
        (), (ARBITRUM,), ("sequencer",), 0.5, 0.75,
    ),
    CorpusEntry(
        "gas-mainnet-spikes", K.WARNING, C.GAS_TIMING,
        "Mainnet gas tripled within minutes of large airdrop claims opening; pending approvals sat for 40 "
        "blocks. Keep a gas ceiling on every transaction the daemon signs.",
        (), (MAINNET,), ("gas",), 0.6, 0.7,
    ),
    # --- route selection ------------------------------------------------------------------
    CorpusEntry(
        "route-aggregator-size", K.INSIGHT, C.ROUTE_SELECTION,
        "Routing through 1inch pays off only above $200k, where it beat the best single pool by 11 bps; under $20k "
        "the extra hops burn more gas than they save.",
        ("1inch", "uniswap-v3", "curve", "balancer"), (MAINNET,), ("routing",), 0.6, 0.8,
    ),
    CorpusEntry(
        "route-stale-quotes", K.WARNING, C.ROUTE_SELECTION,
        "Stale quotes revert: aggregator quotes older than two blocks reverted 30% of the time on Base in volatile "
        "hours. Fetch a fresh quote right before signing.",
        ("1inch",), (BASE,), ("routing",), 0.5, 0.75,
    ),
    CorpusEntry(
        "route-long-tail-hop", K.HEURISTIC, C.ROUTE_SELECTION,
        "For long-tail tokens a two-hop path through WETH usually beats the direct 1% pool, because the "
        "direct pool is shallow and its fee is high.",
        ("uniswap-v3",), (ARBITRUM,), ("routing",), 0.5, 0.7,
    ),
    CorpusEntry(
        "route-cowswap-batch", K.INSIGHT, C.ROUTE_SELECTION,
        "Batch-auction routing via CoW Protocol matched 15% of our mainnet volume peer to peer, paying no LP "
        "fee at all on those coincidences of wants.",
        ("cow-protocol",), (MAINNET,), ("routing",), 0.5, 0.6,
    ),
    # --- liquidity conditions -------------------------------------------------------------
    CorpusEntry(
        "liq-weekend-thin", K.INSIGHT, C.LIQUIDITY_CONDITIONS,
        "Weekend liquidity on Arbitrum is thin: pool depth drops about 35% from Friday evening until Monday and "
        "spreads double.",
        ("uniswap-v3",), (ARBITRUM,), ("depth",), 0.5, 0.7,
    ),
    CorpusEntry(
        "liq-borrow-rate-flight", K.CAUSAL_LINK, C.LIQUIDITY_CONDITIONS,
        "When Aave USDC borrow APY on mainnet goes above 15%, LPs pull stablecoins out of Uniswap and Curve "
        "within hours to supply them to Aave instead, and the pools thin out.",
        ("aave", "uniswap-v3", "curve"), (MAINNET,), ("rates",), 0.7, 0.7,
    ),
    CorpusEntry(
        "liq-emissions-end", K.WARNING, C.LIQUIDITY_CONDITIONS,
        "Pool depth on Optimism gauges collapses within a day of emissions ending. Read the incentive "
        "schedule before committing capital.",
        ("velodrome",), (OPTIMISM,), ("incentives",), 0.6, 0.75,
    ),
    CorpusEntry(
        "liq-balancer-weighted", K.FACT, C.LIQUIDITY_CONDITIONS,
        "Balancer 80/20 weighted pools are rebalanced by arbitrageurs automatically and suffer less "
        "impermanent loss than 50/50 pools for the majority-weighted token.",
        ("balancer",), (MAINNET,), ("amm",), 0.5, 0.8,
    ),
    # --- regime transitions ---------------------------------------------------------------
    CorpusEntry(
        "regime-vol-doubling", K.REGIME_SHIFT, C.REGIME_TRANSITIONS,
        "ETH 30-day realised volatility jumped from 40% to 85% in one week after ETF flows reversed; the "
        "mean-reversion strategies lost money for the whole month that followed.",
        (), (MAINNET,), ("volatility",), 0.7, 0.75,
    ),
    CorpusEntry(
        "regime-funding-negative", K.REGIME_SHIFT, C.REGIME_TRANSITIONS,
        "Negative funding on GMX perps for three weeks (shorts paying longs) marked a bearish regime: risk-on had "
        "turned defensive.",
        ("gmx",), (ARBITRUM,), ("funding",), 0.6, 0.7,
    ),
    CorpusEntry(
        "regime-breakout", K.HEURISTIC, C.REGIME_TRANSITIONS,
        "A close outside the 20-day range on rising volume ends the sideways chop; widen LP ranges or exit "
        "before being left holding the depreciating side.",
        ("uniswap-v3",), (ARBITRUM,), ("trend",), 0.7, 0.65,
    ),
    CorpusEntry(
        "regime-stable-supply", K.CAUSAL_LINK, C.REGIME_TRANSITIONS,
        "Four weeks of net stablecoin minting on mainnet preceded each of the last three rallies; net "
        "burning preceded the slumps.",
        (), (MAINNET,), ("macro",), 0.5, 0.55,
    ),
    # --- risk events ----------------------------------------------------------------------
    CorpusEntry(
        "risk-health-factor", K.WARNING, C.RISK_EVENTS,
        "Liquidation risk: Aave v3 borrowers on Arbitrum with a health factor below 1.15 were liquidated when ETH "
        "fell 12% in two hours. Keep the health factor above 1.5 around macro news.",
        ("aave",), (ARBITRUM,), ("lending",), 0.8, 0.85,
    ),
    CorpusEntry(
        "risk-usdc-depeg", K.WARNING, C.RISK_EVENTS,
        "USDC traded at 0.88 on Curve during the SVB weekend. Stablecoin pegs can break on off-chain "
        "banking news, so cap exposure to any single stable at 40%.",
        ("curve",), (MAINNET,), ("stables",), 0.7, 0.9,
    ),
    CorpusEntry(
        "risk-oracle-pump", K.CAUSAL_LINK, C.RISK_EVENTS,
        "Oracle manipulation: illiquid tokens accepted as collateral can be pumped on one DEX so the oracle reports "
        "a fake value, letting an attacker borrow against it and leave bad debt (the Mango pattern).",
        (), (), ("oracle",), 0.6, 0.8,
    ),
    CorpusEntry(
        "risk-steth-discount", K.INSIGHT, C.RISK_EVENTS,
        "stETH is not always 1:1 with ETH: it traded 6% under in June 2022 while leveraged Aave positions unwound, "
        "and the discount lasted weeks.",
        ("lido", "aave"), (MAINNET,), ("lst",), 0.6, 0.85,
    ),
    CorpusEntry(
        "risk-bridge-hack", K.WARNING, C.RISK_EVENTS,
        "Third-party bridge contracts have been the largest single source of stolen funds; hold bridged "
        "assets only as long as a trade needs them.",
        (), (), ("bridges",), 0.6, 0.8,
    ),
    # --- rebalance timing -----------------------------------------------------------------
    CorpusEntry(
        "rebal-drift-threshold", K.HEURISTIC, C.REBALANCE_TIMING,
        "Rebalancing the 60/40 ETH/USDC vault on a 5% drift threshold beat a fixed weekly schedule by 0.7% "
        "per quarter after gas; the weekly resets paid gas for nothing in quiet weeks.",
        (), (ARBITRUM,), ("allocation",), 0.6, 0.75,
    ),
    CorpusEntry(
        "rebal-wait-an-hour", K.HEURISTIC, C.REBALANCE_TIMING,
        "When price leaves a concentrated position's band, wait one hour before re-centering: 40% of the exits "
        "on Arbitrum ETH/USDC came back inside within that hour, saving the swap and the gas.",
        ("uniswap-v3",), (ARBITRUM,), ("lp",), 0.6, 0.7,
    ),
    CorpusEntry(
        "rebal-gas-vs-fees", K.HEURISTIC, C.REBALANCE_TIMING,
        "Skip a rebalance whenever its gas would exceed a tenth of the fees the position earns over the "
        "following seven days.",
        ("uniswap-v3",), (MAINNET,), ("lp",), 0.5, 0.7,
    ),
    # --- range selection ------------------------------------------------------------------
    CorpusEntry(
        "range-width-sigma", K.HEURISTIC, C.RANGE_SELECTION,
        "Choosing an LP range: make it about twice ETH's expected weekly move wide; ranges under one standard "
        "deviation sat out of range 60% of the time.",
        ("uniswap-v3",), (ARBITRUM,), ("lp",), 0.5, 0.75,
    ),
    CorpusEntry(
        "range-stable-narrow", K.INSIGHT, C.RANGE_SELECTION,
        "For USDC/USDT in the 0.01% tier a ±0.05% range earned nine times the fees of a full-range position "
        "and almost never needed moving.",
        ("uniswap-v3",), (BASE,), ("stables", "lp"), 0.5, 0.8,
    ),
    CorpusEntry(
        "range-skew-trend", K.HEURISTIC, C.RANGE_SELECTION,
        "In a trending regime, skew the range toward the trend direction so the position converts into the "
        "appreciating token rather than away from it.",
        ("uniswap-v3",), (OPTIMISM,), ("lp", "trend"), 0.5, 0.6,
    ),
    # --- fee optimisation -----------------------------------------------------------------
    CorpusEntry(
        "fee-tier-choice", K.INSIGHT, C.FEE_OPTIMIZATION,
        "On Base, ETH/USDC volume concentrates in the 0.05% tier; the 0.3% tier earns more per unit of "
        "liquidity only when realised volatility is above 80%.",
        ("uniswap-v3",), (BASE,), ("fee-tier",), 0.6, 0.7,
    ),
    CorpusEntry(
        "fee-compound-cadence", K.HEURISTIC, C.FEE_OPTIMIZATION,
        "Compounding cadence: fold collected LP fees back in weekly on L2s but only monthly on mainnet; under $5k, "
        "mainnet compounding burns more in gas than it adds.",
        ("uniswap-v3",), (MAINNET, ARBITRUM), ("lp",), 0.5, 0.7,
    ),
    CorpusEntry(
        "fee-pendle-fixed", K.INSIGHT, C.FEE_OPTIMIZATION,
        "Fixed yield via Pendle: principal tokens on stETH locked in 4.1% APR to maturity, however Lido's "
        "rewards moved.",
        ("pendle", "lido"), (MAINNET,), ("yield",), 0.6, 0.75,
    ),
    CorpusEntry(
        "fee-gmx-glp", K.FACT, C.FEE_OPTIMIZATION,
        "GLP holders are the counterparty of GMX traders: they lose when traders win in aggregate, as in "
        "strongly trending months, and collect fees otherwise.",
        ("gmx",), (ARBITRUM,), ("perps",), 0.5, 0.8,
    ),
    # --- JIT defence ----------------------------------------------------------------------
    CorpusEntry(
        "jit-pattern", K.WARNING, C.JIT_DEFENSE,
        "Just-in-time liquidity: a bot adds a huge position to the Uniswap v3 pool right before a large swap and "
        "removes it right after, collecting most of the swap's fees.",
        ("uniswap-v3",), (MAINNET,), ("jit", "mev"), 0.5, 0.8,
    ),
    CorpusEntry(
        "jit-move-tier", K.HEURISTIC, C.JIT_DEFENSE,
        "JIT activity concentrates in the 0.05% pool; moving our liquidity to the 0.3% tier on mainnet cut the "
        "dilution by two thirds.",
        ("uniswap-v3",), (MAINNET,), ("jit",), 0.5, 0.65,
    ),
    # --- tool guidance --------------------------------------------------------------------
    CorpusEntry(
        "tool-simulate-first", K.HEURISTIC, C.TOOL_GUIDANCE,
        "Always simulate a multicall before sending it: simulated bundles reverted 1 in 20 times, unsimulated "
        "ones 1 in 4.",
        ("tenderly",), (MAINNET, ARBITRUM), ("simulation",), 0.6, 0.8,
    ),
    CorpusEntry(
        "tool-rpc-limits", K.FACT, C.TOOL_GUIDANCE,
        "The public Arbitrum RPC rate-limits at about 40 requests per second; the price-feed loop needs a paid "
        "endpoint, with a second provider as fallback.",
        (), (ARBITRUM,), ("rpc",), 0.5, 0.8,
    ),
    CorpusEntry(
        "tool-unlimited-approvals", K.WARNING, C.TOOL_GUIDANCE,
        "Never grant unlimited token approvals to a router; revoke them after each session. The 2023 router "
        "exploits drained wallets through standing allowances.",
        (), (), ("security",), 0.7, 0.9,
    ),
    CorpusEntry(
        "tool-nonce-stuck", K.FACT, C.TOOL_GUIDANCE,
        "A stuck transaction blocks every later nonce; replace it by resending the same nonce with a 12% "
        "higher fee, or a zero-value self-transfer to cancel.",
        (), (MAINNET,), ("tooling",), 0.4, 0.9,
    ),
    # --- strategic patterns ---------------------------------------------------------------
    CorpusEntry(
        "strat-basis-trade", K.INSIGHT, C.STRATEGIC_PATTERNS,
        "Basis trade: holding stETH while shorting the same amount of ETH perps on GMX earned staking APR plus "
        "funding with no price exposure, until funding turned negative.",
        ("lido", "gmx"), (ARBITRUM,), ("basis",), 0.5, 0.7,
    ),
    CorpusEntry(
        "strat-lst-loop", K.WARNING, C.STRATEGIC_PATTERNS,
        "Looping wstETH on Aave (deposit, borrow ETH, restake) multiplied yield threefold, but a 5% discount of "
        "the LST would have liquidated the loop at 4x leverage.",
        ("aave", "lido"), (MAINNET,), ("leverage",), 0.7, 0.75,
    ),
    CorpusEntry(
        "strat-exit-first", K.HEURISTIC, C.STRATEGIC_PATTERNS,
        "Before opening any perp or LP position, record the stop price, the maximum loss in USDC and a time "
        "limit; close it when any of the three is hit.",
        (), (), ("discipline",), 0.7, 0.7,
    ),
    CorpusEntry(
        "strat-size-by-conviction", K.HEURISTIC, C.STRATEGIC_PATTERNS,
        "Size positions by how many independent signals agree, never more than 5% of the treasury on a single "
        "idea.",
        (), (), ("sizing",), 0.5, 0.6,
    ),
    # --- anti-knowledge -------------------------------------------------------------------
    CorpusEntry(
        "anti-tuesday-gas", K.ANTI_KNOWLEDGE, C.GAS_TIMING,
        "The claim that mainnet gas is cheapest on Tuesdays is false: over twelve months the Tuesday average "
        "matched the weekly mean within 3%.",
        (), (MAINNET,), ("gas",), 0.5, 0.8,
    ),
    CorpusEntry(
        "anti-tvl-safety", K.ANTI_KNOWLEDGE, C.RISK_EVENTS,
        "High TVL is no evidence that a protocol is safe: three exploited lending markets each held over "
        "$100M when they were drained.",
        (), (), ("tvl",), 0.6, 0.85,
    ),
    CorpusEntry(
        "anti-il-recovers", K.ANTI_KNOWLEDGE, C.STRATEGIC_PATTERNS,
        "Impermanent loss does not heal by waiting: if the price trends away and never comes back, the loss "
        "becomes permanent on exit.",
        ("uniswap-v3",), (), ("amm",), 0.5, 0.85,
    ),
    CorpusEntry(
        "anti-airdrop-farming", K.ANTI_KNOWLEDGE, C.STRATEGIC_PATTERNS,
        "Farming points on a new L2 does not reliably pay: across four drops the tokens received covered the "
        "gas spent only once.",
        (), (BASE,), ("airdrops",), 0.4, 0.6,
    ),
    # --- causal links ---------------------------------------------------------------------
    CorpusEntry(
        "causal-token-unlocks", K.CAUSAL_LINK, C.RISK_EVENTS,
        "Token unlocks above 2% of supply preceded a median 8% drawdown over the following two weeks; cut "
        "exposure beforehand.",
        (), (), ("unlocks",), 0.5, 0.65,
    ),
    CorpusEntry(
        "causal-fomc", K.CAUSAL_LINK, C.REGIME_TRANSITIONS,
        "FOMC days: on-chain volatility jumps for about three hours after the Fed statement; LP fees spike, but "
        "so do out-of-range events.",
        (), (MAINNET, ARBITRUM), ("macro",), 0.5, 0.7,
    ),
    CorpusEntry(
        "causal-cex-listing", K.CAUSAL_LINK, C.LIQUIDITY_CONDITIONS,
        "A Binance listing announcement moves the DEX price of the token within minutes and pulls DEX volume "
        "to the exchange within a day.",
        (), (ARBITRUM, BASE), ("listings",), 0.4, 0.6,
    ),
    CorpusEntry(
        "causal-lst-unwind", K.CAUSAL_LINK, C.RISK_EVENTS,
        "When the stETH discount widens past 2%, looped Aave positions get closed out by keepers, whose forced "
        "sales push the discount wider still.",
        ("lido", "aave"), (MAINNET,), ("lst",), 0.6, 0.7,
    ),
    # --- facts ----------------------------------------------------------------------------
    CorpusEntry(
        "fact-op-withdrawal", K.FACT, C.TOOL_GUIDANCE,
        "Optimism withdrawals are slow: the canonical bridge to mainnet needs 7 days (the fault-proof window); "
        "a fast bridge costs a small fee when time matters.",
        (), (OPTIMISM, MAINNET), ("bridges",), 0.5, 0.9,
    ),
    CorpusEntry(
        "fact-lido-queue", K.FACT, C.LIQUIDITY_CONDITIONS,
        "Lido withdrawal requests take 1 to 5 days to finalise, longer when the validator exit queue is "
        "congested; swapping stETH on Curve is instant but pays the discount.",
        ("lido", "curve"), (MAINNET,), ("lst",), 0.6, 0.85,
    ),
    CorpusEntry(
        "fact-aave-emode", K.FACT, C.RISK_EVENTS,
        "Aave v3 E-mode raises the maximum LTV to 93% for correlated assets such as wstETH/WETH, which "
        "allows tighter loops.",
        ("aave",), (MAINNET, ARBITRUM), ("leverage",), 0.6, 0.9,
    ),
    CorpusEntry(
        "fact-gmx-fees", K.FACT, C.FEE_OPTIMIZATION,
        "GMX charges 0.05–0.07% to open or close a position plus an hourly borrow fee; holding a leveraged "
        "position for a month costs more than the opening fee.",
        ("gmx",), (ARBITRUM,), ("perps",), 0.5, 0.9,
    ),
    CorpusEntry(
        "fact-uniswap-hooks", K.FACT, C.TOOL_GUIDANCE,
        "Uniswap v4 pools can carry hooks that change fees dynamically; read the hook contract before "
        "routing through an unfamiliar v4 pool.",
        ("uniswap-v4",), (BASE,), ("tooling",), 0.5, 0.7,
    ),
    CorpusEntry(
        "fact-curve-amplification", K.FACT, C.SLIPPAGE,
        "Curve's amplification parameter A keeps stable pools nearly flat near the peg; when a pool becomes "
        "imbalanced past 80/20 its price curve steepens sharply.",
        ("curve",), (MAINNET,), ("amm",), 0.5, 0.85,
    ),
    # --- more warnings and insights -------------------------------------------------------
    CorpusEntry(
        "warn-wrong-chain", K.WARNING, C.TOOL_GUIDANCE,
        "USDC.e on Arbitrum and native USDC are different tokens; routes that mix them pay an extra swap. "
        "Check the contract address, not the symbol.",
        (), (ARBITRUM,), ("tokens",), 0.5, 0.85,
    ),
    CorpusEntry(
        "insight-lp-vs-hold", K.INSIGHT, C.STRATEGIC_PATTERNS,
        "Over the last quarter, the ETH/USDC position in the 0.05% tier earned 14% in fees but lost 17% to "
        "impermanent loss versus holding.",
        ("uniswap-v3",), (ARBITRUM,), ("lp",), 0.7, 0.75,
    ),
    CorpusEntry(
        "insight-liquidation-bots", K.INSIGHT, C.RISK_EVENTS,
        "Liquidation bots on Arbitrum act within one block of the health factor crossing 1.0; there is no "
        "time to top up manually once it is close.",
        ("aave",), (ARBITRUM,), ("liquidations",), 0.6, 0.8,
    ),
    CorpusEntry(
        "warn-governance-attack", K.WARNING, C.RISK_EVENTS,
        "Low-turnout governance votes can be swung with borrowed voting tokens; treat a surprise proposal "
        "that touches treasury or oracle settings as an exit signal.",
        (), (), ("governance",), 0.7, 0.6,
    ),
    CorpusEntry(
        "insight-base-memecoin", K.INSIGHT, C.LIQUIDITY_CONDITIONS,
        "Memecoin pools on Base lose most of their depth within 48 hours of launch; exiting later than that "
        "meant 10% or more price impact.",
        (), (BASE,), ("memecoins",), 0.4, 0.6,
    ),
    CorpusEntry(
        "heur-keep-dry-powder", K.HEURISTIC, C.STRATEGIC_PATTERNS,
        "Dry powder: hold 20% of the treasury in USDC on Arbitrum, where most positions live, so collateral "
        "top-ups and dip buys need no bridging.",
        (), (ARBITRUM,), ("treasury",), 0.5, 0.7,
    ),
    # --- second batch: neighbours of the first batch, written as near-misses ---------------
    # slippage and MEV
    CorpusEntry(
        "slip-exact-output", K.HEURISTIC, C.SLIPPAGE,
        "To repay a fixed debt, use an exact-output swap with a cap on the input: it fixes the amount received and "
        "pushes all the slippage onto what is spent, so the repayment never comes up short.",
        ("uniswap-v3",), (ARBITRUM,), ("swaps",), 0.5, 0.8,
    ),
    CorpusEntry(
        "slip-night-spreads", K.INSIGHT, C.SLIPPAGE,
        "Between 22:00 and 04:00 UTC a $50k sell on the Velodrome OP/USDC pool pays about twice the daytime price "
        "impact, as market makers pull their ranges overnight.",
        ("velodrome",), (OPTIMISM,), ("impact",), 0.6, 0.65,
    ),
    CorpusEntry(
        "slip-lst-swap-size", K.FACT, C.SLIPPAGE,
        "Selling 2,000 wstETH through the Curve and Balancer pools costs under 0.1%; above 10,000 the impact passes "
        "1%, since the pools together hold only about 60,000.",
        ("curve", "balancer"), (MAINNET,), ("lst",), 0.5, 0.75,
    ),
    CorpusEntry(
        "mev-l2-no-sandwich", K.INSIGHT, C.SLIPPAGE,
        "Sandwich attacks are rare on Arbitrum because it has no public mempool for bots to watch; there the "
        "slippage tolerance guards against price moves more than against bots.",
        ("uniswap-v3",), (ARBITRUM,), ("mev",), 0.6, 0.7,
    ),
    CorpusEntry(
        "anti-l2-no-mev", K.ANTI_KNOWLEDGE, C.SLIPPAGE,
        "The belief that rollups carry no MEV is wrong: on Base, backrunning and cyclic arbitrage bots take profit "
        "after nearly every large swap; only sandwiching is rarer than on mainnet.",
        (), (BASE,), ("mev",), 0.5, 0.75,
    ),
    # gas
    CorpusEntry(
        "gas-maxfee-headroom", K.HEURISTIC, C.GAS_TIMING,
        "Set maxFeePerGas to twice the current base fee: the base fee can rise at most 12.5% per block, so a 2x cap "
        "survives six full blocks in a row, while the tip alone decides priority.",
        (), (MAINNET,), ("eip1559",), 0.6, 0.85,
    ),
    CorpusEntry(
        "gas-approval-permit2", K.INSIGHT, C.GAS_TIMING,
        "Signing a Permit2 allowance instead of sending a separate approve transaction, and batching it with the "
        "swap through the Universal Router, saved about 46k gas per new token on mainnet.",
        ("permit2",), (MAINNET,), ("approvals",), 0.4, 0.8,
    ),
    # routing and bridges
    CorpusEntry(
        "route-uniswapx-expiry", K.WARNING, C.ROUTE_SELECTION,
        "Intents signed on UniswapX sometimes expire with no filler when the token is illiquid and no solver finds "
        "the fill worth it; for time-critical sells, go straight to an AMM pool.",
        ("uniswapx",), (MAINNET,), ("intents",), 0.6, 0.7,
    ),
    CorpusEntry(
        "route-cctp-native", K.FACT, C.ROUTE_SELECTION,
        "Circle's CCTP burns USDC on the source chain and mints native USDC on the destination, with no liquidity "
        "pool and no bridged variant left to unwind afterwards.",
        ("cctp",), (ARBITRUM, BASE, MAINNET), ("bridges",), 0.5, 0.85,
    ),
    CorpusEntry(
        "route-fast-bridge-fee", K.INSIGHT, C.ROUTE_SELECTION,
        "Across relayer fees between Arbitrum and Base ran from 0.04% to 0.3% by size and jumped whenever the "
        "relayers' capital on the target chain ran low; split large transfers.",
        ("across",), (ARBITRUM, BASE), ("bridges",), 0.5, 0.7,
    ),
    CorpusEntry(
        "episode-bridge-stall", K.EPISODE_SUMMARY, C.ROUTE_SELECTION,
        "Episode: a 50k USDC Stargate transfer to Base sat for six hours because the destination pool was empty, "
        "and the trade it was meant to fund missed its window.",
        ("stargate",), (BASE,), ("bridges",), 0.5, 0.8,
    ),
    # liquidity and lending markets
    CorpusEntry(
        "liq-tick-cliff", K.INSIGHT, C.LIQUIDITY_CONDITIONS,
        "Most active liquidity in the Arbitrum ETH/USDC 0.05% pool sits within ±2% of spot; past a 3% move the "
        "next ticks are nearly empty and the impact per $100k rises tenfold.",
        ("uniswap-v3",), (ARBITRUM,), ("ticks",), 0.6, 0.7,
    ),
    CorpusEntry(
        "lrt-withdraw-delay", K.FACT, C.LIQUIDITY_CONDITIONS,
        "Redeeming weETH for ETH passes through EigenLayer's 7-day escrow on top of the beacon-chain exit queue; "
        "plan on 8 to 14 days, or sell on a DEX at the going discount.",
        ("eigenlayer",), (MAINNET,), ("lrt",), 0.6, 0.8,
    ),
    CorpusEntry(
        "lend-util-kink", K.CAUSAL_LINK, C.LIQUIDITY_CONDITIONS,
        "Aave's variable borrow rate turns steep once utilisation passes the optimal point (92% for USDC): when a "
        "whale withdrew, our borrow APR went from 7% to 38% within a block.",
        ("aave",), (MAINNET,), ("rates",), 0.6, 0.8,
    ),
    CorpusEntry(
        "lend-supply-cap", K.CONSTRAINT, C.TOOL_GUIDANCE,
        "Aave v3 on Base caps the total supply of each collateral asset; once the cbETH cap is reached, new "
        "deposits revert until governance raises it, so the loop cannot grow.",
        ("aave",), (BASE,), ("caps",), 0.5, 0.85,
    ),
    CorpusEntry(
        "lend-isolation-ceiling", K.FACT, C.RISK_EVENTS,
        "Assets in Aave v3 isolation mode can back only stablecoin borrows, up to a protocol-wide debt ceiling; "
        "once that ceiling fills, nobody can borrow against them until it is raised.",
        ("aave",), (ARBITRUM,), ("lending",), 0.6, 0.85,
    ),
    # regimes
    CorpusEntry(
        "regime-vol-compression", K.INSIGHT, C.REGIME_TRANSITIONS,
        "A month of ETH realised volatility under 30% preceded each of this cycle's large moves; the calm ends "
        "abruptly, so do not narrow ranges to the quiet regime's width.",
        (), (MAINNET,), ("volatility",), 0.5, 0.6,
    ),
    CorpusEntry(
        "regime-correlation-one", K.REGIME_SHIFT, C.REGIME_TRANSITIONS,
        "In the August selloff every altcoin's 30-day correlation with ETH rose above 0.9 within days; holding many "
        "different tokens gave no protection, only stablecoins did.",
        (), (), ("correlation",), 0.6, 0.7,
    ),
    CorpusEntry(
        "regime-l2-volume-shift", K.REGIME_SHIFT, C.REGIME_TRANSITIONS,
        "After Dencun cut rollup fees, more than half of our ETH/USDC flow moved from mainnet to Base and "
        "Arbitrum; mainnet pools now mostly fill whale-sized orders.",
        ("uniswap-v3",), (MAINNET, BASE, ARBITRUM), ("volume",), 0.5, 0.7,
    ),
    CorpusEntry(
        "regime-rate-cuts-yields", K.REGIME_SHIFT, C.REGIME_TRANSITIONS,
        "After the first Fed cut, on-chain stablecoin lending rates fell from 11% to 4% within two months, and "
        "carry trades funded at the old rates stopped paying.",
        ("aave",), (MAINNET,), ("macro",), 0.7, 0.65,
    ),
    # risk events, oracles, perps
    CorpusEntry(
        "risk-sequencer-grace", K.FACT, C.RISK_EVENTS,
        "When the Arbitrum sequencer restarts after an outage, Aave reads Chainlink's uptime feed and holds off "
        "liquidations for a one-hour grace period so borrowers can add collateral first.",
        ("aave", "chainlink"), (ARBITRUM,), ("sequencer",), 0.5, 0.8,
    ),
    CorpusEntry(
        "risk-admin-no-timelock", K.WARNING, C.RISK_EVENTS,
        "Contracts whose admin multisig can upgrade them without a timelock can be changed overnight; keep funds "
        "only in markets with a delay of 48 hours or more on upgrades.",
        (), (), ("admin",), 0.7, 0.8,
    ),
    CorpusEntry(
        "causal-liquidation-cascade", K.CAUSAL_LINK, C.RISK_EVENTS,
        "Forced sales from liquidations push ETH lower on DEXs and trip the next tier of underwater loans; the 12% "
        "drop last May came in three legs about 20 minutes apart.",
        ("aave",), (MAINNET, ARBITRUM), ("liquidations",), 0.7, 0.7,
    ),
    CorpusEntry(
        "anti-audit-safe", K.ANTI_KNOWLEDGE, C.RISK_EVENTS,
        "Audited does not mean safe: two protocols exploited this year had three audits each, and the bug sat in "
        "code added after the last one.",
        (), (), ("audits",), 0.6, 0.85,
    ),
    CorpusEntry(
        "oracle-heartbeat-lag", K.CAUSAL_LINK, C.RISK_EVENTS,
        "Chainlink's ETH/USD feed on Arbitrum updates on a 0.05% deviation or a 24-hour heartbeat; in a fast move "
        "Aave's collateral value lagged the DEX price by up to a minute, then liquidations arrived in a burst.",
        ("chainlink", "aave"), (ARBITRUM,), ("oracle",), 0.6, 0.7,
    ),
    CorpusEntry(
        "perp-adl", K.WARNING, C.RISK_EVENTS,
        "When GMX's pool cannot cover trader profits, auto-deleveraging closes the most profitable positions at "
        "mark price; a big winning short can be shut without warning.",
        ("gmx",), (ARBITRUM,), ("perps",), 0.6, 0.75,
    ),
    CorpusEntry(
        "perp-mark-index", K.FACT, C.RISK_EVENTS,
        "Perp liquidations trigger on the mark price, an index across several exchanges, not the last trade; a 4% "
        "wick on one exchange left our dYdX short untouched.",
        ("dydx",), (), ("perps",), 0.5, 0.8,
    ),
    # rebalancing
    CorpusEntry(
        "rebal-loop-ltv-band", K.HEURISTIC, C.REBALANCE_TIMING,
        "Re-lever the wstETH loop on Aave only when its LTV is more than 5 points off target; adjusting it daily "
        "spent more on swap fees than the yield it protected.",
        ("aave", "lido"), (MAINNET,), ("leverage",), 0.5, 0.7,
    ),
    CorpusEntry(
        "rebal-twap-guard", K.HEURISTIC, C.REBALANCE_TIMING,
        "Before each vault rebalance, compare the pool price with its 30-minute TWAP; when they differ by more "
        "than 1%, postpone, since the pool may be mid-manipulation or mid-liquidation.",
        ("uniswap-v3",), (ARBITRUM,), ("twap",), 0.6, 0.65,
    ),
    # ranges
    CorpusEntry(
        "range-lst-pair", K.HEURISTIC, C.RANGE_SELECTION,
        "For wstETH/WETH a ±1% range falls out of position about monthly as the exchange rate climbs with staking "
        "rewards; set it slightly above the current price so it stays in range longer.",
        ("uniswap-v3", "lido"), (ARBITRUM,), ("lp",), 0.5, 0.7,
    ),
    CorpusEntry(
        "range-single-sided-sell", K.STRATEGY_OUTCOME, C.RANGE_SELECTION,
        "Outcome: single-sided ETH ranges placed 3–5% above spot sold into strength on 11 of 14 attempts and "
        "earned fees while waiting, beating CEX limit orders on net price.",
        ("uniswap-v3",), (ARBITRUM,), ("lp",), 0.5, 0.7,
    ),
    # fees and yield
    CorpusEntry(
        "fee-merkl-in-range", K.INSIGHT, C.FEE_OPTIMIZATION,
        "Merkl incentives on Arbitrum pools reward only liquidity that is in range, weighted by fees earned; a "
        "narrow range collected three times the rewards per dollar of a wide one.",
        ("merkl", "uniswap-v3"), (ARBITRUM,), ("incentives",), 0.5, 0.7,
    ),
    CorpusEntry(
        "fee-ve-bribes", K.INSIGHT, C.FEE_OPTIMIZATION,
        "Locking VELO as veVELO and voting for our own pool redirected emissions to it; with bribes added, the "
        "lock returned 1.4 times its cost over six months.",
        ("velodrome",), (OPTIMISM,), ("incentives",), 0.5, 0.6,
    ),
    CorpusEntry(
        "anti-headline-apr", K.ANTI_KNOWLEDGE, C.FEE_OPTIMIZATION,
        "The highest advertised APR is not the best yield: a 30% USDC market on a new lender paid mostly in its "
        "own token, which fell 80%, so the net result was negative.",
        (), (), ("yield",), 0.5, 0.8,
    ),
    # JIT
    CorpusEntry(
        "jit-wide-core", K.HEURISTIC, C.JIT_DEFENSE,
        "JIT bots only dilute liquidity at the active tick: a wide core position lost under 5% of its fees to them "
        "while our ±0.5% band lost half, so keep most capital wide in pools they frequent.",
        ("uniswap-v3",), (MAINNET,), ("jit",), 0.6, 0.7,
    ),
    CorpusEntry(
        "jit-hook-defence", K.FACT, C.JIT_DEFENSE,
        "A Uniswap v4 hook can withhold fees from liquidity that is added and removed within the same block, "
        "which makes just-in-time provision unprofitable in that pool.",
        ("uniswap-v4",), (BASE,), ("jit",), 0.5, 0.75,
    ),
    # tooling
    CorpusEntry(
        "tool-rebasing-steth", K.FACT, C.TOOL_GUIDANCE,
        "stETH balances rebase daily; many vaults, bridges and AMMs mishandle a balance that grows by itself, so "
        "hold wstETH, whose balance stays fixed, in contracts and on L2s.",
        ("lido",), (MAINNET,), ("lst",), 0.5, 0.9,
    ),
    CorpusEntry(
        "tool-rpc-stale-read", K.WARNING, C.TOOL_GUIDANCE,
        "Load-balanced RPC endpoints can answer from a node one block behind; after a write, pin reads to the "
        "receipt's block number or the next read may show the old balance.",
        (), (ARBITRUM,), ("rpc",), 0.5, 0.8,
    ),
    CorpusEntry(
        "tool-gas-limit-buffer", K.HEURISTIC, C.TOOL_GUIDANCE,
        "eth_estimateGas underestimates aggregator swaps whose route changes between estimate and inclusion; add a "
        "25% buffer to the gas limit or they fail out of gas.",
        ("1inch",), (MAINNET,), ("gas",), 0.5, 0.8,
    ),
    CorpusEntry(
        "tool-decimals", K.WARNING, C.TOOL_GUIDANCE,
        "USDC and USDT use 6 decimals, WBTC 8 and most tokens 18; scaling by the wrong exponent once sent a swap a "
        "trillion times too small.",
        (), (), ("tokens",), 0.6, 0.9,
    ),
    CorpusEntry(
        "tool-sign-typed-data", K.WARNING, C.TOOL_GUIDANCE,
        "A signed EIP-712 message can be as dangerous as a transaction: phishing sites ask for Permit2 signatures "
        "that let them pull tokens later. Only sign typed data the daemon built itself.",
        (), (), ("security",), 0.7, 0.85,
    ),
    CorpusEntry(
        "tool-trace-revert", K.HEURISTIC, C.TOOL_GUIDANCE,
        "When a transaction reverts without a reason, trace it with debug_traceTransaction on an archive node; "
        "Uniswap's STF means the token transfer failed, usually a missing approval or a fee-on-transfer token.",
        ("uniswap-v3",), (MAINNET,), ("tooling",), 0.4, 0.8,
    ),
    # strategy, constraints, reflections
    CorpusEntry(
        "strat-pendle-yt", K.INSIGHT, C.STRATEGIC_PATTERNS,
        "Pendle YT on ezETH is a leveraged long on the floating yield plus points; its value decays to zero at "
        "maturity, so it only pays if the yield stays high.",
        ("pendle",), (ARBITRUM,), ("yield",), 0.5, 0.7,
    ),
    CorpusEntry(
        "anti-rsi-oversold", K.ANTI_KNOWLEDGE, C.STRATEGIC_PATTERNS,
        "Buying ETH whenever the daily RSI fell under 30 lost money through 2022: in a downtrend, oversold readings "
        "persisted for weeks.",
        (), (), ("signals",), 0.5, 0.75,
    ),
    CorpusEntry(
        "cons-max-leverage", K.CONSTRAINT, C.STRATEGIC_PATTERNS,
        "Hard limit set by the owner: perp leverage at most 3x, and total perp notional at most half of the "
        "treasury.",
        (), (), ("limits",), 0.7, 0.95,
    ),
    CorpusEntry(
        "pref-stable-lp", K.PREFERENCE, C.STRATEGIC_PATTERNS,
        "Owner preference: keep LP capital in stable and ETH-correlated pairs; volatile long-tail pools get at most "
        "10% of it.",
        (), (), ("lp",), 0.6, 0.9,
    ),
    CorpusEntry(
        "death-memecoin-chase", K.DEATH_REFLECTION, C.STRATEGIC_PATTERNS,
        "A golem that died bought every new Base memecoin in its first hour and never sold before the liquidity "
        "left; 90% of its treasury ended in tokens nobody would buy.",
        (), (BASE,), ("memecoins",), 0.6, 0.8,
    ),
)


QUERIES: tuple[CorpusQuery, ...] = (
    _q("How do I limit price impact when trading a very large size?", "slip-split-orders"),
    _q("How do I avoid being front-run by MEV searchers on Ethereum?", "slip-tolerance-sandwich"),
    _q("When during the week is it cheapest to submit Ethereum L1 transactions?", "gas-weekend-nights"),
    _q("Does paying a higher gas price get my swap confirmed faster on an optimistic rollup?",
       "gas-arbitrum-tip"),
    _q("Is a DEX aggregator worth it for small trades compared with going direct?", "route-aggregator-size"),
    _q("Why do my swaps keep failing when I submit an outdated price estimate?", "route-stale-quotes"),
    _q("Do markets get shallower on Saturdays and Sundays?", "liq-weekend-thin"),
    _q("What happens to liquidity mining once the reward programme stops paying out?", "liq-emissions-end"),
    _q("Is there a derivatives indicator that sentiment has flipped to pessimistic?",
       "regime-funding-negative"),
    _q("How much collateral margin is safe on a crypto loan during a sudden crash?",
       "risk-health-factor", "insight-liquidation-bots"),
    _q("Can a dollar-backed coin lose its one-dollar value, and how do I limit the damage?", "risk-usdc-depeg"),
    _q("How do exploiters distort price feeds to drain a money market?", "risk-oracle-pump"),
    _q("Why would a liquid staking derivative be priced under par?",
       "risk-steth-discount", "causal-lst-unwind"),
    _q("Should I adjust portfolio weights on a calendar or only when they wander off target?",
       "rebal-drift-threshold"),
    _q("My liquidity went out of range; should I move it immediately or be patient?", "rebal-wait-an-hour"),
    _q("How broad should my price interval be for concentrated liquidity on a volatile pair?",
       "range-width-sigma"),
    _q("How often should I reinvest my liquidity earnings, given the network cost?", "fee-compound-cadence"),
    _q("Where can I get a guaranteed, non-floating interest rate on staked ether until a set date?",
       "fee-pendle-fixed"),
    _q("What is flash capital that appears only for a whale trade and vanishes afterwards?", "jit-pattern"),
    _q("Should I test a complicated transaction in a sandbox copy of the chain before broadcasting it?",
       "tool-simulate-first"),
    _q("Why do my node calls get throttled, and what backup should I configure?", "tool-rpc-limits"),
    _q("Is it safe to leave open-ended spend permissions for contracts on my account?", "tool-unlimited-approvals"),
    _q("How can I collect yield while staying market-neutral?", "strat-basis-trade"),
    _q("Does a lot of money parked in a contract prove it is secure?", "anti-tvl-safety"),
    _q("If providing liquidity left me worse off than simply holding, will that reverse over time?",
       "anti-il-recovers"),
    _q("Do coins drop when large vesting tranches for insiders hit circulation?",
       "causal-token-unlocks"),
    _q("How do central bank meetings shake up crypto prices in the short term?", "causal-fomc"),
    _q("How long do exits from the OP Stack chain to Ethereum last, and can I make them quicker?",
       "fact-op-withdrawal"),
    _q("What happened to fade-the-move trading systems when price swings suddenly doubled?",
       "regime-vol-doubling"),
    _q("What has been the biggest cause of crypto hacks, and should I leave coins parked on other chains?",
       "risk-bridge-hack"),
    _q("My pending payment is frozen and all the ones after it are queued; how do I unjam it?", "tool-nonce-stuck"),
    _q("Is it a myth that one particular day brings the lowest Ethereum transaction costs?", "anti-tuesday-gas"),
    _q("How expensive is it to sit in a geared futures trade for weeks?", "fact-gmx-fees"),
    _q("How dangerous is stacking the same staked collateral again and again to amplify returns?",
       "strat-lst-loop"),
    _q("Why did my trade include a conversion between two versions of the same dollar coin?",
       "warn-wrong-chain"),
    _q("How much idle cash should sit in reserve for opportunities and emergencies?", "heur-keep-dry-powder"),
    # --- second batch ---------------------------------------------------------------------
    _q("I must obtain a precise quantity of a coin to settle a loan; which kind of trade makes sure I get all of it?",
       "slip-exact-output"),
    _q("On Coinbase's L2, do joke coins execute worse than quoted, and during which part of the day is it least "
       "bad?",
       "slip-quote-vs-fill"),
    _q("How big a clip of the wrapped staked-ether token can I dump on DEXs before the hit tops one percent?",
       "slip-lst-swap-size"),
    _q("Which venue on Ethereum handles a seven-figure conversion between two major dollar tokens with the least "
       "loss?", "slip-curve-stables"),
    _q("Is it true that second-layer networks have no extractable value at all?", "anti-l2-no-mev"),
    _q("How high should my bid limit be so a transfer still lands if demand keeps climbing for a little while?",
       "gas-maxfee-headroom"),
    _q("These days, is it local activity or Ethereum's own load that makes a rollup transfer expensive?",
       "gas-l2-blobs"),
    _q("Why did my gasless off-chain order simply lapse without ever executing, and what should I use when speed "
       "matters?", "route-uniswapx-expiry"),
    _q("How do I shift dollars to another rollup and end up holding the issuer's official coin rather than a "
       "wrapped IOU?", "route-cctp-native"),
    _q("For an obscure coin, should I go via the main ether pair instead of its own tiny market?",
       "route-long-tail-hop"),
    _q("Why does execution get dramatically worse after a modest swing away from where market makers concentrate "
       "their capital?", "liq-tick-cliff"),
    _q("How long until a restaked receipt token is converted back to the underlying coin if I go through the protocol?",
       "lrt-withdraw-delay"),
    _q("If I redeem through the biggest staking provider directly, when do I hold ether again, and is there a "
       "faster route?", "fact-lido-queue"),
    _q("Why do decentralised exchange reserves drain when money-market yields climb?", "liq-borrow-rate-flight"),
    _q("Why did the interest on my outstanding loan suddenly spike after a large depositor pulled out?",
       "lend-util-kink"),
    _q("Why is the lending market refusing more of Coinbase's staked ether as backing?", "lend-supply-cap"),
    _q("Does an unusually sleepy market tend to stay that way?", "regime-vol-compression"),
    _q("Does spreading capital over lots of coins shield me when the whole market tanks together?",
       "regime-correlation-one"),
    _q("If a rollup's block producer halts, can my loan be seized the instant the network comes back?",
       "risk-sequencer-grace"),
    _q("Should I trust a platform if its team could swap the code in an instant?", "risk-admin-no-timelock"),
    _q("Why does a broad market crash tend to feed on itself in successive waves?", "causal-liquidation-cascade"),
    _q("Does a clean report from reputable reviewers guarantee a platform can't be hacked?", "anti-audit-safe"),
    _q("Why does the money market's view of my backing trail what swaps show during violent swings?",
       "oracle-heartbeat-lag"),
    _q("Can the venue unilaterally terminate my futures bet while it is sitting on large gains?", "perp-adl"),
    _q("Does a brief spike at a single venue get my geared futures bet wiped?", "perp-mark-index"),
    _q("How far may my loan-to-collateral ratio wander from its goal before I should resize?",
       "rebal-loop-ltv-band"),
    _q("When is re-centring my liquidity not worth it, given the network charge against expected income?",
       "rebal-gas-vs-fees"),
    _q("For a pairing of a yield-bearing ether wrapper with plain ether, which way should the band lean?",
       "range-lst-pair"),
    _q("Has parking one-directional liquidity above the market worked as a way to take profits?",
       "range-single-sided-sell"),
    _q("On Coinbase's rollup, which charge level suits capital in the native-coin/dollar market, and when does the "
       "pricier one pay better?", "fee-tier-choice"),
    _q("Whose pool pays out when futures punters come out ahead, and when do the providers profit?", "fee-gmx-glp"),
    _q("Is the venue quoting the largest interest automatically the right home for idle dollars?",
       "anti-headline-apr"),
    _q("Does how broad my interval is change how much the same-block opportunists skim from me?", "jit-wide-core"),
    _q("Can a venue's custom plug-in logic defeat opportunists whose capital is present only for an instant?",
       "jit-hook-defence"),
    _q("Which pricing bucket is least exposed to opportunists that park huge capital for a single block around "
       "whale trades?", "jit-move-tier"),
    _q("Should I inspect custom plug-in code attached to a venue before sending my trade through it?",
       "fact-uniswap-hooks"),
    _q("Why do my holdings look unchanged straight after a confirmed transfer when I ask the provider?",
       "tool-rpc-stale-read"),
    _q("My transactions run out of fuel halfway through; how much headroom should I give them?",
       "tool-gas-limit-buffer"),
    _q("Can merely approving a pop-up request in my wallet, with nothing broadcast, cost me my funds?",
       "tool-sign-typed-data"),
    _q("Which instrument gives geared exposure to a variable return stream, and what is it worth at expiry?",
       "strat-pendle-yt"),
    _q("What is the ceiling on how geared our futures bets may be?", "cons-max-leverage"),
)


# Function words and question scaffolding: they carry no topic, so sharing them is allowed.
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did",
    "do", "does", "doing", "don", "down", "during", "each", "few", "for", "from", "further", "get", "gets", "got",
    "had", "has", "have", "having", "he", "her", "here", "hers", "how", "i", "if", "in", "into", "is", "it", "its",
    "itself", "just", "let", "me", "more", "most", "my", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "out", "over", "own", "same", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours",
))

_TOKEN = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ations", "ation", "ities", "ings", "ity", "ing", "ers", "ies", "ed", "er", "es", "ly", "s")


def content_words(text: str) -> set[str]:
    """Lowercase words of `text` minus stopwords and trivial tokens (single characters and numbers)."""
    return {w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()}


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _related(a: str, b: str) -> bool:
    """Same word or same stem: equal, equal after stripping a common suffix (liquidated and
    liquidation, stakers and staking), sharing their first five letters (both at least five
    long), or one stem (at least four long) starting the other (swap and swapping)."""
    if a == b:
        return True
    sa, sb = _stem(a), _stem(b)
    if sa == sb:
        return True
    if len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5]:
        return True
    short, long_ = sorted((sa, sb), key=len)
    return len(short) >= 4 and long_.startswith(short)


def shared_words(query: str, text: str) -> set[tuple[str, str]]:
    """Pairs (query word, entry word) that count as shared keywords."""
    return {(q, t) for q in content_words(query) for t in content_words(text) if _related(q, t)}
