"""The decision benchmark: does a golem decide better in its clade than alone, or than by naive sharing?

    .venv/bin/python -m bench.bench_ecology [--days 20] [--seeds 30] [--jobs 2] [--decisions 12]
                                            [--arms solo,share_everything,release,clade,oracle]
                                            [--variants honest,attacker,sleeper,silent]
                                            [--release COMMIT] [--seed N] [--out DIR]

**One world per seed.** Every write, hidden truth, topic, stated confidence, question, the
luck of every decision and every near-copy draw is generated from the seed before any arm
runs (bench/ecology/world.py); each run prints its world's hash and the report *asserts* one
hash per seed across every arm and variant (and equal to the driver's). The simulation is
bench/ecology/engine.py: real Grimoires, the real curator and gates, the wire codec, the
daemon's digests, the bundled MiniLM.

**Utility**: +1 a decision taken on good knowledge, −1 on bad, 0 blind (nothing applies, or
nothing believed at ≥ 0.5); the good, bad and blind shares are reported with it.

**Arms** (the same world, the same agent):
- `solo`: no sibling (this checkout's code); run once per seed, since no variant reaches its
  victims (it is the same run in every variant's table);
- `share_everything`: every public entry crosses at once (the soma barrier `crdt.may_cross`
  alone), no trust, no evidence, the agent believes its local confidence;
- `release`: the previous release, run from its commit (`--release`, default the main this
  step started from): its tree is extracted with `git archive` and its workers import the
  daemon from there (bench/ecology/__init__.py); each run reports where its code came from;
- `clade`: this checkout, with its defaults;
- `oracle`: the ceiling — every good entry crosses the moment it is written (the first sync
  after the write, before the day's decisions), no bad one ever does, and the agent never
  acts on bad knowledge; it reads the same digests.

**Variants**: `honest`; `attacker` (golem 2 compromised from day 0: it writes only bad
insights and heuristics at confidence 1.0, pushes everything it may send at all — no gate of
its own — and each day records fake negative outcomes on every good sibling entry it holds
about a topic the victims are asked that day, and fake positives on its own about those
topics); `sleeper` (honest until day 10, then the attacker); `silent` (golem 2 writes and
decides nothing: the control for the attack, what losing golem 2's knowledge alone costs).
Figures are over the victims' decisions (golems 0 and 1) in every variant.

**Comparisons**, paired by seed, stated before the run: the primary family is `clade −
share_everything` and `clade − solo` in utility, honest and attacker (Holm-adjusted over
those four); every other comparison is a second family, Holm-adjusted on its own. The
oracle's gain over solo captured: (U_clade − U_solo) / (U_oracle − U_solo), per seed and as
the ratio of the means.

Also per arm and variant (mean [95 % t-interval] over seeds): covered (the golem held
something about the topic, digest or not); bad golem-days ((golem, day, entry): a bad entry
in a decision digest after its second negative outcome); good in time (of honest golems' good
insights, the share in every honest sibling's digest, asked with the insight's own text, one
curator cycle after the write); promoted (insights the author's gate let cross by the end);
first-cycle admission refusals by reason; golem 2's share of the victims' digest slots while
compromised and its most in one digest; soma on siblings and entries destroyed (must be 0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_rows, print_table, progress
from bench.common.report import ROOT, add_common_args, main_in_workdir, not_empty
from bench.common.stats import holm, mean_interval, paired
from bench.ecology import job, worker_init
from bench.ecology.world import make_world

ARMS = ("solo", "share_everything", "release", "clade", "oracle")
VARIANTS = ("honest", "attacker", "sleeper", "silent")
SOLO_VARIANTS = ("honest",)  # solo is run once per seed: no variant can reach its victims
RELEASE = "f42876d"  # main when step 24 started (the previous release)
PRIMARY = (("clade", "share_everything", "honest"), ("clade", "share_everything", "attacker"),
           ("clade", "solo", "honest"), ("clade", "solo", "attacker"))
METRICS = ("utility", "good_share", "bad_share", "blind_share", "covered_share", "bad_golem_days", "good_in_time",
           "insights_promoted", "attacker_slots", "brier_shown", "brier_stated")


def _prepare(args: argparse.Namespace, work: Path, seeds: list[int]) -> dict[int, dict[str, str]]:
    """Each seed's world (JSON) and its texts' vectors (.npz), written once for every arm."""
    import numpy as np

    from daemon.embedding.embedder import get_embedder

    embedder = get_embedder(work / "embedder")
    out: dict[int, dict[str, str]] = {}
    for seed in seeds:
        world = make_world(seed, days=args.days, decisions=args.decisions)
        world_file = work / f"world-{seed}.json"
        world_file.write_text(json.dumps(asdict(world)))
        texts = world.texts()
        vectors = np.concatenate([embedder.embed(texts[i:i + 256]) for i in range(0, len(texts), 256)])
        vectors_file = work / f"vectors-{seed}.npz"
        np.savez(vectors_file, texts=np.frombuffer(json.dumps(texts).encode(), dtype=np.uint8), vectors=vectors)
        out[seed] = {"world": str(world_file), "vectors": str(vectors_file), "digest": world.digest()}
        progress(f"world {seed}: {world.digest()} ({len(texts)} texts)")
    return out


def _release_tree(commit: str, work: Path) -> tuple[Path, str]:
    """The release's `crdt`, `crypto` and `daemon` at `commit`, extracted under `work`; and its full hash."""
    full = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    target = work / f"release-{full[:12]}"
    target.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "archive", full, "crdt", "crypto", "daemon"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target, full


def _pool(jobs: int, specs: list[Any], code_root: str | None, results: list[dict[str, Any]], total: int) -> None:
    if not specs:
        return
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=worker_init, initargs=(code_root,)) as pool:
        for res in pool.imap_unordered(job, specs):
            results.append(res)
            progress(f"{len(results)}/{total} {res['arm']} {res['variant']} seed {res['seed']}: utility "
                     f"{res['utility']:.3f}, good in time {res['good_in_time'] or 0:.2f} in {res['seconds']} s")


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from bench.ecology.engine import RunSpec

    started = time.perf_counter()
    arms = [a for a in args.arms.split(",") if a]
    variants = [v for v in args.variants.split(",") if v]
    seeds = [args.seed + i for i in range(args.seeds)]
    progress("primary comparisons (utility, paired by seed, Holm over these): "
             + "; ".join(f"{a} − {b} ({v})" for a, b, v in PRIMARY))
    worlds = _prepare(args, work, seeds)
    release_root, release_commit = _release_tree(args.release, work) if "release" in arms else (None, None)
    specs = {a: [RunSpec(a, v, s, args.cycle_hours, str(work / f"{a}-{v}-{s}"), worlds[s]["world"],
                         worlds[s]["vectors"]) for s in seeds for v in (SOLO_VARIANTS if a == "solo" else variants)]
             for a in arms}
    total = sum(len(x) for x in specs.values())
    results: list[dict[str, Any]] = []
    _pool(args.jobs, [s for a in arms if a != "release" for s in specs[a]], None, results, total)
    _pool(args.jobs, specs.get("release", []), str(release_root) if release_root else None, results, total)
    for r in [r for r in results if r["arm"] == "solo"]:  # solo's victims never meet golem 2: one run serves all
        results += [{**r, "variant": v} for v in variants if v not in SOLO_VARIANTS]
    failed = _check(results, worlds, release_root)
    return {"machine": machine_info(work), "params": {
        "days": args.days, "cycle_hours": args.cycle_hours, "decisions_per_day": args.decisions, "seeds": seeds,
        "golems": 3, "arms": arms, "variants": variants, "jobs": args.jobs, "release": release_commit,
        "primary": [f"{a} − {b} ({v})" for a, b, v in PRIMARY]},
        "worlds": {str(s): w["digest"] for s, w in worlds.items()},
        "table": _table(results, arms, variants), "comparisons": _comparisons(results, arms, variants),
        "failed": failed, "runs": sorted(results, key=lambda r: (r["variant"], r["arm"], r["seed"])),
        "total_seconds": round(time.perf_counter() - started, 1)}


def _check(results: list[dict[str, Any]], worlds: dict[int, dict[str, str]], release_root: Path | None) -> list[str]:
    """One world per seed across every arm and variant, the release's runs on the release's code,
    no soma on a sibling and nothing destroyed; each breach is a failure of the bench."""
    failed: list[str] = []
    for seed, w in worlds.items():
        seen = {r["world"] for r in results if r["seed"] == seed}
        if seen != {w["digest"]}:
            failed.append(f"seed {seed}: {len(seen)} worlds across arms ({sorted(seen)}), expected {w['digest']}")
    for r in results:
        on_release = release_root is not None and Path(r["code"]) == release_root.resolve()
        if (r["arm"] == "release") != on_release:
            failed.append(f"{r['arm']} {r['variant']} {r['seed']} ran the code at {r['code']}")
        if r["soma_on_siblings"] or r["destroyed"]:
            failed.append(f"{r['arm']} {r['variant']} {r['seed']}: soma {r['soma_on_siblings']}, "
                          f"destroyed {r['destroyed']}")
    assert not any("worlds across arms" in f for f in failed), failed  # the comparison means nothing otherwise
    return failed


def _table(results: list[dict[str, Any]], arms: list[str], variants: list[str]) -> dict[str, Any]:
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for variant in variants:
        for arm in arms:
            runs = [r for r in results if r["arm"] == arm and r["variant"] == variant]
            row: dict[str, Any] = {m: mean_interval([r[m] for r in runs]) for m in METRICS}
            refused: dict[str, int] = {}
            for r in runs:
                for reason, count in r["refused"].items():
                    refused[reason] = refused.get(reason, 0) + count
            row.update(refused=refused, attacker_max_per_digest=max((r["attacker_max_per_digest"] for r in runs),
                                                                   default=0),
                       soma_on_siblings=sum(r["soma_on_siblings"] for r in runs),
                       destroyed=sum(r["destroyed"] for r in runs), embed_misses=sum(r["embed_misses"] for r in runs))
            table.setdefault(variant, {})[arm] = row
    return table


def _by_seed(results: list[dict[str, Any]], arm: str, variant: str) -> dict[int, dict[str, Any]]:
    return {r["seed"]: r for r in results if r["arm"] == arm and r["variant"] == variant}


def _diff(results: list[dict[str, Any]], a: tuple[str, str], b: tuple[str, str], metric: str = "utility"
          ) -> dict[str, Any]:
    left, right = _by_seed(results, *a), _by_seed(results, *b)
    return paired([left[s][metric] - right[s][metric] for s in sorted(left) if s in right])


def _comparisons(results: list[dict[str, Any]], arms: list[str], variants: list[str]) -> dict[str, Any]:
    primary: dict[str, Any] = {}
    for a, b, v in PRIMARY:
        if a in arms and b in arms and v in variants:
            primary[f"{a} − {b} ({v})"] = _diff(results, (a, v), (b, v))
    secondary: dict[str, Any] = {}
    for v in variants:
        for b in ("release", "share_everything", "solo", "oracle"):
            name = f"clade − {b} ({v})"
            if "clade" in arms and b in arms and name not in primary:
                secondary[name] = _diff(results, ("clade", v), (b, v))
        if v != "honest" and "clade" in arms and "solo" in arms and "honest" in variants:
            secondary[f"clade ({v}) − solo (honest)"] = _diff(results, ("clade", v), ("solo", "honest"))
            secondary[f"clade ({v}) − solo (honest), bad golem-days"] = _diff(
                results, ("clade", v), ("solo", "honest"), "bad_golem_days")
    for family in (primary, secondary):
        adjusted = holm({k: x["p"] for k, x in family.items()})
        for k, x in family.items():
            x["p_holm"] = adjusted[k]
    capture: dict[str, Any] = {}
    if {"clade", "solo", "oracle"} <= set(arms):
        for v in variants:
            for arm in ("clade", "release", "share_everything"):
                if arm not in arms:
                    continue
                mine, solo, oracle = (_by_seed(results, x, v) for x in (arm, "solo", "oracle"))
                seeds = sorted(s for s in mine if s in solo and s in oracle)
                gains = [oracle[s]["utility"] - solo[s]["utility"] for s in seeds]
                got = [mine[s]["utility"] - solo[s]["utility"] for s in seeds]
                per_seed = [g / o for g, o in zip(got, gains, strict=True) if o > 0]
                capture[f"{arm} ({v})"] = {
                    "ratio_of_means": (sum(got) / sum(gains)) if seeds and sum(gains) > 0 else None,
                    "per_seed": mean_interval(per_seed)}
    return {"primary": primary, "secondary": secondary, "oracle_gain_captured": capture}


def _fmt(x: dict[str, Any] | None, digits: int = 3, scale: float = 1) -> str:
    if x is None or x.get("mean") is None:
        return "-"
    mean = f"{x['mean'] * scale:.{digits}f}"
    if x.get("lo") is None:
        return mean
    return f"{mean} [{x['lo'] * scale:.{digits}f}, {x['hi'] * scale:.{digits}f}]"


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    p = res["params"]
    rows.append(("## the runs", f"{p['golems']} golems, {p['days']} days, {p['decisions_per_day']} decisions a day, "
                 f"a cycle every {p['cycle_hours']} h, seeds {p['seeds'][0]}..{p['seeds'][-1]} ({len(p['seeds'])}), "
                 f"release {p['release'] or '-'}; mean [95 % t-interval]; utility in points (×100)"))
    for variant, arms in res["table"].items():
        rows.append((f"## {variant}", "utility | good % | bad % | blind % | covered % | bad golem-days | good in "
                                      "time % | promoted % | golem 2's slots % (max/digest) | soma | destroyed"))
        for arm, t in arms.items():
            rows.append((arm, " | ".join((
                _fmt(t["utility"], 1, 100), _fmt(t["good_share"], 1, 100), _fmt(t["bad_share"], 1, 100),
                _fmt(t["blind_share"], 1, 100), _fmt(t["covered_share"], 1, 100), _fmt(t["bad_golem_days"], 1),
                _fmt(t["good_in_time"], 1, 100), _fmt(t["insights_promoted"], 1, 100),
                f"{_fmt(t['attacker_slots'], 2, 100)} ({t['attacker_max_per_digest']})",
                str(t["soma_on_siblings"]), str(t["destroyed"])))))
        for arm, t in arms.items():
            if t["refused"]:
                rows.append((f"{arm}: refused",
                             ", ".join(f"{k} {v}" for k, v in sorted(t["refused"].items()))))
    for family in ("primary", "secondary"):
        rows.append((f"## {family} comparisons, utility points (paired by seed)", "mean [95 %] p (Holm)"))
        for name, x in res["comparisons"][family].items():
            scale = 1 if "golem-days" in name else 100
            p_holm = "-" if x["p_holm"] is None else f"{x['p_holm']:.2g}"
            rows.append((name, f"{_fmt(x, 1, scale)}  p {p_holm}"))
    rows.append(("## oracle's utility gain over solo captured", "ratio of means; per seed mean [95 %]"))
    for name, x in res["comparisons"]["oracle_gain_captured"].items():
        ratio = "-" if x["ratio_of_means"] is None else f"{x['ratio_of_means']:.2f}"
        rows.append((name, f"{ratio}; {_fmt(x['per_seed'], 2)}"))
    rows.append(("worlds", f"{len(res['worlds'])} seeds, one world each across every arm and variant (asserted)"))
    rows.append(("failed", "; ".join(res["failed"]) or "nothing"))
    rows.append(("total", f"{res['total_seconds']} s"))
    print_table(rows, cap=48)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=20)
    p.add_argument("--cycle-hours", type=int, default=6, choices=(1, 2, 3, 4, 6, 8, 12, 24))
    p.add_argument("--decisions", type=int, default=12, help="decisions per honest golem per day (default 12)")
    p.add_argument("--seeds", type=int, default=30, help="seeds: --seed, --seed + 1, … (default 30)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--release", default=RELEASE, help=f"the previous release's commit (default {RELEASE})")
    add_common_args(p, out_help="keep the stores in DIR")
    args = p.parse_args()
    for name in args.arms.split(","):
        if name not in ARMS:
            p.error(f"--arms: unknown arm {name!r} (one of {', '.join(ARMS)})")
    for name in args.variants.split(","):
        if name not in VARIANTS:
            p.error(f"--variants: unknown variant {name!r} (one of {', '.join(VARIANTS)})")
    if args.days < 1 or args.seeds < 1 or args.jobs < 1 or args.decisions < 1:
        p.error("--days, --seeds, --jobs and --decisions must be at least 1")
    return main_in_workdir("ecology", args, run, report, "clade-bench-ecology-", clash=not_empty)


if __name__ == "__main__":
    raise SystemExit(main())
