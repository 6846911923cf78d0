"""The arms: rankings of one question's candidates, pure arithmetic over `QueryFeatures`.

Fixed arms: raw cosine and BM25 over the whole corpus, their RRF (k = 60), and the daemon's
ranking with a given relevance (`through_scoring`: the relevance goes through
`scoring.normalise` and `scoring.rank` with the candidate's side factors, ties by entry id, as
`Retriever.recall` does). Families with parameters, each a relevance in cosine units:

- `fixed`: cosine + w · coverage (the step-15 fusion; w = 0.4 shipped);
- `power`: cosine + w · coverage^p (a partial match counts less than its share);
- `gated`: cosine + w · coverage · gate, gate = clip(1 − (best cosine − cosine) / delta, 0, 1):
  words lift only candidates whose meaning is already near the best (agreement of the lists);
- `adaptive`: cosine + w · coverage · a(q), a(q) = clip((max coverage − c0) / (1 − c0), 0, 1):
  the weight follows how much of the query's IDF mass the best lexical candidate holds.
- `held`: as `power`, with coverage of the IDF mass the store holds (`held_coverage`);
- `mix`: cosine + a · coverage^pa + b · held coverage^pb (both kinds of coverage);
- `soft`: cosine + w · coverage · (1 − cosine)^p: words count less for a candidate whose
  meaning already matches (MiniLM's cosine already rises with shared words);
- `topn`: cosine + w · coverage^p for the n nearest candidates by cosine only;
- `shipped`: the daemon's `fusion.relevance` as the code now stands.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from daemon.grimoire import fusion, scoring

from .features import QueryFeatures

__all__ = ["FAMILIES", "Relevance", "grid", "rrf", "through_scoring"]

Relevance = Callable[[QueryFeatures], np.ndarray]
RRF_K = 60


def through_scoring(q: QueryFeatures, relevance: np.ndarray, k: int = 10) -> list[str]:
    """The top k keys as `Retriever.recall` ranks candidates of this relevance."""
    if not len(q.keys):
        return []
    best = float(relevance.max())
    spread = max(best - float(relevance.min()), scoring.SEMANTIC_FLOOR, 1e-9)
    sem = 1.0 - (best - relevance) / spread
    score = (0.40 * sem + 0.20 * q.temporal + 0.25 * q.importance + 0.15 * q.pad) * q.source
    order = np.argsort(-score, kind="stable")[:k]  # keys are in entry-id order: ties by id
    return [q.keys[i] for i in order]


def rrf(q: QueryFeatures, k: int = 10) -> list[str]:
    score: dict[str, float] = {}
    for ranking in (q.cosine_top, q.bm25_top):
        for i, key in enumerate(ranking):
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + i + 1)
    return sorted(score, key=lambda key: (-score[key], key))[:k]


def _cos(q: QueryFeatures) -> np.ndarray:
    out: np.ndarray = np.maximum(q.cosine, 0.0)
    return out


def fixed(w: float) -> Relevance:
    return lambda q: _cos(q) + w * q.coverage


def power(w: float, p: float) -> Relevance:
    return lambda q: _cos(q) + w * q.coverage ** p


def gated(w: float, delta: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        c = _cos(q)
        gate = np.clip(1.0 - (c.max() - c) / delta, 0.0, 1.0) if len(c) else c
        out: np.ndarray = c + w * q.coverage * gate
        return out
    return rel


def adaptive(w: float, c0: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        top = float(q.coverage.max()) if len(q.coverage) else 0.0
        return _cos(q) + w * q.coverage * min(max((top - c0) / (1.0 - c0), 0.0), 1.0)
    return rel


def soft(w: float, p: float) -> Relevance:
    return lambda q: _cos(q) + w * q.coverage * (1.0 - _cos(q)) ** p


def topn(w: float, n: int, p: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        c = _cos(q)
        ranks = np.empty(len(c))
        ranks[np.argsort(-c, kind="stable")] = np.arange(len(c))
        return c + w * q.coverage ** p * (ranks < n)
    return rel


def held_coverage(q: QueryFeatures) -> np.ndarray:
    """`fusion.held_coverage`: coverage of the IDF mass some candidate holds (a query stem no
    candidate has cannot tell them apart, yet its IDF, the highest, dilutes every coverage)."""
    return np.array([fusion.held_coverage(float(v), q.reach) for v in q.coverage])


def held(w: float, p: float) -> Relevance:
    return lambda q: _cos(q) + w * held_coverage(q) ** p


def mix(a: float, b: float, pa: float, pb: float) -> Relevance:
    return lambda q: _cos(q) + a * q.coverage ** pa + b * held_coverage(q) ** pb


def shipped(q: QueryFeatures) -> np.ndarray:
    """The daemon's own fusion, as the code now stands."""
    return np.array([fusion.relevance(float(c), float(v), q.reach) for c, v in zip(q.cosine, q.coverage, strict=True)])


W = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)
FAMILIES: dict[str, tuple[Callable[..., Relevance], dict[str, Sequence[float]]]] = {
    "fixed": (fixed, {"w": (0.0, *W)}),
    "power": (power, {"w": (*W, 0.35, 0.45), "p": (1.25, 1.5, 1.75, 2.0, 3.0, 4.0)}),
    "gated": (gated, {"w": W, "delta": (0.05, 0.1, 0.15, 0.2, 0.3)}),
    "adaptive": (adaptive, {"w": W, "c0": (0.2, 0.4, 0.6, 0.8)}),
    "held": (held, {"w": (*W, 0.35, 0.45), "p": (1.0, 1.25, 1.5, 1.75, 2.0, 3.0, 4.0)}),
    "mix": (mix, {"a": (0.0, 0.1, 0.2, 0.3, 0.45), "b": (0.0, 0.1, 0.2, 0.3, 0.45, 0.6), "pa": (1.0, 1.5),
                  "pb": (2.0, 3.0)}),
    "soft": (soft, {"w": W, "p": (1.0, 2.0, 3.0)}),
    "topn": (topn, {"w": W, "n": (5, 10, 20, 40), "p": (1.0, 1.5, 2.0)}),
}


def grid(family: str) -> Iterator[tuple[dict[str, Any], Relevance]]:
    """(params, relevance) for every grid point of `family`."""
    make, space = FAMILIES[family]
    names = list(space)
    for values in itertools.product(*(space[n] for n in names)):
        params = dict(zip(names, values, strict=True))
        yield params, make(**params)
