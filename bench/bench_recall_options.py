"""Compare the embedding options for knowledge entries: recall quality, cost, recall latency.

    .venv/bin/python bench/recall_options.py [--quick] [--out DIR] [--seed S]

The options (`[embedding] model`, daemon/grimoire/models.py), each loaded through
`daemon.grimoire.embedder.get_embedder(dir, model)`: `sentence-transformers/all-MiniLM-L6-v2`
(the bundled int8 ONNX file), `sentence-transformers/all-mpnet-base-v2` (8-bit weights, made by
`models.prepare_mpnet`) and `all-MiniLM-L6-v2+all-mpnet-base-v2` (one fused space,
cosine = mean of the two models' cosines). Plus fusions computed here only, from the two models'
own vectors: reciprocal-rank fusion (RRF, k=60) of their two cosine rankings, and weighted score
sums with MiniLM weight 0.3 and 0.7 (MPNet 0.7 / 0.3), to show whether the fused space's untuned 0.5
is a cherry-picked peak. Measures:

1. Quality on the evaluation corpus (tests/semantic_corpus.py: ENTRIES, QUERIES and their
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
   `Grimoire.get_many` of the top k. The stores: entries from `bench.store.Generator` written by
   `Grimoire.remember_many` in transactions of 500 (one base store, copied per option, so every
   option ranks the same entries); vectors written by `write_vectors` (256 per call, through
   bench.recall's `write_synthetic` and `perturbed`) are perturbed real embeddings, not the entries'
   own: real vectors of ~750 DeFi texts and corpus entries by the option's model(s), plus Gaussian
   noise of sigma 0.03*sqrt(384/dim) per dimension (the same noise norm, ~0.59, in every space;
   cosine to the parent ~0.86), renormalised (the real models embed ~8-65 entries/s on 2 shared
   cores: 50,000 would take 13-100 minutes per option). The MPNet store exists only for the RSS
   probe. With `--out DIR` the built stores are kept under DIR/stores and
   reused by later runs with the same parameters (the report says whether they were).

Prints tables to stdout (progress goes to stderr), then one JSON line with every number (also
written to DIR/recall_options.json with --out). Generated data comes from seeded RNGs. The CPU time
other processes used during each section is reported (`other_cpu`, in cores): on a shared machine
it moves every latency here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

# `python bench/recall_options.py` puts bench/ first on sys.path, where bench/crdt.py would shadow
# the `crdt` package: drop it and put the repository root there instead.
_BENCH_DIR = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH_DIR]
sys.path.insert(0, str(_BENCH_DIR.parent))

import numpy as np  # noqa: E402

from bench.recall import (  # noqa: E402
    Sections,
    add_entries,
    defi_texts,
    machine_info,
    rss_kib,
    short_queries,
    summary,
    timed,
    write_synthetic,
)
from bench.store import Generator, dir_size, progress  # noqa: E402
from crypto import Identity  # noqa: E402
from daemon.errors import UsageError  # noqa: E402
from daemon.grimoire import Grimoire, scoring  # noqa: E402
from daemon.grimoire.embedder import (  # noqa: E402
    Embedder,
    EmbeddingInfo,
    assemble_default_model,
    expected_info,
    get_embedder,
)
from daemon.grimoire.models import FUSED, MINILM, MPNET, MPNET_VERSION  # noqa: E402
from daemon.grimoire.retrieval import CANDIDATES, RecallQuery, Retriever, _factors, _passes  # noqa: E402
from daemon.grimoire.schema import SCHEMA_VERSION  # noqa: E402
from daemon.grimoire.store import wall_clock_ms  # noqa: E402
from daemon.grimoire.vectors import stored_vectors, write_vectors  # noqa: E402
from daemon.service.state import BACKLOG_BATCH  # noqa: E402
from tests.semantic_corpus import ENTRIES, QUERIES  # noqa: E402

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Matrix = NDArray[np.float32]
else:
    Matrix = Any

IDENTITY = Identity(bytes(range(32)))
K = 10
MRR_DEPTH = 10
OLD_QUERIES = 36  # the first 36 queries: the corpus before it grew (earlier reports measured these)
WARMUP = 20
RRF_K = 60
FUSION_WEIGHTS = (0.3, 0.7)  # MiniLM's weight in the bench-only score sums; MPNet gets the rest
BASE_DIM = 384  # bench.recall's noise sigma is per dimension of a 384-d space
REAL = (MINILM, MPNET, FUSED)
LATENCY_OPTIONS = (MINILM, FUSED)
LABEL = {
    MINILM: "all-MiniLM-L6-v2 (int8, bundled, the default)",
    MPNET: "all-mpnet-base-v2 (8-bit)",
    FUSED: "MiniLM+MPNet fused, mean cosine",
}
SLUG = {MINILM: "minilm", MPNET: "mpnet", FUSED: "fused"}


@dataclass(frozen=True, slots=True)
class Params:
    quick: bool
    seed: int
    queries: int
    cost_texts: int
    pool_texts: int
    entries: int
    recall_queries: int
    breakdown_queries: int


def make_params(args: argparse.Namespace) -> Params:
    if args.quick:
        return Params(quick=True, seed=args.seed, queries=60, cost_texts=48, pool_texts=64, entries=10_000,
                      recall_queries=40, breakdown_queries=20)
    return Params(quick=False, seed=args.seed, queries=300, cost_texts=240, pool_texts=400, entries=50_000,
                  recall_queries=300, breakdown_queries=100)


def cpu_seconds() -> float:
    """This process's CPU time (all threads) plus its waited-for children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def fuse(a: Matrix, b: Matrix, weight_a: float) -> Matrix:
    """The fused space's construction with another weight: unit rows scaled by sqrt(weight), side by side."""
    fused = np.concatenate([a * np.float32(math.sqrt(weight_a)), b * np.float32(math.sqrt(1 - weight_a))], axis=1)
    return fused.astype(np.float32, copy=False)


def bench_info(weight: float) -> EmbeddingInfo:
    base = expected_info(FUSED)
    assert base is not None
    return EmbeddingInfo(model=f"bench:{weight:g}*MiniLM+{1 - weight:g}*MPNet", model_version="bench",
                         preprocess_hash=base.preprocess_hash, dim=base.dim)


class WrittenSpace:
    """Looks like an `Embedder` to `Retriever` for a space whose vectors this bench writes itself
    (queries come with `query_vector`, entries already have vectors: `embed` is never called)."""

    def __init__(self, info: EmbeddingInfo) -> None:
        self.info = info

    def embed(self, texts: Sequence[str]) -> Matrix:
        raise RuntimeError(f"{self.info.model}: the bench supplies every vector")


# -- 1. quality -------------------------------------------------------------------------------------------


def quality_metrics(ranked: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """recall@1, recall@5, MRR@10 of per-query key lists (best first, QUERIES order): all, first 36."""
    out: dict[str, dict[str, float]] = {}
    for label, n in (("all", len(QUERIES)), ("first36", OLD_QUERIES)):
        r1 = r5 = rr = 0.0
        for q, top in zip(QUERIES[:n], ranked[:n], strict=True):
            r1 += bool(q.relevant & set(top[:1]))
            r5 += bool(q.relevant & set(top[:5]))
            rank = next((i for i, key in enumerate(top[:MRR_DEPTH], 1) if key in q.relevant), None)
            rr += 0.0 if rank is None else 1 / rank
        out[label] = {"r@1": round(r1 / n, 3), "r@5": round(r5 / n, 3), "mrr@10": round(rr / n, 3), "queries": n}
    return out


def raw_ranking(order: NDArray[np.int64]) -> list[list[str]]:
    keys = [e.key for e in ENTRIES]
    return [[keys[j] for j in row[:MRR_DEPTH]] for row in order]


def cosine_order(queries: Matrix, entries: Matrix) -> NDArray[np.int64]:
    """Per query, entry indices by descending cosine (unit vectors)."""
    return np.argsort(-(queries @ entries.T), axis=1, kind="stable")


def rrf_order(*orders: NDArray[np.int64]) -> NDArray[np.int64]:
    n_q, n_e = orders[0].shape
    score = np.zeros((n_q, n_e))
    for order in orders:
        pos = np.empty_like(order)
        pos[np.arange(n_q)[:, None], order] = np.arange(n_e)[None, :]
        score += 1.0 / (RRF_K + pos + 1)
    return np.argsort(-score, axis=1, kind="stable")


@dataclass
class CorpusStore:
    store: Grimoire
    retriever: Retriever
    ids: list[str]  # ENTRIES order
    key_of: dict[str, str]


def corpus_store(path: Path, embedder: Callable[[], Embedder]) -> CorpusStore:
    store = Grimoire.open(path, create=True)
    written = store.remember_many([e.new_entry() for e in ENTRIES], identity=IDENTITY)
    ids = [w.id for w in written]
    return CorpusStore(store, Retriever(store, embedder), ids, {w.id: e.key for w, e in zip(written, ENTRIES,
                                                                                            strict=True)})


def hybrid_ranking(cs: CorpusStore, qvecs: Matrix | None, *, keyword_only: bool = False) -> list[list[str]]:
    """Per query, the keys of `Retriever.recall(k=10)`'s hits (top 5 = its first five: same candidates)."""
    assert max(CANDIDATES, 5 * 5) == max(CANDIDATES, 5 * MRR_DEPTH), "k=5 would draw other candidates"
    out: list[list[str]] = []
    for i, q in enumerate(QUERIES):
        try:
            hits = cs.retriever.recall(RecallQuery(text=q.text, k=MRR_DEPTH, keyword_only=keyword_only),
                                       embed_limit=0, query_vector=None if qvecs is None else qvecs[i])
        except UsageError:  # keyword-only with no searchable word: a miss
            hits = []
        out.append([cs.key_of[h.entry.id] for h in hits])
    return out


def bench_quality(embedders: dict[str, Embedder], root: Path) -> tuple[dict[str, Any], dict[str, Matrix]]:
    """Returns the results and each real model's entry vectors (ENTRIES order) for the perturbation pool."""
    progress(f"[1/5] quality: {len(ENTRIES)} entries, {len(QUERIES)} queries, real stores in {root}")
    res: dict[str, Any] = {"entries": len(ENTRIES), "queries": len(QUERIES), "first_queries_subset": OLD_QUERIES,
                           "options": {}}
    ent: dict[str, Matrix] = {}
    qry: dict[str, Matrix] = {}
    orders: dict[str, NDArray[np.int64]] = {}
    stores: list[CorpusStore] = []
    try:
        for model in REAL:
            emb = embedders[model]
            cs = corpus_store(root / f"{SLUG[model]}.db", lambda emb=emb: emb)
            stores.append(cs)
            t0 = time.perf_counter()
            done = cs.retriever.index_missing()
            embed_s = time.perf_counter() - t0
            vecs = stored_vectors(cs.store, emb.info, cs.ids)
            assert done == len(ENTRIES) and len(vecs) == len(ENTRIES), (done, len(vecs))
            ent[model] = np.stack([vecs[i] for i in cs.ids])
            qry[model] = np.stack([emb.embed([q.text])[0] for q in QUERIES])
            orders[model] = cosine_order(qry[model], ent[model])
            res["options"][model] = {"label": LABEL[model], "kind": "real (get_embedder)",
                                     "raw": quality_metrics(raw_ranking(orders[model])),
                                     "hybrid": quality_metrics(hybrid_ranking(cs, qry[model])),
                                     "index_missing_s": round(embed_s, 2)}
            progress(f"  {model}: {json.dumps(res['options'][model]['raw']['all'])} raw, "
                     f"{json.dumps(res['options'][model]['hybrid']['all'])} hybrid")
        # The fused space is the two models' vectors side by side: check the bench rebuilds it exactly.
        res["fused_rebuild_check"] = {
            "entries_max_abs_diff": float(np.abs(fuse(ent[MINILM], ent[MPNET], 0.5) - ent[FUSED]).max()),
            "queries_max_abs_diff": float(np.abs(fuse(qry[MINILM], qry[MPNET], 0.5) - qry[FUSED]).max()),
            "same_raw_ranking_top10": bool((cosine_order(fuse(qry[MINILM], qry[MPNET], 0.5),
                                                         fuse(ent[MINILM], ent[MPNET], 0.5))[:, :MRR_DEPTH]
                                            == orders[FUSED][:, :MRR_DEPTH]).all()),
        }
        name = f"rrf(k={RRF_K})"
        res["options"][name] = {"label": f"RRF k={RRF_K} of MiniLM, MPNet rankings [bench]", "kind": "bench fusion",
                                "raw": quality_metrics(raw_ranking(rrf_order(orders[MINILM], orders[MPNET]))),
                                "hybrid": None}
        for w in FUSION_WEIGHTS:
            info = bench_info(w)
            space = WrittenSpace(info)
            cs = corpus_store(root / f"sum{w:g}.db", lambda space=space: cast(Embedder, space))
            stores.append(cs)
            write_vectors(cs.store, info, cs.ids, fuse(ent[MINILM], ent[MPNET], w))
            qv = fuse(qry[MINILM], qry[MPNET], w)
            res["options"][f"sum{w:g}"] = {
                "label": f"score sum {w:g}*MiniLM + {1 - w:g}*MPNet [bench]", "kind": "bench fusion",
                "raw": quality_metrics(raw_ranking(cosine_order(qv, fuse(ent[MINILM], ent[MPNET], w)))),
                "hybrid": quality_metrics(hybrid_ranking(cs, qv))}
        res["options"]["keyword-only"] = {"label": "keyword only (FTS5 via Retriever) [floor]", "kind": "reference",
                                          "raw": None,
                                          "hybrid": quality_metrics(hybrid_ranking(stores[0], None,
                                                                                   keyword_only=True))}
    finally:
        for cs in stores:
            cs.store.close()
    return res, ent


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
    from daemon.grimoire.models import prepare_mpnet

    out: dict[str, Any] = {"rss_start_kib": rss_kib()}
    c0, t0 = cpu_seconds(), time.perf_counter()
    target = prepare_mpnet(root / f"all-mpnet-base-v2-{MPNET_VERSION}")
    out.update({"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(cpu_seconds() - c0, 1),
                "vm_hwm_kib": rss_kib("VmHWM"), "model_dir_mib": round(dir_size(target) / 2**20, 1),
                "onnx_mib": round((target / "model.onnx").stat().st_size / 2**20, 1)})
    return out


def run_prepare_probe(workdir: Path) -> dict[str, Any]:
    progress("[3/5] first use: prepare_mpnet into an empty directory (child process)")
    root = Path(tempfile.mkdtemp(prefix="prepare-", dir=workdir))
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--prepare-probe", str(root)],
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


def rss_probe(db: Path, model_dir: Path, model: str) -> dict[str, Any]:
    """In a child: RSS before the model, with it, after a query, with the store's VectorIndex loaded."""
    out: dict[str, Any] = {"model": model, "fastembed_imported_at_start": "fastembed" in sys.modules,
                           "rss_start_kib": rss_kib()}
    t0 = time.perf_counter()
    embedder = get_embedder(model_dir, model)
    out["load_s"] = round(time.perf_counter() - t0, 2)
    out["rss_model_loaded_kib"] = rss_kib()
    embedder.embed(["gas spike on arbitrum"])
    out["rss_after_first_query_kib"] = rss_kib()
    with Grimoire.open(db) as store:
        retriever = Retriever(store, lambda: embedder)
        retriever.recall(RecallQuery(text="sandwich attack on the uniswap router", k=K), embed_limit=0)
        out["vector_index_rows"] = len(retriever._vector_index())
        out["rss_vector_index_loaded_kib"] = rss_kib()
    out["vm_hwm_kib"] = rss_kib("VmHWM")
    return out


def run_rss_probe(db: Path, model_dir: Path, model: str) -> dict[str, Any]:
    progress(f"  RSS probe (child process): {model}")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--rss-probe", str(db), str(model_dir),
                           model], capture_output=True, text=True, check=True, timeout=900)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- 3. the large stores and recall latency ------------------------------------------------------------------


def _marker(db: Path) -> Path:
    return db.with_suffix(".json")


def _cached(db: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    try:
        saved: dict[str, Any] = json.loads(_marker(db).read_text())
    except (OSError, ValueError):
        return None
    return saved if db.is_file() and saved.get("meta") == meta else None


def _cached_build(db: Path, meta: dict[str, Any], label: str,
                  build: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """The store at `db` if its marker says it was built from `meta`; else `build(tmp)`, then moved into place."""
    saved = _cached(db, meta)
    if saved is not None:
        progress(f"  {label}: cached {db}")
        return db, {**saved["built"], "cached": True}
    tmp = db.with_suffix(".tmp")
    for f in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        f.unlink(missing_ok=True)
    built = build(tmp)
    tmp.replace(db)
    built["db_mib"] = round(db.stat().st_size / 2**20, 1)
    _marker(db).write_text(json.dumps({"meta": meta, "built": built}))
    return db, {**built, "cached": False}


def base_store(stores: Path, p: Params) -> tuple[Path, dict[str, Any]]:
    """N Generator entries, no vectors (cached under `stores`)."""

    def build(tmp: Path) -> dict[str, Any]:
        progress(f"  base store: {p.entries:,} entries")
        with Grimoire.open(tmp, create=True) as store:
            built = add_entries(store, Generator(p.seed + 1), p.entries)
            store.checkpoint()
        return built

    return _cached_build(stores / f"base-{p.entries}-{p.seed}.db",
                         {"entries": p.entries, "seed": p.seed, "schema": SCHEMA_VERSION}, "base store", build)


def option_store(stores: Path, base: Path, p: Params, model: str, info: EmbeddingInfo, pool: Matrix,
                 rng_seed: int) -> tuple[Path, dict[str, Any]]:
    """A copy of the base store with perturbed real vectors of `model` for every entry (cached)."""
    scale = math.sqrt(info.dim / BASE_DIM)
    meta = {"entries": p.entries, "seed": p.seed, "schema": SCHEMA_VERSION, "info": asdict(info),
            "pool": len(pool), "pool_checksum": round(float(pool.astype(np.float64).sum()), 3)}

    def build(tmp: Path) -> dict[str, Any]:
        progress(f"  {model} store: copy of the base, {p.entries:,} perturbed vectors ({info.dim}-d)")
        shutil.copyfile(base, tmp)
        with Grimoire.open(tmp) as store:
            # bench.recall's noise is sigma 0.03 per dimension of a 384-d space: scaling the parents up by
            # sqrt(dim/384) before it is added (then renormalising) gives every space the same noise norm.
            built = write_synthetic(store, info, pool * np.float32(scale), np.random.default_rng(rng_seed))
            store.checkpoint()
        built["noise_sigma_per_dim"] = round(0.03 / scale, 5)
        return built

    return _cached_build(stores / f"{SLUG[model]}-{p.entries}-{p.seed}.db", meta, f"{model} store", build)


PHASES = ("vector_refresh", "nearest", "keyword_scores", "rank_fields", "ranking", "get_many")
GROUPS = {"vector refresh + nearest": ("vector_refresh", "nearest"), "keyword_scores": ("keyword_scores",),
          "rank_fields + ranking": ("rank_fields", "ranking"), "get_many (top k)": ("get_many",)}


def breakdown(retriever: Retriever, queries: Sequence[str], qvecs: Matrix, n: int) -> dict[str, Any]:
    """Each call `Retriever.recall` makes, timed alone, in its order (the ranking loop as written there)."""
    store = retriever.store
    kc = max(CANDIDATES, 5 * K)
    times: dict[str, list[float]] = {p: [] for p in PHASES}
    cand = {"vector": 0, "keyword": 0, "both": 0, "ranked": 0}
    for q, vec in zip(queries[:n], qvecs[:n], strict=True):
        rq, now = RecallQuery(text=q, k=K), wall_clock_ms()
        t0 = time.perf_counter()
        index = retriever._vector_index()
        t1 = time.perf_counter()
        via = dict.fromkeys((i for i, _ in index.nearest(vec, kc)), "vector")
        t2 = time.perf_counter()
        try:
            kw = store.keyword_scores(q, k=kc)
        except UsageError:
            kw = []
        t3 = time.perf_counter()
        for entry_id, _ in kw:
            via[entry_id] = "both" if entry_id in via else "keyword"
        t4 = time.perf_counter()
        candidates = [c for c in store.rank_fields(list(via)) if _passes(c, rq, now)]
        t5 = time.perf_counter()
        raw = []
        for c in candidates:
            v = index.vector(c.id)
            raw.append(_factors(c, max(0.0, float(v @ vec)) if v is not None else 0.0, rq.pad, now))
        ranked = sorted(zip(candidates, scoring.normalise(raw), strict=True),
                        key=lambda cf: (-cf[1].score, cf[0].id))[:K]
        t6 = time.perf_counter()
        store.get_many([c.id for c, _ in ranked])
        t7 = time.perf_counter()
        for phase, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t5 - t4, t6 - t5, t7 - t6), strict=True):
            times[phase].append(dt)
        for v in via.values():
            cand[v] += 1
        cand["ranked"] += len(candidates)
    phases = {p: summary(ts) for p, ts in times.items()}
    groups = {g: summary([sum(times[p][i] for p in ps) for i in range(n)]) for g, ps in GROUPS.items()}
    return {"queries": n, "phases": phases, "groups": groups,
            "phases_mean_sum_ms": round(sum(s["mean_ms"] for s in phases.values()), 3),
            "candidates_mean": {k: round(v / n, 1) for k, v in cand.items()}}


def blas_modes() -> tuple[dict[str, Callable[[], AbstractContextManager[object]]], dict[str, Any]]:
    """numpy's BLAS thread pool as it comes (OpenBLAS: one thread per core) and limited to one thread
    (threadpoolctl, when installed): on 2 shared cores the pool's threads compete with everything else."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return {"default": nullcontext}, {"threadpoolctl": None}
    controller = ThreadpoolController()
    info = [{k: lib.get(k) for k in ("internal_api", "num_threads", "version")} for lib in controller.info()
            if lib.get("user_api") == "blas"]
    return ({"default": nullcontext, "1 thread": lambda: controller.limit(limits=1, user_api="blas")},
            {"threadpoolctl": "yes", "blas": info})


def bench_recall(db: Path, embedder: Embedder, queries: Sequence[str], qvecs: Matrix, p: Params) -> dict[str, Any]:
    n = min(p.recall_queries, len(queries))
    qs = list(queries[:n])
    modes, blas = blas_modes()
    with Grimoire.open(db) as store:
        entries = store.counts().entries
        progress(f"  recall over {entries:,} entries ({embedder.info.model}): {n} queries x (excluding, including "
                 f"the query embedding) x BLAS threads ({', '.join(modes)}), interleaved")
        retriever = Retriever(store, lambda: embedder)
        cold = timed(lambda: retriever.recall(RecallQuery(text=qs[0], k=K), embed_limit=0, query_vector=qvecs[0]))
        for i, q in enumerate(qs[1:6], 1):
            retriever.recall(RecallQuery(text=q, k=K), embed_limit=0, query_vector=qvecs[i])
            retriever.recall(RecallQuery(text=q, k=K), embed_limit=0)
        lat: dict[tuple[str, str], list[float]] = {(m, w): [] for m in modes for w in ("excl", "incl")}
        hits = 0
        names = list(modes)
        for i, q in enumerate(qs):
            for mode in names if i % 2 == 0 else names[::-1]:
                with modes[mode]():
                    calls = [("excl", qvecs[i]), ("incl", None)]
                    for which, vec in calls if (i // 2) % 2 == 0 else calls[::-1]:
                        t0 = time.perf_counter()
                        got = retriever.recall(RecallQuery(text=q, k=K), embed_limit=0, query_vector=vec)
                        lat[(mode, which)].append(time.perf_counter() - t0)
                        hits += len(got)
        out: dict[str, Any] = {}
        for mode in names:
            with modes[mode]():
                br = breakdown(retriever, qs, qvecs, min(n, p.breakdown_queries))
            out[mode] = {"excluding_embedding": summary(lat[(mode, "excl")]),
                         "including_embedding": summary(lat[(mode, "incl")]), "breakdown": br}
        index_rows = len(retriever._vector_index())
    return {"entries": entries, "vector_index_rows": index_rows, "dim": embedder.info.dim, "queries": n, "k": K,
            "first_recall_ms": round(cold * 1e3, 1), "mean_hits": round(hits / (len(lat) * n), 2),
            "blas": blas, "modes": out}


# -- output -------------------------------------------------------------------------------------------------------


def fl(lat: dict[str, float]) -> str:
    return f"p50 {lat['p50_ms']:7.2f}  p99 {lat['p99_ms']:7.2f}  mean {lat['mean_ms']:7.2f} ms (n={lat['samples']})"


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f}"


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    width = min(64, max(len(k) for k, _ in rows) + 2)
    for key, value in rows:
        if key.startswith("## "):
            print(f"\n{key[3:]}")
            print("-" * len(key[3:]))
        elif len(key) >= width:
            print(key)
            print(" " * width + value)
        else:
            print(f"{key:<{width}}{value}")


def print_report(res: dict[str, Any]) -> None:
    m, v = res["machine"], res["machine"]["versions"]
    print_rows([
        ("## machine", ""),
        ("CPU", f"{m['cpu_model']} ({m['cpu_count']} logical CPUs, {m['cpus_usable']} usable)"),
        ("kernel / Python", f"{m['kernel']} / {m['python']}"),
        ("code measured (git HEAD; modified under daemon/, crdt/)",
         f"{m['code'].get('head')}; {', '.join(m['code'].get('modified', [])) or 'none'}"),
        ("onnxruntime / fastembed / tokenizers / numpy",
         f"{v['onnxruntime']} / {v['fastembed']} / {v['tokenizers']} / {v['numpy']}"),
        ("memory", f"{m['mem_gib'].get('MemTotal')} GiB total, {m['mem_gib'].get('MemAvailable')} GiB available"),
        ("load average at start / end", f"{m['loadavg_start']} / {res['loadavg_end']}"),
    ])
    q = res["quality"]
    print(f"\n1. quality on the evaluation corpus: {q['entries']} entries, {q['queries']} queries "
          f"(and the first {q['first_queries_subset']})")
    print("-" * 100)
    hdr = f"{'':52}{'raw cosine':^22}   {'hybrid Retriever.recall':^22}"
    for subset, title in (("all", f"all {q['queries']} queries"), ("first36", f"first {OLD_QUERIES} queries")):
        print(f"\n{title}\n{hdr}")
        print(f"{'option':52}{'r@1':>7}{'r@5':>7}{'MRR@10':>8}   {'r@1':>7}{'r@5':>7}{'MRR@10':>8}")
        for opt in q["options"].values():
            cells = []
            for kind in ("raw", "hybrid"):
                got = opt[kind]
                cells.append("".join(f"{got[subset][k]:>{w}.3f}" for k, w in (("r@1", 7), ("r@5", 7), ("mrr@10", 8)))
                             if got else f"{'-':>7}{'-':>7}{'-':>8}")
            print(f"{opt['label']:52}{cells[0]}   {cells[1]}")
    fc = q["fused_rebuild_check"]
    print(f"\ncheck: the fused space's vectors = MiniLM's and MPNet's side by side x sqrt(0.5): max |diff| entries "
          f"{fc['entries_max_abs_diff']:.2g}, queries {fc['queries_max_abs_diff']:.2g}; same raw top 10: "
          f"{fc['same_raw_ranking_top10']}")

    c = res["cost"]
    e = c["entry_embedding"]
    print(f"\n2. cost (query: {c['queries']} short queries, mean {c['query_mean_chars']} chars; entry: "
          f"{e['texts']} texts, mean {e['mean_chars']} chars, embed() calls of {e['batch']})")
    print("-" * 100)
    print(f"{'option':44}{'query p50':>10}{'p99':>8}{'CPU/q':>8}{'entry CPU':>11}{'wall':>8}{'load':>7}"
          f"{'RSS model':>11}{'+index':>9}{'peak':>8}")
    print(f"{'':44}{'ms':>10}{'ms':>8}{'ms':>8}{'ms/entry':>11}{'ms/ent':>8}{'s':>7}{'MiB':>11}{'MiB':>9}{'MiB':>8}")
    for model in REAL:
        ql, ec, rs = c["query_embedding"][model], e[model], c["rss"][model]
        print(f"{LABEL[model]:44}{ql['latency']['p50_ms']:>10.2f}{ql['latency']['p99_ms']:>8.2f}"
              f"{ql['cpu_ms_mean']:>8.2f}{ec['cpu_ms_per_entry']:>11.2f}{ec['wall_ms_per_entry']:>8.2f}"
              f"{c['load_s'][model]:>7.2f}{mib(rs['rss_model_loaded_kib']):>11}"
              f"{mib(rs['rss_vector_index_loaded_kib']):>9}{mib(rs['vm_hwm_kib']):>8}")
    rows: list[tuple[str, str]] = [("## cost details", "")]
    for model in REAL:
        rs = c["rss"][model]
        rows.append((f"RSS child, {SLUG[model]}: start / model / 1st query / index ({rs['vector_index_rows']:,} rows)",
                     f"{mib(rs['rss_start_kib'])} / {mib(rs['rss_model_loaded_kib'])} / "
                     f"{mib(rs['rss_after_first_query_kib'])} / {mib(rs['rss_vector_index_loaded_kib'])} MiB, "
                     f"peak {mib(rs['vm_hwm_kib'])} MiB"))
    pr = c["prepare_mpnet"]
    if "error" in pr:
        rows.append(("first use: prepare_mpnet (child)", f"error: {pr['error']}"))
    else:
        rows.append(("first use: prepare_mpnet into an empty dir (child process)",
                     f"{pr['wall_s']:.1f} s wall, {pr['cpu_s']:.1f} s CPU, peak RSS {mib(pr['vm_hwm_kib'])} MiB, "
                     f"{pr['model_dir_mib']} MiB on disk (model.onnx {pr['onnx_mib']} MiB)"))
    ma = c["assemble_minilm"]
    rows.append(("first use: MiniLM assemble_default_model", f"{ma['wall_s']:.2f} s, {ma['model_dir_mib']} MiB"))
    print_rows(rows)

    r = res["recall"]
    print(f"\n3. recall latency: Retriever.recall(k={K}, embed_limit=0) at {r['entries']:,} entries")
    print("-" * 100)
    rows = [("vectors", r["vectors"])]
    for name, st in r["stores"].items():
        rows.append((f"store {name}", f"{'cached' if st['cached'] else 'built'}: " + ", ".join(
            f"{k} {v}" for k, v in st.items() if k != "cached")))
    for model in LATENCY_OPTIONS:
        x = r[model]
        tag = SLUG[model]
        rows += [(f"## {LABEL[model]} ({x['dim']}-d, {x['vector_index_rows']:,} vectors)", ""),
                 (f"[{tag}] first recall (loads the VectorIndex)", f"{x['first_recall_ms']:.1f} ms"),
                 (f"[{tag}] query embedding alone (section 2)", fl(c["query_embedding"][model]["latency"]))]
        for mode, y in x["modes"].items():
            t = f"[{tag}, BLAS {mode}]"
            rows += [(f"{t} excluding the query embedding", fl(y["excluding_embedding"])),
                     (f"{t} including the query embedding", fl(y["including_embedding"]))]
            b = y["breakdown"]
            for g, lat in b["groups"].items():
                rows.append((f"{t}   {g}", fl(lat)))
            ph = b["phases"]
            rows.append((f"{t}   (refresh / nearest; rank_fields / ranking, p50)",
                         f"{ph['vector_refresh']['p50_ms']:.2f} / {ph['nearest']['p50_ms']:.2f}; "
                         f"{ph['rank_fields']['p50_ms']:.2f} / {ph['ranking']['p50_ms']:.2f} ms"))
            rows.append((f"{t}   sum of phase means / recall mean (excl.)",
                         f"{b['phases_mean_sum_ms']:.2f} / {y['excluding_embedding']['mean_ms']:.2f} ms"))
        cm = x["modes"]["default"]["breakdown"]["candidates_mean"]
        rows.append((f"[{tag}] candidates per query (mean)",
                     f"vector-only {cm['vector']}, keyword-only {cm['keyword']}, both {cm['both']}; "
                     f"ranked after filters {cm['ranked']}"))
    blas = res["recall"][LATENCY_OPTIONS[0]]["blas"]
    rows.append(("numpy BLAS (threadpoolctl)", json.dumps(blas.get("blas")) if blas.get("threadpoolctl")
                 else "threadpoolctl not installed: default threads only"))
    rows.append(("## sections (other = CPU cores used by other processes meanwhile)", ""))
    for name, sec in res["sections"].items():
        rows.append((name, f"{sec['wall_s']:.1f} s wall, own {sec['own_cpu_cores']} cores, "
                           f"other {sec['other_cpu_cores']} cores"))
    rows.append(("total wall clock", f"{res['total_seconds']:.1f} s"))
    print_rows(rows)
    print()


# -- main -------------------------------------------------------------------------------------------------------


def run(p: Params, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    sections = Sections()
    res: dict[str, Any] = {"machine": machine_info(workdir), "params": asdict(p)}
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
    res["sections"] = sections.log
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["parent_peak_rss_mib"] = round(rss_kib("VmHWM") / 1024, 1)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer queries and texts, 10,000 entries")
    ap.add_argument("--out", type=Path, default=None,
                    help="directory for the files; the built stores are kept there and reused (default: temporary)")
    ap.add_argument("--seed", type=int, default=20_240_601, help="RNG seed (default 20240601)")
    ap.add_argument("--rss-probe", nargs=3, metavar=("DB", "MODEL_DIR", "MODEL"), help=argparse.SUPPRESS)
    ap.add_argument("--prepare-probe", metavar="DIR", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rss_probe:
        db, model_dir, model = args.rss_probe
        print(json.dumps(rss_probe(Path(db), Path(model_dir), model)))
        return 0
    if args.prepare_probe:
        print(json.dumps(prepare_probe(Path(args.prepare_probe))))
        return 0
    params = make_params(args)
    if args.out is None:
        workdir, cleanup = Path(tempfile.mkdtemp(prefix="clade-recall-options-")), True
    else:
        workdir, cleanup = args.out.expanduser().resolve(), False
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        res = run(params, workdir)
    finally:
        if cleanup:
            shutil.rmtree(workdir, ignore_errors=True)
    print_report(res)
    line = json.dumps(res, separators=(",", ":"), default=str)
    if not cleanup:
        (workdir / "recall_options.json").write_text(line + "\n")
        progress(f"JSON written to {workdir / 'recall_options.json'}")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
