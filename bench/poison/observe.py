"""bench_poison's observations of real golems over their control API (`Golem.call`): arrivals
from the event streams, embedding drained, writes, what crossed, how the honest answers are
held, digest slots, and one measurement of the victims' digests and searches."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import progress
from bench.common.poison import QA, score_digests
from daemon.testing.harness import EventLog, Golem

__all__ = ["AT_ONCE", "Arrivals", "answer_states", "crossing", "digest_slots", "held_by", "holds", "measure",
           "wait_embedded", "write", "write_many"]

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


def wait_embedded(golems: Sequence[Golem], timeout: float) -> tuple[float, bool]:
    """Until no daemon has an entry without a vector (`/v1/status` embedding_backlog 0); (seconds,
    drained). bench_clade's counter test (entries_embedded >= entries) never held on some golems
    here, costing its whole timeout: the counter leaves out vectors written outside the embedder
    service (a warning is embedded with its write, crossing.remember_warning)."""
    t0 = time.monotonic()
    left = list(golems)
    while left and time.monotonic() - t0 < timeout:
        left = [g for g in left if int(g.call("GET", "/v1/status").get("embedding_backlog", 0)) > 0]
        if left:
            time.sleep(0.5)
    return round(time.monotonic() - t0, 1), not left


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


def holds(g: Golem, entry_id: str) -> bool:
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
            hits = list(pool.map(lambda qa, v=v: [(str(h["id"]), str(h["content"])) for h in v.call(
                "POST", "/v1/memory/search", json={"query": qa.query, "top_k": 5})["results"]], qas))
        # the honest answer: its id, or its exact text (an heir's reissue of an inherited answer)
        a_in = sum(any(i == answers[qa.query] or c == qa.answer for i, c in d)
                   for qa, d in zip(qas, digests, strict=True))
        a_5 = sum(any(i == answers[qa.query] or c == qa.answer for i, c in h) for qa, h in zip(qas, hits, strict=True))
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


def held_by(g: Golem, ids: set[str], timeout: float) -> set[str]:
    """Of `ids`, those `g` holds, polled until all or `timeout` s."""
    deadline = time.monotonic() + timeout
    held: set[str] = set()
    while True:
        held |= {i for i in ids - held if holds(g, i)}
        if held == ids or time.monotonic() > deadline:
            return held
        time.sleep(1)
