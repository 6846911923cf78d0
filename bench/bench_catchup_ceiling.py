"""Catch-up's local ceiling alone: how fast this machine unpacks, verifies and joins signed ops.

    .venv/bin/python -m bench.bench_catchup_ceiling [--ops 10000] [--repeats 5]

The ops are those of `--ops`/2 warnings (body + author slot each, as `POST /v1/memory` makes
them), encoded in catch-up's frames, joined into a fresh store two ways interleaved in each
repeat (bench.common.ceiling): `serial` (decode + verify + `Grimoire.apply_delta` on one
thread), `pipelined` (`daemon.grimoire.ingest.apply_frames`, the daemon's catch-up path, on
sync v2's frames: a signature check per op) and `sealed` (the same on sync v3's frames, with
the writer's seals: a signature check per block of 256 ops).
The ratio pipelined/serial is the figure that travels between machines; the stage costs
(thread CPU per op of the signature check, of opening an op without it and of the join) say
where the time goes. bench_clade `--catchup` measures the same against two real daemons.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import HostLoad, machine_info, out, progress
from bench.common.ceiling import bench_ceiling, stage_costs, warning_ops
from bench.common.clade import content
from bench.common.report import add_common_args, at_least, main_in_workdir, print_table
from bench.common.workload import encode_batches


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    load = HostLoad()
    res: dict[str, Any] = {"machine": machine_info(root)}
    res["ceiling"] = bench_ceiling(root, args.ops, args.repeats, random.Random(args.seed), content)
    progress("[3] stage costs (thread CPU per op)")
    frames = [data for _, data in encode_batches(warning_ops(args.ops, random.Random(args.seed), content))]
    res["stages_us_per_op"] = stage_costs(root, frames, args.ops, args.repeats)
    res["host"] = load.report("ceiling")
    return res


def report(res: dict[str, Any]) -> None:
    c, st = res["ceiling"], res["stages_us_per_op"]
    total = st["verify_us"] + st["open_us"] + st["join_us"]
    out()
    print_table([
        ("ops; frames; encoded bytes per op", f"{c['ops']:,}; {c['batches']}; {c['encoded_bytes_per_op']}"),
        ("serial: decode + verify + apply_delta, best (ops/s); CPU / wall",
         f"{c['serial']['ops_per_s_best']:,}; {c['serial']['cpu_per_wall']}"),
        ("pipelined: ingest.apply_frames, best (ops/s)", f"{c['ops_per_s_best']:,}"),
        ("pipelined: median (ops/s); CPU / wall", f"{c['ops_per_s_median']:,}; {c['cpu_per_wall']}"),
        ("pipelined / serial (best)", f"{c['ops_per_s_best'] / c['serial']['ops_per_s_best']:.2f}"),
        ("sealed (sync v3 frames): best; median (ops/s); CPU / wall",
         f"{c['sealed']['ops_per_s_best']:,}; {c['sealed']['ops_per_s_median']:,}; {c['sealed']['cpu_per_wall']}"),
        ("sealed / pipelined (median); bytes per op sealed vs not",
         f"{c['sealed']['ops_per_s_median'] / c['ops_per_s_median']:.2f}; {c['sealed_bytes_per_op']} vs "
         f"{c['encoded_bytes_per_op']}"),
        ("stage: signature check (us/op, thread CPU)", f"{st['verify_us']}"),
        ("stage: open without it (checks + decode) (us/op)", f"{st['open_us']}"),
        ("stage: join_delta (us/op)", f"{st['join_us']}"),
        ("stages' sum (us/op); ops/s if spread over 2 cores", f"{total:.1f}; {2e6 / total:,.0f}"),
        ("load: others' share of the machine; load average (1 min)",
         f"{res['host']['other_share_of_machine']:.0%}; {res['host']['loadavg_1m']:.2f}"),
    ])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=at_least(2), default=10_000, help="ops to join (2 per warning; default 10,000)")
    p.add_argument("--repeats", type=at_least(1), default=5, help="runs of each way, interleaved (default 5)")
    add_common_args(p, out_help="keep the stores' directory here (default: a temp dir)", seed=1)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return main_in_workdir("catchup_ceiling", parse_args(argv), run, report, "clade-catchup-ceiling-")


if __name__ == "__main__":
    raise SystemExit(main())
