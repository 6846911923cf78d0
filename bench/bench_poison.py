"""Attack benchmark: how far one compromised member steers its siblings' digests (issue "Step 17").

    .venv/bin/python -m bench.bench_poison [--honest 100] [--queries 50] [--paraphrases 3] [--flood 2000]
                                            [--drip 60] [--drip-rate 1] [--cycles 2] [--victims g1,g2]
                                            [--seed N] [--out DIR]

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
cycles on every honest golem and again. Inheritance (testament → heir → relay) is not run:
see `results.inheritance`.

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
endorse: {own_status, sibling_status, victim_confirms}, inheritance, host}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.bench_clade import wait_embedded
from bench.common import Generator, HostLoad, defi_texts, dist, machine_info, out, print_table, progress
from bench.common.poison import QA, kind_abuse_texts, launder, paraphrases, queries, score_digests
from bench.common.report import add_common_args, at_least, main_in_workdir
from daemon.grimoire.store import wall_clock_ms
from daemon.testing.harness import EventLog, Golem, LoopbackClade

HONEST_KINDS = (("insight", 45), ("fact", 20), ("warning", 10), ("heuristic", 15), ("preference", 10))
AT_ONCE = {"warning", "anti_knowledge", "regime_shift", "death_reflection"}


class Arrivals:
    """Entry ids each victim committed (`entries_received` events), with their commit wall ms."""

    def __init__(self, golems: Sequence[Golem]) -> None:
        self.logs = {g.name: EventLog(g.socket).start() for g in golems}
        self.golems = {g.name: g for g in golems}
        self.cursor = dict.fromkeys(self.logs, 0)
        self.seen: dict[str, dict[str, float]] = {name: {} for name in self.logs}

    def scan(self) -> None:
        for name, log in self.logs.items():
            events = log.events[self.cursor[name]:]
            self.cursor[name] += len(events)
            for _, event, data in events:
                if event == "entries_received":
                    for entry_id in data.get("ids", ()):
                        self.seen[name].setdefault(str(entry_id), float(data["committed_ms"]))

    def wait(self, ids: set[str], timeout: float, author: str = "") -> dict[str, int]:
        """Until every victim but `author` holds every id (events, then a GET for the rest);
        arrived per victim."""
        deadline = time.monotonic() + timeout
        while True:
            self.scan()
            missing = {n: ids - set(s) for n, s in self.seen.items() if n != author}
            if not any(missing.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        got: dict[str, int] = {}
        for name, left in missing.items():
            found = len(ids) - len(left)
            for entry_id in left:  # events name at most a batch's first ids
                try:
                    self.golems[name].call("GET", f"/v1/entries/{entry_id}")
                    found += 1
                except RuntimeError:
                    pass
            got[name] = found
        return got

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


def write(g: Golem, content: str, kind: str, confidence: float = 0.8, importance: float = 0.5) -> str:
    made = g.call("POST", "/v1/memory", json={"content": content, "memory_type": kind, "confidence": confidence,
                                              "importance": importance})
    return str(made["id"])


def write_many(g: Golem, items: Sequence[tuple[str, str]], *, confidence: float, importance: float,
               workers: int = 4) -> list[str]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda it: write(g, it[0], it[1], confidence, importance), items))


def crossing(g: Golem, ids: Sequence[str]) -> list[str]:
    """Of `ids` (entries `g` wrote), those that left `g`: promoted, or an at-once kind not held."""
    left = []
    for entry_id in ids:
        doc = g.call("GET", f"/v1/entries/{entry_id}")
        if doc.get("promoted_reason") or (doc["kind"] in AT_ONCE and not doc.get("crossing_hold")):
            left.append(entry_id)
    return left


def answer_states(g: Golem, answers: dict[str, str]) -> dict[str, int]:
    """How `g` holds the honest answers: active, superseded, archived, or absent (never crossed)."""
    states: dict[str, int] = {}
    for entry_id in answers.values():
        try:
            doc = g.call("GET", f"/v1/entries/{entry_id}")
            state = "superseded" if doc["superseded_by"] else "archived" if doc["archived"] else "active"
        except RuntimeError:
            state = "absent"
        states[state] = states.get(state, 0) + 1
    return dict(sorted(states.items()))


def digest_slots(g: Golem, query: str) -> list[tuple[str, str, bool]]:
    """(id, content, marked unverified) of each slot of `g`'s default digest for `query`."""
    res = g.call("POST", "/v1/digest", json={"query": query, "format": "json"})
    doc = res["document"]
    items = json.loads(doc) if isinstance(doc, str) else doc
    by_id = {str(i["id"]): i for i in items if isinstance(i, dict) and "id" in i}
    return [(entry_id, str(by_id.get(entry_id, {}).get("content", "")),
             bool(by_id.get(entry_id, {}).get("unverified", False))) for entry_id in res["entries"]]


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
            held = [i for i in honest_ids[g.name] if _held(v, i)]
            for entry_id in rng.sample(held, min(outcomes, len(held))):
                v.call("POST", f"/v1/entries/{entry_id}/outcome", json={"effect": "positive", "metric": "pnl_usd"})
                recorded += 1
    sent: dict[str, set[str]] = {}
    for g in honest:
        for other in honest:
            if other is g:
                continue
            for entry_id in honest_ids[other.name]:
                if rng.random() < confirm_share and _held(g, entry_id):
                    g.call("POST", f"/v1/entries/{entry_id}/endorse", json={"confirm": True})
                    sent.setdefault(entry_id, set()).add(g.name)
    deadline = time.monotonic() + timeout
    missing = 0
    while True:
        missing = sum(1 for entry_id, by in sent.items() for v in victims if _held(v, entry_id)
                      and v.call("GET", f"/v1/entries/{entry_id}")["confirms"] < len(by - {v.name}))
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {"outcomes": recorded, "confirmations": sum(map(len, sent.values())), "not_arrived": missing}


def _held(g: Golem, entry_id: str) -> bool:
    try:
        g.call("GET", f"/v1/entries/{entry_id}")
        return True
    except RuntimeError:
        return False


def measure(label: str, victims: Sequence[Golem], qas: Sequence[QA], answers: dict[str, str],
            attacker: dict[str, str], laundered: frozenset[str]) -> dict[str, Any]:
    t0 = time.monotonic()
    per_victim: dict[str, Any] = {}
    pooled: list[list[tuple[str, str]]] = []
    in_digest = recall5 = 0
    marked = attacker_slots = 0
    for v in victims:
        with ThreadPoolExecutor(2) as pool:
            slots = list(pool.map(lambda qa, v=v: digest_slots(v, qa.query), qas))
        digests = [[(i, c) for i, c, _ in d] for d in slots]
        for d in slots:
            mine = [u for i, _, u in d if i in attacker]
            attacker_slots += len(mine)
            marked += sum(mine)
        with ThreadPoolExecutor(2) as pool:
            hits = list(pool.map(lambda qa, v=v: [str(h["id"]) for h in v.call(
                "POST", "/v1/memory/search", json={"query": qa.query, "top_k": 5})["results"]], qas))
        a_in = sum(answers[qa.query] in {i for i, _ in d} for qa, d in zip(qas, digests, strict=True))
        a_5 = sum(answers[qa.query] in h for qa, h in zip(qas, hits, strict=True))
        per_victim[v.name] = {**score_digests(digests, attacker, laundered),
                              "answer_in_digest": round(a_in / len(qas), 3), "recall_at_5": round(a_5 / len(qas), 3)}
        pooled += digests
        in_digest += a_in
        recall5 += a_5
    n = len(qas) * len(victims)
    res = {"after": label, **score_digests(pooled, attacker, laundered),
           "answer_in_digest": round(in_digest / n, 3), "recall_at_5": round(recall5 / n, 3),
           "attacker_slots_marked_unverified": f"{marked}/{attacker_slots}",
           "seconds": round(time.monotonic() - t0, 1), "per_victim": per_victim}
    progress(f"  [{label}] digests with attacker {res['with_attacker']:.0%}, >1 {res['more_than_one']:.0%}, "
             f"slots {res['attacker_slot_share']:.1%}, answer in digest {res['answer_in_digest']:.0%}, "
             f"recall@5 {res['recall_at_5']:.0%} ({res['seconds']} s)")
    return res


def settle(x: Golem, ids: Sequence[str], arrivals: Arrivals, everyone: Sequence[Golem],
           timeout: float) -> dict[str, Any]:
    """The attacker's curator cycle, then wait for what left x to arrive and be embedded."""
    x.call("POST", "/v1/curator/run")
    left = crossing(x, ids)
    arrived = arrivals.wait(set(left), timeout)
    _, drained = wait_embedded(everyone, timeout)
    return {"written": len(ids), "crossed_at_x": len(left), "arrived": arrived, "embedded": drained}


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    started = time.monotonic()
    host = HostLoad()
    loads: list[float] = []
    clade = LoopbackClade(root, 3, clade_name="poison")
    x = clade.add_golem("x")
    y = clade.add_golem("y")
    clade.golems += [x, y]
    honest = clade.golems[:3]
    names = set(args.victims.split(","))
    victims = [g for g in honest if g.name in names]
    res: dict[str, Any] = {"params": vars(args) | {"out": str(args.out) if args.out else None},
                           "machine": machine_info(), "failed": []}
    try:
        progress("starting 5 daemons")
        clade.start_all(timeout=180)
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
        everyone = [*honest, x, y]

        def attack(name: str, items: list[tuple[str, str]], confidence: float = 1.0) -> list[str]:
            t0 = time.monotonic()
            ids = write_many(x, items, confidence=confidence, importance=1.0)
            attacker.update(dict.fromkeys(ids, name))
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
            with httpx.Client(transport=httpx.HTTPTransport(uds=x.socket), base_url="http://clade") as c:
                code = c.post(f"/v1/entries/{entry_id}/endorse", json={"confirm": True}).status_code
            own[str(code)] = own.get(str(code), 0) + 1
        confirmed = [i for i in [*targeted, *kind_ids] if i in set(crossing(x, [*targeted, *kind_ids]))]
        sib: dict[str, int] = {}
        with httpx.Client(transport=httpx.HTTPTransport(uds=y.socket), base_url="http://clade", timeout=60) as c:
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
        res["inheritance"] = ("not run: the testament/inherit flow on an offline copy of a victim was left for the "
                              "defence session (the heir's re-authoring needs a validation step the bench cannot "
                              "fake without an outcome API call on the heir; see README 'Inherited entries')")
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


def report(res: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [("## honest baseline", "")]
    if "honest" in res:
        h = res["honest"]
        rows += [("honest entries / crossed by curator", f"{h['entries']} / {h['crossed']}"),
                 ("warning crossing latency ms (p50/p99)",
                  f"{h['warning_latency_ms'].get('p50')} / {h['warning_latency_ms'].get('p99')}"),
                 ("insight crossing latency ms after curator (p50/p99)",
                  f"{h['insight_latency_ms'].get('p50')} / {h['insight_latency_ms'].get('p99')}")]
    rows.append(("## attacks (written / crossed at x / arrived per victim)", ""))
    for name, a in res.get("attacks", {}).items():
        rows.append((name, f"{a['written']} / {a['crossed_at_x']} / {a['arrived']} in {a['seconds']} s"))
    if "endorse" in res:
        e = res["endorse"]
        rows.append(("endorse own (status: n) / by y", f"{e['own_status']} / {e['sibling_status']}"))
        rows.append(("victims holding y's confirm (of first 40)", str(e["victim_confirms_of_first_40"])))
    rows.append(("## digests (after: with attacker, >1, slot share, answer in digest, recall@5)", ""))
    for m in res.get("measurements", []):
        rows.append((m["after"], f"{m['with_attacker']:.0%}, {m['more_than_one']:.0%}, "
                                 f"{m['attacker_slot_share']:.1%}, {m['answer_in_digest']:.0%}, "
                                 f"{m['recall_at_5']:.0%}; {m['slots_by_attack']}; marked unverified "
                                 f"{m.get('attacker_slots_marked_unverified')}"))
    rows.append(("load average (1 min) during", str(res.get("host", {}).get("loadavg_1m_during"))))
    rows.append(("total", f"{res.get('total_seconds')} s; failed: {res.get('failed')}"))
    print_table(rows)
    out()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--honest", type=at_least(0), default=100, help="DeFi sentences per honest golem (default 100)")
    p.add_argument("--queries", type=at_least(1), default=50, help="operational queries (default 50)")
    p.add_argument("--paraphrases", type=at_least(1), default=3, help="targeted paraphrases per query (default 3)")
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
    add_common_args(p, out_help="keep the daemons' data directories here")
    args = p.parse_args(argv)
    if not 0 <= args.corroborate <= 1:
        p.error("--corroborate is a probability in 0..1")
    if args.drip_rate <= 0:
        p.error("--drip-rate must be positive")
    if not set(args.victims.split(",")) <= {"g0", "g1", "g2"}:
        p.error("--victims names honest golems among g0,g1,g2")
    return main_in_workdir("poison", args, run, report, "clade-poison-")


if __name__ == "__main__":
    sys.exit(main())
