"""Relevance of a candidate from its two kinds of evidence, pure: cosine plus weighted coverage.

    relevance = max(cosine, 0) + LEXICAL_WEIGHT · coverage

`coverage` (lexical.coverage) is the share of the query's IDF mass the entry's stems hold:
an entry that has the query's rare words moves up by up to `LEXICAL_WEIGHT` in cosine
units; one that shares only a common word (a speaker's name, a protocol every entry names)
moves up by a few hundredths. Both terms are on fixed scales, so the weight means the same
from one query and one store to the next (rank fusion and min-max normalised BM25 do not:
they stretch whatever matched best into the whole weight, even when it matched one common
word, which is how they sank recall on corpora whose right answers share no word with the
question). The weight is the one parameter; bench/bench_locomo.py measures it against
raw cosine, BM25 and RRF on both kinds of corpus (bench/RESULTS.md has the Pareto table).

Every ranked read goes through `relevance`: `Retriever.recall` (so `clade recall`,
`POST /v1/memory/search`, the digest and the agent's memory tools). The four ranking
factors and the provenance weights (`scoring`) apply to the result afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LEXICAL_WEIGHT", "relevance", "relevances"]

LEXICAL_WEIGHT = 0.4


def relevance(cosine: float | None, coverage: float, *, weight: float = LEXICAL_WEIGHT) -> float:
    """A candidate's relevance: its cosine with the query (None: no vector, counts 0), clipped
    at 0, plus `weight` × its lexical coverage (0..1)."""
    return max(0.0, cosine or 0.0) + weight * min(max(coverage, 0.0), 1.0)


def relevances(cosines: Sequence[float | None], coverages: Sequence[float]) -> list[float]:
    """The relevance of every candidate of one query (aligned with the inputs)."""
    return [relevance(c, v) for c, v in zip(cosines, coverages, strict=True)]
