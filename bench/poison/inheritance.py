"""The inheritance phase of `bench_poison`: testament → heir → relay (see bench_poison's
docstring). Real daemons on loopback; the victim dies through `POST /v1/death`, the heir
inherits with `clade inherit` before it first runs."""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import progress
from bench.common.poison import QA, paraphrases
from bench.poison.observe import crossing, digest_slots, held_by, holds, measure, wait_embedded, write
from daemon.testing.harness import CLADE, Golem, LoopbackClade

__all__ = ["inheritance"]


def _store_rows(db: Path) -> dict[str, tuple[str, str]]:
    """id -> (provenance, author) of every entry in a stopped golem's grimoire.db (read-only)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {str(r[0]): (str(r[1]), str(r[2])) for r in conn.execute("SELECT id, provenance, author FROM entries")}


def _attacker_slot_provenance(g: Golem, qas: Sequence[QA], attacker: dict[str, str]) -> dict[str, int]:
    """Provenance on `g` of the attacker's slots in `g`'s digests over `qas` (inherited, clade, ...)."""
    counts: dict[str, int] = {}
    for qa in qas:
        for entry_id, _, _ in digest_slots(g, qa.query):
            if entry_id in attacker:
                prov = str(g.call("GET", f"/v1/entries/{entry_id}")["provenance"])
                counts[prov] = counts.get(prov, 0) + 1
    return dict(sorted(counts.items()))


def inheritance(clade: LoopbackClade, v: Golem, others: Sequence[Golem], x: Golem, qas: Sequence[QA],
                answers: dict[str, str], attacker: dict[str, str], texts: dict[str, str], laundered: frozenset[str],
                rng: random.Random, args: argparse.Namespace) -> dict[str, Any]:
    """Testament → heir → relay: `v` (which holds the attacker's entries, aged or not) dies through
    `POST /v1/death`; a new member `h` inherits the testament (`clade inherit` before it first runs),
    joins, its agent cites what its digests show (`POST /v1/feedback`) and its curator runs; then
    what `h` re-authored of the attacker's texts and whether it reaches `others` (their digests)."""
    res: dict[str, Any] = {"victim": v.name, "heir": "h", "others": [g.name for g in others],
                           "quarantine_age_s": args.quarantine_age, "heir_quarantine_age_s": args.heir_quarantine_age}
    measurements: list[dict[str, Any]] = []
    frozen = dict(attacker)
    # -- the victim before it dies, and the others -----------------------------------------------------
    measurements.append(measure(f"victim {v.name} before death", [v], qas, answers, attacker, laundered))
    measurements.append(measure("others before death", others, qas, answers, attacker, laundered))
    # -- late: warnings the victim holds unverified when it dies (arrived < quarantine age before) -----
    late_ids: list[str] = []
    if args.late:
        t_age = time.monotonic()
        late_ids = [write(x, f"{paraphrases(rng, qa, 3)[i % 3]} [late {i}]", "warning", 1.0, 1.0)
                    for i, qa in enumerate(rng.sample(list(qas), min(args.late, len(qas))))]
        attacker.update(dict.fromkeys(late_ids, "late"))
        crossed = set(crossing(x, late_ids))
        texts.update({i: str(x.call("GET", f"/v1/entries/{i}")["content"]) for i in late_ids})
        got = held_by(v, crossed, 30)
        res["late"] = {"written": len(late_ids), "crossed_at_x": len(crossed), "arrived_at_victim": len(got),
                       "seconds_to_arrive": round(time.monotonic() - t_age, 1)}
        progress(f"  late: {res['late']}")
    # -- death --------------------------------------------------------------------------------------------
    held_by_v = {i for i in attacker if holds(v, i)}
    t0 = time.monotonic()
    died = v.call("POST", "/v1/death", json={"reflection": "I trusted the clade's routing advice; verify "
                                                           "routers and allowances before acting on them.",
                                             "cause": "bench: inheritance attack"})
    res["death"] = {"steps": {s["name"]: s["status"] for s in died["steps"]},
                    "testament": next((s["detail"] for s in died["steps"] if s["name"] == "testament"), None),
                    "complete": died["complete"], "seconds": round(time.monotonic() - t0, 1)}
    progress(f"  {v.name} died: {res['death']}")
    testament = died["testament_path"]
    if not testament:
        raise RuntimeError(f"{v.name} wrote no testament: {died['steps']}")
    v.stop()
    # -- the heir inherits before it first runs ------------------------------------------------------------
    h = clade.add_golem("h")
    clade.golems.append(h)
    done = subprocess.run([CLADE, "--data-dir", str(h.data.root), "inherit", testament, "--json"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"clade inherit failed: {done.stderr.strip()[-500:]}")
    res["inherit_report"] = json.loads(done.stdout)
    rows = _store_rows(Path(h.data.db_path))
    by_prov: dict[str, int] = {}
    for prov, _ in rows.values():
        by_prov[prov] = by_prov.get(prov, 0) + 1
    held = {i: rows[i][0] for i in attacker if i in rows}
    att_prov: dict[str, int] = {}
    for prov in held.values():
        att_prov[prov] = att_prov.get(prov, 0) + 1
    res["testament"] = {"entries_imported": len(rows), "by_provenance": dict(sorted(by_prov.items())),
                        "attacker_bequeathed": len(held), "attacker_by_provenance": dict(sorted(att_prov.items())),
                        "late_bequeathed": sum(1 for i in late_ids if i in rows),
                        "attacker_held_by_victim": len(held_by_v),
                        "late_held_by_victim": len(held_by_v & set(late_ids))}
    progress(f"  h inherited: {res['inherit_report']}; {res['testament']}")
    # -- the heir joins -----------------------------------------------------------------------------------
    env = {} if args.heir_quarantine_age is None else {"CLADE_TRUST__QUARANTINE_AGE_S": str(args.heir_quarantine_age)}
    clade.start(h, bootstrap=[others[0]], env=env)
    clade.wait_connected([*others, x, h], timeout=120)
    crossed_attacker = {i for i in attacker if holds(others[0], i)}
    res["heir_synced"] = {"attacker_on_others": len(crossed_attacker),
                          "of_which_on_heir": len(held_by(h, crossed_attacker, 120))}
    _, res["heir_embedded"] = wait_embedded([h], 180)
    joined = measure("heir joined", [h], qas, answers, attacker, laundered)
    joined["attacker_slots_by_provenance"] = _attacker_slot_provenance(h, qas, attacker)
    measurements.append(joined)
    # -- the heir's agent uses what its digests show, then its curator runs -----------------------------
    cited = 0
    for qa in qas:
        ids = [i for i, _, _ in digest_slots(h, qa.query)]
        if ids:
            h.call("POST", "/v1/feedback", json={"cited": ids})
            cited += len(ids)
    cycle = h.call("POST", "/v1/curator/run")
    res["heir_agent"] = {"cited": cited, "curator_promoted": cycle.get("entries_promoted")}
    attacker_texts = {texts[i]: i for i in attacker if i in texts}
    own = [e for e in h.call("GET", "/v1/entries", params={"limit": 10_000})["entries"] if e["author"] == h.peer_id]
    reauthored = {str(e["id"]): attacker.get(attacker_texts.get(e["content"], ""), "laundering") for e in own
                  if e["content"] in attacker_texts or e["content"] in laundered}
    by_attack: dict[str, int] = {}
    for tag in reauthored.values():
        by_attack[tag] = by_attack.get(tag, 0) + 1
    res["reauthored"] = {"own_entries": len(own), "reissued": sum(1 for e in own if e.get("origin") == "inherited"),
                         "attacker_texts": len(reauthored), "by_attack": dict(sorted(by_attack.items())),
                         "promoted": sum(1 for e in own if str(e["id"]) in reauthored and e.get("promoted_reason"))}
    progress(f"  heir agent: {res['heir_agent']}; re-authored {res['reauthored']}")
    used_all = {**attacker, **dict.fromkeys(reauthored, "relayed")}  # h's re-authored copies: "relayed"
    used = measure("heir after its agent used it + curator", [h], qas, answers, used_all, laundered)
    used["attacker_slots_by_provenance"] = _attacker_slot_provenance(h, qas, used_all)
    measurements.append(used)
    # -- relay: does what h re-authored reach the others, and their digests ---------------------------
    arrived = {g.name: len(held_by(g, set(reauthored), 60)) for g in others}
    res["relay"] = {"reauthored": len(reauthored), "arrived": arrived}
    if args.quarantine_age is not None and args.quarantine_age <= 120:
        time.sleep(args.quarantine_age + 1)  # the relayed copies age on the others, as x's did
    wait_embedded(others, 120)
    after = measure("others after relay", others, qas, answers, used_all, laundered)
    measurements.append(after)
    res["relay"]["slots_in_others_digests"] = after["slots_by_attack"].get("relayed", 0)
    res["relay"]["slots"] = after["slots"]
    progress(f"  relay: {res['relay']}")
    res["measurements"] = measurements
    res["attacker_before_phase"] = len(frozen)
    return res
