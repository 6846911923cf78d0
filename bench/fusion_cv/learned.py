"""A small learned ranker: pairwise logistic regression over a few candidate features.

Features of a candidate within its query (`features`): clipped cosine, lexical coverage,
coverage², coverage × gate (gate: 1 when the candidate's cosine is the query's best, falling
linearly to 0 at 0.1 below it), coverage × the query's best coverage, and cosine minus the
best cosine. Pairs: each evidence candidate against the query's 30 best other candidates by
the step-15 fusion; a pair's label says which one is the evidence. Every kind of corpus weighs
the same in the fit (its pairs' weights sum to 1), L2-penalised (`L2`), Newton's method.
The relevance is then cosine + Σ (β_j / β_cosine) · feature_j: cosine units, as scoring needs.
(Within one query cosine and cosine minus the best cosine differ by a constant, so pairs
cannot separate their coefficients: only their sum means anything.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arms import Relevance
from .features import QueryFeatures

__all__ = ["NAMES", "features", "fit", "relevance"]

NAMES = ("cosine", "coverage", "coverage2", "coverage_gated", "coverage_x_best", "cosine_gap")
GATE = 0.1
L2 = 1e-3
NEGATIVES = 30


def features(q: QueryFeatures) -> np.ndarray:
    """candidates × len(NAMES)."""
    c = np.maximum(q.cosine, 0.0)
    v = q.coverage
    if not len(c):
        return np.zeros((0, len(NAMES)))
    gate = np.clip(1.0 - (c.max() - c) / GATE, 0.0, 1.0)
    return np.stack([c, v, v ** 2, v * gate, v * float(v.max()), c - c.max()], axis=1)


def fit(questions: Sequence[tuple[str, QueryFeatures]]) -> np.ndarray:
    """Coefficients (len(NAMES)) from (kind, question) pairs."""
    diffs: list[np.ndarray] = []
    kinds: list[str] = []
    for kind, q in questions:
        x = features(q)
        pos = [i for i, k in enumerate(q.keys) if k in q.evidence]
        if not pos:
            continue
        old = np.maximum(q.cosine, 0.0) + 0.4 * q.coverage
        neg = [i for i in np.argsort(-old, kind="stable") if q.keys[i] not in q.evidence][:NEGATIVES]
        for p in pos:
            for n in neg:
                diffs.append(x[p] - x[n])
                kinds.append(kind)
    X = np.array(diffs)
    kind_arr = np.array(kinds)
    w = np.zeros(len(X))
    for kind in set(kinds):
        mask = kind_arr == kind
        w[mask] = 1.0 / mask.sum()
    # symmetric pairs: label 1 for (pos - neg), fit logistic without intercept
    beta = np.zeros(X.shape[1])
    for _ in range(50):
        z = X @ beta
        prob = 1.0 / (1.0 + np.exp(-z))
        grad = X.T @ (w * (prob - 1.0)) + L2 * beta
        hess = (X * (w * prob * (1 - prob))[:, None]).T @ X + L2 * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def relevance(beta: np.ndarray) -> Relevance:
    scale = beta[0] if beta[0] > 1e-6 else 1.0

    def rel(q: QueryFeatures) -> np.ndarray:
        x = features(q)
        return x @ (beta / scale) if len(x) else np.zeros(0)
    return rel

