"""Benchmark semantic memory: the real embedding model, hybrid recall, episode vector search.

    .venv/bin/python -m bench.bench_recall [--quick] [--out DIR] [--seed S] [--rebuild-1m]

Measures, on a fresh data directory (a temporary one unless `--out` is given), with the bundled
all-MiniLM-L6-v2 int8 ONNX model through `get_embedder` (ONNX Runtime directly, offline):

1. Query embedding: `Embedder.embed([query])` for 500 short queries after a warm-up: p50/p99.
2. Batch embedding: 1,000 DeFi texts of 50-300 characters through `Embedder.embed` and through
   fastembed on the same files (`TextEmbedding(...).embed(texts, batch_size=64)`), in calls of 256 texts
   (as `index_missing` makes them) interleaved in the same run, and the ratio; plus fastembed on
   each call's texts sorted by length (less padding in each batch of 64).
3. `Retriever.recall` over 10,000 and 50,000 entries (written by `remember_many`): p50/p99
   excluding the query embedding (the retriever gets an embedder stub that returns the query's
   vector computed in step 1; everything else is the real code path) and including it (the real
   embedder); a per-phase breakdown; the one-time costs of embedding missing entries (entries/s,
   with the real model, on the first entries) and of loading the VectorIndex (first refresh).
   Entries past the first 1,024 get vectors written with `write_vectors`: real embeddings of
   other DeFi texts plus small Gaussian noise, renormalised (the model embeds ~25-65 texts/s on
   2 shared cores: 50,000 texts would take 13-35 minutes). The report says how many were real.
4. `EpisodeLog.search` over 100,000 and 1,000,000 episodes (LanceDB), appended through
   `EpisodeLog.append` in calls of 20,000 rows, vectors = real embeddings + noise (as above):
   flat at 100k; `ensure_index()` (build time); ANN at 100k; at 1M before `ensure_index()` has
   merged the 900k new rows into the index (they are searched flat), `ensure_index()` again (merge
   time), ANN at 1M; with `--rebuild-1m` also a fresh index at 1M (drop_index + ensure_index).
   Next to `EpisodeLog.search` as implemented: the same query with LanceDB's defaults (nprobes 20,
   no refine), and at 100k the old `where embedding IS NOT NULL` prefilter. For each: recall@10
   against exact (numpy) search, the exact cosine of the returned rows relative to the exact top
   10's, and the error of the similarity the search reports. A small half-null table checks that
   a search without a where clause never returns rows without an embedding.
5. RSS of a daemon-like process (a child of this one): VmRSS before fastembed is imported,
   with the model loaded, and after a recall has loaded the 50,000-entry VectorIndex.

Prints a table to stdout (progress goes to stderr), then the JSON result line (bench.common).
Generated data comes from seeded RNGs. The CPU time other processes used during each section
is reported (`other_cpu`, in cores), since noisy neighbours move these figures.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench.common import (
    Generator,
    Sections,
    defi_texts,
    machine_info,
    machine_rows,
    print_table,
    progress,
    short_queries,
    summary,
    timed,
)
from bench.common.machine import dir_size, finish
from bench.common.report import ROOT, add_common_args, bench_command, main_in_workdir, not_empty, section_rows
from bench.common.vectors import (
    NOISE_SIGMA,
    VECTOR_BATCH,
    K,
    Matrix,
    add_entries,
    rss_probe,
    write_synthetic,
)
from bench.recall.episodes import EPISODE_BATCH, bench_episodes
from bench.recall.params import Params, make_params
from daemon.embedding.catalogue import MINILM
from daemon.embedding.embedder import Embedder, EmbeddingInfo, get_embedder
from daemon.errors import UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.recall import factors_of, passes
from daemon.grimoire.retrieval import CANDIDATES, RecallQuery, Retriever
from daemon.grimoire.scoring import normalise
from daemon.grimoire.store import wall_clock_ms
from daemon.grimoire.vector_index import VectorIndex
from daemon.grimoire.vectors import vector_report

WARMUP = 20
EMBED_CALL = 256  # texts per Embedder.embed call in the batch test (index_missing's batch)


# -- 1. and 2.: the model -------------------------------------------------------------------------


def bench_query_embedding(embedder: Embedder, queries: Sequence[str]) -> tuple[dict[str, Any], Matrix]:
    progress(f"[1/5] query embedding: {WARMUP} warm-up + {len(queries)} single-query embed() calls")
    for q in queries[:WARMUP]:
        embedder.embed([q])
    lat: list[float] = []
    vecs: list[Matrix] = []
    for q in queries:
        t0 = time.perf_counter()
        v = embedder.embed([q])
        lat.append(time.perf_counter() - t0)
        vecs.append(v[0])
    chars = [len(q) for q in queries]
    return ({"queries": len(queries), "mean_chars": round(sum(chars) / len(chars), 1), "latency": summary(lat),
             "sample": list(queries[:5])}, np.stack(vecs))


def bench_batch_embedding(embedder: Embedder, model_dir: Path, texts: Sequence[str],
                          rounds: int) -> tuple[dict[str, Any], Matrix]:
    """Three variants on the same texts, interleaved per call of EMBED_CALL texts (the size
    `index_missing` passes to `embed`) with the order rotated, so load drift hits all alike."""
    chunks = [list(texts[i:i + EMBED_CALL]) for i in range(0, len(texts), EMBED_CALL)]
    progress(f"[2/5] batch embedding: {len(texts):,} texts in calls of {EMBED_CALL} x {rounds} round(s) x 3 variants")
    from fastembed import TextEmbedding

    model: Any = TextEmbedding(model_name=MINILM, specific_model_path=str(model_dir), threads=1,
                               enable_cpu_mem_arena=False)  # the files the embedder loaded, through fastembed
    model.model.tokenizer.enable_truncation(max_length=256)
    variants: dict[str, Callable[[list[str]], object]] = {
        "embedder": lambda c: embedder.embed(c),
        "fastembed_raw": lambda c: list(model.embed(c, batch_size=64)),
        "fastembed_raw_sorted_by_length": lambda c: list(model.embed(sorted(c, key=len), batch_size=64)),
    }
    names = list(variants)
    times: dict[str, list[float]] = {k: [] for k in variants}
    step = 0
    for _ in range(rounds):
        for chunk in chunks:
            for j in range(len(names)):
                name = names[(step + j) % len(names)]
                times[name].append(timed(partial(variants[name], chunk)))
            step += 1
        progress("  round: " + ", ".join(f"{n} {len(texts) * len(times[n]) / len(chunks) / sum(times[n]):.1f}/s"
                                         for n in names))
    vectors = embedder.embed(texts)  # the pool of real vectors for synthetic entries and episodes
    out: dict[str, Any] = {"texts": len(texts), "rounds": rounds, "texts_per_call": EMBED_CALL,
                           "mean_chars": round(sum(map(len, texts)) / len(texts), 1)}
    for name, ts in times.items():
        per_round = [sum(ts[r * len(chunks):(r + 1) * len(chunks)]) for r in range(rounds)]
        out[name] = {"texts_per_s": round(len(texts) * rounds / sum(ts), 1),
                     "per_round_texts_per_s": [round(len(texts) / t, 1) for t in per_round]}
    out["embedder_over_raw"] = round(out["embedder"]["texts_per_s"] / out["fastembed_raw"]["texts_per_s"], 3)
    out["sorted_over_raw"] = round(out["fastembed_raw_sorted_by_length"]["texts_per_s"]
                                   / out["fastembed_raw"]["texts_per_s"], 3)
    tok: Any = getattr(getattr(model, "model", None), "tokenizer", None)
    if tok is not None:
        try:
            saved = tok.padding
            tok.no_padding()
            lens = [len(e.ids) for e in tok.encode_batch(list(texts))]
            if saved:
                tok.enable_padding(**{k: v for k, v in saved.items() if k in ("pad_id", "pad_token", "pad_type_id",
                                                                              "direction", "pad_to_multiple_of")})
            def padded(ls: list[int]) -> int:
                return sum(max(ls[i:i + 64]) * len(ls[i:i + 64]) for i in range(0, len(ls), 64))

            calls = [lens[i:i + EMBED_CALL] for i in range(0, len(lens), EMBED_CALL)]
            out["tokens"] = {"mean": round(sum(lens) / len(lens), 1), "max": max(lens),
                             "padded_over_real_batch64": round(sum(map(padded, calls)) / sum(lens), 2),
                             "padded_over_real_sorted": round(sum(padded(sorted(c)) for c in calls) / sum(lens), 2)}
        except Exception as exc:  # noqa: BLE001 - informative only
            out["tokens"] = {"error": str(exc)}
    return out, vectors


# -- 3.: recall -------------------------------------------------------------------------------------


class CachedEmbedder:
    """Looks like an `Embedder` to `Retriever`; returns precomputed vectors for known queries."""

    def __init__(self, real: Embedder, cache: dict[str, Matrix]) -> None:
        self.info: EmbeddingInfo = real.info
        self._real = real
        self._cache = cache

    def embed(self, texts: Sequence[str]) -> Matrix:
        if all(t in self._cache for t in texts):
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.info.dim), np.float32)
        return self._real.embed(texts)


def embed_real(retriever: Retriever, n: int) -> dict[str, Any]:
    progress(f"  Retriever.index_missing(limit={n:,}): real model, batches of {VECTOR_BATCH}")
    t0 = time.perf_counter()
    done = retriever.index_missing(batch=VECTOR_BATCH, limit=n)
    s = time.perf_counter() - t0
    return {"entries": done, "seconds": round(s, 2), "entries_per_s": round(done / s, 1)}


def first_refresh(store: Grimoire, info: EmbeddingInfo) -> dict[str, Any]:
    index = VectorIndex(info)
    t = timed(lambda: index.refresh(store))
    again = [timed(lambda: index.refresh(store)) for _ in range(20)]
    reread = store.connection.execute(
        "SELECT count(*) FROM entries WHERE embedding_created_ms = (SELECT max(embedding_created_ms) FROM entries)"
    ).fetchone()[0]
    return {"rows": len(index), "first_refresh_ms": round(t * 1e3, 2), "rows_reread_per_refresh": int(reread),
            "matrix_mib": round(len(index) * info.dim * 4 / 2**20, 1), "steady_refresh": summary(again)}


def bench_recall(store: Grimoire, embedder: Embedder, queries: Sequence[str], vecs: Matrix,
                 n: int, n_breakdown: int) -> dict[str, Any]:
    entries = store.counts().entries
    progress(f"  recall over {entries:,} entries: {n} queries excluding embedding, {n} including")
    cache = {q: vecs[i] for i, q in enumerate(queries)}
    stub = CachedEmbedder(embedder, cache)
    excl = Retriever(store, lambda: cast(Embedder, stub))
    full = Retriever(store, lambda: embedder)
    qs = list(queries[:n])
    cold = timed(lambda: excl.recall(RecallQuery(text=qs[0], k=K)))  # loads the VectorIndex
    full.recall(RecallQuery(text=qs[0], k=K))
    for q in qs[1:6]:
        excl.recall(RecallQuery(text=q, k=K))
        full.recall(RecallQuery(text=q, k=K))
    hits: list[int] = []
    lat_excl: list[float] = []
    for q in qs:
        t0 = time.perf_counter()
        hits.append(len(excl.recall(RecallQuery(text=q, k=K))))
        lat_excl.append(time.perf_counter() - t0)
    lat_full = [timed(partial(full.recall, RecallQuery(text=q, k=K))) for q in qs]

    # Per phase, each timed alone, in the order Retriever.recall runs them.
    phases: dict[str, list[float]] = {p: [] for p in ("index_missing_check", "vector_index_refresh", "nearest",
                                                       "fts5_recall", "rank_fields", "filter_and_rank", "get_many")}
    vias: dict[str, int] = {"vector": 0, "keyword": 0, "both": 0}
    k_cand = max(CANDIDATES, 5 * K)
    for q in qs[:n_breakdown]:
        vec = cache[q]
        phases["index_missing_check"].append(timed(excl.index_missing))
        t0 = time.perf_counter()
        index = excl.vector_index()
        phases["vector_index_refresh"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        near = index.nearest(vec, k_cand)
        phases["nearest"].append(time.perf_counter() - t0)
        via = dict.fromkeys((i for i, _ in near), "vector")
        t0 = time.perf_counter()
        try:
            kw = store.keyword_scores(q, k=k_cand)
        except UsageError:
            kw = []
        phases["fts5_recall"].append(time.perf_counter() - t0)
        for entry_id, _ in kw:
            via[entry_id] = "both" if entry_id in via else "keyword"
        for v in via.values():
            vias[v] += 1
        t0 = time.perf_counter()
        got = store.rank_fields(list(via))
        phases["rank_fields"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rq, now = RecallQuery(text=q, k=K), wall_clock_ms()
        raw: list[tuple[Any, Any]] = []
        for cand in got:  # the loop of Retriever.recall, as written there
            if not passes(cand, rq, now):
                continue
            ev = index.vector(cand.id)
            semantic = max(0.0, float(ev @ vec)) if ev is not None else 0.0
            raw.append((cand, factors_of(cand, semantic, rq.pad, now)))
        ranked = sorted(zip([c for c, _ in raw], normalise([f for _, f in raw]), strict=True),
                        key=lambda h: (-h[1].score, h[0].id))[:K]
        phases["filter_and_rank"].append(time.perf_counter() - t0)
        phases["get_many"].append(timed(partial(store.get_many, [c.id for c, _ in ranked])))
    breakdown = {p: summary(v) for p, v in phases.items()}
    mean_sum = sum(b["mean_ms"] for b in breakdown.values())
    ex = summary(lat_excl)
    return {
        "entries": entries, "queries": n, "k": K, "candidates_per_source": k_cand,
        "first_recall_ms_excl_embedding": round(cold * 1e3, 2),
        "excluding_embedding": ex, "including_embedding": summary(lat_full),
        "mean_hits": round(sum(hits) / len(hits), 2),
        "breakdown": breakdown, "breakdown_queries": min(n, n_breakdown),
        "phases_mean_sum_ms": round(mean_sum, 3), "unaccounted_mean_ms": round(ex["mean_ms"] - mean_sum, 3),
        "candidates_mean": {k: round(v / max(1, min(n, n_breakdown)), 1) for k, v in vias.items()},
    }


# -- 4.: episodes -------------------------------------------------------------------------------------


# -- 5.: RSS of a daemon-like process -------------------------------------------------------------------


def run_rss_probe(db: Path, model_dir: Path) -> dict[str, Any]:
    """`rss_probe` of MiniLM over `db` in a fresh child process (this module with --rss-probe)."""
    progress("[5/5] RSS probe in a fresh child process")
    proc = subprocess.run(bench_command("bench_recall", "--rss-probe", str(db), str(model_dir)), cwd=ROOT,
                          capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


PACKAGES = ("onnxruntime", "fastembed", "tokenizers", "lancedb", "pylance", "pyarrow", "numpy")


# -- output -------------------------------------------------------------------------------------------------


def fl(lat: dict[str, float]) -> str:
    return f"p50 {lat['p50_ms']:.2f}  p99 {lat['p99_ms']:.2f}  max {lat['max_ms']:.2f} ms  (n={lat['samples']})"


def print_report(res: dict[str, Any]) -> None:
    m = res["machine"]
    d = m["disk"]
    rows: list[tuple[str, str]] = [
        *machine_rows(m, "onnxruntime", "fastembed", "tokenizers"),
        ("lancedb / pylance / pyarrow / numpy", " / ".join(str(m["versions"][k]) for k in PACKAGES[3:])),
        ("disk", f"{d.get('device', '?')} ({d.get('fstype', '?')}) {d.get('free_gib', '?')} GiB free, "
                 f"work dir {d['path']}"),
        ("load average at start / end", f"{m['loadavg_start']} / {res['loadavg_end']}"),
        ("model load (get_embedder, first)", f"{res['model_load_s']:.2f} s"),
    ]
    q = res["query_embedding"]
    rows += [("## 1. query embedding (Embedder.embed([q]))", ""),
             (f"{q['queries']} short queries (mean {q['mean_chars']} chars)", fl(q["latency"]))]
    b = res["batch_embedding"]
    rows += [(f"## 2. batch embedding: {b['texts']:,} texts (mean {b['mean_chars']} chars) in calls of "
              f"{b['texts_per_call']}, {b['rounds']} round(s)", "")]
    for name in ("embedder", "fastembed_raw", "fastembed_raw_sorted_by_length"):
        rows.append((name, f"{b[name]['texts_per_s']:,.1f} texts/s  "
                           f"(per round {b[name]['per_round_texts_per_s']})"))
    rows += [("Embedder.embed / raw fastembed", f"{b['embedder_over_raw']:.3f}"),
             ("raw sorted by length / raw", f"{b['sorted_over_raw']:.3f}")]
    if "mean" in b.get("tokens", {}):
        t = b["tokens"]
        rows.append(("tokens per text (mean / max)", f"{t['mean']} / {t['max']}"))
        rows.append(("tokens computed / real (batches of 64): unsorted / sorted",
                     f"{t['padded_over_real_batch64']} / {t['padded_over_real_sorted']}"))
    st = res["stores"]
    rows += [("## 3. recall (Retriever.recall, k=10)", ""),
             ("vectors", st["vectors"]),
             ("remember_many (500/txn)", f"{st['remember']['entries_per_s']:,.0f} entries/s"),
             ("embed missing entries (index_missing, real)",
              f"{st['embed_real']['entries_per_s']:,.1f} entries/s ({st['embed_real']['entries']:,} in "
              f"{st['embed_real']['seconds']:.1f} s); extrapolated: 10k {st['extrapolated_s_10k']:,.0f} s, "
              f"50k {st['extrapolated_s_50k']:,.0f} s")]
    for r in st["recall"]:
        n = r["entries"]
        fr = r["first_refresh"]
        rows += [
            (f"[{n:,}] first VectorIndex refresh", f"{fr['first_refresh_ms']:.1f} ms ({fr['rows']:,} rows, "
                                                   f"{fr['matrix_mib']} MiB matrix)"),
            (f"[{n:,}] steady refresh (no new vectors; re-reads {fr['rows_reread_per_refresh']} rows)",
             fl(fr["steady_refresh"])),
            (f"[{n:,}] recall excluding query embedding", fl(r["excluding_embedding"])),
            (f"[{n:,}] recall including query embedding", fl(r["including_embedding"])),
        ]
        for phase, lat in r["breakdown"].items():
            rows.append((f"[{n:,}]   {phase}", fl(lat)))
        rows.append((f"[{n:,}]   sum of phase means / recall mean (excl. embedding)",
                     f"{r['phases_mean_sum_ms']:.2f} / {r['excluding_embedding']['mean_ms']:.2f} ms"))
    e = res["episodes"]
    rows += [("## 4. episodes (LanceDB)", ""), ("vectors", e["vectors"]),
             (f"append {e['append_small']['rows']:,} + {e['append_large']['rows']:,} rows, {EPISODE_BATCH:,}/call",
              f"{e['append_small']['rows_per_s']:,.0f} / {e['append_large']['rows_per_s']:,.0f} rows/s in append"),
             (f"ensure_index() at {e['episodes_small']:,}",
              f"built={e['ensure_index_small']['built']} in {e['ensure_index_small']['seconds']:.1f} s"),
             (f"ensure_index() at {e['episodes_large']:,} ({e['append_large']['rows']:,} rows appended since)",
              f"built={e['ensure_index_large']['built']} in {e['ensure_index_large']['seconds']:.1f} s; index state "
              f"{e['ensure_index_large']['state']}"),
             ("has_vector_index() (list_indices, once per search)", fl(e["has_vector_index_call"]))]
    if "rebuild_large" in e:
        rb = e["rebuild_large"]
        rows.append((f"fresh index (drop_index + ensure_index) at {rb['rows']:,}",
                     f"{rb['seconds']:.1f} s ({rb['partitions']} partitions)"))
    for s in e["search"]:
        rows.append((f"[{s['rows']:,}] {s['index']}: {s['variant']}",
                     f"{fl(s['latency'])}  recall@10 {s['recall_at_10']:.3f}  "
                     f"cos/exact {s['cosine_vs_exact_top10']:.3f}  sim err {s['reported_similarity_abs_error']:.3f}"))
    nc = e["null_embedding_check"]
    rows.append((f"search without where on {nc['rows']:,} rows, half without embedding",
                 f"rows without embedding returned: flat {nc['flat']['without_embedding']} of "
                 f"{nc['flat']['returned']}, IVF-PQ {nc['ivf_pq']['without_embedding']} of {nc['ivf_pq']['returned']}"))
    rows.append(("legend", "cos/exact: mean exact cosine of the rows returned / of the exact top 10; "
                           "sim err: mean |reported similarity - exact cosine|"))
    rows += [(f"[{e['episodes_large']:,}] numpy brute force, in-memory matrix", fl(e["numpy_brute_force_large"])),
             ("episode table size", f"{e['bytes'] / 2**20:,.0f} MiB")]
    rs = res["rss"]
    rows += [("## 5. daemon-like process RSS (child process)", ""),
             ("before fastembed import (numpy + daemon.grimoire)", f"{rs['rss_start_kib'] / 1024:.1f} MiB"),
             ("model loaded (get_embedder)", f"{rs['rss_model_loaded_kib'] / 1024:.1f} MiB"),
             ("after first query embedding", f"{rs['rss_after_first_query_kib'] / 1024:.1f} MiB"),
             (f"after recall loaded the {rs['vector_index_rows']:,}-entry VectorIndex",
              f"{rs['rss_vector_index_loaded_kib'] / 1024:.1f} MiB (peak {rs['vm_hwm_kib'] / 1024:.1f} MiB)")]
    rows += section_rows(res["sections"], res["total_seconds"])
    print_table(rows, cap=70)


# -- main -----------------------------------------------------------------------------------------------------


def run(p: Params, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    sections = Sections()
    res: dict[str, Any] = {"machine": machine_info(workdir, PACKAGES),
                           "params": {k: getattr(p, k) for k in p.__slots__}}
    gen = Generator(p.seed)
    rng = np.random.default_rng(p.seed)
    model_dir = workdir / "embedder"
    progress(f"loading the model into {model_dir}")
    t0 = time.perf_counter()
    embedder = get_embedder(model_dir, MINILM)
    res["model_load_s"] = round(time.perf_counter() - t0, 2)

    queries = short_queries(gen, p.query_count)
    with sections.section("1. query embedding"):
        res["query_embedding"], qvecs = bench_query_embedding(embedder, queries)
    texts = defi_texts(gen, p.batch_texts)
    with sections.section("2. batch embedding"):
        res["batch_embedding"], text_vecs = bench_batch_embedding(embedder, model_dir, texts, p.batch_rounds)

    progress(f"[3/5] recall: building {p.entries_small:,} then {p.entries_large:,} entries")
    db = workdir / "grimoire.db"
    recalls: list[dict[str, Any]] = []
    with Grimoire.open(db, create=True) as store, sections.section("3. recall"):
        remember = add_entries(store, gen, p.entries_small)
        embed = embed_real(Retriever(store, lambda: embedder), min(p.real_embed, p.entries_small))
        real_rows = store.connection.execute("SELECT embedding FROM entries WHERE embedding IS NOT NULL").fetchall()
        pool = np.concatenate([text_vecs, np.stack([np.frombuffer(r[0], np.float32) for r in real_rows])])
        synth = [write_synthetic(store, embedder.info, pool, rng)]
        for size in (p.entries_small, p.entries_large):
            if size > p.entries_small:
                more = add_entries(store, gen, size - p.entries_small)
                remember["entries"] += more["entries"]
                remember["seconds"] += more["seconds"]
                synth.append(write_synthetic(store, embedder.info, pool, rng))
            refresh = first_refresh(store, embedder.info)
            r = bench_recall(store, embedder, queries, qvecs, p.recall_queries, p.breakdown_queries)
            recalls.append({**r, "first_refresh": refresh, "vector_report": vector_report(store, embedder.info)})
        remember["entries_per_s"] = round(remember["entries"] / remember["seconds"], 1)
        store.checkpoint()
    rate = embed["entries_per_s"]
    res["stores"] = {
        "vectors": (f"{embed['entries']:,} entries embedded by the real model (index_missing); the other "
                    f"{sum(s['entries'] for s in synth):,} got perturbed real embeddings (pool of {len(pool):,}, "
                    f"noise sigma {NOISE_SIGMA}) via write_vectors, {VECTOR_BATCH} per call"),
        "remember": remember, "embed_real": embed, "synthetic": synth,
        "extrapolated_s_10k": round(10_000 / rate, 1), "extrapolated_s_50k": round(50_000 / rate, 1),
        "recall": recalls, "db_bytes": dir_size(db),
    }
    with sections.section("5. RSS probe"):
        res["rss"] = run_rss_probe(db, model_dir)
    summaries = [gen.sentence(0) for _ in range(5_000)]
    with sections.section("4. episodes"):
        res["episodes"] = bench_episodes(workdir, pool, qvecs, p, rng, summaries)
    return finish(res, started, sections)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="a small smoke run (about a minute)")
    add_common_args(ap, "directory for the files (kept); default: temporary")
    ap.add_argument("--rebuild-1m", action="store_true",
                    help="also build a fresh ANN index at the large episode count (+2-3 min on 2 cores)")
    ap.add_argument("--rss-probe", nargs=2, metavar=("DB", "MODEL_DIR"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench (or, with --rss-probe, the RSS probe of a child); the exit code is 0, or 2
    when `--out` names a directory that is not empty."""
    args = parse_args(argv)
    if args.rss_probe:
        print(json.dumps(rss_probe(Path(args.rss_probe[0]), Path(args.rss_probe[1]), MINILM)))
        return 0
    return main_in_workdir("recall", args, lambda a, path: run(make_params(a), path), print_report,
                           "clade-recall-", clash=not_empty)


if __name__ == "__main__":
    raise SystemExit(main())
