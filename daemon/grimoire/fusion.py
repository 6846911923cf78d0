"""Relevance of a candidate from its two kinds of evidence, pure: cosine plus weighted coverage,
a partial match counting less than its share.

    relevance = max(cosine, 0) + LEXICAL_WEIGHT · coverage ^ COVERAGE_POWER

`coverage` (lexical.coverage) is the share of the query's IDF mass the entry's stems hold,
0..1. An entry holding every informative word of the query moves up by `LEXICAL_WEIGHT`
(0.45) in cosine units; one holding half of the query's IDF mass by 0.45 · 0.5^1.5 = 0.16
(0.20 with the step-15 linear form); one sharing only a common word (a speaker's name, a
protocol every entry names) by a few thousandths. The exponent is what makes fusion know
when words matter: a question answered by an entry that uses its words (a chat history, a
conversation turn naming the thing asked about) has that entry at or near full coverage,
while on text where the answer shares no word with the question the candidates that do share
one are same-topic neighbours sharing *part* of it, and those partial matches were what
pushed right answers out of the top five (the step-15 weight 0.4 kept 0.81× raw cosine's
recall@5 on an operator corpus with decoys; this form keeps 0.88× held out, 1.00× fitted).

Both terms are on fixed scales, so the two constants mean the same from one query and one
store to the next (rank fusion and min-max normalised BM25 do not: they stretch whatever
matched best into the whole weight, even when it matched one common word).

Where the constants come from: bench/bench_fusion_cv.py, leave-one-corpus-out cross-validation
over LoCoMo conversations 1-5, the three keyword-disjoint corpora (tests/helpers/
semantic_corpus*.py) and twelve synthetic multi-session chat histories; this family
(`power` in bench/fusion_cv/arms.py) had the best held-out objective of the six tried (fixed
weight, power, cosine-gated, query-adaptive weight, dampened by cosine, top-n gated) and a
pairwise-learned ranker (which fitted LoCoMo and chat best but fell to 0.74× raw cosine on a
held-out keyword-disjoint corpus). Every fold chose (0.45, 1.5) except the operator corpus's
(0.8, 1.5); fitted on all corpora: (0.45, 1.5). bench/RESULTS.md has the held-out table,
docs/design/retrieval.md the reasoning.

Every ranked read goes through `relevance`: `Retriever.recall` (so `clade recall`,
`POST /v1/memory/search`, the digest and the agent's memory tools). The four ranking
factors and the provenance weights (`scoring`) apply to the result afterwards.
"""

from __future__ import annotations

__all__ = ["COVERAGE_POWER", "LEXICAL_WEIGHT", "relevance"]

LEXICAL_WEIGHT = 0.45  # what full coverage adds, in cosine units (cross-validated: bench/bench_fusion_cv.py)
COVERAGE_POWER = 1.5  # > 1: a partial lexical match counts less than its share (same source)


def relevance(cosine: float | None, coverage: float, *, weight: float = LEXICAL_WEIGHT,
              power: float = COVERAGE_POWER) -> float:
    """A candidate's relevance: its cosine with the query (None: no vector, counts 0), clipped
    at 0, plus `weight` × its lexical coverage (clamped to 0..1) raised to `power`. Monotone
    in both; `weight` 0 is cosine alone (the ranking before fusion); `power` 1 is step 15's
    linear form."""
    covered = min(max(coverage, 0.0), 1.0)
    return max(0.0, cosine or 0.0) + weight * covered ** power
