"""The daemon's memory and its cold start: RSS by component, idle, at 50,000 entries; the
seconds from `clade run` to the first search answered by meaning.

    .venv/bin/python -m bench.bench_footprint [--before DIR] [--rounds N] [--entries N] [--out DIR]

Each code tree is measured in the same run, rounds interleaved (this checkout is "after";
`--before DIR`, another checkout of clade such as main's, is "before"; a tree's code reaches
the daemons through PYTHONPATH):

1. components: a child process imports the daemon's parts one after another (the interpreter,
   numpy, trio, libp2p, FastAPI/hypercorn, the daemon's own modules, ONNX Runtime, tokenizers,
   then loads the bundled MiniLM, runs a batch of 8 × 256 tokens, imports LanceDB/pyarrow) and
   reports VmRSS after each step, and the peak (VmHWM);
2. cold start (per round): a fresh golem joined to a one-golem clade (p2p on, loopback) is
   spawned and asked `POST /v1/memory/search` until an answer comes by meaning (no
   `degraded`; "before" trees have no such field: their first 200); the seconds from spawn;
3. idle (per round): another fresh golem, ready and then left alone for `--idle` seconds:
   its VmRSS (the model never asked for); then one search (model loaded), VmRSS; then, when
   the tree unloads an unused model (`[embedding] unload_after_s`, set to `--unload` s here),
   VmRSS once it did. Each figure twice: the daemon process's own (`rss_*`) and with its child
   processes (`total_*`: the embedding process, where the model runs since step 27);
4. at `--entries` entries: a store of generated entries with perturbed real MiniLM vectors
   (bench.common.vectors, built once and copied) under a golem joined to a one-golem clade,
   p2p on as a golem runs (`store`; until 2026-12-01 this was measured with p2p off, which
   leaves libp2p out), and again with p2p off (`store_p2p_off`), each with its model directory
   ready as after a first load (the lean graph in place): VmRSS idle, after 30 searches
   (model and vector index loaded; search p50/p99), and after the unload (own and total); after
   the searches also both processes' PSS (`total_pss_searched_mib`: the libraries both map
   counted once, as the unit's cgroup charges them);
5. ipc (this tree only, `--ipc-calls`): in one fresh process, one query embedded in process
   and through the embedding process (`daemon.embedding.remote.ModelHost`), interleaved:
   what the process boundary adds to a search (p50/p99 ms).

The result (`bench: "footprint"`): components {tree: [{step, rss_mib, delta_mib}], peak};
cold_start {tree: [{ready_s, first_meaning_s, attempts}]}; idle {tree: [{rss_idle_mib,
rss_used_mib, rss_unloaded_mib, total_*}]}; store and store_p2p_off {tree: {rss_idle_mib, rss_searched_mib,
rss_unloaded_mib, total_*, search p50/p99 ms}}; ipc {in_process, embedding_process: {p50_ms,
p99_ms}}; the machine's load (other processes' CPU) throughout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import HostLoad, machine_info, print_table, progress, workdir
from bench.common.machine import rss_kib, tree_rollup_kib, tree_status_kib
from bench.common.report import emit
from bench.common.stats import percentile

ROOT = Path(__file__).resolve().parent.parent
QUERY = "gas price spike on arbitrum during a liquidation"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


# -- 1. components (in a child process: `--probe`) -------------------------------------------------


def probe() -> list[dict[str, Any]]:
    """Import and load the daemon's parts in order; VmRSS after each (run in a fresh process)."""
    steps: list[dict[str, Any]] = [{"step": "interpreter", "rss_mib": rss_kib() / 1024}]
    held: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], object]) -> None:
        fn()
        steps.append({"step": name, "rss_mib": rss_kib() / 1024})

    def load_model() -> None:
        from daemon.embedding.embedder import get_embedder
        held["e"] = get_embedder(Path(os.environ["FOOTPRINT_MODEL_DIR"]), MODEL)

    step("numpy", lambda: __import__("numpy"))
    step("trio", lambda: __import__("trio"))
    step("libp2p (py-libp2p)", lambda: __import__("libp2p"))
    step("FastAPI + hypercorn", lambda: (__import__("fastapi"), __import__("hypercorn.trio")))
    step("daemon modules (service, api, p2p)", lambda: (__import__("daemon.service.runtime"),
                                                        __import__("daemon.api.app")))
    step("onnxruntime", lambda: __import__("onnxruntime"))
    step("tokenizers", lambda: __import__("tokenizers"))
    step("MiniLM session loaded", load_model)
    step("a query embedded", lambda: held["e"].embed([QUERY]))
    step("a batch of 8 x 256 tokens embedded", lambda: held["e"].embed(["word " * 300] * 8))
    step("lancedb + pyarrow", lambda: (__import__("lancedb"), __import__("pyarrow")))
    prev = 0.0
    for s in steps:
        s["rss_mib"] = round(s["rss_mib"], 1)
        s["delta_mib"] = round(s["rss_mib"] - prev, 1)
        prev = s["rss_mib"]
    steps.append({"step": "peak (VmHWM)", "rss_mib": round(rss_kib("VmHWM") / 1024, 1), "delta_mib": None})
    return steps


def components(tree: Path, model_dir: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "FOOTPRINT_MODEL_DIR": str(model_dir)}
    out = subprocess.run([sys.executable, "-m", "bench.bench_footprint", "--probe"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    result: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- daemons -----------------------------------------------------------------------------------------


def _rss_mib(pid: int) -> float:
    """The daemon process's own VmRSS."""
    return round(rss_kib(pid=pid) / 1024, 1)


def _total_mib(pid: int) -> float:
    """The daemon's VmRSS with its child processes' (the embedding process, where it has one)."""
    return round(tree_status_kib(pid, "VmRSS") / 1024, 1)


def _search(golem: Any) -> dict[str, Any]:
    found: dict[str, Any] = golem.call("POST", "/v1/memory/search", json={"query": QUERY, "top_k": 5})
    return found


def _golem(root: Path, name: str, *, joined: bool) -> Any:
    from daemon.datadir import DataDir
    from daemon.testing.harness import Golem, LoopbackClade

    if joined:
        return LoopbackClade(root / name, 1).golems[0]
    data = DataDir(root / name / "data")
    data.init()
    return Golem(name, data)


P2P_ARGS = ["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"]


def cold_start(root: Path, tree: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Spawn a fresh joined golem; search until an answer by meaning; seconds from spawn."""
    golem = _golem(root, "cold", joined=True)
    golem.spawn(P2P_ARGS, env={**env, "PYTHONPATH": str(tree)})
    try:
        golem.wait_ready(timeout)
        ready = time.perf_counter() - golem.spawned_at
        attempts = 0
        while True:
            attempts += 1
            found = _search(golem)
            if found.get("degraded") is None:
                break
            if time.perf_counter() - golem.spawned_at > timeout:
                raise TimeoutError(f"no search by meaning within {timeout} s")
        first = time.perf_counter() - golem.spawned_at
        return {"ready_s": round(ready, 2), "first_meaning_s": round(first, 2), "attempts": attempts,
                "rss_mib": _rss_mib(golem.pid)}
    finally:
        golem.stop()


def _wait_unloaded(golem: Any, timeout: float) -> bool:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        memory = golem.call("GET", "/v1/status").get("memory")
        if memory is None:
            return False  # a tree without the field does not unload
        if not memory["model_loaded"]:
            return True
        time.sleep(0.5)  # a poll interval
    return False


def idle(root: Path, tree: Path, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """A fresh joined golem left alone, then used once, then left until its model unloads."""
    golem = _golem(root, "idle", joined=True)
    golem.spawn(P2P_ARGS, env={**env, "PYTHONPATH": str(tree)})
    try:
        golem.wait_ready(args.timeout)
        time.sleep(args.idle)  # the measurement: what an untouched daemon holds after this long
        out: dict[str, Any] = {"rss_idle_mib": _rss_mib(golem.pid), "total_idle_mib": _total_mib(golem.pid)}
        while _search(golem).get("degraded") is not None:
            pass
        out["rss_used_mib"], out["total_used_mib"] = _rss_mib(golem.pid), _total_mib(golem.pid)
        unloaded = _wait_unloaded(golem, args.unload + 30)
        out["rss_unloaded_mib"] = _rss_mib(golem.pid) if unloaded else None
        out["total_unloaded_mib"] = _total_mib(golem.pid) if unloaded else None
        return out
    finally:
        golem.stop()


def build_store(path: Path, n: int, seed: int, model_dir: Path) -> dict[str, Any]:
    """`n` generated entries with perturbed real MiniLM vectors (bench.common.vectors)."""
    import numpy as np

    from bench.common import Generator
    from bench.common.vectors import add_entries, write_synthetic
    from daemon.embedding.embedder import get_embedder
    from daemon.grimoire import Grimoire

    embedder = get_embedder(model_dir, MODEL)
    pool = embedder.embed([Generator(seed).entry().content for _ in range(600)]).astype(np.float32)
    with Grimoire.open(path, create=True) as store:
        made = add_entries(store, Generator(seed + 1), n)
        write_synthetic(store, embedder.info, pool, np.random.default_rng(seed + 2))
        store.checkpoint()
    return made


def ready_model_dir(target: Path) -> Path:
    """A golem's model directory as after its first model load: the lean graph
    (daemon/embedding/lean_graph.py) in place, which that load only starts writing (33 MiB more
    until then). Built once; each store golem gets a copy."""
    from daemon.embedding.embedder import assemble_default_model

    return assemble_default_model(target, wait_for_lean=True)


def at_store(root: Path, tree: Path, env: dict[str, str], store: Path, model: Path, args: argparse.Namespace, *,
             p2p: bool) -> dict[str, Any]:
    """A golem over a copy of the built store and of `model` (`ready_model_dir`): `p2p`, joined
    to a one-golem clade with libp2p listening on loopback, as a golem runs (the figure of
    record); else p2p off (what the network stack adds, by difference)."""
    golem = _golem(root, "store" if p2p else "store-p2p-off", joined=p2p)
    db = golem.data.db_path
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)
    shutil.copyfile(store, db)
    shutil.copytree(model, golem.data.root / "embedder", dirs_exist_ok=True)
    if p2p:
        golem.spawn(P2P_ARGS, env={**env, "PYTHONPATH": str(tree)})
    else:
        golem.spawn(env={**env, "PYTHONPATH": str(tree), "CLADE_P2P__ENABLED": "false"})
    try:
        golem.wait_ready(args.timeout)
        time.sleep(args.idle)  # the measurement: an untouched daemon over a full store
        out: dict[str, Any] = {"rss_idle_mib": _rss_mib(golem.pid), "total_idle_mib": _total_mib(golem.pid)}
        while _search(golem).get("degraded") is not None:
            pass
        times = []
        for i in range(30):
            t0 = time.perf_counter()
            golem.call("POST", "/v1/memory/search", json={"query": f"{QUERY} {i}", "top_k": 5})
            times.append((time.perf_counter() - t0) * 1000)
        out.update({"rss_searched_mib": _rss_mib(golem.pid), "total_searched_mib": _total_mib(golem.pid),
                    "total_pss_searched_mib": round(tree_rollup_kib(golem.pid) / 1024, 1),
                    "search_p50_ms": round(percentile(times, 50), 1),
                    "search_p99_ms": round(percentile(times, 99), 1),
                    "entries": golem.call("GET", "/v1/status")["entries"]})
        unloaded = _wait_unloaded(golem, args.unload + 30)
        out["rss_unloaded_mib"] = _rss_mib(golem.pid) if unloaded else None
        out["total_unloaded_mib"] = _total_mib(golem.pid) if unloaded else None
        return out
    finally:
        golem.stop()


# -- 5. one query's embedding: in process vs through the embedding process (`--probe-ipc`) --------------


def probe_ipc(model_dir: Path, n: int) -> dict[str, Any]:
    """One query embedded `n` times in this process and `n` times through a `ModelHost` (the
    daemon's path since step 27), interleaved; milliseconds per call (run in a fresh process)."""
    from daemon.embedding.embedder import get_embedder
    from daemon.embedding.remote import ModelHost

    local = get_embedder(model_dir, MODEL)
    host = ModelHost(model_dir)
    try:
        remote = host.embedder(MODEL)
        for warm in range(5):
            local.embed([f"{QUERY} {warm}"])
            remote.embed([f"{QUERY} {warm}"])
        times: dict[str, list[float]] = {"in_process": [], "embedding_process": []}
        for i in range(n):
            for name, embedder in (("in_process", local), ("embedding_process", remote)):
                t0 = time.perf_counter()
                embedder.embed([f"{QUERY} {i}"])  # a new text each time: no cache on either side
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        host.stop()
    return {name: {"p50_ms": round(percentile(t, 50), 2), "p99_ms": round(percentile(t, 99), 2)}
            for name, t in times.items()} | {"calls": n}


def ipc(tree: Path, model_dir: Path, n: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "FOOTPRINT_MODEL_DIR": str(model_dir)}
    out = subprocess.run([sys.executable, "-m", "bench.bench_footprint", "--probe-ipc", str(n)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- the run -----------------------------------------------------------------------------------------


def _knows_unload(tree: Path) -> bool:
    """Whether the tree's config has `[embedding] unload_after_s` (daemon/config.py, later a package)."""
    files = [tree / "daemon" / "config.py", *sorted((tree / "daemon" / "config").glob("*.py"))]
    return any("unload_after_s" in f.read_text() for f in files if f.is_file())


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    trees = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    # Only trees that know the key get it (an older tree's config may refuse an unknown key).
    envs = {name: ({"CLADE_EMBEDDING__UNLOAD_AFTER_S": str(args.unload)} if _knows_unload(tree) else {})
            for name, tree in trees.items()}
    res: dict[str, Any] = {"machine": machine_info(root, ("onnxruntime", "fastembed", "lancedb")),
                           "params": {"rounds": args.rounds, "entries": args.entries, "idle_s": args.idle,
                                      "unload_after_s": args.unload, "trees": {k: str(v) for k, v in trees.items()}},
                           "components": {}, "cold_start": {}, "idle": {}, "store": {}, "store_p2p_off": {},
                           "ipc": None, "failed": []}
    load = HostLoad()
    model_dir = root / "model"
    for name, tree in trees.items():
        progress(f"[components] {name}")
        res["components"][name] = components(tree, model_dir)
    if (ROOT / "daemon" / "embedding" / "remote.py").is_file() and args.ipc_calls:
        progress("[ipc] one query's embedding: in process vs the embedding process")
        res["ipc"] = ipc(ROOT, model_dir, args.ipc_calls)
    for r in range(args.rounds):
        for name, tree in trees.items():
            progress(f"[round {r + 1}] cold start, idle: {name}")
            res["cold_start"].setdefault(name, []).append(cold_start(root / f"{name}-{r}", tree, envs[name],
                                                                     args.timeout))
            res["idle"].setdefault(name, []).append(idle(root / f"{name}-{r}", tree, envs[name], args))
    if args.entries:
        store = (args.out or root) / f"store-{args.entries}.db"
        if not store.exists():
            progress(f"[store] building {args.entries:,} entries")
            res["store_build"] = build_store(store, args.entries, args.seed, model_dir)
        model = ready_model_dir(root / "store-model")
        for name, tree in trees.items():
            progress(f"[store] {name}")
            res["store"][name] = at_store(root / f"{name}-store", tree, envs[name], store, model, args, p2p=True)
            res["store_p2p_off"][name] = at_store(root / f"{name}-store", tree, envs[name], store, model, args,
                                                  p2p=False)
    res["host_load"] = load.report("whole run", quiet=True)
    res["loadavg_end"] = list(os.getloadavg())
    return res


def report(res: dict[str, Any]) -> None:
    trees = list(res["components"])
    steps = [s["step"] for s in res["components"][trees[0]]]
    rows = []
    for i, step in enumerate(steps):
        cells = []
        for t in trees:
            s = res["components"][t][i]
            delta = "" if s["delta_mib"] is None else f"{s['delta_mib']:+.1f}"
            cells.append(f"{t} {s['rss_mib']:7.1f} ({delta})")
        rows.append((step, "   ".join(cells)))
    print_table(rows)
    for t in trees:
        cs, ids = res["cold_start"].get(t, []), res["idle"].get(t, [])
        print_table([
            (f"{t}: ready / first search by meaning (s)",
             ", ".join(f"{c['ready_s']} / {c['first_meaning_s']}" for c in cs)),
            (f"{t}: idle joined golem RSS MiB (never used / used / unloaded)",
             ", ".join(f"{i['rss_idle_mib']} / {i['rss_used_mib']} / {i['rss_unloaded_mib']}" for i in ids)),
            (f"{t}: the same with its child processes (the embedding process)",
             ", ".join(f"{i.get('total_idle_mib')} / {i.get('total_used_mib')} / {i.get('total_unloaded_mib')}"
                       for i in ids)),
        ])
        for key, how in (("store", "joined, p2p on"), ("store_p2p_off", "p2p off")):
            if t not in res.get(key, {}):
                continue
            s = res[key][t]
            print_table([(f"{t}: at {s['entries']:,} entries, {how}: RSS MiB (idle / searched / unloaded)",
                          f"{s['rss_idle_mib']} / {s['rss_searched_mib']} / {s['rss_unloaded_mib']}"),
                         (f"{t}: the same with its child processes",
                          f"{s.get('total_idle_mib')} / {s.get('total_searched_mib')} / {s.get('total_unloaded_mib')}"),
                         (f"{t}: searched, both processes' PSS (shared pages once)",
                          f"{s.get('total_pss_searched_mib')}"),
                         (f"{t}: search p50 / p99 ms", f"{s['search_p50_ms']} / {s['search_p99_ms']}")])
    if res.get("ipc"):
        i = res["ipc"]
        print_table([(f"one query embedded, p50 / p99 ms ({i['calls']} calls each, interleaved)",
                      f"in process {i['in_process']['p50_ms']} / {i['in_process']['p99_ms']}; "
                      f"embedding process {i['embedding_process']['p50_ms']} / {i['embedding_process']['p99_ms']}")])
    print_table([("other processes' CPU (cores, whole run)", json.dumps(res.get("host_load")))])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--probe-ipc", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ipc-calls", type=int, default=200,
                    help="one query embedded this many times in process and through the embedding process (0: skip)")
    ap.add_argument("--before", type=Path, default=None, help="another clade checkout to measure alongside")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--entries", type=int, default=50_000, help="the store's size (0: skip)")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds an idle daemon is left alone")
    ap.add_argument("--unload", type=float, default=10.0, help="[embedding] unload_after_s for trees that have it")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--seed", type=int, default=20_240_601)
    ap.add_argument("--out", type=Path, default=None, help="keep the work dir (and the built store) here")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.probe:
        print(json.dumps(probe()))
        return 0
    if args.probe_ipc:
        print(json.dumps(probe_ipc(Path(os.environ["FOOTPRINT_MODEL_DIR"]), args.probe_ipc)))
        return 0
    started = time.perf_counter()
    with workdir(args.out, "clade-footprint-") as root:
        res = run(args, root)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    report(res)
    emit("footprint", res)
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
