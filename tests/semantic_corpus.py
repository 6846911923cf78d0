"""A small DeFi Grimoire for measuring semantic recall (used by test_semantic_recall.py).

ENTRIES are knowledge a trading golem would write (65 entries over the twelve categories
and seven kinds). QUERIES are paraphrased questions a golem would ask, each with the keys
of the one or two entries that answer it. A query shares no content word, nor a word
stem, with the entries that answer it (their content, tags and protocols: everything the
FTS5 index sees); `shared_words` defines "shares" and the tests enforce it. Keyword search
can therefore reach an answer only by accident, through function words the query and the
answer both happen to use.

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
