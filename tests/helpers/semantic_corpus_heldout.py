"""A second keyword-disjoint corpus, held out from tuning: a golem's operational knowledge.

Same rules as tests/helpers/semantic_corpus.py (whose `shared_words` defines "shares"): a query shares
no content word nor stem with the entries that answer it, and most queries share a word with
a wrong neighbour on the same topic, so lexical evidence points the wrong way. Written after
the fusion weight was chosen, to check it on text it was not tuned on (bench/bench_locomo.py,
tests/grimoire/test_fusion_recall.py).
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
    _e("rpc-rate-limit", K.WARNING, GAS, "The public RPC endpoint answers HTTP 429 after about 25 requests per "
       "second; batch calls or run a private node.", ("rpc",), 0.6),
    _e("rpc-stale-head", K.WARNING, GAS, "A lagging RPC node can serve a block head two minutes old; compare "
       "its latest block number with a second provider before trading.", ("rpc",), 0.4),
    _e("rpc-failover", K.HEURISTIC, GAS, "Keep three RPC providers and switch on the first timeout; sticky "
       "sessions on one provider caused a missed exit.", ("rpc",), 0.5),
    _e("nonce-gap", K.WARNING, GAS, "A dropped transaction leaves a nonce gap and every later transaction "
       "waits in the mempool; resend the missing nonce with a higher tip.", ("nonce",), 0.5),
    _e("nonce-parallel", K.HEURISTIC, GAS, "Signing two transactions concurrently from one account reuses a "
       "nonce; serialise signing behind one counter per account.", ("nonce",), 0.4),
    _e("key-rotation", K.HEURISTIC, RISK, "Rotate the hot wallet key monthly and move surplus funds to the "
       "cold wallet every Sunday.", ("wallet",), 0.6),
    _e("key-leak-env", K.WARNING, RISK, "Private keys in environment variables leaked through a crash dump "
       "uploaded to the error tracker.", ("wallet",), 0.5),
    _e("hot-wallet-cap", K.CONSTRAINT, RISK, "The hot wallet may hold at most five percent of the treasury.",
       ("wallet",), 0.5),
    _e("approval-revoke", K.HEURISTIC, RISK, "Unlimited token approvals to a router outlive the trade; revoke "
       "them after each large swap.", ("approvals",), 0.4),
    _e("clock-drift", K.WARNING, OPS, "Server clock drift of a few seconds made signed exchange API "
       "requests fail as expired; keep NTP running.", ("time",), 0.5),
    _e("disk-full-log", K.WARNING, OPS, "Debug logging filled the disk in two days and the database "
       "stopped accepting writes; cap log files.", ("disk",), 0.5),
    _e("memory-leak-ws", K.WARNING, OPS, "A websocket subscription that never unsubscribed grew memory "
       "until the process was killed by the kernel.", ("websocket",), 0.6),
    _e("ws-reconnect", K.HEURISTIC, OPS, "Websocket feeds drop silently; resubscribe when no message "
       "arrived for thirty seconds.", ("websocket",), 0.4),
    _e("backtest-lookahead", K.ANTI_KNOWLEDGE, STRAT, "A backtest that used the closing price to decide "
       "the same candle's entry showed profits that vanished live.", ("backtest",), 0.5),
    _e("backtest-fees", K.INSIGHT, STRAT, "Backtests without trading fees and slippage overstated the "
       "strategy's return threefold.", ("backtest",), 0.5),
    _e("overfit-params", K.WARNING, STRAT, "Parameters tuned on one month of data failed the next month; "
       "validate on a later period never used for tuning.", ("tuning",), 0.4),
    _e("alert-fatigue", K.INSIGHT, OPS, "Paging the owner for every failed transaction trained them to "
       "ignore pages; alert only when losses exceed a threshold.", ("alerts",), 0.5),
    _e("heartbeat-dead-man", K.HEURISTIC, OPS, "Emit a heartbeat every minute; an external watchdog "
       "unwinds positions if three heartbeats are missed.", ("alerts",), 0.6),
    _e("gas-estimate-margin", K.HEURISTIC, GAS, "Add twenty percent to the gas estimate for calls whose path "
       "depends on state that can change before inclusion.", ("gas",), 0.5),
    _e("l2-sequencer-down", K.WARNING, RISK, "When the rollup sequencer halts, transactions queue for hours; "
       "force inclusion through the L1 inbox costs far more.", ("rollup",), 0.5),
    _e("bridge-finality", K.FACT, RISK, "Withdrawals from an optimistic rollup to mainnet wait seven days "
       "for the fraud proof window.", ("rollup",), 0.4),
    _e("oracle-heartbeat", K.FACT, RISK, "Chainlink feeds update on a deviation threshold or a heartbeat of "
       "an hour, whichever comes first.", ("oracle",), 0.5),
    _e("price-feed-sanity", K.HEURISTIC, RISK, "Reject an oracle price more than three percent from the "
       "median of two exchanges before acting on it.", ("oracle",), 0.5),
    _e("tax-lot-record", K.FACT, STRAT, "Every fill is logged with cost basis so the owner's accountant "
       "can compute realised gains per lot.", ("records",), 0.4),
)

QUERIES: tuple[CorpusQuery, ...] = (
    _q("Why does the chain gateway turn me away when I query it quickly?", "rpc-rate-limit"),
    _q("How can I tell the chain gateway I use is behind the tip?", "rpc-stale-head"),
    _q("What should happen when the chain gateway goes quiet?", "rpc-failover"),
    _q("My queued sends are stuck behind one that disappeared; what now?", "nonce-gap"),
    _q("Why did a pair of payments from a single address collide?", "nonce-parallel"),
    _q("How often should I change the signing secret of the spending account?", "key-rotation"),
    _q("Where could a secret escape when the program dies abruptly?", "key-leak-env"),
    _q("Why did authenticated venue calls get rejected as outdated?", "clock-drift"),
    _q("What made storage run out and halt the ledger?", "disk-full-log"),
    _q("Why does the daemon keep growing until the OS ends it?", "memory-leak-ws"),
    _q("Historical simulation looked great but real money lost; which mistake peeks ahead?", "backtest-lookahead"),
    _q("Why were simulated gains so inflated compared with reality, cost-wise?", "backtest-fees"),
    _q("How do I stop my human from tuning out notifications?", "alert-fatigue"),
    _q("Who exits my bets if the agent goes silent?", "heartbeat-dead-man"),
    _q("How long until funds leaving an L2 arrive on Ethereum itself?", "bridge-finality"),
    _q("How do I catch a bogus quote from a data provider before trading on it?", "price-feed-sanity"),
)
