"""How many of one author's shipped vectors a receiver checks: a continuous sampling plan.

Dodge's CSP-1 (1943), per author: check a share `screening` of its shipped vectors until
`clearance` checks in a row have matched here, then the smaller share `cleared`; a mismatch
sends the author back to screening (and makes it suspect: shipped.py). A check costs one
MiniLM embedding of the entry's text (~12 ms of CPU on a 2-vCPU Xeon, even in a batch), so at
1/8 it was ~1.5 ms of a sibling's ~12 ms per received warning; a cleared author's vectors
cost 1/64 of an embedding each. The price: an author that behaves until it is cleared and
then forges is checked, per forged vector and receiver, with probability `cleared` instead of
`screening` (docs/design/security.md, "A compromised member").

Pure and light (no numpy): the config imports the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLEARANCE", "CLEARED_RATE", "CheckPlan"]

# The plan's defaults ([embedding] check_shipped_clearance, check_shipped_cleared): at the
# screening share of 1/8, 24 clean checks in a row take ~190 of an author's vectors.
CLEARANCE = 24
CLEARED_RATE = 1 / 64


@dataclass(frozen=True, slots=True)
class CheckPlan:
    """Which share of one author's shipped vectors a receiver checks (CSP-1, see the module
    docstring): `screening` until `clearance` (≥ 1) checks in a row matched, then `cleared`
    (never more than `screening`). `flat(rate)`: one share whatever the record."""

    screening: float
    cleared: float = CLEARED_RATE
    clearance: int = CLEARANCE

    @classmethod
    def flat(cls, rate: float) -> CheckPlan:
        return cls(screening=rate, cleared=rate, clearance=1)

    def clears_at(self) -> int | None:
        """The clean run from which an author is checked at `cleared`; None when clearing
        lowers nothing (`cleared` not below `screening`)."""
        return max(1, self.clearance) if self.cleared < self.screening else None

    def rate(self, clean_in_a_row: int) -> float:
        """The share to check of an author whose last `clean_in_a_row` checks here matched."""
        at = self.clears_at()
        return self.cleared if at is not None and clean_in_a_row >= at else self.screening
