"""Benchmark the knowledge ecology as decisions: does a golem decide better in a clade?

    .venv/bin/python -m bench.bench_ecology [--days 20] [--seeds 10] [--jobs 2] [--decisions 12]
                                            [--arms solo,share_everything,main,clade]
                                            [--variants honest,attacker,sleeper] [--seed N] [--out DIR]

Three golems, each a real Grimoire (SQLite) on one simulated clock, run the real curator
(`run_cycle`: decay, prune, compress, promote through the crossing gates) every
`--cycle-hours` and then sync every pair through the wire codec with the sender's sync gate,
as anti-entropy does. Vectors come from the bundled MiniLM model; digests are the daemon's
(`digest.build_digest`: recall, trust, diversity, budget).

The world (seeded: every arm of one seed sees the same writes, queries and luck). Every day
each golem writes 2 insights and, every other day, a heuristic, each about one of 12 topics
(a protocol on a chain) and a metric; each carries a hidden truth, "good" (acting on it helps with probability 0.8,
70 % of them) or "bad" (0.25), and a stated confidence (0.6-0.9 insights, 0.7-0.9 heuristics)
its writer states without knowing which; now and then a near-copy of a sibling's insight; and
soma (3 strategy outcomes, a sensitive fact every fifth day). Every day each honest golem
faces `--decisions` decisions: a question about a random topic; it reads its digest (k = 10, the API default),
acts on the insight or heuristic about that topic it believes most (the confidence the digest
shows; an entry marked unverified only if nothing else applies) and records the outcome the
hidden truth draws (`Grimoire.record_outcome`). Knowledge about other topics does not apply:
with none that applies, the decision is taken blind (not on good knowledge).

Arms, in one invocation on the same seeds and world:
- `solo`: no sibling at all (this issue's code: belief over its own outcomes);
- `share_everything`: no gate but the soma barrier (`crdt.may_cross`: public, never
  strategy outcomes), no trust, no evidence; the agent believes its local confidence;
- `main`: the gates and trust as main had them, outcomes stay home, the agent believes its
  local confidence (the digest main showed), no refutation;
- `clade`: this issue: evidence crosses, pooled belief shown and refuted entries withheld,
  admission by track record, vouchers' entries released on arrival.
Variants: `honest`; `attacker` (golem 2 is compromised from day 0: it writes bad insights and
heuristics at confidence 1.0, records fake negative outcomes on up to 6 good entries it holds
and fake positive ones on its own each day); `sleeper` (golem 2 is honest for the first 10
days, then as `attacker`).

Measured per arm and variant, mean and 95 % interval (t) over the seeds, decisions of golems 0
and 1 only (the victims in every variant):
- good: the share of decisions taken on good knowledge (a decision with nothing to act on is
  not); acted: the share with anything to act on; covered: the share where the golem held
  something about the topic at all (digest or not: what retrieval could have found);
- bad golem-days: (golem, day, entry) where a bad entry was in one of the golem's decision
  digests after its second negative outcome anywhere (honest outcomes);
- good in time: of the good insights honest golems wrote, the share in every honest sibling's
  digest (a digest asked with the insight's own text) one curator cycle after the write;
  promoted: the share of honest golems' insights their crossing gate let cross at all;
- Brier: of the confidence the agent acted on and of the writer's stated confidence, against
  the outcome that followed (lower is better), and the gain (stated − shown); and, without the
  selection the agent's choice makes (it acts on the entry it believes most, so the forecasts
  it acts on are the high ones), over every insight or heuristic its digests showed, the
  expected Brier (f − p)² + p(1 − p) against the hidden probability p;
- soma on siblings (strategy outcomes, sensitive facts, other golems' outcome rows) and
  entries destroyed (written but missing, or a store whose row count fell): must be 0.

Prints a table per metric, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_rows, print_table, progress
from bench.common.report import add_common_args, main_in_workdir, not_empty
from bench.common.stats import mean_interval
from crdt import EntryBody, Kind, Sensitivity, decode_delta, encode_delta, may_cross
from crypto import Identity, signature_ok
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.belief import BeliefPolicy
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.grimoire.digest import build_digest
from daemon.grimoire.retrieval import Retriever
from daemon.grimoire.trust import TrustPolicy

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_800_000_000_000
PROTOCOLS = ("uniswap-v3", "aave-v3", "curve", "gmx")
METRICS = ("fee tier", "utilisation", "slippage at 100k", "liquidation threshold", "funding rate", "borrow rate",
           "depth at 2%", "oracle delay", "withdrawal queue", "gas per swap")
CHAINS = ("mainnet", "arbitrum", "base")
MOVES = ("widens", "tightens", "doubles", "halves", "lags", "leads")
WHEN = ("after large liquidations", "during weekend lows", "when ETH gas is above 40 gwei",
        "around option expiries", "after governance votes", "when stablecoin supply contracts")
ACTIONS = ("reduce position size by a third", "move liquidity to the 0.05% pool", "pause new borrows",
           "widen the rebalance band", "hedge with a short perp", "switch the route to the aggregator")
HELP = {"good": 0.8, "bad": 0.25}
ARMS = ("solo", "share_everything", "main", "clade")
VARIANTS = ("honest", "attacker", "sleeper")
SLEEPER_TURNS = 10  # days
VICTIMS = (0, 1)
NO_REFUTE = BeliefPolicy(refute_min_negative=math.inf)


@dataclass(frozen=True)
class Arm:
    name: str
    sync: bool
    barrier_only: bool  # the sync gate is crdt.may_cross alone (no promotion, no holds)
    trust: bool
    evidence: bool  # outcomes bump the signed evidence slot (it crosses)
    shown: str  # what the agent believes: "belief" (the digest's pooled belief) or "local" (local confidence)
    refute: bool
    release_vouched: bool


ARM = {
    "solo": Arm("solo", sync=False, barrier_only=False, trust=True, evidence=True, shown="belief", refute=True,
                release_vouched=True),
    "share_everything": Arm("share_everything", sync=True, barrier_only=True, trust=False, evidence=False,
                            shown="local", refute=False, release_vouched=False),
    "main": Arm("main", sync=True, barrier_only=False, trust=True, evidence=False, shown="local", refute=False,
                release_vouched=False),
    "clade": Arm("clade", sync=True, barrier_only=False, trust=True, evidence=True, shown="belief", refute=True,
                 release_vouched=True),
}


@dataclass
class Golem:
    index: int
    identity: Identity
    store: Grimoire
    retriever: Retriever
    rows_seen: int = 0
    rows_fell: int = 0

    @property
    def me(self) -> str:
        return self.identity.peer_id


@dataclass
class Written:
    id: str
    golem: int
    kind: str  # insight | heuristic | near_copy | soma
    truth: str  # good | bad | soma
    written_ms: int
    stated: float
    content: str
    topic: tuple[str, str] | None = None  # (protocol, chain): what decisions it applies to


@dataclass
class Tally:
    decisions: int = 0
    acted: int = 0
    good: int = 0
    shown: list[tuple[float, int]] = field(default_factory=list)
    stated: list[tuple[float, int]] = field(default_factory=list)
    bad_days: set[tuple[int, int, str]] = field(default_factory=set)
    # Every insight or heuristic a victim's digest showed: (confidence shown, stated, P(helps)).
    items: list[tuple[float, float, float]] = field(default_factory=list)
    covered: int = 0  # decisions where the golem held something about the topic (digest or not)
    good_checked: int = 0
    good_everywhere: int = 0


def _topic(rng: random.Random) -> tuple[str, str]:
    return rng.choice(PROTOCOLS), rng.choice(CHAINS)


def _insight(rng: random.Random, topic: tuple[str, str]) -> str:
    return (f"On {topic[1]}, the {rng.choice(METRICS)} of {topic[0]} "
            f"{rng.choice(MOVES)} {rng.choice(WHEN)}.")


def _heuristic(rng: random.Random, topic: tuple[str, str]) -> str:
    return (f"When the {rng.choice(METRICS)} of {topic[0]} on {topic[1]} "
            f"{rng.choice(MOVES)}, {rng.choice(ACTIONS)}.")


def _question(rng: random.Random, topic: tuple[str, str]) -> str:
    return f"What should I do about the {rng.choice(METRICS)} of {topic[0]} on {topic[1]}?"


def _luck(seed: int, *parts: object) -> float:
    """A uniform draw fixed by the seed and `parts` (one arm's choices never shift another's luck)."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _gate(sender: Golem, arm: Arm) -> Callable[[EntryBody], bool]:
    return may_cross if arm.barrier_only else sender.store.sync_gate(sender.me)


def _sync(sender: Golem, receiver: Golem, arm: Arm) -> None:
    gate = _gate(sender, arm)
    for delta in list(sender.store.iter_deltas(receiver.store.causal_context(), gate=gate)):
        decoded, rejected = decode_delta(encode_delta(delta), signature_ok)
        receiver.store.apply_delta(decoded, rejected=rejected, local_replica=receiver.me, sender=sender.me)


def _digest(golem: Golem, text: str, now_ms: int) -> list[dict[str, Any]]:
    doc = build_digest(golem.retriever, text=text, now_ms=now_ms, budget_tokens=2000, k=10, fmt="json",
                       include_sensitive=False, namespace="bench", embed_limit=0)
    return list(json.loads(doc["document"]))


_EMBEDDER: Any = None


def _embedder(work: Path) -> Any:
    global _EMBEDDER
    if _EMBEDDER is None:
        from daemon.embedding.embedder import get_embedder

        _EMBEDDER = get_embedder(work / "embedder")
    return _EMBEDDER


def run_one(arm_name: str, variant: str, seed: int, days: int, cycle_hours: int, decisions: int,
            work: Path) -> dict[str, Any]:
    """One arm × variant × seed: the simulation and its figures."""
    arm = ARM[arm_name]
    started = time.perf_counter()
    embedder = _embedder(work)
    root = work / f"{arm_name}-{variant}-{seed}"
    root.mkdir(parents=True, exist_ok=True)
    clock = {"now": T0}
    trust = TrustPolicy(enabled=arm.trust, release_vouched=arm.release_vouched)
    settings = CuratorSettings(trust=trust)
    golems: list[Golem] = []
    for g in range(3):
        store = Grimoire.open(root / f"golem-{g}.db", create=True, wall_ms=lambda: clock["now"])
        retriever = Retriever(store, lambda: embedder)
        retriever.trust = trust
        retriever.belief = BeliefPolicy() if arm.refute else NO_REFUTE
        golems.append(Golem(g, Identity(bytes([g + 1]) * 32), store, retriever))
    world: dict[str, Written] = {}
    negatives: dict[str, int] = {}
    second_negative: dict[str, int] = {}
    tally = Tally()
    pending_good: list[tuple[int, Written]] = []  # (check at this step count, the insight)
    writes = random.Random(seed)
    asks = random.Random(seed + 1)

    def compromised(g: int, day: int) -> bool:
        return g == 2 and (variant == "attacker" or (variant == "sleeper" and day >= SLEEPER_TURNS))

    def write(g: int, kind: str, truth: str, new: NewEntry, topic: tuple[str, str] | None = None) -> Written:
        entry = golems[g].store.remember(new, identity=golems[g].identity)
        w = Written(entry.id, g, kind, truth, clock["now"], new.confidence, new.content, topic)
        world[entry.id] = w
        return w

    def outcome(g: int, entry_id: str, positive: bool) -> None:
        golem = golems[g]
        golem.store.record_outcome(entry_id, "positive" if positive else "negative", metric=f"pnl_usd_g{g}",
                                   value=round(_luck(seed, "value", g, entry_id, clock["now"]) * 100, 2),
                                   note=f"soma note of golem {g}", now_ms=clock["now"],
                                   identity=golem.identity if arm.evidence else None)

    def decide(g: int, day: int, n: int) -> None:
        golem = golems[g]
        topic = _topic(asks)
        items = _digest(golem, _question(asks, topic), clock["now"])
        shown = [i for i in items if i["type"] in ("insight", "heuristic") and i["id"] in world
                 and world[i["id"]].truth in HELP and world[i["id"]].topic == topic]  # what applies
        for item in items:  # the bad-entry exposure: in a digest after its second negative outcome
            w = world.get(item["id"])
            if w is not None and w.truth == "bad" and item["id"] in second_negative and g in VICTIMS:
                tally.bad_days.add((g, day, item["id"]))
        if g in VICTIMS:
            tally.decisions += 1
            held = {r[0] for r in golem.store.connection.execute(
                "SELECT id FROM entries WHERE archived = 0 AND status = 'active' AND kind IN ('insight', 'heuristic')")}
            tally.covered += any(world[i].topic == topic for i in held if i in world)
        if not shown:
            return
        if arm.shown == "local":
            local = {e.id: e.local_confidence for e in golem.store.get_many([i["id"] for i in shown])}
            for i in shown:
                i["confidence"] = local.get(i["id"], i["confidence"])
        if g in VICTIMS:
            tally.items += [(float(i["confidence"]), world[i["id"]].stated, HELP[world[i["id"]].truth])
                            for i in shown]
        verified = [i for i in shown if not i.get("unverified")] or shown
        chosen = max(verified, key=lambda i: float(i["confidence"]))  # first of equals: the digest's order
        w = world[chosen["id"]]
        helped = _luck(seed, "help", g, day, n) < HELP[w.truth]
        if g in VICTIMS:
            tally.acted += 1
            tally.good += w.truth == "good"
            tally.shown.append((float(chosen["confidence"]), int(helped)))
            tally.stated.append((w.stated, int(helped)))
        outcome(g, w.id, helped)
        if not helped:
            negatives[w.id] = negatives.get(w.id, 0) + 1
            if negatives[w.id] == 2:
                second_negative[w.id] = clock["now"]

    def attack(g: int) -> None:
        held = golems[g].store.connection.execute(
            "SELECT id, author FROM entries WHERE archived = 0 AND status = 'active' "
            "AND kind IN ('insight', 'heuristic')").fetchall()
        others = [i for i, a in held if a != golems[g].me and i in world and world[i].truth == "good"]
        own = [i for i, a in held if a == golems[g].me]
        for entry_id in sorted(others)[:6]:
            outcome(g, entry_id, False)
        for entry_id in sorted(own)[-6:]:
            outcome(g, entry_id, True)

    steps_per_day = round(24 / cycle_hours)
    step_count = 0
    for day in range(days):
        for step in range(steps_per_day):
            clock["now"] = T0 + day * DAY + step * cycle_hours * HOUR
            if step == 0:
                for g in range(3):
                    if compromised(g, day):
                        for _ in range(2):
                            topic = _topic(writes)
                            write(g, "insight", "bad", NewEntry(kind=Kind.INSIGHT, content=_insight(writes, topic),
                                                                confidence=1.0), topic)
                        if day % 2 == 0:
                            topic = _topic(writes)
                            write(g, "heuristic", "bad", NewEntry(
                                kind=Kind.HEURISTIC, content=_heuristic(writes, topic), confidence=1.0), topic)
                        continue
                    for _ in range(2):
                        truth = "good" if writes.random() < 0.7 else "bad"
                        topic = _topic(writes)
                        w = write(g, "insight", truth, NewEntry(kind=Kind.INSIGHT, content=_insight(writes, topic),
                                                                confidence=round(writes.uniform(0.6, 0.9), 2)), topic)
                        if truth == "good":
                            pending_good.append((step_count + 1, w))
                    if day % 2 == g % 2:
                        truth = "good" if writes.random() < 0.7 else "bad"
                        topic = _topic(writes)
                        write(g, "heuristic", truth, NewEntry(
                            kind=Kind.HEURISTIC, content=_heuristic(writes, topic),
                            confidence=round(writes.uniform(0.7, 0.9), 2)), topic)
                    received = sorted(w.id for w in world.values() if w.kind == "insight" and w.golem != g
                                      and golems[g].store.connection.execute(
                                          "SELECT 1 FROM entries WHERE id = ?", (w.id,)).fetchone())
                    if received and writes.random() < 0.5:
                        orig = world[writes.choice(received)]
                        write(g, "near_copy", orig.truth, NewEntry(
                            kind=Kind.INSIGHT, content=orig.content.rstrip(".") + ", as seen again.", confidence=0.8),
                              orig.topic)
                    for n in range(3):
                        write(g, "soma", "soma", NewEntry(
                            kind=Kind.STRATEGY_OUTCOME, confidence=0.9,
                            content=f"Closed {writes.choice(PROTOCOLS)} position #{day}-{n}: size "
                                    f"{writes.randint(1, 90)}k, P&L {writes.uniform(-3, 3):+.2f}%."))
                    if day % 5 == 0:
                        write(g, "soma", "soma", NewEntry(kind=Kind.FACT, sensitivity=Sensitivity.SENSITIVE,
                                                          content=f"Wallet {g} keeps {writes.randint(10, 99)} ETH "
                                                                  "on the hot signer.", confidence=0.9))
            for golem in golems:
                golem.retriever.index_missing()
            if step == steps_per_day // 2:
                for g in range(3):
                    if compromised(g, day):
                        attack(g)
                    else:
                        for n in range(decisions):
                            decide(g, day, n)
            for golem in golems:
                run_cycle(golem.store, identity=golem.identity, now_ms=clock["now"], settings=settings,
                          vectors=golem.retriever.vectors())
            if arm.sync:
                for a in golems:
                    for b in golems:
                        if a is not b:
                            _sync(a, b, arm)
            step_count += 1
            due = [(s, w) for s, w in pending_good if s <= step_count]
            pending_good = [(s, w) for s, w in pending_good if s > step_count]
            for _, w in due:
                honest = [g for g in range(3) if g != w.golem and not compromised(g, day)]
                if not honest:
                    continue
                for golem in golems:
                    golem.retriever.index_missing()
                tally.good_checked += 1
                tally.good_everywhere += all(
                    w.id in {i["id"] for i in _digest(golems[g], w.content, clock["now"])} for g in honest)
            for golem in golems:
                rows = int(golem.store.connection.execute("SELECT count(*) FROM entries").fetchone()[0])
                golem.rows_fell += rows < golem.rows_seen
                golem.rows_seen = rows
    insights = [w for w in world.values() if w.kind == "insight" and not compromised(w.golem, days - 1)]
    crossed = sum(1 for w in insights if golems[w.golem].store.connection.execute(
        "SELECT promoted_ms IS NOT NULL FROM entries WHERE id = ?", (w.id,)).fetchone()[0])
    soma = 0
    missing = 0
    for g, golem in enumerate(golems):
        held = {r[0] for r in golem.store.connection.execute("SELECT id FROM entries")}
        soma += sum(1 for w in world.values() if w.kind == "soma" and w.golem != g and w.id in held)
        soma += int(golem.store.connection.execute(
            "SELECT count(*) FROM outcomes WHERE metric != ?", (f"pnl_usd_g{g}",)).fetchone()[0])
        missing += sum(1 for w in world.values() if w.golem == g and w.id not in held)
    for golem in golems:
        golem.store.close()
    return {
        "arm": arm_name, "variant": variant, "seed": seed,
        "decisions": tally.decisions, "acted": tally.acted, "good": tally.good,
        "good_share": tally.good / tally.decisions if tally.decisions else None,
        "acted_share": tally.acted / tally.decisions if tally.decisions else None,
        "covered_share": tally.covered / tally.decisions if tally.decisions else None,
        "bad_golem_days": len(tally.bad_days),
        "good_checked": tally.good_checked,
        "good_in_time": tally.good_everywhere / tally.good_checked if tally.good_checked else None,
        "insights_promoted": crossed / len(insights) if insights else None,
        "brier_shown": _brier(tally.shown), "brier_stated": _brier(tally.stated),
        "brier_items_shown": _expected_brier([(f, p) for f, _, p in tally.items]),
        "brier_items_stated": _expected_brier([(s, p) for _, s, p in tally.items]),
        "soma_on_siblings": soma, "destroyed": missing + sum(g.rows_fell for g in golems),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _brier(pairs: Sequence[tuple[float, int]]) -> float | None:
    return statistics.fmean((f - y) ** 2 for f, y in pairs) if pairs else None


def _expected_brier(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The Brier score a forecast f of an event of probability p has in expectation,
    (f − p)² + p(1 − p): calibration over everything shown, without drawing outcomes."""
    return statistics.fmean((f - p) ** 2 + p * (1 - p) for f, p in pairs) if pairs else None


def _job(task: tuple[str, str, int, int, int, int, str]) -> dict[str, Any]:
    arm, variant, seed, days, cycle_hours, decisions, work = task
    return run_one(arm, variant, seed, days, cycle_hours, decisions, Path(work))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    arms = [a for a in args.arms.split(",") if a]
    variants = [v for v in args.variants.split(",") if v]
    seeds = [args.seed + i for i in range(args.seeds)]
    _embedder(work)  # the model files, once, before the workers share the directory
    tasks = [(a, v, s, args.days, args.cycle_hours, args.decisions, str(work)) for s in seeds for v in variants
             for a in arms]
    results: list[dict[str, Any]] = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for res in pool.imap_unordered(_job, tasks):
            results.append(res)
            progress(f"{len(results)}/{len(tasks)} {res['arm']} {res['variant']} seed {res['seed']}: "
                     f"good {res['good_share']:.3f} in {res['seconds']} s")
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for variant in variants:
        for arm in arms:
            runs = sorted((r for r in results if r["arm"] == arm and r["variant"] == variant), key=lambda r: r["seed"])
            table.setdefault(variant, {})[arm] = {
                "good_share": mean_interval([r["good_share"] for r in runs]),
                "acted_share": mean_interval([r["acted_share"] for r in runs]),
                "covered_share": mean_interval([r["covered_share"] for r in runs]),
                "bad_golem_days": mean_interval([r["bad_golem_days"] for r in runs]),
                "good_in_time": mean_interval([r["good_in_time"] for r in runs]),
                "insights_promoted": mean_interval([r["insights_promoted"] for r in runs]),
                "brier_shown": mean_interval([r["brier_shown"] for r in runs]),
                "brier_stated": mean_interval([r["brier_stated"] for r in runs]),
                "brier_gain": mean_interval([r["brier_stated"] - r["brier_shown"] for r in runs
                                        if r["brier_shown"] is not None and r["brier_stated"] is not None]),
                "brier_items_shown": mean_interval([r["brier_items_shown"] for r in runs]),
                "brier_items_stated": mean_interval([r["brier_items_stated"] for r in runs]),
                "brier_items_gain": mean_interval([r["brier_items_stated"] - r["brier_items_shown"] for r in runs
                                              if r["brier_items_shown"] is not None]),
                "soma_on_siblings": sum(r["soma_on_siblings"] for r in runs),
                "destroyed": sum(r["destroyed"] for r in runs),
            }
    paired: dict[str, dict[str, Any]] = {}
    if "clade" in arms:
        for variant in variants:
            for other in (a for a in arms if a != "clade"):
                by_seed = {r["seed"]: r for r in results if r["variant"] == variant and r["arm"] == other}
                diffs = [r["good_share"] - by_seed[r["seed"]]["good_share"] for r in results
                         if r["variant"] == variant and r["arm"] == "clade" and r["seed"] in by_seed]
                paired.setdefault(variant, {})[other] = mean_interval(diffs)
            if variant != "honest" and "solo" in arms:  # the clade under attack against solo unattacked
                solo = {r["seed"]: r for r in results if r["variant"] == "honest" and r["arm"] == "solo"}
                diffs = [r["good_share"] - solo[r["seed"]]["good_share"] for r in results
                         if r["variant"] == variant and r["arm"] == "clade" and r["seed"] in solo]
                paired[variant]["solo_honest"] = mean_interval(diffs)
    return {"machine": machine_info(work), "params": {
        "days": args.days, "cycle_hours": args.cycle_hours, "decisions_per_day": args.decisions, "seeds": seeds,
        "golems": 3, "arms": arms, "variants": variants, "jobs": args.jobs},
        "table": table, "paired_good_share_vs": paired, "runs": sorted(results, key=lambda r: (
            r["variant"], r["arm"], r["seed"])), "total_seconds": round(time.perf_counter() - started, 1)}


def _fmt(x: dict[str, Any], digits: int = 3, pct: bool = False) -> str:
    if x["mean"] is None:
        return "-"
    scale = 100 if pct else 1
    mean = f"{x['mean'] * scale:.{digits}f}"
    if x["lo"] is None:
        return mean
    return f"{mean} [{x['lo'] * scale:.{digits}f}, {x['hi'] * scale:.{digits}f}]"


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    p = res["params"]
    rows.append((f"## {p['golems']} golems, {p['days']} days, {p['decisions_per_day']} decisions a day, "
                 f"a cycle every {p['cycle_hours']} h, seeds {p['seeds'][0]}..{p['seeds'][-1]} "
                 "(mean [95 % interval])", ""))
    for variant, arms in res["table"].items():
        rows.append((f"## {variant}", "good % | acted % | covered % | bad golem-days | good in time % | promoted % "
                                      "| Brier acted-on: shown / stated, gain | Brier all shown: belief / stated, gain "
                                      "| soma | destroyed"))
        for arm, t in arms.items():
            rows.append((arm, " | ".join((
                _fmt(t["good_share"], 1, True), _fmt(t["acted_share"], 1, True), _fmt(t["covered_share"], 1, True),
                _fmt(t["bad_golem_days"], 1), _fmt(t["good_in_time"], 1, True), _fmt(t["insights_promoted"], 1, True),
                f"{_fmt(t['brier_shown'])} / {_fmt(t['brier_stated'])}, {_fmt(t['brier_gain'])}",
                f"{_fmt(t['brier_items_shown'])} / {_fmt(t['brier_items_stated'])}, {_fmt(t['brier_items_gain'])}",
                str(t["soma_on_siblings"]), str(t["destroyed"])))))
    for variant, others in res["paired_good_share_vs"].items():
        for other, x in others.items():
            rows.append((f"clade − {other} ({variant}), good points", _fmt(x, 1, True)))
    rows.append(("total", f"{res['total_seconds']} s"))
    print_table(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=20)
    p.add_argument("--cycle-hours", type=int, default=6, choices=(1, 2, 3, 4, 6, 8, 12, 24))
    p.add_argument("--decisions", type=int, default=12, help="decisions per honest golem per day (default 12)")
    p.add_argument("--seeds", type=int, default=10, help="seeds: --seed, --seed + 1, … (default 10)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    add_common_args(p, out_help="keep the stores in DIR")
    args = p.parse_args()
    for name in args.arms.split(","):
        if name not in ARM:
            p.error(f"--arms: unknown arm {name!r} (one of {', '.join(ARMS)})")
    for name in args.variants.split(","):
        if name not in VARIANTS:
            p.error(f"--variants: unknown variant {name!r} (one of {', '.join(VARIANTS)})")
    return main_in_workdir("ecology", args, run, report, "clade-bench-ecology-", clash=not_empty)


if __name__ == "__main__":
    raise SystemExit(main())
