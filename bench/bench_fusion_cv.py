"""Fusion chosen by cross-validation: held-out recall of every arm on every corpus we have.

    .venv/bin/python -m bench.bench_fusion_cv [--path locomo10-dev.json] [--chat-histories 10]

Corpora (bench/fusion_cv/corpora.py): LoCoMo conversations 1-5 (shared/, never copied here),
the three keyword-disjoint corpora (tests/helpers/semantic_corpus*.py) and synthetic
multi-session chat histories (bench/fusion_cv/chat.py). Each question's candidates and their
evidence are taken once through the real retrieval path with the bundled MiniLM
(bench/fusion_cv/features.py; embeddings and features cached under /tmp/clade-fusion-cv).

Arms: raw cosine (the model alone, whole corpus), BM25 (FTS5), RRF of the two (k = 60), the
step-15 fusion (w = 0.4, shipped until step 20), and each fusion family of
bench/fusion_cv/arms.py with its parameters chosen by leave-one-corpus-out cross-validation
(bench/fusion_cv/cv.py): every figure of a family is **held out**, from parameters fitted
without the corpus it is measured on. `shipped` is the daemon's `fusion.relevance` as it
now stands (its constants were fitted on all corpora: an in-sample figure, printed beside
the held-out ones for comparison). Intervals: 95 % bootstrap over questions (seeded).

Prints the tables, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.bench_locomo import DEFAULT_PATH
from bench.common import emit, machine_info, out, progress
from bench.fusion_cv import arms, cv
from bench.fusion_cv.corpora import all_corpora
from bench.fusion_cv.features import corpus_features
from bench.longmemeval import DEFAULT_DIR as LME_DIR

FIXED_ARMS = ("cosine", "bm25", "rrf", "w=0.4 (step 15)", "w=0 (cosine+factors)")
GROUPS = ("locomo", "semantic", "heldout", "operator", "chat", "longmemeval")


def _group(fold: cv.Fold) -> str:
    return fold.kind if fold.kind != "disjoint" else fold.name


def run(args: argparse.Namespace) -> dict[str, Any]:
    folds = []
    lme = None if args.no_longmemeval else args.longmemeval
    for corpus in all_corpora(args.path, chat_histories=args.chat_histories, longmemeval_dir=lme,
                              longmemeval_limit=args.longmemeval_questions):
        t0 = time.perf_counter()
        folds.append(cv.Fold(corpus.name, corpus.kind, corpus_features(corpus)))
        progress(f"{corpus.name}: {len(corpus.docs)} entries, {len(corpus.questions)} questions "
                 f"({time.perf_counter() - t0:.1f} s)")
    rows: dict[str, dict[str, np.ndarray]] = {}  # arm -> fold -> per-question metrics
    fixed: dict[str, Any] = {"cosine": "cosine", "bm25": "bm25", "rrf": "rrf",
                             "w=0.4 (step 15)": arms.fixed(0.4), "w=0 (cosine+factors)": arms.fixed(0.0),
                             "shipped (in-sample)": arms.shipped}
    for name, arm in fixed.items():
        rows[name] = {f.name: cv.ranked(f, arm) for f in folds}
    cosine_rows = rows["cosine"]
    objective = {arm: cv.objective(per, cosine_rows, folds) for arm, per in rows.items()}
    chosen: dict[str, Any] = {}
    for family in args.families:
        res = cv.crossvalidate(folds, family, progress, leave=args.leave)
        rows[f"{family} (CV)"] = res["heldout"]
        rows[f"{family} (fit)"] = res["fit_rows"]
        chosen[family] = {"per_fold": res["chosen"], "fit": res["fit"]}
    objective.update({arm: cv.objective(per, cosine_rows, folds) for arm, per in rows.items() if arm not in objective})
    table: dict[str, dict[str, Any]] = {}
    for arm, per in rows.items():
        table[arm] = {}
        for group in GROUPS:
            members = [f.name for f in folds if _group(f) == group]
            if not members:
                continue
            pooled = np.concatenate([per[m] for m in members])
            table[arm][group] = {m: cv.bootstrap(pooled, i) for i, m in enumerate(cv.METRICS)}
            table[arm][group]["n"] = len(pooled)
            if group == "locomo":
                for cat in (1, 2, 3, 4):
                    qs = [i for m in members for i, q in enumerate(
                        next(f for f in folds if f.name == m).questions) if q.category == cat]
                    cat_rows = np.concatenate([per[m][[i for i, q in enumerate(
                        next(f for f in folds if f.name == m).questions) if q.category == cat]] for m in members])
                    table[arm][group][f"cat{cat}_any@5"] = float(cat_rows[:, 1].mean()) if len(qs) else None
            if len(members) > 1 and group != "longmemeval":  # spread over folds
                table[arm][group]["fold_any@5"] = [float(per[m][:, 1].mean()) for m in members]
    return {"table": table, "chosen": chosen, "objective": objective,
            "folds": {f.name: {"kind": f.kind, "questions": len(f.questions)} for f in folds}}


def _fmt(v: tuple[float, float, float]) -> str:
    return f"{v[0]:.3f} [{v[1]:.2f},{v[2]:.2f}]"


def print_tables(res: dict[str, Any]) -> None:
    table = res["table"]
    for group, cols in (("locomo", ("any@1", "any@5", "recall@10")), ("semantic", ("any@1", "recall@5")),
                        ("heldout", ("any@1", "recall@5")), ("operator", ("any@1", "recall@5")),
                        ("chat", ("any@1", "any@5", "recall@10")),
                        ("longmemeval", ("any@1", "any@5", "recall@10"))):
        if group not in next(iter(table.values())):
            continue
        n = next(iter(table.values()))[group]["n"]
        out(f"## {group} ({n} questions; held-out for the (CV) arms; 95 % bootstrap over questions)")
        extra = " cat1/2/3/4 any@5" if group == "locomo" else (
            " ×cosine r@5" if group not in ("chat", "longmemeval") else "")
        out(f"{'arm':24s} " + " ".join(f"{c:>20s}" for c in cols) + extra)
        for arm, groups in table.items():
            g = groups[group]
            line = f"{arm:24s} " + " ".join(f"{_fmt(g[c]):>20s}" for c in cols)
            if group == "locomo":
                line += " " + "/".join(f"{g[f'cat{c}_any@5']:.3f}" for c in (1, 2, 3, 4))
            elif group not in ("chat", "longmemeval"):
                line += f" {g['recall@5'][0] / max(table['cosine'][group]['recall@5'][0], 1e-9):.3f}"
            out(line)
    out("## the cross-validation objective over all corpora (bench/fusion_cv/cv.py; (CV) arms: held-out)")
    out("  ".join(f"{arm} {v:.3f}" for arm, v in res["objective"].items()))
    out("## parameters chosen (per held-out benchmark or corpus; fit = on every corpus)")
    for family, ch in res["chosen"].items():
        settings: dict[str, list[str]] = {}
        for fold, params in ch["per_fold"].items():
            settings.setdefault(repr(params), []).append(fold)
        out(f"{family}: fit {ch['fit']}; folds: " + "; ".join(f"{p} x{len(fs)}" for p, fs in settings.items()))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--path", type=lambda s: __import__("pathlib").Path(s), default=DEFAULT_PATH.resolve())
    ap.add_argument("--chat-histories", type=int, default=12)
    ap.add_argument("--families", type=lambda s: s.split(","), default=[*arms.FAMILIES, "learned"])
    ap.add_argument("--longmemeval", type=lambda s: __import__("pathlib").Path(s), default=LME_DIR,
                    help="a directory of LongMemEval-S question files (default: the development split)")
    ap.add_argument("--longmemeval-questions", type=int, default=None, help="only the first N of them")
    ap.add_argument("--no-longmemeval", action="store_true")
    ap.add_argument("--leave", choices=("benchmark", "corpus"), default="benchmark",
                    help="what cross-validation leaves out together (default: a whole benchmark)")
    args = ap.parse_args(argv)
    if not args.path.is_file():
        ap.error(f"no LoCoMo file at {args.path}: give its path with --path")
    started = time.perf_counter()
    machine = machine_info(None, ("onnxruntime", "fastembed"))
    res = run(args)
    lme = None if args.no_longmemeval else str(args.longmemeval)
    print_tables(res)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("fusion_cv", {"machine": machine, "params": {"path": str(args.path), "chat_histories": args.chat_histories,
                                                      "families": args.families, "leave": args.leave,
                                                      "longmemeval": lme,
                                                      "longmemeval_questions": args.longmemeval_questions},
                       "total_seconds": round(time.perf_counter() - started, 1), **res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
