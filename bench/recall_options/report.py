"""The tables bench_recall_options prints: quality, cost, recall latency, sections."""

from __future__ import annotations

import json
from typing import Any

from bench.common import machine_rows, print_rows
from bench.common.report import section_rows
from bench.common.vectors import K
from bench.recall_options.options import LABEL, LATENCY_OPTIONS, OLD_QUERIES, REAL, SLUG, fl, mib


def print_report(res: dict[str, Any]) -> None:
    m = res["machine"]
    print_rows([
        *machine_rows(m, "onnxruntime", "fastembed", "tokenizers", "numpy"),
        ("load average at start / end", f"{m['loadavg_start']} / {res['loadavg_end']}"),
    ], cap=64)
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
    print_rows(rows, cap=64)

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
    rows += section_rows(res["sections"], res["total_seconds"])
    print_rows(rows, cap=64)
    print()

