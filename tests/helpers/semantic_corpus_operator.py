"""A third keyword-disjoint corpus: the questions a DeFi golem's operator asks, with same-topic distractors.

Same rules as tests/helpers/semantic_corpus.py (whose `shared_words` defines "shares"): a query shares
no content word nor stem with the entries that answer it, and most queries share a word with a
wrong neighbour on the same topic (each topic has two or three entries: the answer and its
distractors), so lexical evidence points the wrong way. Each query also has a
decoy: an entry written to share the query's wording (often its rarest words) but answering
something else, the shape that made fusion lose to cosine on a held-out corpus. Written for
step 20's fusion cross-validation (bench/bench_fusion_cv.py), in an operator's words rather than an agent's.
"""

from __future__ import annotations

from crdt import Kind
from crdt.body import Category
from tests.helpers.semantic_corpus import CorpusEntry, CorpusQuery

__all__ = ["ENTRIES", "QUERIES"]

K, C = Kind, Category
GAS, RISK, OPS, STRAT = C.GAS_TIMING, C.RISK_EVENTS, C.TOOL_GUIDANCE, C.STRATEGIC_PATTERNS


def _e(key: str, kind: Kind, cat: Category, content: str, tags: tuple[str, ...] = (),
       importance: float = 0.5) -> CorpusEntry:
    return CorpusEntry(key, kind, cat, content, (), (), tags, importance, 0.7)


def _q(text: str, *keys: str) -> CorpusQuery:
    return CorpusQuery(text, frozenset(keys))


ENTRIES: tuple[CorpusEntry, ...] = (
    # concentrated liquidity
    _e("lp-out-of-range", K.WARNING, STRAT, "A narrow Uniswap v3 position earns nothing once the price leaves "
       "its band; the golem sat idle for nine days after ETH rallied.", ("liquidity",), 0.6),
    _e("lp-rebalance-cost", K.HEURISTIC, STRAT, "Re-centring a concentrated position costs two swaps plus gas; "
       "below roughly 400 dollars of capital it loses more than the fees earned.", ("liquidity",), 0.5),
    _e("lp-fee-tier", K.INSIGHT, STRAT, "Stable pairs collect most volume in the 0.01 percent pool, volatile "
       "pairs in the 0.3 percent pool.", ("liquidity",), 0.4),
    # lending and liquidation
    _e("health-factor-floor", K.CONSTRAINT, RISK, "Keep the Aave health factor above 1.6; below 1.2 a ten "
       "percent drop triggers liquidation.", ("lending",), 0.7),
    _e("liquidation-penalty", K.INSIGHT, RISK, "Liquidators seize collateral at a five to ten percent bonus, "
       "so being liquidated costs far more than repaying early.", ("lending",), 0.5),
    _e("borrow-rate-spike", K.WARNING, RISK, "When a market's utilisation passes its kink, variable borrow "
       "interest jumps from four to over forty percent within minutes.", ("lending",), 0.5),
    # perpetuals
    _e("funding-drain", K.WARNING, STRAT, "Holding a long perp through a week of positive funding paid 3.1 "
       "percent of notional to shorts; check funding before carrying a position.", ("perps",), 0.6),
    _e("perp-leverage-cap", K.CONSTRAINT, RISK, "Perpetual positions are capped at three times leverage.",
       ("perps",), 0.6),
    _e("perp-mark-wick", K.WARNING, RISK, "A thin order book wicked the mark price and closed a leveraged "
       "position that the spot market never threatened.", ("perps",), 0.4),
    # MEV
    _e("sandwich-slippage", K.WARNING, GAS, "Swaps sent to the public mempool with two percent tolerance were "
       "sandwiched; route large swaps through a private relay such as Flashbots Protect.", ("mev",), 0.7),
    _e("mev-backrun-rebate", K.INSIGHT, GAS, "MEV Blocker returns part of the backrun value to the sender.",
       ("mev",), 0.3),
    _e("mev-private-delay", K.HEURISTIC, GAS, "Private relays can hold a transaction for several blocks; do "
       "not use them for time-critical exits.", ("mev",), 0.4),
    # oracles
    _e("twap-manipulation", K.WARNING, RISK, "A thin pool's time-weighted average was pushed for a few blocks "
       "and a lending market priced collateral from it.", ("oracle",), 0.6),
    _e("chainlink-heartbeat", K.HEURISTIC, RISK, "Chainlink feeds update on a deviation threshold or a "
       "heartbeat; a value older than its heartbeat means the feed is stale.", ("oracle",), 0.5),
    # stablecoins
    _e("depeg-exit", K.HEURISTIC, RISK, "If USDC trades below 0.98 for an hour, swap into a second dollar "
       "token and halt new positions.", ("stablecoin",), 0.7),
    _e("stable-yield-source", K.INSIGHT, STRAT, "Double-digit returns on dollar tokens usually come from "
       "leverage loops or token emissions, not borrower demand.", ("stablecoin",), 0.4),
    # governance
    _e("timelock-watch", K.HEURISTIC, RISK, "Read queued timelock transactions of every protocol we deposit "
       "in; an upgrade can change withdrawal rules after 48 hours.", ("governance",), 0.5),
    _e("governance-vote-bribe", K.INSIGHT, STRAT, "Vote markets pay more for gauge votes in the week before an "
       "epoch ends.", ("governance",), 0.3),
    # withdrawals and unbonding
    _e("unbonding-wait", K.FACT, STRAT, "Unstaking from the restaking vault takes seven days before the "
       "tokens can move.", ("staking",), 0.5),
    _e("withdraw-queue", K.WARNING, RISK, "During a bank run the vault's redemption queue grew to three "
       "weeks; size positions to exits, not to deposits.", ("staking",), 0.6),
    _e("staking-slash", K.WARNING, RISK, "An operator's double signing burned one percent of delegated stake.",
       ("staking",), 0.4),
    # the golem's own spending
    _e("inference-budget", K.CONSTRAINT, OPS, "Language model calls are limited to 20 dollars a day; at the "
       "limit the golem drops to the small model for routine ticks.", ("cost",), 0.7),
    _e("gas-budget", K.CONSTRAINT, GAS, "Gas spending may not exceed two percent of the position it serves.",
       ("cost",), 0.6),
    _e("cost-report", K.HEURISTIC, OPS, "Post a weekly cost report with model tokens, gas and exchange fees.",
       ("cost",), 0.3),
    # gas timing
    _e("gas-weekend", K.INSIGHT, GAS, "Base fees on mainnet are lowest on Sunday mornings UTC; batch "
       "non-urgent rebalances then.", ("gas",), 0.5),
    _e("gas-spike-nft", K.WARNING, GAS, "A popular mint pushed base fees past 300 gwei for an hour; pending "
       "swaps with fixed caps were stuck.", ("gas",), 0.4),
    # supervision and control
    _e("kill-switch", K.HEURISTIC, OPS, "The operator's pause flag in the config stops new trades at the next "
       "tick; open positions are left alone.", ("control",), 0.7),
    _e("approval-threshold", K.CONSTRAINT, OPS, "Trades above 5,000 dollars wait for an operator confirmation "
       "in the chat channel.", ("control",), 0.6),
    _e("dead-man-exit", K.HEURISTIC, RISK, "If the golem misses three heartbeats, a watchdog contract unwinds "
       "every leveraged position.", ("control",), 0.6),
    # bridges
    _e("bridge-delay", K.FACT, GAS, "Optimistic rollup withdrawals through the canonical bridge settle after "
       "a seven day challenge period.", ("bridge",), 0.5),
    _e("bridge-exploit", K.WARNING, RISK, "Third-party bridges holding pooled collateral were drained three "
       "times this year; move only working capital across them.", ("bridge",), 0.5),
    # airdrops and emissions
    _e("emission-dump", K.ANTI_KNOWLEDGE, STRAT, "Farming a new token's emissions and holding them lost "
       "money: reward tokens fell 80 percent within a month.", ("emissions",), 0.5),
    _e("sybil-filter", K.WARNING, STRAT, "Airdrop checkers exclude wallets funded from the same source; "
       "splitting capital over fresh wallets earned nothing.", ("airdrop",), 0.4),
    # exchanges
    _e("cex-withdraw-freeze", K.WARNING, RISK, "The exchange paused withdrawals for maintenance without "
       "notice; keep no more than a day's trading float there.", ("exchange",), 0.5),
    _e("cex-api-ip", K.HEURISTIC, OPS, "Exchange API keys bound to a fixed IP address stop working when the "
       "server moves; update the allow list first.", ("exchange",), 0.4),
    # tax and records
    _e("tax-lots", K.HEURISTIC, OPS, "Record the cost basis of every lot at acquisition; rebuilding it "
       "from explorers later took two days.", ("accounting",), 0.4),
    _e("pnl-mark", K.INSIGHT, OPS, "Daily profit figures should mark positions at the oracle price, not the "
       "last fill.", ("accounting",), 0.3),
    # decoys: each shares the wording of an operator question (its rarest words) but answers
    # something else on the same topic, the way an operator's words meet the wrong note
    _e("decoy-pool-deposit", K.FACT, STRAT, "Pool deposit receipts are ERC-20 tokens; the market value of a "
       "receipt climbed with the pool's fees.", ("liquidity",), 0.4),
    _e("decoy-band-account", K.INSIGHT, STRAT, "A small account can hold one band per pool; moving it needs a "
       "new NFT each time.", ("liquidity",), 0.4),
    _e("decoy-loan-selling", K.INSIGHT, RISK, "Forced selling by funds drifted the loan market for days in "
       "March.", ("lending",), 0.4),
    _e("decoy-loan-close", K.HEURISTIC, RISK, "Close a loan sooner when settling it frees collateral for a "
       "better trade.", ("lending",), 0.4),
    _e("decoy-loan-open", K.FACT, RISK, "Keeping a loan open needs no action unless governance changes the "
       "asset's parameters; costly votes are rare.", ("lending",), 0.4),
    _e("decoy-leveraged-returns", K.INSIGHT, STRAT, "Leveraged bets kept open for days show the best returns "
       "in trending weeks.", ("perps",), 0.4),
    _e("decoy-derivatives-multiplier", K.FACT, STRAT, "The derivatives venue's fee multiplier halves for "
       "accounts above a monthly volume.", ("perps",), 0.4),
    _e("decoy-bot-trade", K.INSIGHT, STRAT, "Our trade bot got ahead of the market twice by reading funding "
       "before the hour.", ("bots",), 0.4),
    _e("decoy-bots-order", K.FACT, GAS, "Order routing bots extract quotes from five aggregators and recoup "
       "their fee from price improvement.", ("mev",), 0.4),
    _e("decoy-submission-route", K.FACT, GAS, "The submission route for urgent unwinds is the public mempool "
       "with a high tip.", ("mev",), 0.4),
    _e("decoy-deposits-protocol", K.FACT, RISK, "The borrowing protocol judges deposits by a loan-to-value "
       "figure per asset.", ("lending",), 0.4),
    _e("decoy-price-reference", K.FACT, RISK, "The price reference for reports is refreshing every minute "
       "from three exchanges.", ("oracle",), 0.4),
    _e("decoy-usd-coin-plan", K.HEURISTIC, STRAT, "The plan for USD coin balances: lend them in the two "
       "largest money markets.", ("stablecoin",), 0.4),
    _e("decoy-usd-interest", K.FACT, STRAT, "Interest offered on USD coins is paid daily and funds our gas "
       "wallet.", ("stablecoin",), 0.4),
    _e("decoy-platform-terms", K.FACT, OPS, "Platform terms of service bar automated accounts from some "
       "regions; our money sits with compliant ones.", ("governance",), 0.4),
    _e("decoy-locked-assets", K.FACT, STRAT, "Locked-up assets earn a boosted rate that becomes spendable "
       "yield each epoch.", ("staking",), 0.4),
    _e("decoy-pool-rush", K.INSIGHT, STRAT, "Everyone rushes into a new pool at once in its first week; "
       "rates then fall for a long time.", ("staking",), 0.4),
    _e("decoy-agent-ai-cap", K.FACT, OPS, "The agent's AI provider caps requests per minute; what happens "
       "then is a short wait.", ("cost",), 0.4),
    _e("decoy-network-ceiling", K.FACT, GAS, "Network fees have no protocol ceiling; trade size does not "
       "change what a transfer is worth to validators.", ("gas",), 0.4),
    _e("decoy-cheapest-send", K.INSIGHT, GAS, "The cheapest on-chain send of stablecoins is on an L2, where "
       "transactions cost a cent.", ("gas",), 0.4),
    _e("decoy-halt-bot", K.FACT, OPS, "The market-making bot halts quoting right away when volatility spikes "
       "and resumes after ten minutes.", ("control",), 0.4),
    _e("decoy-orders-signoff", K.FACT, OPS, "Limit orders need a sign-off from the venue's risk engine "
       "before they rest on the book.", ("control",), 0.4),
    _e("decoy-agent-silent", K.FACT, OPS, "The agent goes silent in the chat channel at night; open bets are "
       "reported in the morning summary.", ("control",), 0.4),
    _e("decoy-l2-funds", K.INSIGHT, GAS, "Moving funds between two L2s through a fast bridge takes minutes "
       "and costs little.", ("bridge",), 0.4),
    _e("decoy-cross-chain-park", K.HEURISTIC, STRAT, "Park idle money in cross-chain yield contracts only "
       "after an audit.", ("bridge",), 0.4),
    _e("decoy-harvest-coins", K.HEURISTIC, STRAT, "Harvest incentive coins weekly: each harvest costs gas.",
       ("emissions",), 0.4),
    _e("decoy-free-tokens", K.FACT, STRAT, "Free tokens from the last airdrop qualify for staking on new "
       "addresses only.", ("airdrop",), 0.4),
    _e("decoy-venue-sit", K.FACT, RISK, "Orders sit on a centralised venue's book until filled or "
       "cancelled at once.", ("exchange",), 0.4),
    _e("decoy-venue-machine", K.FACT, OPS, "Venue credentials live on the machine in an encrypted file.",
       ("exchange",), 0.4),
    _e("decoy-tax-log", K.HEURISTIC, OPS, "Log tax estimates each quarter; buying time for the filing is "
       "easy with an extension.", ("accounting",), 0.4),
)

QUERIES: tuple[CorpusQuery, ...] = (
    _q("Why did my pool deposit stop paying out after the market climbed?", "lp-out-of-range"),
    _q("When is moving my pool band not worth it for a small account?", "lp-rebalance-cost"),
    _q("How close to forced selling of my loan can I let things drift?", "health-factor-floor"),
    _q("Why is a forced close of my loan so much worse than settling it sooner?", "liquidation-penalty"),
    _q("Why did my loan suddenly get so costly to keep open?", "borrow-rate-spike"),
    _q("What quietly ate my returns while I kept a leveraged bet open for days?", "funding-drain"),
    _q("How much multiplier am I allowed on derivatives bets?", "perp-leverage-cap"),
    _q("Why did a bot get ahead of my trade and leave me worse off?", "sandwich-slippage"),
    _q("Is there a way to recoup some of what bots extract from my order?", "mev-backrun-rebate"),
    _q("Why shouldn't urgent unwinds go through the hidden submission route?", "mev-private-delay"),
    _q("How could someone fake the figure a borrowing protocol uses to judge my deposits?", "twap-manipulation"),
    _q("How do I know the price reference has stopped refreshing?", "chainlink-heartbeat"),
    _q("What's the plan if the USD coin loses its one-to-one peg?", "depeg-exit"),
    _q("What actually funds the huge interest offered on USD coins?", "stable-yield-source"),
    _q("How can a platform alter its terms on me while my money sits there?", "timelock-watch"),
    _q("How long until locked-up assets I withdraw become spendable?", "unbonding-wait"),
    _q("Could I be trapped for a long time if everyone rushes out of a pool at once?", "withdraw-queue"),
    _q("How much may the agent spend on AI, and what happens at the cap?", "inference-budget"),
    _q("Is there a ceiling on network fees relative to what a trade is worth?", "gas-budget"),
    _q("When is the cheapest time to send on-chain transactions?", "gas-weekend"),
    _q("How do I halt the bot right away?", "kill-switch"),
    _q("Which orders need my sign-off first?", "approval-threshold"),
    _q("What happens to open bets if the agent goes silent?", "dead-man-exit"),
    _q("How long does moving funds from an L2 back to Ethereum take?", "bridge-delay"),
    _q("Is it safe to park lots of money in cross-chain transfer contracts?", "bridge-exploit"),
    _q("Should we keep the incentive coins we harvest?", "emission-dump"),
    _q("Why did spreading money over many new addresses not qualify for free tokens?", "sybil-filter"),
    _q("How much should sit on a centralised venue at once?", "cex-withdraw-freeze"),
    _q("Why did my venue credentials fail after we relocated the machine?", "cex-api-ip"),
    _q("What should I log when buying so tax time is easy?", "tax-lots"),
)
