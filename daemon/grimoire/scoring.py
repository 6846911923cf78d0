"""Retrieval scoring, pure: importance composite, four-factor rank, discounts, feedback.

DESIGN.md fixes the weights:

    importance = 0.3·exp(−age_days/30) + 0.3·min(access_count/10, 1) + 0.4·explicit
    rank       = (0.40·semantic + 0.20·temporal + 0.25·importance + 0.15·pad) × source × bloodstain × citation

Choices where DESIGN.md is silent (documented in the README): temporal recency is
exp(−age_days/7) (a week, sharper than importance's month); PAD similarity is the cosine
of the query's and the entry's PAD vectors mapped to 0..1 (0.5, neutral, when either is
missing); semantic similarity is the cosine clipped at 0. The source factor multiplies the
discount of where *this* golem got the entry (self 1.0, vault 1.0, clade 0.80, styx 0.80,
lethe 0.50, marketplace 0.60) by that of the author's own origin when it was not
first-hand, and by 0.85 per inherited generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CITATION_BOUNDS",
    "SOURCE_DISCOUNT",
    "Factors",
    "cited",
    "importance",
    "injected_not_cited",
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


def importance(*, explicit: float, access_count: int, days: float) -> float:
    """DESIGN's importance composite, 0..1."""
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
    citation: float

    @property
    def score(self) -> float:
        return rank(self)


def rank(f: Factors) -> float:
    base = 0.40 * f.semantic + 0.20 * f.temporal + 0.25 * f.importance + 0.15 * f.pad
    return base * f.source * f.citation


def cited(weight: float) -> float:
    """Citation feedback: an entry the model cited gains weight (bounded)."""
    return min(CITATION_BOUNDS[1], weight + CITED_STEP)


def injected_not_cited(weight: float) -> float:
    """An entry injected into the prompt but not cited loses a little weight (bounded)."""
    return max(CITATION_BOUNDS[0], weight - UNCITED_STEP)
