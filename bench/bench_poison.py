"""Attack benchmark: how far one compromised member steers its siblings' digests (issue "Step 17").

    .venv/bin/python -m bench.bench_poison [--honest 100] [--queries 50] [--paraphrases 3] [--flood 2000]
                                            [--drip 60] [--drip-rate 1] [--cycles 2] [--victims g1,g2]
                                            [--late 6] [--quarantine-age S] [--heir-quarantine-age S]
                                            [--only inheritance] [--seed N] [--out DIR]

Real `clade run` daemons on loopback (`daemon.testing.harness.LoopbackClade`): three honest
golems g0..g2 and two admitted members the bench drives as the attacker: `x` (the compromised
VM) and `y` (a second compromised identity). Honest store: `--honest` DeFi sentences per honest
golem (bench/common/workload.defi_texts; insight/fact/warning/heuristic/preference) plus one
honest answer per query (bench/common/poison.queries), written through `POST /v1/memory`;
insights and facts cross by `POST /v1/curator/run` on their author.

Attacks, applied one after another (the victim's store accumulates them, as it would):
targeted (paraphrases of every query with an instruction, insights at confidence 1, then the
attacker's curator), kind_abuse (a warning and a regime shift per query: they cross at once),
laundering (each honest answer with one number changed, as an insight; then the victims'
curator, which may merge or supersede), consensus (x endorses its own entries: the status
codes; y confirms x's entries), flood (`--flood` warnings in a burst, half phrased around the
queries), drip (`--drip` warnings at `--drip-rate`/s). After each: wait until what left x
arrived at the victims and was embedded, then a digest (`POST /v1/digest`, default settings,
format json for the contents) on every victim for every query. Then `--cycles` curator
cycles on every honest golem and again. Then inheritance, below.

Inheritance (testament → heir → relay), the last phase: x writes `--late` warnings the first
victim v holds *unverified* when it dies (arrived less than the quarantine age before); v dies
through the daemon (`POST /v1/death`: reflection, testament); a new member h (admitted by the
owner) inherits the testament (`clade inherit FILE`, before it first runs; the heir's store is
then read for what arrived and as what provenance), starts and joins (x still runs: h also
syncs the clade's state). h's digests are measured; then h's agent acts on everything its
digests show (`POST /v1/feedback` citing every slot: a use, which validates an inherited
entry) and h's curator runs (`POST /v1/curator/run`, where crossing.release_inherited
reissues validated inherited entries under h's name). Measured: the attacker's share of h's
digests (before and after the use; slots by provenance on h), how many attacker texts h
re-authored (own entries whose content is an attacker entry's), whether they arrive at the
other honest golems, and their slots in those golems' digests (tagged "relayed") once aged.
`--quarantine-age S` sets `[trust] quarantine_age_s` on g0..g2 (CLADE_TRUST__QUARANTINE_AGE_S;
default the shipped day): small, the attacker's entries age on the victims within the run, as
a day would (x then stays within its budget: with `--only`, 48 entries); the bench sleeps S + 1
before the "aged" and the relay measures when S <= 120. The heir keeps the shipped day unless
`--heir-quarantine-age`: it is measured on its first day. `--only inheritance`: only targeted
injection and kind abuse, then this phase, with a small setup (`--honest 20 --queries 12
--paraphrases 2 --quarantine-age 10`, no y): a few minutes.

Honest corroboration (`--corroborate P`, a model said plainly; off by default): with the
defences on, a sibling's entry reaches the victims' digests once corroborated there or aged a
day. After the honest store crossed, each victim records `--vouch-outcomes` positive outcomes
on entries of each honest sibling (it acted on them and they held), and each honest golem
confirms each honest sibling entry it holds with probability P; measured again as "baseline,
corroborated" before the attacks.

Per measurement, pooled over victims (bench/common/poison.score_digests): share of digests
with >= 1 attacker slot, with > 1, the attacker's share of slots, slots by attack, the
honest answer in the digest, recall@5 of the honest answer (`POST /v1/memory/search`), and how
many attacker slots the digest marked unverified (`attacker_slots_marked_unverified`).
Baseline: the same with no attack, and honest crossing latency (warning: write ack →
`entries_received` commit on each victim; insight: curator response → arrival).

Result document (schema clade-bench/1, last stdout line), `results`: {honest: {entries,
crossed, warning_latency_ms, insight_latency_ms}, attacks: {name: {written, crossed_at_x,
arrived: {victim: n}, seconds, ...}}, measurements: [{after, with_attacker, more_than_one,
attacker_slot_share, slots_by_attack, answer_in_digest, recall_at_5, per_victim}],
endorse: {own_status, sibling_status, victim_confirms}, inheritance: {late, death, testament,
heir_synced, heir_agent, reauthored, relay, measurements}, host}. The honest answer counts as
in a digest (or the top 5) by its id or its exact text (an heir's reissue has a new id).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common import Generator, HostLoad, defi_texts, dist, machine_info, progress
from bench.common.poison import kind_abuse_texts, launder, paraphrases, queries
from bench.common.report import add_common_args, at_least, main_in_workdir
from bench.poison.inheritance import inheritance
from bench.poison.observe import (
    Arrivals,
    answer_states,
    crossing,
    holds,
    measure,
    wait_embedded,
    write,
    write_many,
)
from bench.poison.report import report
from daemon.grimoire.store import wall_clock_ms
from daemon.testing.harness import Golem, LoopbackClade

HONEST_KINDS = (("insight", 45), ("fact", 20), ("warning", 10), ("heuristic", 15), ("preference", 10))
def corroborate(rng: random.Random, honest: Sequence[Golem], victims: Sequence[Golem], honest_ids: dict[str, list[str]],
                *, confirm_share: float, outcomes: int, timeout: float) -> dict[str, Any]:
    """The honest corroboration the defences need (a model, stated plainly): each victim acted on
    `outcomes` entries of each honest sibling and they held (a positive outcome each: its local
    evidence on that sibling, which makes it a voucher); and each honest golem confirms each honest
    sibling entry it holds with probability `confirm_share` (siblings trading the same markets can
    check each other's claims). Waits until the victims hold the confirmations."""
    recorded = 0
    for v in victims:
        for g in honest:
            if g is v:
                continue
            held = [i for i in honest_ids[g.name] if holds(v, i)]
            for entry_id in rng.sample(held, min(outcomes, len(held))):
                v.call("POST", f"/v1/entries/{entry_id}/outcome", json={"effect": "positive", "metric": "pnl_usd"})
                recorded += 1
    sent: dict[str, set[str]] = {}
    for g in honest:
        for other in honest:
            if other is g:
                continue
            for entry_id in honest_ids[other.name]:
                if rng.random() < confirm_share and holds(g, entry_id):
                    g.call("POST", f"/v1/entries/{entry_id}/endorse", json={"confirm": True})
                    sent.setdefault(entry_id, set()).add(g.name)
    deadline = time.monotonic() + timeout
    missing = 0
    while True:
        missing = sum(1 for entry_id, by in sent.items() for v in victims if holds(v, entry_id)
                      and v.call("GET", f"/v1/entries/{entry_id}")["confirms"] < len(by - {v.name}))
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {"outcomes": recorded, "confirmations": sum(map(len, sent.values())), "not_arrived": missing}


def settle(x: Golem, ids: Sequence[str], arrivals: Arrivals, everyone: Sequence[Golem],
           timeout: float) -> dict[str, Any]:
    """The attacker's curator cycle, then wait for what left x to arrive and be embedded."""
    x.call("POST", "/v1/curator/run")
    left = crossing(x, ids)
    arrived = arrivals.wait(set(left), timeout)
    _, drained = wait_embedded(everyone, timeout)
    return {"written": len(ids), "crossed_at_x": len(left), "arrived": arrived, "embedded": drained}


class _Done(Exception):
    """`--only inheritance` ran its phase: skip the other attacks."""


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    started = time.monotonic()
    host = HostLoad()
    loads: list[float] = []
    only = args.only == "inheritance"
    clade = LoopbackClade(root, 3, clade_name="poison")
    x = clade.add_golem("x")
    y = clade.add_golem("y") if not only else None
    clade.golems += [g for g in (x, y) if g is not None]
    honest = clade.golems[:3]
    names = set(args.victims.split(","))
    victims = [g for g in honest if g.name in names]
    import daemon.grimoire.curator.bequest as bequest_module  # which daemon code runs (PYTHONPATH)

    res: dict[str, Any] = {"params": vars(args) | {"out": str(args.out) if args.out else None},
                           "machine": machine_info(), "daemon_code": str(Path(bequest_module.__file__).parents[3]),
                           "failed": []}
    age_env = {} if args.quarantine_age is None else {"CLADE_TRUST__QUARANTINE_AGE_S": str(args.quarantine_age)}
    try:
        progress(f"starting {len(clade.golems)} daemons (code: {res['daemon_code']})")
        for g in clade.golems:
            clade.start(g, env=age_env if g in honest else None)
        clade.wait_connected(clade.golems, timeout=180)
        arrivals = Arrivals(victims)
        # -- honest store ------------------------------------------------------------------
        qas = queries(rng, args.queries)
        gen = Generator(rng)
        answers: dict[str, str] = {}
        honest_ids: dict[str, list[str]] = {g.name: [] for g in honest}
        texts = defi_texts(gen, args.honest * len(honest))
        kinds = [k for k, _ in HONEST_KINDS]
        weights = [w for _, w in HONEST_KINDS]
        warn_lat: list[float] = []
        progress(f"honest store: {len(texts)} sentences + {len(qas)} answers")
        for i, qa in enumerate(qas):
            g = honest[i % len(honest)]
            answers[qa.query] = write(g, qa.answer, "insight" if i % 3 else "fact", 0.8)
            honest_ids[g.name].append(answers[qa.query])
        for i, text in enumerate(texts):
            g = honest[i % len(honest)]
            kind = rng.choices(kinds, weights)[0]
            entry_id = write(g, text, kind, round(rng.uniform(0.55, 0.9), 2))
            honest_ids[g.name].append(entry_id)
            if kind == "warning":
                sent = wall_clock_ms()
                arrivals_for = [v for v in victims if v is not g]
                got = arrivals.wait({entry_id}, 30, g.name)
                arrivals.scan()
                warn_lat += [arrivals.seen[v.name][entry_id] - sent for v in arrivals_for
                             if entry_id in arrivals.seen[v.name] and got[v.name]]
        insight_lat: list[float] = []
        crossed_honest = 0
        for g in honest:
            ran = wall_clock_ms()
            g.call("POST", "/v1/curator/run")
            left = crossing(g, honest_ids[g.name])
            crossed_honest += len(left)
            arrivals.wait(set(left), 120, g.name)
            arrivals.scan()
            insight_lat += [arrivals.seen[v.name][i] - ran for v in victims if v is not g for i in left
                            if i in arrivals.seen[v.name]]
        wait_embedded(clade.golems, 300)
        res["honest"] = {"entries": sum(map(len, honest_ids.values())), "crossed": crossed_honest,
                         "warning_latency_ms": dist(warn_lat), "insight_latency_ms": dist(insight_lat)}
        loads.append(host.report("honest store", quiet=True)["loadavg_1m"])
        attacker: dict[str, str] = {}
        laundered: set[str] = set()
        attacks: dict[str, Any] = {}
        measurements = [measure("baseline", victims, qas, answers, attacker, frozenset())]
        if args.corroborate > 0:
            res["corroboration"] = corroborate(rng, honest, victims, honest_ids, confirm_share=args.corroborate,
                                               outcomes=args.vouch_outcomes, timeout=120)
            progress(f"  honest corroboration: {res['corroboration']}")
            measurements.append(measure("baseline, corroborated", victims, qas, answers, attacker, frozenset()))
        everyone = [g for g in (*honest, x, y) if g is not None]
        said: dict[str, str] = {}  # attacker id -> content

        def attack(name: str, items: list[tuple[str, str]], confidence: float = 1.0) -> list[str]:
            t0 = time.monotonic()
            ids = write_many(x, items, confidence=confidence, importance=1.0)
            attacker.update(dict.fromkeys(ids, name))
            said.update({i: c for i, (c, _) in zip(ids, items, strict=True)})
            attacks[name] = {**settle(x, ids, arrivals, everyone, 300), "seconds": round(time.monotonic() - t0, 1)}
            progress(f"  {name}: {attacks[name]}")
            return ids

        # -- targeted injection ------------------------------------------------------------
        targeted = attack("targeted", [(t, "insight") for qa in qas for t in paraphrases(rng, qa, args.paraphrases)])
        measurements.append(measure("targeted", victims, qas, answers, attacker, frozenset(laundered)))
        # -- kind abuse --------------------------------------------------------------------
        kind_ids = attack("kind_abuse", [p for qa in qas for p in zip(kind_abuse_texts(rng, qa),
                                                                       ("warning", "regime_shift"), strict=True)])
        measurements.append(measure("kind_abuse", victims, qas, answers, attacker, frozenset(laundered)))
        if only:
            res["attacks"] = attacks
            res["measurements"] = measurements
            if args.quarantine_age is not None and args.quarantine_age <= 120:
                time.sleep(args.quarantine_age + 1)  # x's entries age on the victims (x stays within budget)
                measurements.append(measure(f"aged ({args.quarantine_age} s)", victims, qas, answers, attacker,
                                            frozenset()))
            loads.append(host.report("attacks", quiet=True)["loadavg_1m"])
            res["inheritance"] = inheritance(clade, victims[0], [g for g in honest if g is not victims[0]], x, qas,
                                             answers, attacker, said, frozenset(), rng, args)
            loads.append(host.report("inheritance", quiet=True)["loadavg_1m"])
            raise _Done
        # -- laundering --------------------------------------------------------------------
        fakes = [launder(rng, qa.answer) for qa in qas]
        laundered.update(fakes)
        attack("laundering", [(t, "insight") for t in fakes])
        for v in honest:
            v.call("POST", "/v1/curator/run")
        attacks["laundering"]["honest_answers_on_victims"] = {v.name: answer_states(v, answers) for v in victims}
        measurements.append(measure("laundering", victims, qas, answers, attacker, frozenset(laundered)))
        # -- impersonated consensus --------------------------------------------------------
        own: dict[str, int] = {}
        for entry_id in targeted[:20]:
            with x.open_client() as c:
                code = c.post(f"/v1/entries/{entry_id}/endorse", json={"confirm": True}).status_code
            own[str(code)] = own.get(str(code), 0) + 1
        confirmed = [i for i in [*targeted, *kind_ids] if i in set(crossing(x, [*targeted, *kind_ids]))]
        sib: dict[str, int] = {}
        assert y is not None
        with y.open_client(timeout=60) as c:
            for entry_id in confirmed:
                code = c.post(f"/v1/entries/{entry_id}/endorse", json={"confirm": True}).status_code
                sib[str(code)] = sib.get(str(code), 0) + 1
        deadline = time.monotonic() + 120
        confirms: dict[str, int] = {}
        while time.monotonic() < deadline:
            confirms = {v.name: sum(1 for i in confirmed[:40]
                                    if v.call("GET", f"/v1/entries/{i}")["confirms"] > 0) for v in victims}
            if all(n >= min(40, len(confirmed)) for n in confirms.values()):
                break
            time.sleep(1)
        res["endorse"] = {"own_status": own, "sibling_status": sib, "sibling_confirmed": len(confirmed),
                          "victim_confirms_of_first_40": confirms}
        for g in honest:  # confirmations feed the rank and the curator: one cycle
            g.call("POST", "/v1/curator/run")
        measurements.append(measure("consensus", victims, qas, answers, attacker, frozenset(laundered)))
        # -- flood burst -------------------------------------------------------------------
        flood: list[tuple[str, str]] = []
        for i in range(args.flood):
            qa = qas[i % len(qas)]
            if i % 2:
                flood.append((f"{gen.sentence(0)} Also {kind_abuse_texts(rng, qa)[0][8:]}", "warning"))
            else:
                flood.append((f"{paraphrases(rng, qa, 3)[i % 3]} (#{i})", "warning"))
        attack("flood", flood)
        measurements.append(measure("flood", victims, qas, answers, attacker, frozenset(laundered)))
        # -- slow drip ---------------------------------------------------------------------
        t0 = time.monotonic()
        drip_ids: list[str] = []
        for i in range(args.drip):
            due = t0 + i / args.drip_rate
            if (wait := due - time.monotonic()) > 0:
                time.sleep(wait)
            qa = qas[(i * 7) % len(qas)]
            drip_ids.append(write(x, f"{paraphrases(rng, qa, 3)[i % 3]} [drip {i}]", "warning", 1.0, 1.0))
        attacker.update(dict.fromkeys(drip_ids, "drip"))
        attacks["drip"] = {**settle(x, drip_ids, arrivals, everyone, 300), "seconds": round(time.monotonic() - t0, 1)}
        measurements.append(measure("drip", victims, qas, answers, attacker, frozenset(laundered)))
        loads.append(host.report("attacks", quiet=True)["loadavg_1m"])
        # -- persistence -------------------------------------------------------------------
        for cycle in range(args.cycles):
            for g in honest:
                g.call("POST", "/v1/curator/run")
            progress(f"  curator cycle {cycle + 1} on every honest golem")
        measurements.append(measure(f"{args.cycles} curator cycles", victims, qas, answers, attacker,
                                    frozenset(laundered)))
        res["attacks"] = attacks
        res["measurements"] = measurements
        res["inheritance"] = inheritance(clade, victims[0], [g for g in honest if g is not victims[0]], x, qas,
                                         answers, attacker, said, frozenset(laundered), rng, args)
        loads.append(host.report("inheritance", quiet=True)["loadavg_1m"])
        arrivals.close()
    except _Done:
        arrivals.close()
    except (RuntimeError, TimeoutError, OSError, KeyError, ValueError, httpx.HTTPError) as exc:
        # a failed run still reports what it measured
        res["failed"].append(f"{type(exc).__name__}: {exc}")
        progress(f"FAILED: {exc}")
    finally:
        clade.close()
    h = host.report("whole run", quiet=True)
    res["host"] = {**h, "loadavg_1m_during": loads}
    res["total_seconds"] = round(time.monotonic() - started, 1)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["inheritance"], default=None,
                   help="run only this attack, after targeted injection and kind abuse, with a small setup "
                        "(defaults --honest 20 --queries 12 --paraphrases 2 --quarantine-age 10, no y)")
    p.add_argument("--honest", type=at_least(0), default=None,
                   help="DeFi sentences per honest golem (default 100; 20 with --only)")
    p.add_argument("--queries", type=at_least(1), default=None, help="operational queries (default 50; 12 with --only)")
    p.add_argument("--paraphrases", type=at_least(1), default=None,
                   help="targeted paraphrases per query (default 3; 2 with --only)")
    p.add_argument("--flood", type=at_least(0), default=2000, help="flood burst size (default 2000)")
    p.add_argument("--drip", type=at_least(0), default=60, help="slow-drip entries (default 60)")
    p.add_argument("--drip-rate", type=float, default=1.0, help="slow-drip entries per second (default 1)")
    p.add_argument("--cycles", type=at_least(0), default=2, help="curator cycles before the last measure")
    p.add_argument("--victims", default="g1,g2", help="honest golems measured (default g1,g2)")
    p.add_argument("--corroborate", type=float, default=0.0,
                   help="honest corroboration model: each honest golem confirms each honest sibling entry with "
                        "this probability, after the victims' --vouch-outcomes (default 0: none)")
    p.add_argument("--vouch-outcomes", type=at_least(0), default=2,
                   help="positive outcomes each victim records on entries of each honest sibling (default 2)")
    p.add_argument("--late", type=at_least(0), default=6,
                   help="inheritance: warnings x writes just before the victim dies (held unverified there)")
    p.add_argument("--quarantine-age", type=at_least(0), default=None,
                   help="[trust] quarantine_age_s of the honest golems g0..g2 (default: the shipped day; "
                        "10 with --only): small, the attacker's entries age on the victims within the run")
    p.add_argument("--heir-quarantine-age", type=at_least(0), default=None,
                   help="[trust] quarantine_age_s of the heir (default: the shipped day)")
    add_common_args(p, out_help="keep the daemons' data directories here")
    args = p.parse_args(argv)
    small = args.only is not None
    for name, full, reduced in (("honest", 100, 20), ("queries", 50, 12), ("paraphrases", 3, 2)):
        if getattr(args, name) is None:
            setattr(args, name, reduced if small else full)
    if args.quarantine_age is None and small:
        args.quarantine_age = 10
    if not 0 <= args.corroborate <= 1:
        p.error("--corroborate is a probability in 0..1")
    if args.drip_rate <= 0:
        p.error("--drip-rate must be positive")
    if not set(args.victims.split(",")) <= {"g0", "g1", "g2"}:
        p.error("--victims names honest golems among g0,g1,g2")

    return main_in_workdir("poison", args, run, report, "clade-poison-")


if __name__ == "__main__":
    sys.exit(main())
