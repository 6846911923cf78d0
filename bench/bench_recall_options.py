"""Compare the embedding options for knowledge entries: recall quality, cost, recall latency.

    .venv/bin/python -m bench.bench_recall_options [--quick] [--out DIR] [--seed S]

The options (`[embedding] model`, daemon/embedding/catalogue.py), each loaded through
`daemon.embedding.embedder.get_embedder(dir, model)`: `sentence-transformers/all-MiniLM-L6-v2`
(the bundled int8 ONNX file), `sentence-transformers/all-mpnet-base-v2` (8-bit weights, made by
`models.prepare_mpnet`) and `all-MiniLM-L6-v2+all-mpnet-base-v2` (one fused space,
cosine = mean of the two models' cosines). Plus fusions computed here only, from the two models'
own vectors: reciprocal-rank fusion (RRF, k=60) of their two cosine rankings, and weighted score
sums with MiniLM weight 0.3 and 0.7 (MPNet 0.7 / 0.3), to show whether the fused space's untuned 0.5
is a cherry-picked peak. Measures:

1. Quality on the evaluation corpus (tests/helpers/semantic_corpus.py: ENTRIES, QUERIES and their
   `.relevant` keys): recall@1, recall@5 and MRR@10 (reciprocal rank of the first relevant entry
   within the top 10, 0 if none), over all queries and over the first 36 only (the older, easier
   subset, so the figures compare with earlier reports), each
   (a) "raw": the entries ranked by the cosine of their vectors with the query's vector alone;
   (b) "hybrid": the real `Retriever.recall(RecallQuery(text=q, k=10), embed_limit=0,
       query_vector=v)` on a real `Grimoire` in a temporary directory holding the corpus (vector
       and FTS5 candidates, the real ranking of scoring.py). Entry vectors are written by
       `Retriever.index_missing` with the real model; top 5 = the first five of the k=10 list
       (both draw the same max(64, 5k) = 64 candidates per source).
   Query vectors are `Embedder.embed([q])`, one query per call, as the daemon computes them. The
   weighted sums go through the Retriever too, as a space built the way the fused one is (each
   model's unit vector scaled by the square root of its weight, concatenated), written with
   `write_vectors`. RRF is a ranking of rankings with no vector space to search: raw only. A
   keyword-only line (the Retriever with `keyword_only=True`) is the floor every model must beat.
2. Cost of each real option. Query embedding: `Embedder.embed([q])` for N short queries (300) after
   20 warm-up calls, the options interleaved in rounds: p50/p99 and process CPU per query (all
   threads: the fused space runs its two models on two threads for a query). Entry embedding: process
   CPU and wall time per ~200-character DeFi text (180-220 chars) in `embed` calls of BACKLOG_BATCH
   (8: daemon/service/state.py, the batch of the daemon's background embedder), options interleaved per
   batch. Model load (first `get_embedder`, MPNet already prepared). First-use preparation:
   `prepare_mpnet` into an empty temporary directory in a child process (wall, CPU, peak RSS =
   VmHWM, size on disk); `assemble_default_model` (MiniLM: file copies) likewise, in process. RSS
   (VmRSS) of a daemon-like child process: at start (imports), model loaded, after its first
   query, after a recall loaded the VectorIndex of the large store (below); peak (VmHWM).
3. Recall latency at 50,000 entries (10,000 with --quick) for MiniLM (the default) and the fused space:
   `Retriever.recall(RecallQuery(text=q, k=10), embed_limit=0)` over 300 short queries, p50/p99,
   including the query embedding and excluding it (`query_vector=` the vector computed in 2.), the
   two interleaved per query, each with numpy's BLAS thread pool as it comes (OpenBLAS: a thread per
   core) and limited to 1 thread (threadpoolctl, if installed; also interleaved: on 2 shared cores
   the pool's spinning threads slow what runs next); the first recall (loads the VectorIndex); and,
   in both BLAS modes, a per-phase breakdown
   timing the store and index calls `recall` makes, directly, in its order: vector refresh +
   nearest (`Retriever._vector_index()`, `VectorIndex.nearest`), `Grimoire.keyword_scores`,
   `Grimoire.rank_fields` + the ranking (filters, factors, `scoring.normalise`, sort), and
   `Grimoire.get_many` of the top k. The stores: entries from `bench.common.Generator` written by
   `Grimoire.remember_many` in transactions of 500 (one base store, copied per option, so every
   option ranks the same entries); vectors written by `write_vectors` (256 per call, through
   bench.common.vectors' `write_synthetic` and `perturbed`) are perturbed real embeddings, not the entries'
   own: real vectors of ~750 DeFi texts and corpus entries by the option's model(s), plus Gaussian
   noise of sigma 0.03*sqrt(384/dim) per dimension (the same noise norm, ~0.59, in every space;
   cosine to the parent ~0.86), renormalised (the real models embed ~8-65 entries/s on 2 shared
   cores: 50,000 would take 13-100 minutes per option). The MPNet store exists only for the RSS
   probe. With `--out DIR` the built stores are kept under DIR/stores and
   reused by later runs with the same parameters (the report says whether they were).

Prints tables to stdout (progress goes to stderr), then the JSON result line of bench.common (also
written to DIR/recall_options.json with --out). Generated data comes from seeded RNGs. The CPU time
other processes used during each section is reported (`other_cpu`, in cores): on a shared machine
it moves every latency here.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench.common import (
    Generator,
    Sections,
    defi_texts,
    machine_info,
    progress,
    rss_kib,
    short_queries,
    summary,
)
from bench.common.machine import dir_size, finish, own_cpu_seconds
from bench.common.report import ROOT, add_common_args, bench_command, main_in_workdir
from bench.common.vectors import Matrix, rss_probe
from bench.recall_options.latency import base_store, bench_recall, option_store
from bench.recall_options.options import LATENCY_OPTIONS, PACKAGES, REAL, SLUG, WARMUP, Params, make_params
from bench.recall_options.quality import bench_quality, fuse
from bench.recall_options.report import print_report
from daemon.embedding.catalogue import FUSED, MINILM, MPNET, MPNET_VERSION
from daemon.embedding.embedder import Embedder, assemble_default_model, get_embedder
from daemon.service.embedding import BACKLOG_BATCH_OTHER as BACKLOG_BATCH  # one batch size for every option
from tests.helpers.semantic_corpus import ENTRIES

# -- 2. cost ---------------------------------------------------------------------------------------------------


def bench_query_embedding(embedders: dict[str, Embedder], queries: Sequence[str],
                          rounds: int = 3) -> tuple[dict[str, Any], dict[str, Matrix]]:
    progress(f"[2/5] query embedding: {WARMUP} warm-up + {len(queries)} embed([q]) per option, "
             f"{rounds} interleaved rounds")
    for emb in embedders.values():
        for q in queries[:WARMUP]:
            emb.embed([q])
    lat: dict[str, list[float]] = {m: [] for m in embedders}
    cpu: dict[str, list[float]] = {m: [] for m in embedders}
    vec: dict[str, list[Matrix | None]] = {m: [None] * len(queries) for m in embedders}
    names = list(embedders)
    per = math.ceil(len(queries) / rounds)
    for r in range(rounds):
        for j in range(len(names)):
            model = names[(r + j) % len(names)]
            emb = embedders[model]
            for i in range(r * per, min(len(queries), (r + 1) * per)):
                c0, t0 = time.process_time(), time.perf_counter()
                v = emb.embed([queries[i]])
                lat[model].append(time.perf_counter() - t0)
                cpu[model].append(time.process_time() - c0)
                vec[model][i] = v[0]
        progress("  round " + str(r + 1) + ": " + ", ".join(
            f"{SLUG[m]} p50 {summary(lat[m])['p50_ms']:.1f} ms" for m in names))
    out = {m: {"latency": summary(lat[m]), "cpu_ms_mean": round(1e3 * sum(cpu[m]) / len(cpu[m]), 2)} for m in names}
    return out, {m: np.stack(cast(list[Any], vec[m])) for m in names}


def bench_entry_embedding(embedders: dict[str, Embedder], texts: Sequence[str]) -> tuple[dict[str, Any],
                                                                                         dict[str, Matrix]]:
    batches = [list(texts[i:i + BACKLOG_BATCH]) for i in range(0, len(texts), BACKLOG_BATCH)]
    progress(f"  entry embedding: {len(texts)} texts of {min(map(len, texts))}-{max(map(len, texts))} chars, "
             f"{len(batches)} calls of {BACKLOG_BATCH} per option, interleaved")
    names = list(embedders)
    for emb in embedders.values():
        emb.embed(batches[0])
    cpu = dict.fromkeys(names, 0.0)
    wall = dict.fromkeys(names, 0.0)
    vecs: dict[str, list[Matrix]] = {m: [] for m in names}
    for b, batch in enumerate(batches):
        for j in range(len(names)):
            model = names[(b + j) % len(names)]
            c0, t0 = time.process_time(), time.perf_counter()
            vecs[model].append(embedders[model].embed(batch))
            wall[model] += time.perf_counter() - t0
            cpu[model] += time.process_time() - c0
    n = len(texts)
    out: dict[str, Any] = {"texts": n, "mean_chars": round(sum(map(len, texts)) / n, 1), "batch": BACKLOG_BATCH}
    for m in names:
        out[m] = {"cpu_ms_per_entry": round(1e3 * cpu[m] / n, 2), "wall_ms_per_entry": round(1e3 * wall[m] / n, 2),
                  "entries_per_s_wall": round(n / wall[m], 1)}
    return out, {m: np.concatenate(v) for m, v in vecs.items()}


def prepare_probe(root: Path) -> dict[str, Any]:
    """In a child: `prepare_mpnet` into `root` (empty): time, CPU, peak RSS, size."""
    from daemon.embedding.catalogue import prepare_mpnet

    out: dict[str, Any] = {"rss_start_kib": rss_kib()}
    c0, t0 = own_cpu_seconds(), time.perf_counter()
    target = prepare_mpnet(root / f"all-mpnet-base-v2-{MPNET_VERSION}")
    out.update({"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(own_cpu_seconds() - c0, 1),
                "vm_hwm_kib": rss_kib("VmHWM"), "model_dir_mib": round(dir_size(target) / 2**20, 1),
                "onnx_mib": round((target / "model.onnx").stat().st_size / 2**20, 1)})
    return out


def run_prepare_probe(workdir: Path) -> dict[str, Any]:
    progress("[3/5] first use: prepare_mpnet into an empty directory (child process)")
    root = Path(tempfile.mkdtemp(prefix="prepare-", dir=workdir))
    try:
        proc = subprocess.run(bench_command("bench_recall_options", "--prepare-probe", str(root)), cwd=ROOT,
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def minilm_assembly(workdir: Path) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="assemble-", dir=workdir))
    try:
        t0 = time.perf_counter()
        assemble_default_model(root / "embedder")
        return {"wall_s": round(time.perf_counter() - t0, 2), "model_dir_mib": round(dir_size(root) / 2**20, 1)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_rss_probe(db: Path, model_dir: Path, model: str) -> dict[str, Any]:
    progress(f"  RSS probe (child process): {model}")
    proc = subprocess.run(bench_command("bench_recall_options", "--rss-probe", str(db), str(model_dir), model),
                          cwd=ROOT, capture_output=True, text=True, check=True, timeout=900)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- main -------------------------------------------------------------------------------------------------------


def run(p: Params, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    sections = Sections()
    res: dict[str, Any] = {"machine": machine_info(workdir, PACKAGES), "params": asdict(p)}
    gen = Generator(p.seed)
    queries = short_queries(gen, p.queries)
    cost_texts = defi_texts(gen, p.cost_texts, 180, 220)
    pool_texts = defi_texts(gen, p.pool_texts)
    model_dir = workdir / "embedder"

    progress(f"loading {', '.join(REAL)} (get_embedder, model dir {model_dir})")
    embedders: dict[str, Embedder] = {}
    load_s: dict[str, float] = {}
    for model in REAL:
        t0 = time.perf_counter()
        embedders[model] = get_embedder(model_dir, model)
        load_s[model] = round(time.perf_counter() - t0, 2)

    with tempfile.TemporaryDirectory(prefix="quality-", dir=workdir) as qdir, sections.section("1. quality"):
        res["quality"], corpus_vecs = bench_quality(embedders, Path(qdir))

    cost: dict[str, Any] = {"load_s": load_s, "queries": len(queries),
                            "query_mean_chars": round(sum(map(len, queries)) / len(queries), 1),
                            "query_sample": queries[:5]}
    with sections.section("2a. query embedding"):
        cost["query_embedding"], qvecs = bench_query_embedding(embedders, queries)
    with sections.section("2b. entry embedding CPU"):
        cost["entry_embedding"], cost_vecs = bench_entry_embedding(embedders, cost_texts)
    cost["fused_rebuild_check_entries"] = float(np.abs(fuse(cost_vecs[MINILM], cost_vecs[MPNET], 0.5)
                                                       - cost_vecs[FUSED]).max())
    with sections.section("2c. first use (prepare_mpnet child, MiniLM assembly)"):
        cost["prepare_mpnet"] = run_prepare_probe(workdir)
        cost["assemble_minilm"] = minilm_assembly(workdir)

    progress(f"[4/5] stores of {p.entries:,} entries and recall latency")
    stores_dir = workdir / "stores"
    stores_dir.mkdir(exist_ok=True)
    recall: dict[str, Any] = {"entries": p.entries, "stores": {}}
    dbs: dict[str, Path] = {}
    with sections.section("3a. build stores (or reuse the cached ones)"):
        pools = {}
        for model in (MINILM, MPNET):
            extra = embedders[model].embed(pool_texts)  # calls of all texts, fastembed batches of 8
            pools[model] = np.concatenate([cost_vecs[model], extra, corpus_vecs[model]])
        pools[FUSED] = fuse(pools[MINILM], pools[MPNET], 0.5)
        base, recall["stores"]["base"] = base_store(stores_dir, p)
        for i, model in enumerate(REAL):
            dbs[model], recall["stores"][SLUG[model]] = option_store(stores_dir, base, p, model,
                                                                     embedders[model].info, pools[model],
                                                                     p.seed + 100 + i)
    recall["vectors"] = (f"perturbed real embeddings via write_vectors (pool of {len(pools[MINILM]):,} real vectors "
                         f"per space: {len(cost_texts)} + {len(pool_texts)} DeFi texts + {len(ENTRIES)} corpus "
                         "entries; noise norm ~0.59, cosine to the parent ~0.86), not the entries' own embeddings")
    for model in LATENCY_OPTIONS:
        with sections.section(f"3b. recall latency {SLUG[model]}"):
            recall[model] = bench_recall(dbs[model], embedders[model], queries, qvecs[model], p)
    res["recall"] = recall

    progress("[5/5] RSS of daemon-like child processes")
    with sections.section("2d. RSS probes (children)"):
        cost["rss"] = {model: run_rss_probe(dbs[model], model_dir, model) for model in REAL}
    res["cost"] = cost
    return finish(res, started, sections)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer queries and texts, 10,000 entries")
    add_common_args(ap, "directory for the files; the built stores are kept there and reused (default: temporary)")
    ap.add_argument("--rss-probe", nargs=3, metavar=("DB", "MODEL_DIR", "MODEL"), help=argparse.SUPPRESS)
    ap.add_argument("--prepare-probe", metavar="DIR", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench (or a child's probe: --rss-probe, --prepare-probe); the exit code is 0."""
    args = parse_args(argv)
    if args.rss_probe:
        db, model_dir, model = args.rss_probe
        print(json.dumps(rss_probe(Path(db), Path(model_dir), model, embed_limit=0)))
        return 0
    if args.prepare_probe:
        print(json.dumps(prepare_probe(Path(args.prepare_probe))))
        return 0
    return main_in_workdir("recall_options", args, lambda a, path: run(make_params(a), path), print_report,
                           "clade-recall-options-", json_name="recall_options.json")


if __name__ == "__main__":
    raise SystemExit(main())
