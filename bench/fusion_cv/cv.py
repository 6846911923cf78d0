"""Leave-one-benchmark-out cross-validation of the fusion families, and the held-out tables.

Every corpus is a fold (a LoCoMo conversation, a keyword-disjoint corpus, a chat history, a
LongMemEval question), and folds are left out a whole **benchmark** at a time (`leave="benchmark"`,
the default): each family's parameters are chosen on the *other* benchmarks (`objective`) and
every corpus of the held-out benchmark is ranked with them. A choice fitted on LoCoMo and the
chat sets is judged on LongMemEval, and so on: what holds only on the data it was chosen on
shows up. `leave="corpus"` is step 20's leave-one-corpus-out (a LoCoMo conversation judged with
parameters fitted on the other four): kept for comparison.

The objective, over the training corpora, is the mean of one score per kind present:
LoCoMo (any@5 + recall@10) / 2 pooled over questions; chat (any@1 + any@5) / 2; LongMemEval
(any@1 + recall@10) / 2; keyword-disjoint the mean over its corpora of min(recall@5 / raw-cosine
recall@5, 1) minus 5 × the shortfall below 0.98 of each (the goal is a floor, not a trade).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import arms, learned
from .features import QueryFeatures

__all__ = ["METRICS", "Fold", "bootstrap", "crossvalidate", "metrics", "objective"]

METRICS = ("any@1", "any@5", "any@10", "recall@5", "recall@10")
FLOOR = 0.98


@dataclass(frozen=True)
class Fold:
    name: str
    kind: str  # locomo, disjoint, chat, longmemeval
    questions: list[QueryFeatures]


def metrics(q: QueryFeatures, top: Sequence[str]) -> np.ndarray:
    """The METRICS of one question's ranking."""
    ev = q.evidence
    return np.array([float(bool(ev & set(top[:1]))), float(bool(ev & set(top[:5]))), float(bool(ev & set(top[:10]))),
                     len(ev & set(top[:5])) / len(ev), len(ev & set(top[:10])) / len(ev)])


def ranked(fold: Fold, arm: str | arms.Relevance) -> np.ndarray:
    """Per-question METRICS (questions × 5) of `arm` ("cosine", "bm25", "rrf" or a relevance)."""
    rows = []
    for q in fold.questions:
        if arm == "cosine":
            top = list(q.cosine_top[:10])
        elif arm == "bm25":
            top = list(q.bm25_top[:10])
        elif arm == "rrf":
            top = arms.rrf(q)
        else:
            assert callable(arm)
            top = arms.through_scoring(q, arm(q))
        rows.append(metrics(q, top))
    return np.array(rows)


def objective(per_fold: dict[str, np.ndarray], cosine: dict[str, np.ndarray], folds: Sequence[Fold]) -> float:
    """The training score of one parameter setting (module docstring)."""
    parts = []
    loc = [per_fold[f.name] for f in folds if f.kind == "locomo"]
    if loc:
        m = np.concatenate(loc).mean(axis=0)
        parts.append((m[1] + m[4]) / 2)
    chat = [per_fold[f.name] for f in folds if f.kind == "chat"]
    if chat:
        m = np.concatenate(chat).mean(axis=0)
        parts.append((m[0] + m[1]) / 2)
    lme = [per_fold[f.name] for f in folds if f.kind == "longmemeval"]
    if lme:
        m = np.concatenate(lme).mean(axis=0)
        parts.append((m[0] + m[4]) / 2)
    dis = [f for f in folds if f.kind == "disjoint"]
    if dis:
        ratios = [per_fold[f.name][:, 3].mean() / max(cosine[f.name][:, 3].mean(), 1e-9) for f in dis]
        parts.append(float(np.mean([min(r, 1.0) for r in ratios]) - 5 * sum(max(0.0, FLOOR - r) for r in ratios)))
    return float(np.mean(parts))


def held_out_groups(folds: Sequence[Fold], leave: str) -> dict[str, list[Fold]]:
    """What is left out together: a whole benchmark (`leave="benchmark"`) or one corpus."""
    groups: dict[str, list[Fold]] = {}
    for f in folds:
        groups.setdefault(f.kind if leave == "benchmark" else f.name, []).append(f)
    return groups


def crossvalidate(folds: Sequence[Fold], family: str, progress: Callable[[str], None] = lambda _: None,
                  *, leave: str = "benchmark") -> dict[str, Any]:
    """Leave-one-benchmark-out (or one corpus: `leave="corpus"`) over `folds` for one family:
    {"heldout": {fold: per-question METRICS}, "chosen": {held-out group: params}, "fit": params
    chosen on every fold, "fit_rows"}."""
    groups = held_out_groups(folds, leave)
    if family == "learned":
        return _learned(folds, groups, progress)
    cosine = {f.name: ranked(f, "cosine") for f in folds}
    table: list[tuple[dict[str, Any], dict[str, np.ndarray]]] = []
    for params, rel in arms.grid(family):
        table.append((params, {f.name: ranked(f, rel) for f in folds}))
    progress(f"  {family}: {len(table)} settings ranked")
    heldout: dict[str, np.ndarray] = {}
    chosen: dict[str, dict[str, Any]] = {}
    for group, members in groups.items():
        left = {f.name for f in members}
        train = [g for g in folds if g.name not in left]
        best = max(table, key=lambda pt: objective(pt[1], cosine, train))
        chosen[group] = best[0]
        for f in members:
            heldout[f.name] = best[1][f.name]
    fit = max(table, key=lambda pt: objective(pt[1], cosine, folds))
    return {"heldout": heldout, "chosen": chosen, "fit": fit[0], "fit_rows": fit[1]}


def _learned(folds: Sequence[Fold], groups: dict[str, list[Fold]], progress: Callable[[str], None]) -> dict[str, Any]:
    heldout: dict[str, np.ndarray] = {}
    chosen: dict[str, dict[str, Any]] = {}
    for group, members in groups.items():
        left = {f.name for f in members}
        beta = learned.fit([(g.kind, q) for g in folds if g.name not in left for q in g.questions])
        chosen[group] = {n: round(float(b / beta[0]), 3) for n, b in zip(learned.NAMES, beta, strict=True)}
        for f in members:
            heldout[f.name] = ranked(f, learned.relevance(beta))
    beta = learned.fit([(g.kind, q) for g in folds for q in g.questions])
    progress(f"  learned: fitted {len(groups) + 1} times")
    return {"heldout": heldout, "chosen": chosen,
            "fit": {n: round(float(b / beta[0]), 4) for n, b in zip(learned.NAMES, beta, strict=True)},
            "fit_rows": {f.name: ranked(f, learned.relevance(beta)) for f in folds}}


def bootstrap(rows: np.ndarray, column: int, *, rounds: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of one METRICS column over questions and its 95 % bootstrap interval (seeded)."""
    values = rows[:, column]
    if len(values) < 2:
        return float(values.mean()), float(values.mean()), float(values.mean())
    idx = np.random.default_rng(seed).integers(0, len(values), (rounds, len(values)))
    means = np.sort(values[idx].mean(axis=1))
    return float(values.mean()), float(means[int(0.025 * rounds)]), float(means[int(0.975 * rounds) - 1])
