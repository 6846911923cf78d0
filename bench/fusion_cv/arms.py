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
- `lenmix`: as `mix`, with the first term's coverage length-normalised and saturated as BM25
  weighs a word (`bm25_coverage`: one occurrence in an entry of the candidates' mean length
  counts 1, more occurrences up to k1 + 1, a long entry less);
- `bm25n`: cosine + w · (BM25 / the best candidate's BM25)^p · reach (score fusion with
  FTS5's own BM25, damped when no candidate holds much of the query);
- `session`: the shipped relevance plus λ × the best relevance of another candidate of the
  same event time (a session's date on the chat benchmarks): session context;
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


def bm25_coverage(q: QueryFeatures, b: float, k1: float = 1.2) -> np.ndarray:
    """Per candidate: Σ idf(s) · sat(tf_s) / Σ idf(s) over the query's stems, sat(tf) = tf · (k1 + 1) /
    (tf + k1 · (1 − b + b · len / mean len)): BM25's term weight, 1 for one occurrence at the
    candidates' mean length."""
    total = sum(q.weights.values())
    if not len(q.keys) or total <= 0:
        return np.zeros(len(q.keys))
    avg = max(float(q.lengths.mean()), 1.0)
    out = np.zeros(len(q.keys))
    for i, (tf, n) in enumerate(zip(q.tf, q.lengths, strict=True)):
        norm = k1 * (1.0 - b + b * n / avg)
        out[i] = sum(q.weights[s] * t * (k1 + 1.0) / (t + norm) for s, t in tf.items()) / total
    return out


def lenmix(a: float, pa: float, hb: float, b: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        cov = np.minimum(bm25_coverage(q, b), 1.5)
        out: np.ndarray = _cos(q) + a * cov ** pa + hb * held_coverage(q) ** fusion.HELD_POWER
        return out
    return rel


def bm25n(w: float, p: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        best = float(q.bm25.max()) if len(q.bm25) else 0.0
        norm = q.bm25 / best if best > 0 else np.zeros(len(q.bm25))
        out: np.ndarray = shipped(q) + w * norm ** p * q.reach
        return out
    return rel


def session(lam: float) -> Relevance:
    def rel(q: QueryFeatures) -> np.ndarray:
        base = shipped(q)
        out = base.copy()
        for t in np.unique(q.event):
            idx = np.flatnonzero(q.event == t)
            if len(idx) < 2:
                continue
            vals = base[idx]
            top2 = np.sort(vals)[-2:]
            for j, v in zip(idx, vals, strict=True):
                other = top2[0] if v == top2[1] else top2[1]
                out[j] += lam * other
        return out
    return rel


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
    "lenmix": (lenmix, {"a": (0.1, 0.2, 0.3, 0.45, 0.6), "pa": (1.0, 1.5), "hb": (0.0, 0.2, 0.45),
                        "b": (0.25, 0.5, 0.75)}),
    "bm25n": (bm25n, {"w": W, "p": (1.0, 2.0, 3.0)}),
    "session": (session, {"lam": (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)}),
}


def grid(family: str) -> Iterator[tuple[dict[str, Any], Relevance]]:
    """(params, relevance) for every grid point of `family`."""
    make, space = FAMILIES[family]
    names = list(space)
    for values in itertools.product(*(space[n] for n in names)):
        params = dict(zip(names, values, strict=True))
        yield params, make(**params)
