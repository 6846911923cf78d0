"""What the soak checks once its load and faults are over (bench/bench_soak.py): every
acknowledged warning on every golem, the ops that must converge after one sync round, the
stores' integrity, the last backup, and that no secret leaked anywhere a daemon writes or serves."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.soak.load import Tally, now
from daemon.testing.harness import CLADE, Golem
from daemon.testing.styx_server import StyxServer

__all__ = ["converge", "gated_ops_after_one_round", "integrity", "secrets_found", "served", "verify_backup"]


def converge(golems: Sequence[Golem], tally: Tally, last_end: float, *, timeout: float) -> dict[str, Any]:
    """When every acknowledged warning (not held as a repeat) is on every golem, looked at once
    the load has stopped: `after_load_s` from then (the convergence itself) and `seconds` from
    the last fault's end (which also counts the load that ran after it); else what was still
    missing."""
    warnings = [a.entry_id for a in tally.acks if a.kind == "warning"]
    started = now()
    deadline = started + timeout
    state: dict[str, Any] = {}
    while now() < deadline:
        try:
            have = {x.name: {e["id"]: e for e in x.call("GET", "/v1/entries", params={
                "limit": 10_000, "archived": "true"})["entries"]} for x in golems}
        except (RuntimeError, httpx.HTTPError):
            time.sleep(1)  # poll pacing
            continue
        held = {i for entries in have.values() for i, e in entries.items() if e.get("crossing_hold")}
        missing = {name: [w for w in warnings if w not in held and w not in entries]
                   for name, entries in have.items()}
        state = {"missing": {k: len(v) for k, v in missing.items() if v},
                 "missing_ids": {k: v[:5] for k, v in missing.items() if v}}
        if not any(missing.values()):
            return {"seconds": round(now() - last_end, 1), "after_load_s": round(now() - started, 1),
                    "held_warnings": len(held)}
        time.sleep(1)  # poll pacing
    return {"seconds": None, **state}


def gated_ops_after_one_round(golems: Sequence[Golem], *, timeout: float) -> dict[str, Any]:
    """What must converge: with the load stopped and the curators quiet, every golem pulls once
    from every connected sibling (`POST /v1/sync`); then the ops that may cross (`shared`)
    must be equal on every golem at once. The causal context (which also learns the dots each
    golem withheld) is reported apart: seconds until it is equal too (None: not within `timeout`)."""
    rounds: dict[str, Any] = {}
    for golem in golems:
        try:
            synced = golem.call("POST", "/v1/sync")["synced"]
            rounds[golem.name] = sum(1 for s in synced if "error" not in s)
        except (RuntimeError, httpx.HTTPError) as exc:
            rounds[golem.name] = f"failed: {exc}"
    digests = {x.name: x.call("GET", "/v1/state-digest") for x in golems}
    ops = {name: d["shared"] for name, d in digests.items()}
    out: dict[str, Any] = {"pulls_per_golem": rounds, "gated_ops_equal": len(set(ops.values())) == 1,
                           "gated_ops_distinct": len(set(ops.values()))}
    start = now()
    while True:
        contexts = {x.name: x.call("GET", "/v1/state-digest")["context"] for x in golems}
        if len(set(contexts.values())) == 1:
            out["context_equal_after_s"] = round(now() - start, 1)
            break
        if now() - start > timeout:
            out["context_equal_after_s"] = None
            out["contexts_distinct"] = len(set(contexts.values()))
            break
        time.sleep(1)  # poll pacing
    return out


def integrity(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def verify_backup(golems: Sequence[Golem]) -> str:
    """`clade backup verify` of the newest backup any golem made (opened with that golem's identity
    key: backups are sealed to the owner and the golem, not the clade key)."""
    made = [(p.stat().st_mtime, p, g) for g in golems for p in g.data.backups_path.glob("*") if p.is_file()]
    if not made:
        return "no backup was made"
    _, path, golem = max(made, key=lambda m: m[0])
    done = subprocess.run([CLADE, "--data-dir", str(golem.data.root), "backup", "verify", str(path),
                           "--identity-key", str(golem.data.identity_path)], capture_output=True, check=False)
    if done.returncode != 0:
        return f"failed: {done.stderr.decode(errors='replace')[-300:]}"
    return "ok"


def served(golems: Sequence[Golem]) -> list[tuple[str, str]]:
    """What each daemon serves about itself: `/v1/status` and `/metrics`."""
    out = []
    for golem in golems:
        for path in ("/v1/status", "/metrics"):
            try:
                out.append((f"{golem.name} {path}", golem.request("GET", path).text))
            except (httpx.HTTPError, RuntimeError) as exc:
                out.append((f"{golem.name} {path}", f"unreachable: {exc}"))
    return out


def secrets_found(golems: Sequence[Golem], logs: dict[str, list[str]], styx: StyxServer,
                  pages: list[tuple[str, str]], needles: dict[str, str]) -> list[str]:
    """Where any of `needles` (what -> text: the API token, a sensitive entry's text) shows up:
    must be nowhere."""
    found = []
    places: list[tuple[str, str]] = list(pages)
    for golem in golems:
        places.append((f"{golem.name} log", "\n".join(logs.get(golem.name, []))))
        if golem.data.playbook_path.exists():
            places.append((f"{golem.name} PLAYBOOK.md", golem.data.playbook_path.read_text(errors="replace")))
        shown = subprocess.run([CLADE, "--data-dir", str(golem.data.root), "config", "show"], capture_output=True,
                               check=False)
        places.append((f"{golem.name} clade config show", (shown.stdout + shown.stderr).decode(errors="replace")))
    places.append(("styx items", json.dumps(styx.items())))
    for path in styx.db_path.parent.rglob("*"):
        if path.is_file():
            places.append((f"styx file {path.name}", path.read_bytes().decode("latin-1")))
    for where, text in places:
        for what, needle in needles.items():
            if needle in text:
                found.append(f"{what} in {where}")
    return found
