"""Retrieval scoring, pure: importance composite, four-factor rank, discounts, feedback.

The weights (docs/design/retrieval.md):

    importance = 0.3·exp(−age_days/30) + 0.3·min(access_count/10, 1) + 0.4·explicit
    rank       = (0.40·semantic + 0.20·temporal + 0.25·importance + 0.15·pad) × source × bloodstain

The factors are made comparable over the candidate set before weighting (`normalise`).
Relevance is min-max normalised over the candidates as Park et al. (2023) do, anchored at
the best one: semantic' = 1 − (best − x) / max(spread, 0.2). Raw cosine spreads only a few
hundredths between the right answer and the next candidate, so unscaled it was drowned by
the side factors; the 0.2 floor keeps near-identical candidates (a spread of 0.005) from
being stretched into the whole 0.40, and anchoring at the best keeps every candidate's base
above zero so the source multiplier still acts. Recency, importance and PAD are
already on absolute 0..1 scales and are not rescaled: stretching them over the candidates
would turn a few seconds of age or 0.01 of importance into the whole weight of their factor
(bench/bench_recall.py measures the variants).

Citation feedback does not multiply the rank (the first design had × citation weight): a citation
is a *use* and counts one access, which importance already weighs (0.3·min(uses/10, 1)).
The citation weight (cited up, injected-but-not-cited down, bounded 0.5..1.5) is kept per
entry as the curator's usage signal. Measured on the evaluation corpus (112 entries, 77
queries), 200 queries whose answers the golem cites: recall@5 −0.21 with the ×0.5..1.5
multiplier, −0.04 even with ×0.9..1.1, −0.01 with the access count alone — a multiplier on
the whole score lets a few cited entries crowd every other query's answers out.

Choices the first design left open (documented in docs/design/retrieval.md): temporal recency is
exp(−days/7) (a week, sharper than importance's month), the days counted from the entry's
last sign of life — its creation, its last use (a citation) or its last validation (the
forgetting curve's anchor: a confirmation, an outcome), whichever is latest (`last_touched`),
so knowledge in use stays recent however old it is; PAD similarity is the cosine
of the query's and the entry's PAD vectors mapped to 0..1 (0.5, neutral, when either is
missing); semantic similarity is the cosine clipped at 0. The source factor multiplies the
discount of where *this* golem got the entry (self 1.0, vault 1.0, clade 0.80, styx 0.80,
lethe 0.50, marketplace 0.60) by that of the author's own origin when it was not
first-hand, and by 0.85 per inherited generation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CITATION_BOUNDS",
    "EXTERNAL_CONFIDENCE",
    "SOURCE_DISCOUNT",
    "Factors",
    "cited",
    "entry_last_touched",
    "external_rank",
    "importance",
    "injected_not_cited",
    "last_touched",
    "normalise",
    "pad_similarity",
    "rank",
    "source_factor",
    "temporal",
]

MS_PER_DAY = 86_400_000
SOURCE_DISCOUNT = {
    "self": 1.0, "vault": 1.0, "inherited": 1.0, "clade": 0.80, "styx": 0.80, "lethe": 0.50, "marketplace": 0.60,
}
BLOODSTAIN_BOOST = 1.2
GENERATION_DECAY = 0.85
CITATION_BOUNDS = (0.5, 1.5)
CITED_STEP = 0.05
UNCITED_STEP = 0.02


def age_days(created_ms: int, now_ms: int) -> float:
    return max(0.0, (now_ms - created_ms) / MS_PER_DAY)


# The author's own write anchors the forgetting curve (its confidence op, a tick after the body):
# an anchor this close to creation is the write itself, not a later sign of life.
WRITE_ANCHOR_SLACK_MS = 60_000


def entry_last_touched(*, event_ms: int, created_ms: int, used_ms: int | None, validated_ms: int | None) -> int:
    """What recency counts from: the latest of the entry's time (`event_ms`: its event time when
    one is given, else `created_ms`), its last use and its last validation — an anchor within
    `WRITE_ANCHOR_SLACK_MS` of creation is the author's own write, so it does not renew an
    entry dated in the past."""
    renewed = validated_ms if validated_ms is not None and validated_ms > created_ms + WRITE_ANCHOR_SLACK_MS else None
    return last_touched(event_ms, used_ms, renewed)


def last_touched(created_ms: int, used_ms: int | None, validated_ms: int | None) -> int:
    """When the entry last showed it is alive: the latest of its creation, last use and last
    validation (None: never). Recency counts from this."""
    return max(created_ms, used_ms or created_ms, validated_ms or created_ms)


def importance(*, explicit: float, access_count: int, days: float) -> float:
    """The importance composite (docs/design/retrieval.md), 0..1."""
    return 0.3 * math.exp(-days / 30) + 0.3 * min(access_count / 10, 1.0) + 0.4 * explicit


def temporal(days: float) -> float:
    """Recency, 1.0 for now, 0.37 after a week."""
    return math.exp(-days / 7)


def pad_similarity(query: tuple[float, float, float] | None, entry: tuple[float, float, float] | None) -> float:
    """Cosine of two PAD vectors mapped to 0..1; 0.5 when either is missing or zero."""
    if query is None or entry is None:
        return 0.5
    dot = sum(a * b for a, b in zip(query, entry, strict=True))
    norm = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in entry))
    if norm == 0:
        return 0.5
    return (dot / norm + 1) / 2


def source_factor(*, provenance: str, origin: str, generation: int, bloodstain: bool) -> float:
    """Discount for how the knowledge reached us, boost for death-sourced entries."""
    factor = SOURCE_DISCOUNT.get(provenance, 0.5)
    if origin != "self":
        factor *= SOURCE_DISCOUNT.get(origin, 0.5)
    factor *= GENERATION_DECAY ** generation
    if bloodstain:
        factor *= BLOODSTAIN_BOOST
    return factor


@dataclass(frozen=True, slots=True)
class Factors:
    semantic: float
    temporal: float
    importance: float
    pad: float
    source: float

    @property
    def score(self) -> float:
        return rank(self)


# The smallest relevance spread over the candidates that counts as its full range (cosine).
SEMANTIC_FLOOR = 0.2


def normalise(factors: Sequence[Factors], *, semantic_floor: float = SEMANTIC_FLOOR) -> list[Factors]:
    """The same factors with relevance rescaled over this candidate set: the best candidate 1.0,
    the others 1 − (best − x) / max(spread, floor). The other factors are on absolute scales."""
    if not factors:
        return []
    best = max(f.semantic for f in factors)
    spread = max(best - min(f.semantic for f in factors), semantic_floor, 1e-9)
    return [
        Factors(semantic=1.0 - (best - f.semantic) / spread, temporal=f.temporal, importance=f.importance,
                pad=f.pad, source=f.source)
        for f in factors
    ]


def rank(f: Factors) -> float:
    base = 0.40 * f.semantic + 0.20 * f.temporal + 0.25 * f.importance + 0.15 * f.pad
    return base * f.source


# Where a result from outside the Grimoire (a Styx hit) starts: the local confidence of
# knowledge from a service rather than a sibling (docs/glossary.md, "Styx").
EXTERNAL_CONFIDENCE = 0.2


NEUTRAL = 0.5  # a factor this golem cannot know: the middle of its range (as a local entry without a PAD)


def external_rank(relevance: float) -> float:
    """The four-factor rank of a result from outside the Grimoire (the hook the Styx fan-in
    ranks by, daemon/styx/fanin.py), from its relevance already discounted by its layer. What
    this golem cannot know of it — when it was last alive, how important or used it is, its
    PAD — counts as neutral (0.5 each), as a local entry without a PAD gets 0.5: a Styx hit
    ranks with a local entry of equal discounted relevance and middling recency and importance
    (above a week-old unused one, below a fresh important one). Counted as nothing (until step
    25), every Styx hit ranked below nearly every local entry: a clade-layer hit at relevance
    0.99 fell out of a top 10 beside a hundred weakly related local warnings."""
    return rank(Factors(semantic=max(0.0, relevance), temporal=NEUTRAL, importance=NEUTRAL, pad=NEUTRAL,
                        source=1.0))


def cited(weight: float) -> float:
    """Citation feedback: an entry the model cited gains usage weight (bounded)."""
    return min(CITATION_BOUNDS[1], weight + CITED_STEP)


def injected_not_cited(weight: float) -> float:
    """An entry injected into the prompt but not cited loses a little usage weight (bounded)."""
    return max(CITATION_BOUNDS[0], weight - UNCITED_STEP)
