"""Benchmark clade key rotation: the owner's bundles for N members, and a live rotation.

    .venv/bin/python -m bench.bench_rotate [--members N] [--rounds R] [--seed S]

1. Owner side, in process (what `clade owner rotate` runs, without argparse): for N members
   (default 100, fresh identities in the owner's register), `prepare_rotation`, one
   `RotationBundle.create` per member (a SealedBox and an Ed25519 signature each), written
   0600, then `commit_rotation`; wall time in total and per member. Then the same through
   the real `clade owner rotate` console script (Python start-up included), once.
2. Golem side: `RotationBundle.open` of one bundle (signature check + SealedBox open), and
   `DataDir.install_clade_key` (keyring rewrite, fsyncs), each repeated.
3. Live, on loopback with two real daemons (`daemon.testing.harness`): R rotations. Each
   round the owner rotates, golem a joins (`clade join` → POST /v1/keys/reload), then golem
   b joins through the CLI and at once writes a warning; measured: the `clade join` wall
   time (Python start-up, bundle checks, keyring write, reload over the API) and the time
   from b's join returning to a's `entries_received` for that warning via gossip, i.e. the
   first epoch-R envelope a accepted from b. The floor, in the same run: the same write →
   arrival with no rotation in between.

Prints a table, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_rows, print_table, progress, summary
from bench.common.report import add_common_args, at_least, main_in_workdir, not_empty
from crypto import Identity, OwnerKey
from crypto.keyfile import write_secret
from crypto.rotation import (
    MemberRecord,
    RotationBundle,
    commit_rotation,
    load_members,
    prepare_rotation,
    record_member,
)
from daemon.datadir import DataDir
from daemon.testing.harness import CLADE, EventLog, Golem, LoopbackClade


def owner_side(work: Path, members: int, rng: random.Random) -> dict[str, Any]:
    owner_dir = work / "owner"
    owner = OwnerKey.create(owner_dir, "bench")
    now = int(time.time())
    ids = [Identity(rng.randbytes(32)) for _ in range(members)]
    for ident in ids:
        record_member(owner_dir, MemberRecord(peer_id=ident.peer_id, generation=0, not_after=now + 86_400))
    out = work / "bundles"
    out.mkdir()
    started = time.perf_counter()
    rotated = prepare_rotation(owner, owner_dir)
    for record in load_members(owner_dir):
        write_secret(out / f"{record.peer_id}.rotation", RotationBundle.create(rotated, record.peer_id, issued_at=now))
    commit_rotation(rotated, owner_dir)
    in_process = time.perf_counter() - started

    started = time.perf_counter()
    run = subprocess.run([CLADE, "--json", "owner", "rotate", "--owner-dir", str(owner_dir), "--out",
                          str(work / "bundles-cli")], capture_output=True, check=False)
    cli_s = time.perf_counter() - started
    cli_doc = json.loads(run.stdout) if run.returncode == 0 else {"error": run.stderr.decode()[-500:]}

    # golem side: open one bundle and install it
    golem = DataDir(work / "golem")
    golem.init()
    me = golem.load_identity()
    LoopbackClade.admit(golem, OwnerKey.load(owner_dir))
    membership = golem.load_membership()
    assert membership is not None
    bundle = RotationBundle.create(OwnerKey.load(owner_dir).with_clade_key(rng.randbytes(32), 10**6), me.peer_id,
                                   issued_at=now)
    opens, installs = [], []
    for i in range(50):
        t = time.perf_counter()
        epoch, key = RotationBundle.open(bundle, me, membership[0])
        opens.append(time.perf_counter() - t)
        t = time.perf_counter()
        golem.install_clade_key(epoch + i, key if i == 0 else rng.randbytes(32))
        installs.append(time.perf_counter() - t)
    return {"members": members, "rotate_in_process_s": round(in_process, 4),
            "per_member_ms": round(in_process / members * 1000, 4), "rotate_cli_s": round(cli_s, 3),
            "cli_bundles": len(cli_doc.get("bundles", [])), "cli_error": cli_doc.get("error"),
            "bundle_bytes": len(bundle), "open_bundle": summary(opens), "install_key": summary(installs)}


def _arrival_ms(watch: EventLog, entry: str, after_ms: float, timeout: float = 30) -> float:
    at, _, _ = watch.wait_for(lambda name, data: name == "entries_received" and entry in data["ids"]
                              and data["via"] == "gossip", timeout=timeout)
    return at - after_ms


def _join(golem: Golem, bundle: Path) -> dict[str, Any]:
    run = subprocess.run([CLADE, "--json", "--data-dir", str(golem.data.root), "join", str(bundle)],
                         capture_output=True, check=True)
    return dict(json.loads(run.stdout))


def live(work: Path, rounds: int) -> dict[str, Any]:
    lc = LoopbackClade(work / "clade", 2)
    a, b = lc.golems
    owner_dir = work / "clade" / "owner"
    watch: EventLog | None = None
    floor, joins, first_accept = [], [], []
    failed: list[str] = []
    try:
        lc.start_all()
        watch = EventLog(a.socket).start()
        for g in (a, b):
            record_member(owner_dir, MemberRecord(peer_id=g.peer_id, generation=0, not_after=int(time.time()) + 86_400))
        for i in range(rounds):
            sent = time.time() * 1000
            entry = b.call("POST", "/v1/memory", json={"content": f"floor write {i}", "memory_type": "warning"})["id"]
            floor.append(_arrival_ms(watch, entry, sent) / 1000)
            owner = OwnerKey.load(owner_dir)
            rotated = prepare_rotation(owner, owner_dir)
            out = work / f"round-{i}"
            out.mkdir()
            for g in (a, b):
                write_secret(out / g.peer_id, RotationBundle.create(rotated, g.peer_id, issued_at=int(time.time())))
            commit_rotation(rotated, owner_dir)
            _join(a, out / a.peer_id)
            started = time.perf_counter()
            doc = _join(b, out / b.peer_id)
            joins.append(time.perf_counter() - started)
            joined_ms = time.time() * 1000
            if (doc.get("reloaded") or {}).get("epoch") != rotated.key_epoch:
                failed.append(f"round {i}: b did not reload epoch {rotated.key_epoch}: {doc}")
            entry = b.call("POST", "/v1/memory", json={"content": f"first at epoch {rotated.key_epoch}",
                                                       "memory_type": "warning"})["id"]
            first_accept.append(_arrival_ms(watch, entry, joined_ms) / 1000)
            progress(f"round {i + 1}/{rounds}: join {joins[-1] * 1000:.0f} ms, "
                     f"first epoch-{rotated.key_epoch} envelope accepted {first_accept[-1] * 1000:.1f} ms after")
        counters = a.call("GET", "/v1/status")["counters"]
    finally:
        if watch is not None:
            watch.close()
        lc.close()
    return {"rounds": rounds, "join_cli": summary(joins), "join_to_first_accept": summary(first_accept),
            "floor_write_to_arrival": summary(floor),
            "a_rejected_unknown_epoch": counters.get("gossip_rejected_unknown_epoch", 0), "failed": failed}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    rng = random.Random(args.seed)
    progress(f"owner side: {args.members} members")
    owner = owner_side(work / "owner-side", args.members, rng)
    progress(f"live: {args.rounds} rotations of a two-daemon clade")
    alive = live(work / "live", args.rounds)
    failed = alive.pop("failed")
    if owner.get("cli_error"):
        failed.append(f"clade owner rotate failed: {owner['cli_error']}")
    return {"machine": machine_info(work), "params": {"members": args.members, "rounds": args.rounds,
                                                      "seed": args.seed},
            "owner": owner, "live": alive, "total_seconds": round(time.perf_counter() - started, 1), "failed": failed}


def report(res: dict[str, Any]) -> None:
    o, lv = res["owner"], res["live"]
    rows = machine_rows(res["machine"], "pynacl")
    rows += [
        ("## owner: clade owner rotate", ""),
        (f"{o['members']} bundles, in process", f"{o['rotate_in_process_s'] * 1000:.1f} ms "
                                                 f"({o['per_member_ms']:.3f} ms per member)"),
        (f"{o['members']} bundles, the CLI (with start-up)", f"{o['rotate_cli_s']:.2f} s ({o['cli_bundles']} bundles)"),
        ("bundle size", f"{o['bundle_bytes']} bytes"),
        ("## golem", ""),
        ("open a rotation bundle p50 / p99", f"{o['open_bundle']['p50_ms']:.3f} / {o['open_bundle']['p99_ms']:.3f} ms"),
        ("install a key (keyring + fsync) p50 / p99",
         f"{o['install_key']['p50_ms']:.2f} / {o['install_key']['p99_ms']:.2f} ms"),
        (f"## live, {lv['rounds']} rotations, 2 daemons", ""),
        ("clade join on a running daemon p50 / max",
         f"{lv['join_cli']['p50_ms']:.0f} / {lv['join_cli']['max_ms']:.0f} ms"),
        ("join returned → first new-epoch envelope accepted by the sibling p50 / max",
         f"{lv['join_to_first_accept']['p50_ms']:.1f} / {lv['join_to_first_accept']['max_ms']:.1f} ms"),
        ("floor: write → arrival, no rotation p50 / max",
         f"{lv['floor_write_to_arrival']['p50_ms']:.1f} / {lv['floor_write_to_arrival']['max_ms']:.1f} ms"),
    ]
    print_table(rows, cap=60)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_rotate", description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=at_least(1), default=100, help="members to rotate to (default 100)")
    p.add_argument("--rounds", type=at_least(1), default=5, help="live rotations (default 5)")
    add_common_args(p, out_help="keep the work directory here (default: a temp dir, removed)")
    args = p.parse_args(argv)
    return main_in_workdir("rotate", args, run, report, "clade-bench-rotate-", clash=not_empty)


if __name__ == "__main__":
    sys.exit(main())
