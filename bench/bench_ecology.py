"""Benchmark the knowledge ecology: 30 simulated days of a 3-golem clade, outcomes and gates.

    .venv/bin/python -m bench.bench_ecology [--days 30] [--cycle-hours 6] [--seed N] [--out DIR]

Three golems, each a real Grimoire (SQLite) on one simulated clock, run the real curator
(`run_cycle`: validate, decay, prune, compress, promote through the crossing gates) every
`--cycle-hours` and then sync every pair through the wire codec with the real sync gate
(`Grimoire.sync_gate`), as anti-entropy does. Vectors come from the bundled MiniLM model.

The world: every day each golem writes
- 2 insights about (protocol, metric, chain) topics and, every other day, a heuristic;
- now and then a near-copy of a sibling's insight it has received (novelty should hold it);
- 3 strategy outcomes (P&L, position sizes) and, every fifth day, a sensitive fact: soma.
Each insight and heuristic carries a hidden truth: "good" (acting on it helps with
probability 0.8) or "bad" (0.25); writers state their confidence (0.6–0.9 for insights,
0.7–0.9 for heuristics) without knowing which. Every day each golem acts on up to 6 live
entries it holds (its own or received, recall threshold passed) and reports the outcome
(`Grimoire.record_outcome`, positive with the entry's hidden probability).

Measured:
- crossing: of each kind and truth, the share of a golem's entries that reached every
  sibling, and hours from the write to the arrival (p50 / p90);
- containment: bad heuristics and near-copies that never reached a sibling; soma rows
  (strategy_outcome, sensitive) found on a sibling (must be 0);
- calibration: the Brier score of each forecast against the outcome that followed it, days
  1–10 and the last 10: the golem's belief just before the outcome (its local confidence at
  the last evidence, i.e. the Beta posterior over its outcomes, before the forgetting curve),
  the decayed local confidence recall ranks by, and the writer's stated confidence (what a
  golem without outcomes would believe); and the mean belief in good and in bad entries at
  the end (how far outcomes pulled them apart);
- nothing destroyed: no store's count of entry rows ever fell, and every entry ever written
  is still a row (active, superseded or archived).

Prints a table, then the JSON result line (bench.common). Seeded: two runs write the same data.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_rows, print_table, progress
from bench.common.report import add_common_args, main_in_workdir, not_empty
from crdt import Kind, Sensitivity, decode_delta, encode_delta
from crypto import Identity, signature_ok
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.grimoire.retrieval import Retriever

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_800_000_000_000
PROTOCOLS = ("uniswap-v3", "aave-v3", "curve", "balancer", "gmx", "compound", "morpho", "pendle", "lido", "maker")
METRICS = ("fee tier", "utilisation", "slippage at 100k", "liquidation threshold", "funding rate", "borrow rate",
           "depth at 2%", "oracle delay", "withdrawal queue", "gas per swap")
CHAINS = ("mainnet", "arbitrum", "base", "optimism")
MOVES = ("widens", "tightens", "doubles", "halves", "lags", "leads")
WHEN = ("after large liquidations", "during weekend lows", "when ETH gas is above 40 gwei",
        "around option expiries", "after governance votes", "when stablecoin supply contracts")
ACTIONS = ("reduce position size by a third", "move liquidity to the 0.05% pool", "pause new borrows",
           "widen the rebalance band", "hedge with a short perp", "switch the route to the aggregator")
HELP = {"good": 0.8, "bad": 0.25}


@dataclass
class Golem:
    name: str
    identity: Identity
    store: Grimoire
    retriever: Retriever
    rows_seen: int = 0
    rows_fell: int = 0


@dataclass
class Written:
    """What the world knows of one entry (hidden truth, who wrote it, when)."""

    id: str
    golem: int
    kind: str  # insight | heuristic | near_copy | soma
    truth: str  # good | bad | soma
    written_ms: int
    stated: float
    arrived: dict[int, int] = field(default_factory=dict)  # sibling index -> ms it was first held there


def _insight(rng: random.Random) -> str:
    return (f"On {rng.choice(CHAINS)}, the {rng.choice(METRICS)} of {rng.choice(PROTOCOLS)} "
            f"{rng.choice(MOVES)} {rng.choice(WHEN)}.")


def _heuristic(rng: random.Random) -> str:
    return (f"When the {rng.choice(METRICS)} of {rng.choice(PROTOCOLS)} on {rng.choice(CHAINS)} "
            f"{rng.choice(MOVES)}, {rng.choice(ACTIONS)}.")


def _sync(sender: Golem, receiver: Golem) -> None:
    """Anti-entropy sender -> receiver through the codec, with the sender's crossing gate."""
    me = sender.identity.peer_id
    for delta in list(sender.store.iter_deltas(receiver.store.causal_context(), gate=sender.store.sync_gate(me))):
        decoded, rejected = decode_delta(encode_delta(delta), signature_ok)
        receiver.store.apply_delta(decoded, rejected=rejected, local_replica=receiver.identity.peer_id,
                                   sender=me)


def _brier(pairs: list[tuple[float, int]]) -> float | None:
    return round(statistics.fmean((f - y) ** 2 for f, y in pairs), 4) if pairs else None


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from daemon.embedding.embedder import get_embedder

    started = time.perf_counter()
    rng = random.Random(args.seed)
    embedder = get_embedder(work / "embedder")
    clock = {"now": T0}
    settings = CuratorSettings()
    golems: list[Golem] = []
    for g in range(3):
        store = Grimoire.open(work / f"golem-{g}.db", create=True, wall_ms=lambda: clock["now"])
        golems.append(Golem(f"G{g}", Identity(bytes([g + 1]) * 32), store, Retriever(store, lambda: embedder)))
    world: dict[str, Written] = {}
    forecasts: dict[str, dict[str, list[tuple[float, int]]]] = {
        arm: {"early": [], "late": []} for arm in ("belief", "decayed", "stated")}
    cycles = 0

    def write(g: int, kind: str, truth: str, new: NewEntry) -> None:
        entry = golems[g].store.remember(new, identity=golems[g].identity)
        world[entry.id] = Written(entry.id, g, kind, truth, clock["now"], new.confidence)

    steps_per_day = round(24 / args.cycle_hours)
    for day in range(args.days):
        progress(f"day {day + 1}/{args.days}")
        for step in range(steps_per_day):
            clock["now"] = T0 + day * DAY + step * args.cycle_hours * HOUR
            if step == 0:
                for g in range(3):
                    for _ in range(2):
                        truth = "good" if rng.random() < 0.7 else "bad"
                        write(g, "insight", truth, NewEntry(kind=Kind.INSIGHT, content=_insight(rng),
                                                            confidence=round(rng.uniform(0.6, 0.9), 2)))
                    if day % 2 == g % 2:
                        truth = "good" if rng.random() < 0.7 else "bad"
                        write(g, "heuristic", truth, NewEntry(kind=Kind.HEURISTIC, content=_heuristic(rng),
                                                              confidence=round(rng.uniform(0.7, 0.9), 2)))
                    received = [w for w in world.values() if w.kind == "insight" and g in w.arrived]
                    if received and rng.random() < 0.5:
                        orig = rng.choice(received)
                        text = golems[g].store.get(orig.id).body.content.rstrip(".") + ", as seen again."
                        write(g, "near_copy", orig.truth, NewEntry(kind=Kind.INSIGHT, content=text, confidence=0.8))
                    for n in range(3):
                        write(g, "soma", "soma", NewEntry(
                            kind=Kind.STRATEGY_OUTCOME, confidence=0.9,
                            content=f"Closed {rng.choice(PROTOCOLS)} position #{day}-{n}: size "
                                    f"{rng.randint(1, 90)}k, P&L {rng.uniform(-3, 3):+.2f}%."))
                    if day % 5 == 0:
                        write(g, "soma", "soma", NewEntry(kind=Kind.FACT, sensitivity=Sensitivity.SENSITIVE,
                                                          content=f"Wallet {g} keeps {rng.randint(10, 99)} ETH "
                                                                  "on the hot signer.", confidence=0.9))
            if step == steps_per_day // 2:
                for golem in golems:
                    _act(rng, golem, world, day, args.days, clock["now"], forecasts)
            for golem in golems:
                golem.retriever.index_missing()
                run_cycle(golem.store, identity=golem.identity, now_ms=clock["now"], settings=settings,
                          vectors=golem.retriever.vectors())
            cycles += 1
            for a in golems:
                for b in golems:
                    if a is not b:
                        _sync(a, b)
            for g, golem in enumerate(golems):
                held = {r[0] for r in golem.store.connection.execute("SELECT id FROM entries")}
                if len(held) < golem.rows_seen:
                    golem.rows_fell += 1
                golem.rows_seen = len(held)
                for w in world.values():
                    if w.golem != g and g not in w.arrived and w.id in held:
                        w.arrived[g] = clock["now"]
    res: dict[str, Any] = {"machine": machine_info(work), "params": {
        "days": args.days, "cycle_hours": args.cycle_hours, "seed": args.seed, "golems": 3, "cycles": cycles}}
    res["crossing"] = _crossing(world)
    soma_ids = {w.id for w in world.values() if w.kind == "soma"}
    res["soma_on_siblings"] = sum(1 for w in world.values() if w.id in soma_ids and w.arrived)
    res["brier"] = {arm: {k: _brier(v) for k, v in phases.items()} for arm, phases in forecasts.items()}
    res["brier"]["outcomes"] = {k: len(v) for k, v in forecasts["belief"].items()}
    beliefs: dict[str, list[float]] = {"good": [], "bad": []}
    for golem in golems:
        for entry_id, belief in golem.store.connection.execute(
                "SELECT id, coalesce(decay_base, local_confidence) FROM entries WHERE outcomes_positive "
                "+ outcomes_negative > 0" if _has_outcomes(golem.store) else "SELECT id, 0 FROM entries WHERE 0"):
            w = world.get(entry_id)
            if w is not None and w.truth in beliefs:
                beliefs[w.truth].append(float(belief))
    res["belief_at_end"] = {k: {"mean": round(statistics.fmean(v), 3) if v else None, "entries": len(v)}
                            for k, v in beliefs.items()}
    missing = 0
    for g, golem in enumerate(golems):
        held = {r[0] for r in golem.store.connection.execute("SELECT id FROM entries")}
        missing += sum(1 for w in world.values() if w.golem == g and w.id not in held)
    states = Counter[str]()
    for golem in golems:
        for archived, status, superseded in golem.store.connection.execute(
                "SELECT archived, status, superseded_by IS NOT NULL OR local_superseded_by IS NOT NULL "
                "FROM entries"):
            states["archived" if archived else "superseded" if superseded or status != "active" else "live"] += 1
    res["destroyed"] = {"written_missing": missing, "row_count_fell": sum(g.rows_fell for g in golems),
                        "rows": dict(states)}
    for golem in golems:
        golem.store.close()
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def _has_outcomes(store: Grimoire) -> bool:
    return any(r[1] == "outcomes_positive" for r in store.connection.execute("PRAGMA table_info(entries)"))


def _act(rng: random.Random, golem: Golem, world: dict[str, Written], day: int, days: int, now_ms: int,
         forecasts: dict[str, dict[str, list[tuple[float, int]]]]) -> None:
    """The golem acts on up to 6 live entries it holds and reports what came of it."""
    rows = golem.store.connection.execute(
        "SELECT id, coalesce(decay_base, local_confidence), local_confidence FROM entries WHERE archived = 0 "
        "AND status = 'active' AND kind IN ('insight', 'heuristic') AND local_confidence >= 0.1").fetchall()
    pool = [(i, b, c) for i, b, c in rows if i in world and world[i].truth in HELP]
    phase = "early" if day < 10 else "late" if day >= days - 10 else None
    for entry_id, belief, confidence in rng.sample(pool, min(6, len(pool))):
        w = world[entry_id]
        helped = int(rng.random() < HELP[w.truth])
        if phase is not None:
            forecasts["belief"][phase].append((float(belief), helped))
            forecasts["decayed"][phase].append((float(confidence), helped))
            forecasts["stated"][phase].append((w.stated, helped))
        record = getattr(golem.store, "record_outcome", None)  # absent before outcomes existed (the "before" run)
        if record is not None:
            record(entry_id, "positive" if helped else "negative", metric="pnl_sign", now_ms=now_ms)


def _crossing(world: dict[str, Written]) -> list[dict[str, Any]]:
    out = []
    for kind, truth in (("insight", "good"), ("insight", "bad"), ("heuristic", "good"), ("heuristic", "bad"),
                        ("near_copy", "good"), ("near_copy", "bad"), ("soma", "soma")):
        group = [w for w in world.values() if w.kind == kind and w.truth == truth]
        if not group:
            continue
        everywhere = [w for w in group if len(w.arrived) == 2]
        hours = [(max(w.arrived.values()) - w.written_ms) / HOUR for w in everywhere]
        out.append({"kind": kind, "truth": truth, "written": len(group), "reached_all": len(everywhere),
                    "reached_any": sum(1 for w in group if w.arrived),
                    "share": round(len(everywhere) / len(group), 3), "hours_p50": _pct(hours, 0.5),
                    "hours_p90": _pct(hours, 0.9)})
    return out


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    p = res["params"]
    rows.append((f"## crossing ({p['golems']} golems, {p['days']} days, a cycle every {p['cycle_hours']} h)", ""))
    for c in res["crossing"]:
        rows.append((f"{c['kind']} ({c['truth']})",
                     f"{c['reached_all']}/{c['written']} reached every sibling ({c['share']:.0%}), "
                     f"{c['reached_any']} any; hours to all p50 {c['hours_p50']} p90 {c['hours_p90']}"))
    rows.append(("soma rows on a sibling", str(res["soma_on_siblings"])))
    b = res["brier"]
    rows += [("## calibration (Brier score against the next outcome: lower is better)", ""),
             ("outcomes forecast", f"days 1-10: {b['outcomes']['early']}, last 10 days: {b['outcomes']['late']}")]
    for arm, label in (("belief", "belief (posterior, before decay)"), ("decayed", "decayed local confidence"),
                       ("stated", "writer's stated confidence")):
        rows.append((label, f"days 1-10 {b[arm]['early']}, last 10 days {b[arm]['late']}"))
    e = res["belief_at_end"]
    rows.append(("mean belief at the end", f"good entries {e['good']['mean']} ({e['good']['entries']}), "
                                           f"bad entries {e['bad']['mean']} ({e['bad']['entries']})"))
    d = res["destroyed"]
    rows += [("## nothing destroyed", ""),
             ("written entries missing", str(d["written_missing"])),
             ("times a store's row count fell", str(d["row_count_fell"])),
             ("rows by state", ", ".join(f"{k} {v}" for k, v in sorted(d["rows"].items())))]
    print_table(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--cycle-hours", type=int, default=6, choices=(1, 2, 3, 4, 6, 8, 12, 24))
    add_common_args(p, out_help="keep the three stores in DIR")
    args = p.parse_args()
    return main_in_workdir("ecology", args, run, report, "clade-bench-ecology-", clash=not_empty)


if __name__ == "__main__":
    raise SystemExit(main())
