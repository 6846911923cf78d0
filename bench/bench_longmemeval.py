"""Recall on LongMemEval-S through real daemons, one fresh daemon per question, with baselines.

    .venv/bin/python -m bench.bench_longmemeval [--path DIR] [--questions N] [--no-daemon]

Each question (bench/longmemeval.py) is its own golem: a fresh data directory whose store holds
the question's ~240 user turns (event time: the session's date), the turns' vectors computed
once by the bench with the configured model (as bench_locomo does, so the daemon need not embed
them again; cached under /tmp by text), then `clade run` and one `POST /v1/memory/search` of
the question (top_k 50), its latency as the client sees it. (One search is a few clock ticks of
CPU: the daemon's CPU per search is bench_recall_daemon's figure, over hundreds of searches.)

In the same run and over the same texts: raw cosine with the same model, BM25 (FTS5 porter,
the question's words minus stop words OR-ed) and their RRF (k = 60) over the whole haystack
(bench_locomo's baselines), and `in-process`: `Retriever.recall` on a copy of the store (the
daemon's ranking without HTTP; what `--no-daemon` keeps).

Figures per arm, overall and per question type: turn any@1/@5/@10 and recall@5/@10 (the
evidence: the user turns marked `has_answer`), session any@k and recall@k over the first k
distinct sessions of the turn ranking (the evidence: `answer_session_ids`), with 95 %
bootstrap intervals over questions. Prints the tables, then the JSON result line
(bench.common).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_locomo import IDENTITY, bm25_rankings, build_store, in_process, rrf, through_daemon
from bench.common import emit, machine_info, out, progress, summary, workdir
from bench.fusion_cv.cv import bootstrap
from bench.fusion_cv.features import embed_cached
from bench.longmemeval import DEFAULT_DIR, TYPES, load, session_metrics, turn_of
from daemon.embedding.embedder import DEFAULT_MODEL, get_embedder
from daemon.grimoire.fusion import LEXICAL_WEIGHT

__all__ = ["IDENTITY", "main"]

TOP = 50  # turns asked of each arm (session metrics need distinct sessions past the tenth turn)
TURN = ("any@1", "any@5", "any@10", "recall@5", "recall@10")
SESSION = ("session_any@1", "session_recall@5", "session_recall@10")


def turn_metrics(evidence: frozenset[str], top: Sequence[str]) -> dict[str, float]:
    return {"any@1": float(bool(evidence & set(top[:1]))), "any@5": float(bool(evidence & set(top[:5]))),
            "any@10": float(bool(evidence & set(top[:10]))),
            "recall@5": len(evidence & set(top[:5])) / len(evidence),
            "recall@10": len(evidence & set(top[:10])) / len(evidence)}


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loaded = load(args.path, args.questions)
    embedder = get_embedder(root / "embedder", args.model)
    rows: dict[str, list[dict[str, float]]] = {}
    types: list[str] = []
    latencies: list[float] = []
    for n, corpus in enumerate(loaded.corpora, 1):
        q = corpus.questions[0]
        docs = embed_cached(embedder, [d.content for d in corpus.docs])
        qv = embed_cached(embedder, [q.text])[0]
        rankings: dict[str, list[str]] = {"cosine": [corpus.docs[i].key for i in np.argsort(-(docs @ qv),
                                                                                           kind="stable")[:100]]}
        rankings["bm25"] = bm25_rankings(corpus, 100)[0]
        rankings["rrf"] = rrf((rankings["cosine"], rankings["bm25"]), TOP)
        db = root / f"{corpus.name}.db"
        key_of = build_store(corpus, db, root / "embedder", args.model, docs)
        if not args.no_daemon:
            found, lat = through_daemon(corpus, db, key_of, root, args.model, top_k=TOP)
            rankings["clade"] = found[0]
            latencies += lat
        rankings["in-process"] = in_process(corpus, db, key_of, root / "embedder", args.model,
                                            [LEXICAL_WEIGHT], k=TOP)[f"w={LEXICAL_WEIGHT:g}"][0]
        db.unlink(missing_ok=True)
        types.append(TYPES[q.category - 1])
        sessions = loaded.answer_sessions[corpus.name]
        evidence = frozenset(turn_of(k) for k in q.evidence)
        for arm, ranking in rankings.items():
            top = list(dict.fromkeys(turn_of(k) for k in ranking))  # a long turn's pieces count once
            rows.setdefault(arm, []).append({**turn_metrics(evidence, top), **session_metrics(top, sessions)})
        if n % 10 == 0:
            progress(f"{n}/{len(loaded.corpora)} questions")
    res: dict[str, Any] = {"questions": len(loaded.corpora), "skipped": loaded.skipped,
                           "turns": sum(len(c.docs) for c in loaded.corpora), "arms": {}}
    for arm, per in rows.items():
        table: dict[str, Any] = {}
        for group in ("all", *TYPES):
            picked = [r for r, t in zip(per, types, strict=True) if group in ("all", t)]
            if not picked:
                continue
            mat = np.array([[r[m] for m in (*TURN, *SESSION)] for r in picked])
            table[group] = {m: list(bootstrap(mat, i)) for i, m in enumerate((*TURN, *SESSION))}
            table[group]["n"] = len(picked)
        res["arms"][arm] = table
    if latencies:
        res["search_latency"] = summary(latencies)
    return res


def print_tables(res: dict[str, Any]) -> None:
    cols = (*TURN, *SESSION)
    out(f"## LongMemEval-S: {res['questions']} questions, {res['turns']} user turns; left out: {res['skipped']}")
    out(f"{'arm':11s} " + " ".join(f"{c.replace('session_', 's.'):>20s}" for c in cols))
    for arm, table in res["arms"].items():
        a = table["all"]
        out(f"{arm:11s} " + " ".join(f"{a[c][0]:.3f} [{a[c][1]:.2f},{a[c][2]:.2f}]" for c in cols))
    out("## per question type: turn any@1 / turn recall@10 / session recall@5")
    groups = [g for g in TYPES if g in next(iter(res["arms"].values()))]
    out(f"{'arm':11s} " + " ".join(f"{g[:22]:>24s}" for g in groups))
    for arm, table in res["arms"].items():
        out(f"{arm:11s} " + " ".join(
            f"{table[g]['any@1'][0]:.2f}/{table[g]['recall@10'][0]:.2f}/{table[g]['session_recall@5'][0]:.2f}"
            f" n={table[g]['n']:<3d}".rjust(24) for g in groups))
    if "search_latency" in res:
        out(f"## through the daemon: search latency p50 {res['search_latency']['p50_ms']} ms, "
            f"p99 {res['search_latency']['p99_ms']} ms (load {os.getloadavg()[0]:.2f})")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--path", type=Path, default=DEFAULT_DIR.resolve(),
                    help="a directory of LongMemEval-S question files (.json or .json.gz)")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--questions", type=int, default=None, help="only the first N questions (by file name)")
    ap.add_argument("--no-daemon", action="store_true", help="baselines and the in-process ranking only")
    args = ap.parse_args(argv)
    if not args.path.is_dir():
        ap.error(f"no LongMemEval directory at {args.path}: give it with --path")
    started = time.perf_counter()
    machine = machine_info(None, ("onnxruntime", "fastembed"))
    with workdir(None, "clade-longmemeval-") as root:
        res = run(args, root)
    print_tables(res)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("longmemeval", {"machine": machine, "params": {"path": str(args.path), "model": args.model,
                                                        "questions": args.questions, "daemon": not args.no_daemon,
                                                        "top_k": TOP},
                         "total_seconds": round(time.perf_counter() - started, 1), **res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
