"""One run of the decision benchmark: an arm and a variant played on one seed's world.

Three golems, each a real Grimoire (SQLite) on one simulated clock, run the real curator
(`run_cycle`: decay, prune, compress, promote through the crossing gates) every
`cycle_hours` and then sync every ordered pair through the wire codec (`encode_delta` /
`decode_delta` with signature checks) under the sender's sync gate, as anti-entropy does.
Digests are the daemon's (`build_digest`: recall, trust, belief, diversity, budget).
Vectors come from the bundled MiniLM model, embedded once per world by the driver
(`CachedEmbedder`: a text not in the table is embedded by the real model and counted).

This module imports the daemon's packages (`daemon`, `crdt`, `crypto`) from wherever the
process finds them first: the driver runs the *release* arm in workers whose `sys.path`
starts with an extracted copy of the previous release's commit, so that arm runs that
release's code, not today's code with switches. It uses only calls both have.

Each day every honest golem writes its world writes (and, half the days, restates one
sibling insight it was *shown* in a digest: a near-copy, an own entry of the original's truth);
at mid-day it answers its questions: it reads its digest for the question (k = 10, the API
default), takes the insight or heuristic about the question's topic it believes most (the
confidence the digest shows — the pooled belief — or its local confidence in the arms that
have no belief; one marked unverified only if nothing verified applies) and acts on it only
if that confidence is above `ACT_AT` (0.5: acting on bad knowledge costs as much as acting on
good knowledge gains, so acting on a coin flip or worse is not a decision). The outcome
follows the world's luck for that decision and is recorded (`Grimoire.record_outcome`).
Utility per decision: +1 on good knowledge, −1 on bad, 0 blind.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench.common.seed import seed_entry
from crdt import EntryBody, Kind, Sensitivity, decode_delta, encode_delta, may_cross
from crypto import Identity, signature_ok
from daemon.embedding.embedder import Embedder
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.belief import BeliefPolicy
from daemon.grimoire.curator.cycle import CuratorSettings, run_cycle
from daemon.grimoire.digest import build_digest
from daemon.grimoire.retrieval import Retriever
from daemon.grimoire.trust import TrustPolicy

from .world import GOLEMS, HELP, World, Write, luck, near_copy_text

__all__ = ["ACT_AT", "ARMS", "VARIANTS", "CachedEmbedder", "RunSpec", "run_one"]

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_800_000_000_000
ACT_AT = 0.5
ARMS = ("solo", "share_everything", "release", "clade", "oracle")
VARIANTS = ("honest", "attacker", "sleeper", "silent")
SLEEPER_TURNS = 10  # days
ATTACKER = 2
VICTIMS = (0, 1)
NO_REFUTE = BeliefPolicy(refute_min_negative=float("inf"))


@dataclass(frozen=True, slots=True)
class Arm:
    sync: bool
    gate: str  # "daemon": the store's own sync gate; "barrier": crdt.may_cross alone; "oracle": good only
    trust: bool  # trust, quarantine and refutation as the code under test has them
    evidence: bool  # outcomes bump the signed evidence slot (it crosses)
    shown: str  # what the agent believes: "digest" (the confidence the digest shows) or "local"
    omniscient: bool = False  # the agent never acts on bad knowledge (the oracle)


ARM = {
    "solo": Arm(sync=False, gate="daemon", trust=True, evidence=True, shown="digest"),
    "share_everything": Arm(sync=True, gate="barrier", trust=False, evidence=False, shown="local"),
    "release": Arm(sync=True, gate="daemon", trust=True, evidence=True, shown="digest"),
    "clade": Arm(sync=True, gate="daemon", trust=True, evidence=True, shown="digest"),
    "oracle": Arm(sync=True, gate="oracle", trust=False, evidence=False, shown="local", omniscient=True),
}


@dataclass(frozen=True, slots=True)
class RunSpec:
    arm: str
    variant: str
    seed: int
    cycle_hours: int
    work: str  # the directory for this run's stores
    world_file: str  # the pickled-free world: JSON written by the driver
    vectors_file: str  # the world's texts and their vectors (.npz)


class CachedEmbedder:
    """The `Embedder` surface the Retriever uses (`info`, `embed`), over vectors computed once
    per world; a text not in the table is embedded by the real model (`fallback`) and counted."""

    def __init__(self, info: Any, table: dict[str, np.ndarray], fallback: Callable[[], Any]) -> None:
        self.info = info
        self._table = table
        self._fallback = fallback
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._table]
        if missing:
            self.misses += len(missing)
            for text, row in zip(missing, self._fallback().embed(missing), strict=True):
                self._table[text] = row
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        return np.stack([self._table[t] for t in texts]).astype(np.float32, copy=False)


@dataclass
class Golem:
    index: int
    identity: Identity
    store: Grimoire
    retriever: Retriever
    shown_siblings: set[str] = field(default_factory=set)  # sibling insights its digests showed it
    rows_seen: int = 0
    rows_fell: int = 0

    @property
    def me(self) -> str:
        return self.identity.peer_id


@dataclass
class Written:
    id: str
    golem: int
    kind: str
    truth: str
    written_ms: int
    stated: float
    content: str
    topic: tuple[str, str] | None


@dataclass
class Tally:
    decisions: int = 0
    good: int = 0
    bad: int = 0
    covered: int = 0
    bad_days: set[tuple[int, int, str]] = field(default_factory=set)
    shown: list[tuple[float, int]] = field(default_factory=list)
    stated: list[tuple[float, int]] = field(default_factory=list)
    good_checked: int = 0
    good_everywhere: int = 0
    digest_items: int = 0  # items in victims' decision digests while golem 2 is compromised
    attacker_items: int = 0  # … of which golem 2's
    attacker_max: int = 0  # most of golem 2's items in one digest
    refused: dict[str, int] = field(default_factory=dict)  # first-cycle admission refusals by reason
    blind: dict[str, int] = field(default_factory=dict)  # why victims' decisions were blind
    bad_from: dict[str, int] = field(default_factory=dict)  # whose bad knowledge victims acted on


def load_world(path: str) -> World:
    from .world import Decision, NearCopyDraw

    doc = json.loads(Path(path).read_text())

    def write(d: dict[str, Any]) -> Write:
        return Write(**{**d, "topic": tuple(d["topic"]) if d["topic"] else None})

    return World(doc["seed"], doc["days"], doc["decisions"], tuple(write(d) for d in doc["honest"]),
                 tuple(write(d) for d in doc["attacker"]),
                 tuple(Decision(**{**d, "topic": tuple(d["topic"])}) for d in doc["questions"]),
                 tuple(NearCopyDraw(**d) for d in doc["near_copies"]))


def _load_vectors(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        texts = json.loads(bytes(data["texts"]).decode())
        return dict(zip(texts, data["vectors"], strict=True))


def _real_embedder(work: Path) -> Callable[[], Any]:
    loaded: list[Any] = []

    def get() -> Any:
        if not loaded:
            from daemon.embedding.embedder import get_embedder

            loaded.append(get_embedder(work / "embedder"))
        return loaded[0]

    return get


def _model_info(fallback: Callable[[], Any]) -> Any:
    from daemon.embedding.embedder import DEFAULT_MODEL, expected_info

    return expected_info(DEFAULT_MODEL) or fallback().info


def run_one(spec: RunSpec) -> dict[str, Any]:
    """One arm × variant × seed: the simulation and its figures (module docstring)."""
    arm = ARM[spec.arm]
    world = load_world(spec.world_file)
    started = time.perf_counter()
    root = Path(spec.work)
    root.mkdir(parents=True, exist_ok=True)
    fallback = _real_embedder(root.parent)
    embedder = CachedEmbedder(_model_info(fallback), _load_vectors(spec.vectors_file), fallback)
    clock = {"now": T0}
    trust = TrustPolicy() if arm.trust else dataclasses.replace(TrustPolicy(), enabled=False, release_vouched=False)
    settings = CuratorSettings(trust=trust)
    golems: list[Golem] = []
    for g in range(GOLEMS):
        store = Grimoire.open(root / f"golem-{g}.db", create=True, wall_ms=lambda: clock["now"])
        retriever = Retriever(store, lambda: cast(Embedder, embedder))  # the surface it uses: info, embed
        retriever.trust = trust
        retriever.belief = BeliefPolicy() if arm.trust else NO_REFUTE
        golems.append(Golem(g, Identity(bytes([g + 1]) * 32), store, retriever))
    written: dict[str, Written] = {}
    negatives: dict[str, int] = {}
    second_negative: set[str] = set()
    tally = Tally()
    pending_good: list[tuple[int, Written]] = []
    by_day = _writes_by_golem_day(world)
    questions = {(q.golem, q.day, q.n): q for q in world.questions}
    near = {(d.golem, d.day): d for d in world.near_copies}

    def compromised(g: int, day: int) -> bool:
        return g == ATTACKER and (spec.variant == "attacker" or (spec.variant == "sleeper" and day >= SLEEPER_TURNS))

    def silent(g: int) -> bool:
        return g == ATTACKER and spec.variant == "silent"

    def write(g: int, w: Write, kind: str | None = None, content: str | None = None,
              confidence: float | None = None) -> Written:
        new = NewEntry(kind=Kind(w.kind if w.kind != "near_copy" else "insight"), content=content or w.content,
                       confidence=w.confidence if confidence is None else confidence,
                       sensitivity=Sensitivity.SENSITIVE if w.sensitive else Sensitivity.PUBLIC)
        entry = seed_entry(golems[g].store, new, golems[g].identity)
        out = Written(entry.id, g, kind or w.kind, w.truth, clock["now"], new.confidence, new.content, w.topic)
        written[entry.id] = out
        return out

    def outcome(g: int, entry_id: str, positive: bool, day: int) -> None:
        golem = golems[g]
        value = round(luck(world.seed, "value", g, entry_id, clock["now"]) * 100, 2)
        golem.store.record_outcome(entry_id, "positive" if positive else "negative", metric=f"pnl_usd_g{g}",
                                   value=value, note=f"soma note of golem {g}", now_ms=clock["now"],
                                   identity=golem.identity if arm.evidence else None)

    def decide(g: int, day: int, n: int) -> None:
        golem = golems[g]
        q = questions[(g, day, n)]
        items = _digest(golem, q.question, clock["now"])
        victim = g in VICTIMS
        if victim and compromised(ATTACKER, day):
            mine = sum(1 for i in items if i["id"] in written and written[i["id"]].golem == ATTACKER)
            tally.digest_items += len(items)
            tally.attacker_items += mine
            tally.attacker_max = max(tally.attacker_max, mine)
        applicable = [i for i in items if i["type"] in ("insight", "heuristic") and i["id"] in written
                      and written[i["id"]].truth in HELP and written[i["id"]].topic == q.topic]
        for item in items:
            w = written.get(item["id"])
            if w is not None and w.truth == "bad" and item["id"] in second_negative and victim:
                tally.bad_days.add((g, day, item["id"]))
            if w is not None and w.golem != g and w.kind == "insight":
                golem.shown_siblings.add(item["id"])
        covered = False
        if victim:
            tally.decisions += 1
            held = {r[0] for r in golem.store.connection.execute(
                "SELECT id FROM entries WHERE archived = 0 AND status = 'active' AND kind IN ('insight', 'heuristic')")}
            covered = any(written[i].topic == q.topic for i in held if i in written)
            tally.covered += covered
        if arm.omniscient:
            applicable = [i for i in applicable if written[i["id"]].truth == "good"]
        if not applicable:
            if victim:
                why = "not in digest" if covered else "nothing held"
                tally.blind[why] = tally.blind.get(why, 0) + 1
            return
        if arm.shown == "local":
            local = {e.id: e.local_confidence for e in golem.store.get_many([i["id"] for i in applicable])}
            for i in applicable:
                i["confidence"] = local.get(i["id"], i["confidence"])
        verified = [i for i in applicable if not i.get("unverified")] or applicable
        chosen = max(verified, key=lambda i: float(i["confidence"]))  # first of equals: the digest's order
        if float(chosen["confidence"]) <= ACT_AT and not arm.omniscient:
            if victim:
                tally.blind["below 0.5"] = tally.blind.get("below 0.5", 0) + 1
            return
        w = written[chosen["id"]]
        helped = q.luck < HELP[w.truth]
        if victim:
            tally.good += w.truth == "good"
            tally.bad += w.truth == "bad"
            if w.truth == "bad":
                src = "own" if w.golem == g else ("golem 2" if w.golem == ATTACKER else "sibling")
                src += ", unverified" if chosen.get("unverified") else ""
                tally.bad_from[src] = tally.bad_from.get(src, 0) + 1
            tally.shown.append((float(chosen["confidence"]), int(helped)))
            tally.stated.append((w.stated, int(helped)))
        outcome(g, w.id, helped, day)
        if not helped:
            negatives[w.id] = negatives.get(w.id, 0) + 1
            if negatives[w.id] == 2:
                second_negative.add(w.id)

    def attack(g: int, day: int) -> None:
        """Fake outcomes aimed at today's questions: every good sibling entry it holds about a
        topic the victims are asked today gets a negative, every own entry about one a positive."""
        asked = {q.topic for q in world.questions if q.day == day and q.golem in VICTIMS}
        held = golems[g].store.connection.execute(
            "SELECT id, author FROM entries WHERE archived = 0 AND status = 'active' "
            "AND kind IN ('insight', 'heuristic') ORDER BY id").fetchall()
        for entry_id, author in held:
            w = written.get(entry_id)
            if w is None or w.topic not in asked:
                continue
            if author == golems[g].me:
                outcome(g, entry_id, True, day)
            elif w.truth == "good":
                outcome(g, entry_id, False, day)

    def gate(sender: Golem) -> Callable[[EntryBody], bool]:
        if arm.gate == "oracle":
            return lambda body: may_cross(body) and body.id in written and written[body.id].truth == "good"
        if arm.gate == "barrier" or compromised(sender.index, day):
            return may_cross  # a compromised VM pushes everything it may send at all
        return sender.store.sync_gate(sender.me)

    steps_per_day = round(24 / spec.cycle_hours)
    step_count = 0
    for day in range(world.days):
        for step in range(steps_per_day):
            clock["now"] = T0 + day * DAY + step * spec.cycle_hours * HOUR
            if step == 0:
                for g in range(GOLEMS):
                    if silent(g):
                        continue
                    if compromised(g, day):
                        for w in by_day["attacker"].get((g, day), []):
                            write(g, w)
                        continue
                    for w in by_day["honest"].get((g, day), []):
                        out = write(g, w)
                        if w.kind == "insight" and w.truth == "good":
                            pending_good.append((step_count + 1, out))
                    draw = near[(g, day)]
                    shown = sorted(i for i in golems[g].shown_siblings if written[i].kind == "insight")
                    if shown and draw.u < 0.5:
                        orig = written[shown[min(len(shown) - 1, int(draw.pick * len(shown)))]]
                        w = Write(g, day, -1, "insight", orig.truth, 0.8, near_copy_text(orig.content), orig.topic)
                        write(g, w, kind="near_copy")
                for golem in golems:
                    golem.retriever.index_missing()
            if step == steps_per_day // 2:
                for g in range(GOLEMS):
                    if silent(g):
                        continue
                    if compromised(g, day):
                        attack(g, day)
                        continue
                    for n in range(world.decisions):
                        decide(g, day, n)
            for golem in golems:
                report = run_cycle(golem.store, identity=golem.identity, now_ms=clock["now"], settings=settings,
                                   vectors=golem.retriever.vectors())
                for reason, count in (getattr(report, "promotion_refused", None) or {}).items():
                    tally.refused[reason] = tally.refused.get(reason, 0) + count
            if arm.sync:
                for a in golems:
                    for b in golems:
                        if a is not b:
                            _sync(a, b, gate(a))
            step_count += 1
            due = [good for s, good in pending_good if s <= step_count]
            pending_good = [(s, good) for s, good in pending_good if s > step_count]
            if due:
                for golem in golems:
                    golem.retriever.index_missing()
            for good in due:
                honest = [g for g in range(GOLEMS) if g != good.golem and not compromised(g, day) and not silent(g)]
                if not honest:
                    continue
                tally.good_checked += 1
                tally.good_everywhere += all(
                    good.id in {i["id"] for i in _digest(golems[g], good.content, clock["now"])} for g in honest)
            for golem in golems:
                rows = int(golem.store.connection.execute("SELECT count(*) FROM entries").fetchone()[0])
                golem.rows_fell += rows < golem.rows_seen
                golem.rows_seen = rows
    return _figures(spec, world, golems, written, tally, embedder, compromised, started)


def _figures(spec: RunSpec, world: World, golems: list[Golem], written: dict[str, Written], tally: Tally,
             embedder: CachedEmbedder, compromised: Callable[[int, int], bool], started: float) -> dict[str, Any]:
    import daemon

    insights = [w for w in written.values() if w.kind == "insight" and not compromised(w.golem, world.days - 1)]
    crossed = sum(1 for w in insights if golems[w.golem].store.connection.execute(
        "SELECT promoted_ms IS NOT NULL FROM entries WHERE id = ?", (w.id,)).fetchone()[0])
    soma = 0
    missing = 0
    for g, golem in enumerate(golems):
        held = {r[0] for r in golem.store.connection.execute("SELECT id FROM entries")}
        soma += sum(1 for w in written.values() if w.truth == "soma" and w.golem != g and w.id in held)
        soma += int(golem.store.connection.execute(
            "SELECT count(*) FROM outcomes WHERE metric != ?", (f"pnl_usd_g{g}",)).fetchone()[0])
        missing += sum(1 for w in written.values() if w.golem == g and w.id not in held)
    for golem in golems:
        golem.store.close()
    d = tally.decisions
    return {
        "arm": spec.arm, "variant": spec.variant, "seed": spec.seed, "world": world.digest(),
        "code": str(Path(daemon.__file__).resolve().parents[1]),
        "decisions": d, "good": tally.good, "bad": tally.bad, "blind": d - tally.good - tally.bad,
        "utility": (tally.good - tally.bad) / d if d else None,
        "good_share": tally.good / d if d else None, "bad_share": tally.bad / d if d else None,
        "blind_share": (d - tally.good - tally.bad) / d if d else None,
        "covered_share": tally.covered / d if d else None,
        "bad_golem_days": len(tally.bad_days),
        "good_checked": tally.good_checked,
        "good_in_time": tally.good_everywhere / tally.good_checked if tally.good_checked else None,
        "insights_promoted": crossed / len(insights) if insights else None,
        "refused": tally.refused, "blind_reasons": tally.blind, "bad_from": tally.bad_from,
        "attacker_slots": tally.attacker_items / tally.digest_items if tally.digest_items else None,
        "attacker_max_per_digest": tally.attacker_max,
        "brier_shown": _brier(tally.shown), "brier_stated": _brier(tally.stated),
        "soma_on_siblings": soma, "destroyed": missing + sum(g.rows_fell for g in golems),
        "embed_misses": embedder.misses, "seconds": round(time.perf_counter() - started, 1),
    }


def _brier(pairs: Sequence[tuple[float, int]]) -> float | None:
    return sum((f - y) ** 2 for f, y in pairs) / len(pairs) if pairs else None


def _writes_by_golem_day(world: World) -> dict[str, dict[tuple[int, int], list[Write]]]:
    out: dict[str, dict[tuple[int, int], list[Write]]] = {"honest": {}, "attacker": {}}
    for name, writes in (("honest", world.honest), ("attacker", world.attacker)):
        for w in writes:
            out[name].setdefault((w.golem, w.day), []).append(w)
    return out


def _sync(sender: Golem, receiver: Golem, gate: Callable[[EntryBody], bool]) -> None:
    for delta in list(sender.store.iter_deltas(receiver.store.causal_context(), gate=gate)):
        decoded, rejected = decode_delta(encode_delta(delta), signature_ok)
        receiver.store.apply_delta(decoded, rejected=rejected, local_replica=receiver.me, sender=sender.me)


def _digest(golem: Golem, text: str, now_ms: int) -> list[dict[str, Any]]:
    doc = build_digest(golem.retriever, text=text, now_ms=now_ms, budget_tokens=2000, k=10, fmt="json",
                       include_sensitive=False, namespace="bench", embed_limit=0)
    return list(json.loads(doc["document"]))


