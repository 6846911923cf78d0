"""A clade of two hundred in one process: gossip and anti-entropy of 5 to 200 golems over a
simulated network, with each golem's real codec, store and gates, connected as the daemon's
bounded neighbourhood connects them.

    .venv/bin/python -m bench.bench_scale [--sizes 5,10,20,50,100,200] [--ops 60] [--seeds 3]
                                          [--profiles loopback,wan] [--loss 0.01] [--neighbours 12]
                                          [--rotate-s 60] [--sync-interval-s 30] [--partition-s 30]
                                          [--heal-s 900] [--arms flood,mesh,flood-sync1] [--history 1]
                                          [--send-share 0.5] [--relay-flood] [--out DIR]

What is real, per golem: its Ed25519 identity and owner-issued certificate, `GossipCodec`
(seal: encode the delta, sign, encrypt with the clade key; open: decrypt, the certificate,
the sender's and every op's signature, freshness, the replay guard), its Grimoire (a SQLite
file: `remember` writes the warning and its signed ops; `ops_of` + `sync_gate` choose what
crosses, as `Broadcast._publish_new` does; `apply_delta` joins what arrives, as
`Broadcast._applier` does), and anti-entropy (`PullState`/`ServeState`, `iter_deltas` through
the gate, `decode_delta`, `join`) on the real wire messages. The CPU time of those calls is
measured (`time.process_time`, so other processes on the machine do not inflate it) and
becomes simulated time: a golem is one CPU queue.

Who is connected to whom is the daemon's own policy (daemon/p2p/neighbourhood.py, imported):
each golem keeps a random `--neighbours` of the others connected (cap `cap_for`: 16 for 12),
the end dialed trims beyond its cap at once (the newcomer last), and from the partition on
each golem swaps one neighbour every `--rotate-s` (× U(0.8, 1.2)) and pulls anti-entropy from
its neighbours in turn every `--sync-interval-s` (`PartnerCycle`), as `Dialing` and `CatchUp`
do; a new connection pulls both ways at once and 2 s and 6 s later (admission.SETTLE_PULLS_S);
a golem short of its target dials again every second (`IDLE_WAKE_S`).
Before the partition golems only gossip (the figures per op are gossip's).

What is modelled: the network (a seeded event scheduler; one-way latency per transmission
from a profile; loss per transmission; a partition that cuts the clade in two and heals) and
py-libp2p's GossipSub as the daemon configures it (daemon/p2p/host.py), over the connections
of the neighbourhood (a mesh peer or an IHAVE target is a connected one): mesh degree D=6,
D_lo=4, D_hi=12, heartbeat 1 s; a golem publishes its own message to every neighbour it is
connected to (flood publishing, daemon/p2p/flood.py; arm `flood`) or to its mesh only
(py-libp2p's own GossipSub; arm `mesh`); a message is forwarded once validated to every mesh
peer but the one it came from and its origin (no IDONTWANT: v1.1 as py-libp2p does it); each
copy a publisher sends queues on its CPU (`--hop-cpu-ms` / 2 each), so flooding's extra
copies delay its later ones; at each heartbeat IHAVE of the message ids of the last 3 heartbeats goes to
max(6, 0.25 × non-mesh peers) random non-mesh peers, answered by IWANT for the ones missing;
duplicates are dropped after the seen check. Its CPU per message copy handled (protobuf,
Noise, Yamux, the seen cache) is `--hop-cpu-ms` per copy (half sending, half receiving), and
its delay that is not CPU (trio and thread hand-offs) `--hop-wait-ms` per frame; both are
calibrated against the real daemons (bench_clade at 5 daemons on loopback: a raw GossipSub
probe costs a sibling ~8.9 ms of CPU and arrives ~3 times, ~3 ms per copy; propagation p50 per
delivery 20.7 ms, bench/RESULTS.md), and the 5-golem loopback run must agree with them (it
is the anchor: its figures are printed beside the real ones). Byte counts are payload plus
`RPC_OVERHEAD` per frame; IHAVE/IWANT count `MSG_ID_BYTES` per id.

`--arms flood,mesh` runs both arms on one world per seed (the same identities,
neighbourhood, mesh and writers at the first write: asserted) and prints them side by side.
An arm suffixed `-sync1` pulls anti-entropy with sync v1 (contexts sent whole, the daemons
before `/clade/sync/2.0.0`) instead of the daemon's v2 (contexts reconciled by their
difference, `crdt.summary`). `--history N`: before the run every golem has written N warnings
that every golem holds (a clade that has been running: each causal context has a row per
golem, which is what a pull's context costs).
Reported per size, profile and arm (intervals over seeds): convergence of an op (write to applied
at every golem) p50/p99 and per delivery, its ratio to the 5-golem figure of the same run;
mean hops against log_D(n); bytes per op per golem (payload, control) and its ratio to
log n; CPU per op per golem (measured: codec + store; modelled: transport); connections per
golem (the most any golem held once its dialer had run, and the mean); and the partition's
heal: seconds from the heal to convergence, pulls run, and the sync bytes it took (both
directions, from the heal to convergence), whole and per golem (the heal curve: O(n) bytes
means bytes per golem flat in n). Then the limits that bind first as the clade grows, from
the same figures (module `limits`).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import HostLoad, machine_info, print_table, progress
from bench.common.report import emit, ints
from bench.common.stats import mean_interval
from bench.scale.sim import D, Sim, world
from crypto import Identity
from crypto.membership import Certificate, OwnerKey
from daemon.p2p.dialing import IDLE_WAKE_S
from daemon.p2p.neighbourhood import cap_for

# The real daemons this simulation must agree with at 5 golems on loopback (bench/RESULTS.md,
# "2026-11-30 (evening)", run A1: bench_clade --sizes 5 --rates 10 --count 200, 2-vCPU Intel Xeon,
# quiet): a warning's propagation per delivery p50 / p99, a raw probe's CPU per received message,
# a sibling's CPU per warning (with its embedding process's checks of shipped vectors, which the
# simulation leaves out). The transport figures below (--hop-cpu-ms, --hop-wait-ms) were fitted
# to the 2026-11-23 daemons (delivery p50 20.7 ms, probe 8.9 ms); the 5-golem run still comes
# within ~10 % of today's delivery p50, and the ratios between sizes barely move with them
# (bench/RESULTS.md, "2026-11-30 (late)").
ANCHOR = {"delivery_p50_ms": 14.4, "delivery_p99_ms": 24.7, "probe_cpu_ms": 6.5, "sibling_cpu_per_warning_ms": 9.6}


def one_run(n: int, *, seed: int, profile: str, args: argparse.Namespace, owner: OwnerKey,
            flood: bool = True, sync_version: int = 2) -> dict[str, Any]:
    """Form the neighbourhood and the mesh, write `--ops` warnings from random golems at
    `--rate`/s, let them spread; then (with `--partition`) cut the clade in two (each golem
    refills its neighbourhood on its side), start rotation and the anti-entropy timers, write
    `--ops`/2 warnings across both sides, keep it cut `--partition-s`, heal, and run until
    every golem has every op (or
    `--heal-s` has passed): the sync bytes and seconds that took."""
    with tempfile.TemporaryDirectory(prefix=f"clade-scale-{n}-") as tmp:
        sim = Sim(n, seed=seed, profile=profile, loss=args.loss, hop_cpu_s=args.hop_cpu_ms / 1000,
                  hop_wait_s=args.hop_wait_ms / 1000, root=Path(tmp), owner=owner, target=args.neighbours,
                  rotate_s=args.rotate_s, sync_interval_s=args.sync_interval_s, flood=flood,
                  degree=args.degree, sync_version=sync_version, send_share=args.send_share,
                  relay_flood=args.relay_flood)
        try:
            sim.history(args.history)
            for _ in range(4):  # each golem's dialer, from the siblings it knows, until all are full
                for g in sim.rng.sample(sim.golems, n):
                    sim.tend(g)
            sim.at(0.0, sim.heartbeat)
            sim.run_until(5.0)  # the mesh forms
            start = sim.now
            writes = []
            for i in range(args.ops):
                g = sim.rng.choice(sim.golems)
                writes.append((start + i / args.rate, g.index))
                sim.at(start + i / args.rate, partial(sim.write, g, f"gas above {80 + i} gwei on chain {i}: "
                                                             f"delay swaps (seed {seed})"))
            digest = world(sim, writes)
            sim.run_until(start + args.ops / args.rate + 10.0)
            out = {"profile": profile, "seed": seed, "arm": ("flood" if flood else "mesh")
                   + ("" if sync_version == 2 else "-sync1"), "world": digest,
                   **sim.figures(list(sim.written))}
            if args.partition:
                half = set(range(n // 2))
                sim.cut = {frozenset((a, b)) for a in half for b in range(n) if b not in half}
                cut_at = sim.now
                sim.churn = True
                sim.cut_links()
                sim.at(cut_at + IDLE_WAKE_S, sim.refill)
                for g in sim.golems:  # each timer at a random phase, as in daemons started at different times
                    sim.at(cut_at + sim.rotate_s * sim.rng.random(), partial(sim.rotation, g))
                    sim.at(cut_at + sim.sync_interval_s * sim.rng.random(), partial(sim.anti_entropy, g))
                before = set(sim.written)
                for i in range(args.ops // 2):
                    g = sim.rng.choice(sim.golems)
                    sim.at(cut_at + i / args.rate, partial(sim.write, g, f"partitioned warning {i} ({seed})"))
                sim.run_until(cut_at + max(args.ops / 2 / args.rate + 3.0, args.partition_s))
                sim.cut = set()
                healed = sim.now
                pulls0, bytes0 = sim.pulls, sim.sync_bytes
                late = [m for m in sim.written if m not in before]
                while not sim.converged() and sim.now < healed + args.heal_s:
                    sim.run_until(sim.now + 5.0)
                last = max((g.seen[m] for g in sim.golems for m in late if m in g.seen), default=healed)
                heal_bytes = sim.sync_bytes - bytes0
                out["partition"] = {"ops": len(late), "converged": sim.converged(),
                                    "heal_to_converged_s": round(last - healed, 2), "pulls": sim.pulls - pulls0,
                                    "pulls_per_golem": round((sim.pulls - pulls0) / n, 1),
                                    "heal_bytes": heal_bytes, "heal_bytes_per_golem": round(heal_bytes / n),
                                    "connections_max": sim.max_conns}
                out["connections_max"] = sim.max_conns
            return out
        finally:
            sim.close()


def limits(rows: dict[int, dict[str, Any]], cert_check_ms: float, hop_cpu_ms: float) -> dict[str, Any]:
    """What binds first as the clade grows, from the measured per-size figures."""
    sizes = sorted(rows)
    big = rows[sizes[-1]]
    per_op_ms = big["cpu_real_ms_per_op_per_golem"] + big["cpu_model_ms_per_op_per_golem"]
    return {
        "cpu_per_op_per_golem_ms": round(per_op_ms, 2),
        "ops_per_s_one_core_can_take": round(1000 / per_op_ms, 1) if per_op_ms else None,
        "connections_per_golem_max": max(rows[n]["connections_max"] for n in sizes),
        "connections_per_golem": "at most the cap (neighbourhood.cap_for: 16 for 12) whatever n: the daemon's "
                                 "bounded neighbourhood",
        "hello_certificate_checks_per_restart_ms": round(min(sizes[-1] - 1, cap_for(12)) * cert_check_ms, 1),
        "reconnect_pulls_per_golem": "3 per new connection (at once, 2 s and 6 s later, both ends): 3 × the "
                                     "neighbourhood after a restart, 3 per rotation",
        "ihave_peers_per_heartbeat": "min(6, connected peers not in the mesh): bounded by the neighbourhood",
        "hop_cpu_ms": hop_cpu_ms,
    }


def cert_check_cost(owner: OwnerKey, reps: int = 200) -> float:
    """Measured: one hello's certificate check (`Certificate.from_bytes` + `verify`), ms."""
    identity = Identity(bytes(32))
    now = int(time.time())
    cert = Certificate.issue(owner, identity.peer_id, generation=0, not_before=now - 300, not_after=now + 86_400)
    raw = cert.to_bytes()
    t0 = time.process_time()
    for _ in range(reps):
        Certificate.from_bytes(raw).verify(owner.public_key, cert.clade_id, now=now)
    return (time.process_time() - t0) / reps * 1000


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and k not in ("seed", "golems")]
    out: dict[str, Any] = {k: mean_interval([r[k] for r in runs]) for k in keys}
    if "partition" in runs[0]:
        out["partition"] = {k: mean_interval([r["partition"][k] for r in runs])
                            for k in ("heal_to_converged_s", "pulls_per_golem", "heal_bytes", "heal_bytes_per_golem")}
        out["partition"]["converged"] = all(r["partition"]["converged"] for r in runs)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    load = HostLoad()
    res: dict[str, Any] = {"machine": machine_info(None, ("pynacl", "libp2p")),
                           "params": {k: v for k, v in vars(args).items() if k != "out"}, "failed": []}
    with tempfile.TemporaryDirectory(prefix="clade-scale-owner-") as tmp:
        owner = OwnerKey.create(Path(tmp) / "owner", "scale")
        res["cert_check_ms"] = round(cert_check_cost(owner), 3)
        res["anchor"] = ANCHOR
        res["runs"] = {}
        res["summary"] = {}
        groups = [f"{profile}/{arm}" for profile in args.profiles for arm in args.arms]
        for profile in args.profiles:
            for n in args.sizes:
                by_arm: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
                for s in range(args.seeds):
                    for arm in args.arms:
                        progress(f"[{profile}/{arm}] {n} golems, seed {s + 1}/{args.seeds}")
                        by_arm[arm].append(one_run(n, seed=args.seed + s, profile=profile, args=args, owner=owner,
                                                   flood=arm.startswith("flood"),
                                                   sync_version=1 if arm.endswith("-sync1") else 2))
                    if len({by_arm[arm][-1]["world"] for arm in args.arms}) != 1:
                        raise AssertionError(f"{profile}/{n} seed {args.seed + s}: the arms' worlds differ")
                for arm, runs in by_arm.items():
                    res["runs"][f"{profile}/{arm}/{n}"] = runs
                    res["summary"][f"{profile}/{arm}/{n}"] = summarise(runs)
        res["limits"] = {g: limits({n: {k: v["mean"] for k, v in res["summary"][f"{g}/{n}"].items()
                                        if isinstance(v, dict) and "mean" in v} for n in args.sizes},
                                   res["cert_check_ms"], args.hop_cpu_ms) for g in groups}
    base = min(args.sizes)
    for group in groups:
        ref = res["summary"][f"{group}/{base}"]
        for n in args.sizes:
            row = res["summary"][f"{group}/{n}"]
            row["full_p50_vs_base"] = round(row["full_p50_ms"]["mean"] / ref["full_p50_ms"]["mean"], 2)
            row["full_p99_vs_base"] = round(row["full_p99_ms"]["mean"] / ref["full_p99_ms"]["mean"], 2)
            row["bytes_vs_base"] = round(row["bytes_per_op_per_golem"]["mean"] / ref["bytes_per_op_per_golem"]["mean"],
                                         2)
            row["log_n_vs_base"] = round(math.log(n) / math.log(base), 2)
            if row["connections_max"]["mean"] > cap_for(args.neighbours):
                res["failed"].append(f"{group}/{n}: a golem held more connections than the cap")
            if row["reached_all"]["mean"] < args.ops:
                res["failed"].append(f"{group}/{n}: not every op reached every golem by gossip")
    res["host_load"] = load.report("whole run", quiet=True)
    return res


def report(res: dict[str, Any]) -> None:
    for key, row in res["summary"].items():
        def m(k: str, row: dict[str, Any] = row) -> str:
            return f"{row[k]['mean']:g}"

        part = row.get("partition", {})
        print_table([
            (f"{key}: op reaches all, p50 / p99 ms (× smallest size)",
             f"{m('full_p50_ms')} / {m('full_p99_ms')} ({row['full_p50_vs_base']}× / {row['full_p99_vs_base']}×)"),
            (f"{key}: per delivery p50 / p99 ms; hops mean (log_D n)",
             f"{m('delivery_p50_ms')} / {m('delivery_p99_ms')}; {m('hops_mean')} ({m('log_d_n')})"),
            (f"{key}: bytes per op per golem, payload + control (× smallest; log n ×)",
             f"{m('bytes_per_op_per_golem')} = {m('payload_bytes_per_op_per_golem')} + "
             f"{m('control_bytes_per_op_per_golem')} ({row['bytes_vs_base']}×; {row['log_n_vs_base']}×)"),
            (f"{key}: CPU per op per golem ms, measured + modelled; copies in",
             f"{m('cpu_real_ms_per_op_per_golem')} + {m('cpu_model_ms_per_op_per_golem')}; "
             f"{m('copies_in_per_op_per_golem')}"),
            (f"{key}: connections per golem, max (mean)", f"{m('connections_max')} ({m('connections_mean')})"),
            *([(f"{key}: partition heal s; pulls / golem; sync bytes to heal, whole / per golem",
                f"{part['heal_to_converged_s']['mean']:g}; {part['pulls_per_golem']['mean']:g}; "
                f"{part['heal_bytes']['mean']:g} / {part['heal_bytes_per_golem']['mean']:g} "
                f"(converged: {part['converged']})")]
              if "partition" in row else []),
        ])
    curve(res)
    print_table([("anchor: real daemons at 5 (bench_clade, bench/RESULTS.md)",
                  f"per delivery p50 {ANCHOR['delivery_p50_ms']} / p99 {ANCHOR['delivery_p99_ms']} ms; sibling "
                  f"CPU per warning {ANCHOR['sibling_cpu_per_warning_ms']} ms (incl. its shipped-vector checks), "
                  f"probe {ANCHOR['probe_cpu_ms']} ms"),
                 ("certificate check per hello, ms", f"{res['cert_check_ms']}"),
                 ("other processes' CPU (whole run)", str(res.get("host_load")))])


def curve(res: dict[str, Any]) -> None:
    """The scaling goals side by side per profile: convergence × the smallest size, bytes per op
    against ln n, connections, and the heal's bytes per golem (flat in n: O(n) bytes)."""
    rows = []
    for key, row in res["summary"].items():
        part = row.get("partition", {})
        rows.append((f"{key}: full p50 ×; bytes/op × (ln n ×); conns max; heal bytes/golem; heal s",
                     f"{row['full_p50_vs_base']}×; {row['bytes_vs_base']}× ({row['log_n_vs_base']}×); "
                     f"{row['connections_max']['mean']:g}; "
                     f"{round(part['heal_bytes_per_golem']['mean']) if part else '-'}; "
                     f"{round(part['heal_to_converged_s']['mean'], 1) if part else '-'}"))
    print_table(rows)
    arms(res)


def arms(res: dict[str, Any]) -> None:
    """Flood publishing against the mesh only, per profile and size, when both arms ran."""
    rows = []
    for key, flood in res["summary"].items():
        profile, arm, n = key.split("/")
        mesh = res["summary"].get(f"{profile}/mesh/{n}")
        if arm != "flood" or mesh is None:
            continue
        def cell(row: dict[str, Any]) -> str:
            return (f"{row['full_p50_ms']['mean']:g} ms ({row['full_p50_vs_base']}×), "
                    f"{row['bytes_per_op_per_golem']['mean']:g} B ({row['bytes_vs_base']}×), "
                    f"hops {row['hops_mean']['mean']:g}")
        rows.append((f"{profile}/{n}: full p50 (×), bytes/op/golem (×), hops — flood | mesh",
                     f"{cell(flood)} | {cell(mesh)}"))
    if rows:
        print_table(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", type=ints, default=[5, 10, 20, 50, 100, 200])
    ap.add_argument("--profiles", type=lambda s: s.split(","), default=["loopback", "wan"])
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--rate", type=float, default=10.0, help="warnings written per second, clade-wide")
    ap.add_argument("--loss", type=float, default=0.01, help="probability a frame is lost")
    ap.add_argument("--hop-cpu-ms", type=float, default=3.0,
                    help="modelled py-libp2p CPU per message copy handled (half on send, half on receipt)")
    ap.add_argument("--hop-wait-ms", type=float, default=8.0,
                    help="modelled py-libp2p/trio delay per frame that is not CPU (stream hand-offs, scheduling)")
    ap.add_argument("--partition", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--neighbours", type=int, default=12, help="[p2p] neighbours: connections each golem keeps")
    ap.add_argument("--rotate-s", type=float, default=60.0, help="[p2p] rotate_s: one neighbour swapped this often")
    ap.add_argument("--sync-interval-s", type=float, default=30.0,
                    help="[p2p] sync_interval_s: anti-entropy with the next neighbour in turn")
    ap.add_argument("--partition-s", type=float, default=30.0,
                    help="simulated seconds the partition lasts (at least the writes and 3 s): longer than the "
                         "pulls a new connection runs (6 s), so the heal is the neighbourhood's, not their tail")
    ap.add_argument("--heal-s", type=float, default=900.0,
                    help="simulated seconds after the heal to wait for convergence at most")
    ap.add_argument("--degree", type=int, default=D,
                    help="GossipSub mesh degree D (the daemon's: 6; a what-if: D_lo = D - 2, D_hi = max(12, 2D))")
    ap.add_argument("--send-share", type=float, default=0.5,
                    help="a what-if: the share of --hop-cpu-ms a copy costs its sender (the rest its receiver)")
    ap.add_argument("--relay-flood", action="store_true",
                    help="a what-if the daemon does not do: a golem that got a message straight from its origin "
                         "forwards it to every neighbour, not only its mesh (a second flooded hop)")
    ap.add_argument("--arms", type=lambda s: s.split(","), default=["flood"],
                    help="flood (own messages to every neighbour: the daemon) and/or mesh (py-libp2p's "
                         "GossipSub: to the mesh only); both run on one world per seed")
    ap.add_argument("--history", type=int, default=1,
                    help="warnings every golem wrote before the run, held by every golem (contexts: a row per golem)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20_261_128)
    ap.add_argument("--out", type=Path, default=None)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    res = run(args)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    report(res)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    emit("scale", res, also_to=None if args.out is None else args.out / "scale.json")
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
