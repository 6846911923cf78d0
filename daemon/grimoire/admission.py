"""The admission score, pure: whether an insight, fact or causal link has earned crossing.

Modelled on memory admission in LLM agents and caches: Mem0 (Chhikara et al. 2025, "Mem0:
Building Production-Ready AI Agents with Scalable Long-Term Memory", arXiv:2504.19413) admits
a candidate memory by comparing it with the most similar stored ones and answers ADD, UPDATE
or NOOP — a near-duplicate adds nothing; Generative Agents (Park et al. 2023, arXiv:2304.03442)
keep and retrieve memories by importance, recency and relevance; TinyLFU (Einziger, Friedman
and Manes, ACM TOS 13(4), 2017) admits a new item only if its observed use beats what it would
displace. Here the "cache" is the siblings' attention: an entry crosses if it is held with
confidence, adds something they do not have, has been used or proved, and says something
specific. The daemon computes the score; no writer field (such as `quality`) feeds it.

    score = 0.40 · confidence + 0.30 · novelty + 0.15 · evidence + 0.15 · specificity

- confidence: the author's confidence (0..1);
- novelty: from s, the highest cosine against the entries this golem already promoted and
  those siblings sent (None: nothing to compare with, novelty 1):
  novelty = clip((0.9 − s) / (0.9 − 0.8), 0, 1) — 1 up to cosine 0.8, 0 from 0.9 (a
  paraphrase). The ramp starts at 0.8, not at "unrelated" (0.5): s is a *maximum* over every
  reference, and in one domain the nearest of a hundred other claims sits at 0.6-0.85 with
  MiniLM whatever the new claim says (the decision benchmark's insights: median 0.74, 90th
  percentile 0.84, the nearest on another topic more often than not). A ramp from 0.5 made
  admission fall as the store grew — ~80 % of fresh insights refused for their score
  (bench_ecology, step 24) — where Mem0's rule is to add unless it is a near-duplicate;
- evidence: clip((uses + positive outcomes − negative outcomes) / 3, 0, 1), uses = accesses
  (a citation through feedback counts one);
- specificity: 0.25 for each of: a digit in the content; tokens, chains or protocols named in
  its metadata; content of at least 80 characters; a knowledge category.

The author's track record with the clade (belief.track_record: how its earlier crossed
entries fared in siblings' evidence, prior 0.5) scales the score by min(1, 0.5 + record): no
record yet, or a good one, leaves it as it is; a golem whose entries keep being refuted
(record 0.25 → × 0.75) stops flooding its siblings with the next ones.

Admitted: score > 0.55 and s < 0.9 (a near-duplicate is Mem0's NOOP whatever its score).
An entry at confidence 0.8 with defaults that says something new (s ≤ 0.8) scores 0.62.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["ADMISSION_THRESHOLD", "NEAR_DUPLICATE", "WEIGHTS", "Admission", "AdmissionInput", "admission",
           "evidence_score", "max_similarity", "novelty", "record_factor", "specificity"]

WEIGHTS = {"confidence": 0.40, "novelty": 0.30, "evidence": 0.15, "specificity": 0.15}
ADMISSION_THRESHOLD = 0.55
NEAR_DUPLICATE = 0.9
RELATED = 0.8  # novelty falls from 1 at this cosine to 0 at NEAR_DUPLICATE
EVIDENCE_SATURATION = 3.0
SPECIFIC_LENGTH = 80
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class AdmissionInput:
    """What the score reads of one entry."""

    confidence: float
    content: str
    named: bool  # tokens, chains or protocols in its metadata
    categorised: bool
    uses: int
    positive: int
    negative: int


@dataclass(frozen=True, slots=True)
class Admission:
    score: float
    similarity: float | None
    admitted: bool

    @property
    def near_duplicate(self) -> bool:
        return self.similarity is not None and self.similarity >= NEAR_DUPLICATE


def novelty(similarity: float | None) -> float:
    if similarity is None:
        return 1.0
    return min(1.0, max(0.0, (NEAR_DUPLICATE - similarity) / (NEAR_DUPLICATE - RELATED)))


def evidence_score(uses: int, positive: int, negative: int) -> float:
    return min(1.0, max(0.0, (uses + positive - negative) / EVIDENCE_SATURATION))


def specificity(content: str, *, named: bool, categorised: bool) -> float:
    parts = (bool(_DIGIT.search(content)), named, len(content.strip()) >= SPECIFIC_LENGTH, categorised)
    return 0.25 * sum(parts)


def record_factor(record: float) -> float:
    """How the author's track record (0..1, 0.5 without one) scales the score: never above 1."""
    return min(1.0, 0.5 + max(0.0, record))


def admission(entry: AdmissionInput, similarity: float | None, *, record: float = 0.5) -> Admission:
    """The score and the decision for one entry whose nearest reference has cosine `similarity`,
    by an author whose track record with the clade is `record`."""
    score = (WEIGHTS["confidence"] * entry.confidence + WEIGHTS["novelty"] * novelty(similarity)
             + WEIGHTS["evidence"] * evidence_score(entry.uses, entry.positive, entry.negative)
             + WEIGHTS["specificity"] * specificity(entry.content, named=entry.named, categorised=entry.categorised))
    score *= record_factor(record)
    duplicate = similarity is not None and similarity >= NEAR_DUPLICATE
    return Admission(round(score, 9), similarity, score > ADMISSION_THRESHOLD and not duplicate)


def max_similarity(vector: NDArray[np.float32] | None,
                   references: NDArray[np.float32] | Sequence[NDArray[np.float32]]) -> float | None:
    """The highest cosine of (unit) `vector` against `references` (a matrix, one row each, or a
    list of rows); None without a vector or references."""
    if vector is None or len(references) == 0:
        return None
    matrix = references if isinstance(references, np.ndarray) else np.stack(references)
    return float(np.max(matrix @ vector))
