"""The decision benchmark's world, pure: everything the arms share, drawn from the seed alone.

One `World` per seed holds every write each golem makes (honest, and the attacker's for
golem 2 in the variants that turn it), each write's hidden truth, topic and stated
confidence, every question each golem is asked, the luck of each decision, and the draws a
golem uses when it restates what it was shown (a near-copy). No draw depends on what an arm
does: the arms are run *on* the world, and `World.digest()` (a BLAKE2b of its canonical JSON)
is printed by every run so the report can assert one world per seed across arms and
variants. Before this module the near-copy draws came from the write stream only when a golem
had received something, so solo and the sync arms lived in different worlds from day 2.

The domain: 12 topics (a protocol on a chain); an insight says how a metric of a protocol on a
chain moves; a heuristic says what to do when it does. A write is "good" (acting on it helps
with probability `HELP["good"]` = 0.8; 70 % of honest writes) or "bad" (0.25). The writer
states a confidence without knowing which (0.6-0.9 insights, 0.7-0.9 heuristics); the
attacker states 1.0 and writes only bad knowledge.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass

__all__ = ["CHAINS", "GOLEMS", "HELP", "PROTOCOLS", "Decision", "NearCopyDraw", "World", "Write", "luck",
           "make_world", "near_copy_text"]

GOLEMS = 3
PROTOCOLS = ("uniswap-v3", "aave-v3", "curve", "gmx")
CHAINS = ("mainnet", "arbitrum", "base")
METRICS = ("fee tier", "utilisation", "slippage at 100k", "liquidation threshold", "funding rate", "borrow rate",
           "depth at 2%", "oracle delay", "withdrawal queue", "gas per swap")
MOVES = ("widens", "tightens", "doubles", "halves", "lags", "leads")
WHEN = ("after large liquidations", "during weekend lows", "when ETH gas is above 40 gwei",
        "around option expiries", "after governance votes", "when stablecoin supply contracts")
ACTIONS = ("reduce position size by a third", "move liquidity to the 0.05% pool", "pause new borrows",
           "widen the rebalance band", "hedge with a short perp", "switch the route to the aggregator")
HELP = {"good": 0.8, "bad": 0.25}
GOOD_SHARE = 0.7
NEAR_COPY_CHANCE = 0.5


@dataclass(frozen=True, slots=True)
class Write:
    """One entry a golem writes at the start of `day` (in `seq` order)."""

    golem: int
    day: int
    seq: int
    kind: str  # insight | heuristic | strategy_outcome | fact (soma)
    truth: str  # good | bad | soma
    confidence: float
    content: str
    topic: tuple[str, str] | None = None  # (protocol, chain): the decisions it applies to
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """The `n`-th question golem `golem` is asked on `day`, and the decision's luck (uniform 0..1):
    acting on an entry helps iff `luck < HELP[truth]`."""

    golem: int
    day: int
    n: int
    topic: tuple[str, str]
    question: str
    luck: float


@dataclass(frozen=True, slots=True)
class NearCopyDraw:
    """Whether golem `golem` restates on `day` one sibling insight it was shown (`u < 0.5`), and
    which (`pick`: its position in the sorted shown ids, as a fraction)."""

    golem: int
    day: int
    u: float
    pick: float


@dataclass(frozen=True, slots=True)
class World:
    seed: int
    days: int
    decisions: int
    honest: tuple[Write, ...]  # every golem's honest writes, all days
    attacker: tuple[Write, ...]  # golem 2's writes on the days it is compromised
    questions: tuple[Decision, ...]
    near_copies: tuple[NearCopyDraw, ...]

    def digest(self) -> str:
        """A BLAKE2b-128 of the world's canonical JSON: equal iff the worlds are."""
        doc = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(doc.encode(), digest_size=16).hexdigest()

    def texts(self) -> list[str]:
        """Every text an arm may embed: writes, questions and the near-copies of every insight."""
        writes = self.honest + self.attacker
        out = [w.content for w in writes] + [q.question for q in self.questions]
        out += [near_copy_text(w.content) for w in writes if w.kind == "insight"]
        return list(dict.fromkeys(out))


def luck(seed: int, *parts: object) -> float:
    """A uniform draw fixed by the seed and `parts` alone."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def near_copy_text(content: str) -> str:
    return content.rstrip(".") + ", as seen again."


def _topic(rng: random.Random) -> tuple[str, str]:
    return rng.choice(PROTOCOLS), rng.choice(CHAINS)


def _insight(rng: random.Random, topic: tuple[str, str]) -> str:
    return f"On {topic[1]}, the {rng.choice(METRICS)} of {topic[0]} {rng.choice(MOVES)} {rng.choice(WHEN)}."


def _heuristic(rng: random.Random, topic: tuple[str, str]) -> str:
    return (f"When the {rng.choice(METRICS)} of {topic[0]} on {topic[1]} "
            f"{rng.choice(MOVES)}, {rng.choice(ACTIONS)}.")


def _honest_day(rng: random.Random, g: int, day: int) -> list[Write]:
    out: list[Write] = []

    def add(kind: str, truth: str, confidence: float, content: str, topic: tuple[str, str] | None = None,
            sensitive: bool = False) -> None:
        out.append(Write(g, day, len(out), kind, truth, confidence, content, topic, sensitive))

    for _ in range(2):
        truth = "good" if rng.random() < GOOD_SHARE else "bad"
        topic = _topic(rng)
        add("insight", truth, round(rng.uniform(0.6, 0.9), 2), _insight(rng, topic), topic)
    if day % 2 == g % 2:
        truth = "good" if rng.random() < GOOD_SHARE else "bad"
        topic = _topic(rng)
        add("heuristic", truth, round(rng.uniform(0.7, 0.9), 2), _heuristic(rng, topic), topic)
    for n in range(3):
        add("strategy_outcome", "soma", 0.9,
            f"Closed {rng.choice(PROTOCOLS)} position #{day}-{n}: size {rng.randint(1, 90)}k, "
            f"P&L {rng.uniform(-3, 3):+.2f}%.")
    if day % 5 == 0:
        add("fact", "soma", 0.9, f"Wallet {g} keeps {rng.randint(10, 99)} ETH on the hot signer.", sensitive=True)
    return out


def _attacker_day(rng: random.Random, day: int) -> list[Write]:
    out: list[Write] = []
    for _ in range(2):
        topic = _topic(rng)
        out.append(Write(2, day, len(out), "insight", "bad", 1.0, _insight(rng, topic), topic))
    if day % 2 == 0:
        topic = _topic(rng)
        out.append(Write(2, day, len(out), "heuristic", "bad", 1.0, _heuristic(rng, topic), topic))
    return out


def make_world(seed: int, *, days: int, decisions: int) -> World:
    """The world of `seed`: independent streams for writes, the attacker's writes, questions and
    near-copy draws, so that no part shifts another."""
    writes = random.Random(f"{seed}:writes")
    attacks = random.Random(f"{seed}:attacker")
    asks = random.Random(f"{seed}:questions")
    copies = random.Random(f"{seed}:near-copies")
    honest: list[Write] = []
    attacker: list[Write] = []
    questions: list[Decision] = []
    near: list[NearCopyDraw] = []
    for day in range(days):
        for g in range(GOLEMS):
            honest += _honest_day(writes, g, day)
            near.append(NearCopyDraw(g, day, copies.random(), copies.random()))
            for n in range(decisions):
                topic = _topic(asks)
                question = f"What should I do about the {asks.choice(METRICS)} of {topic[0]} on {topic[1]}?"
                questions.append(Decision(g, day, n, topic, question, luck(seed, "help", g, day, n)))
        attacker += _attacker_day(attacks, day)
    return World(seed, days, decisions, tuple(honest), tuple(attacker), tuple(questions), tuple(near))
