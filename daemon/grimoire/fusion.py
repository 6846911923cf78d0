"""Relevance of a candidate from its two kinds of evidence, pure: cosine plus two lexical terms
that count a partial match for less than its share.

    relevance = max(cosine, 0) + LEXICAL_WEIGHT · coverage ^ COVERAGE_POWER
                               + HELD_WEIGHT · held ^ HELD_POWER,     held = coverage / reach

`coverage` (lexical.coverage) is the share of the query's IDF mass the entry's stems hold,
0..1; `reach` (lexical.reach) is the share that *some* candidate holds, so `held` is the
entry's coverage of what the candidates could cover at all. A query word no candidate has
(a word the store lacks, a misspelling, a word of the question's framing such as "did" or
"go") cannot tell candidates apart, yet its IDF is the highest of all and dilutes every
coverage: "Where did we go camping?" gave the one turn saying "we went camping" a coverage of
0.29, and a same-topic turn without the word ranked first by cosine. `held` gives that turn 1.

What the two powers do: an entry holding every informative word the candidates hold moves up
by 0.3 + 0.45 = 0.75 in cosine units when it holds every query word, by 0.45 (+ its share
of the first term) when it holds every word any candidate has; an entry holding half of
it by 0.3 · 0.5^1.5 + 0.45 · 0.5^3 = 0.16; one sharing only a common word (a speaker's name,
a protocol every entry names) by a few thousandths. That is what makes fusion know when words
matter: a question answered by an entry that uses its words (a chat history, a conversation
turn naming the thing asked about) has that entry at or near full held coverage, while on
text whose answers share no word with the question the candidates that do share one are
same-topic neighbours sharing *part* of it, and those partial matches were what pushed right
answers out of the top five under step 15's linear form (cosine + 0.4 · coverage).

All terms are on fixed scales, so the constants mean the same from one query and one store to
the next (rank fusion and min-max normalised BM25 do not: they stretch whatever matched best
into the whole weight, even when it matched one common word). `held` is relative to the
candidates, but only through the words none of them holds; it is never stretched upwards by
how well the best candidate matched.

Where the constants come from: bench/bench_fusion_cv.py, leave-one-corpus-out
cross-validation over LoCoMo conversations 1-5, the three keyword-disjoint corpora
(tests/helpers/semantic_corpus*.py) and twelve synthetic multi-session chat histories
(bench/fusion_cv/chat.py): the `mix` family of bench/fusion_cv/arms.py, a grid of
(LEXICAL_WEIGHT, HELD_WEIGHT, COVERAGE_POWER, HELD_POWER); 18 of 20 folds chose (0.3, 0.45,
1.5, 3), as did the fit on all corpora. Held out: LoCoMo any@5 0.638 (step 15: 0.635),
chat any@1 0.992 (BM25 0.975, step 15 0.942), keyword-disjoint recall@5 1.01×, 0.93× and
0.94× raw cosine (step 15: 0.97×, 1.00×, 0.81×). bench/RESULTS.md has the table with the
other families tried, docs/design/retrieval.md the reasoning.

Step 28 left whole benchmarks out (LongMemEval-S's development questions added,
bench/bench_longmemeval.py): with the words that frame a question stopped (lexical.QUESTION_FRAMING)
the same constants are chosen whenever LoCoMo, LongMemEval or the chat sets are left out —
LongMemEval turn any@1 0.630 (BM25 0.611), LoCoMo any@5 0.652 held out.

Every ranked read goes through `relevance`: `recall.rank` (so `clade recall`,
`POST /v1/memory/search`, the digest and the agent's memory tools). The four ranking
factors and the provenance weights (`scoring`) apply to the result afterwards.
"""

from __future__ import annotations

import math

__all__ = ["COVERAGE_POWER", "HELD_POWER", "HELD_WEIGHT", "LEXICAL_WEIGHT", "held_coverage", "relevance"]

# Cross-validated together (bench/bench_fusion_cv.py, family `mix`; bench/RESULTS.md).
LEXICAL_WEIGHT = 0.3  # what full coverage of the query's IDF mass adds, in cosine units
COVERAGE_POWER = 1.5  # > 1: a partial match counts less than its share
HELD_WEIGHT = 0.45  # what full coverage of the mass the candidates hold adds
HELD_POWER = 3.0  # steeper: only (nearly) every held word counts


def held_coverage(coverage: float, reach: float) -> float:
    """Coverage relative to `reach` (lexical.reach: the share of the query's IDF mass some
    candidate holds), clamped to 0..1; 0 when no candidate holds any of it."""
    return min(max(coverage / reach, 0.0), 1.0) if reach > 0 else 0.0


def relevance(cosine: float | None, coverage: float, reach: float, *, weight: float = LEXICAL_WEIGHT) -> float:
    """A candidate's relevance: its cosine with the query (None: no vector, counts 0), clipped
    at 0, plus `weight` × its coverage (clamped to 0..1) to the power `COVERAGE_POWER`, plus
    `HELD_WEIGHT` × its `held_coverage` to the power `HELD_POWER`. Monotone in cosine and in
    coverage; `weight` 0 with coverage 0 is cosine alone (the ranking before fusion: the
    retriever passes coverage 0 when its lexical weight is 0)."""
    covered = min(max(coverage, 0.0), 1.0)
    return (max(0.0, cosine or 0.0) + weight * math.pow(covered, COVERAGE_POWER)
            + HELD_WEIGHT * math.pow(held_coverage(covered, reach), HELD_POWER))
