"""Pooled belief, pure: what the clade's outcomes say of one entry, weighed by who saw them.

Every golem that acts on an entry records an outcome (posterior.py) and, for an entry that may
cross, bumps its signed *evidence slot* for it: its positive and negative counts, nothing else
(crdt.EvidenceValue). The slots cross like endorsements; the outcome rows (metric, value, note,
episode, time of the trade) stay home. Here, one belief per entry pools them:

    belief = (K · m₀ + P) / (K + P + N),   K = `BeliefPolicy.strength` (4)

- m₀, the prior: the writer's stated confidence (the author slot), clipped to
  [`floor`, `ceiling`] (0.05..0.90): nobody's word is certain, and an author stating 1.0 must
  not make its entry unrefutable;
- P, N: this golem's own positive and negative outcomes at full weight, plus each sibling's
  counts (at most `per_writer_cap` each, 4: one writer cannot outvote the clade by writing
  big numbers) times that sibling's weight *here*:
  `voucher_weight` 1.0 for a voucher (trust.py: an author whose record here earned it),
  `member_weight` 0.25 for a member in good standing whose record has not, 0 for a suspect or
  distrusted one. The weight comes from this golem's own evidence about the writer, so an
  attacker's contradictions of an honest entry weigh 0.25 × 4 = 1 outcome at most, and nothing
  once it is suspect.

**Refuted**: an entry whose belief is below `refute_below` (0.5: more likely wrong than right)
on at least `refute_min_negative` (2) negative outcomes of this golem's own or of vouchers —
two vouchers' failures, or one voucher's two. A member that is not a voucher moves the belief
a little and never refutes: an attacker cannot refute honest knowledge by contradicting it.
A refuted entry is withheld from digests and default searches (readable, never deleted) and
counts against its author's record. It is a reading of the evidence, not a verdict: more
positive evidence lifts it again.

**Track record** (`track_record`): how an author's entries fared with the clade, the Beta mean
of its entries' weighted positive and negative evidence from others (prior 0.5, strength 4).
The admission score (admission.py) multiplies by min(1, 0.5 + record): an author whose entries
keep failing stops flooding its siblings; one with no record yet is not held back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .posterior import posterior_mean

__all__ = ["Belief", "BeliefPolicy", "SiblingEvidence", "pooled_belief", "track_record", "writer_weight"]


@dataclass(frozen=True, slots=True)
class BeliefPolicy:
    strength: float = 4.0
    floor: float = 0.05
    ceiling: float = 0.90
    per_writer_cap: int = 4
    voucher_weight: float = 1.0
    member_weight: float = 0.25
    refute_below: float = 0.5
    refute_min_negative: float = 2.0


@dataclass(frozen=True, slots=True)
class SiblingEvidence:
    """One sibling's evidence slot on the entry, and its weight here (`writer_weight`)."""

    writer: str
    positive: int
    negative: int
    weight: float


@dataclass(frozen=True, slots=True)
class Belief:
    belief: float
    prior: float  # m₀ as used (the stated confidence, clipped)
    own_positive: int
    own_negative: int
    clade_positive: float  # weighted, capped
    clade_negative: float
    siblings: int  # siblings whose evidence counted (weight > 0, some count)
    refuted: bool
    vouched_negative: float = 0.0  # vouchers' negative outcomes (capped): with own ones, what refutes

    @property
    def weighted_negative(self) -> float:
        return self.own_negative + self.clade_negative

    def to_json(self) -> dict[str, object]:
        return {"belief": round(self.belief, 4), "prior": round(self.prior, 4), "refuted": self.refuted,
                "own": {"positive": self.own_positive, "negative": self.own_negative},
                "clade": {"positive": round(self.clade_positive, 3), "negative": round(self.clade_negative, 3),
                          "siblings": self.siblings}}


def writer_weight(*, voucher: bool, suspect: bool, policy: BeliefPolicy = BeliefPolicy()) -> float:
    """How much one sibling's outcomes count here (the module docstring)."""
    if suspect:
        return 0.0
    return policy.voucher_weight if voucher else policy.member_weight


def pooled_belief(stated: float, own_positive: int, own_negative: int, siblings: Iterable[SiblingEvidence],
                  policy: BeliefPolicy = BeliefPolicy()) -> Belief:
    """The pooled belief and whether the entry is refuted (the module docstring)."""
    prior = min(policy.ceiling, max(policy.floor, float(stated)))
    cap = policy.per_writer_cap
    clade_pos = clade_neg = vouched_neg = 0.0
    counted = 0
    for s in siblings:
        if s.weight <= 0 or (s.positive <= 0 and s.negative <= 0):
            continue
        counted += 1
        clade_pos += s.weight * min(cap, max(0, s.positive))
        clade_neg += s.weight * min(cap, max(0, s.negative))
        if s.weight >= policy.voucher_weight:
            vouched_neg += min(cap, max(0, s.negative))
    positive = own_positive + clade_pos
    negative = own_negative + clade_neg
    value = (policy.strength * prior + positive) / (policy.strength + positive + negative)
    refuted = value < policy.refute_below and own_negative + vouched_neg >= policy.refute_min_negative
    return Belief(value, prior, own_positive, own_negative, clade_pos, clade_neg, counted, refuted, vouched_neg)


def track_record(positive: float, negative: float, *, prior: float = 0.5, strength: float = 4.0) -> float:
    """An author's record with the clade: the Beta mean over its entries' weighted evidence."""
    return posterior_mean(prior, 0, 0, strength=strength) if positive + negative <= 0 else (
        (strength * prior + positive) / (strength + positive + negative))
