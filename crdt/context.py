"""Dots and causal contexts (version vector + dot cloud).

A dot `(replica, seq)` names one op. A causal context is the set of dots a replica has
seen, stored compactly as a version vector `vv[r]` (every seq 1..vv[r] seen) plus a cloud
of seen seqs above it (Almeida, Shoker, Baquero, "Delta State Replicated Data Types",
2018, §5). Adding a dot that closes a gap folds the cloud into the vector.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .errors import InvalidValue

__all__ = ["CausalContext", "Dot"]


@dataclass(frozen=True, slots=True, order=True)
class Dot:
    """One op's name: its writer and the writer's sequence number (1, 2, 3, …)."""

    replica: str
    seq: int

    def __post_init__(self) -> None:
        if type(self.seq) is not int or self.seq < 1:
            raise InvalidValue("seq", f"must be an integer >= 1, got {self.seq!r}")


class CausalContext:
    """A set of dots; `vv` holds contiguous prefixes, `cloud` the seen seqs above them."""

    __slots__ = ("_cloud", "_vv")

    def __init__(
        self, vv: Mapping[str, int] | None = None, cloud: Mapping[str, Iterable[int]] | None = None
    ) -> None:
        self._vv: dict[str, int] = {r: n for r, n in (vv or {}).items() if n > 0}
        self._cloud: dict[str, set[int]] = {}
        for replica, seqs in (cloud or {}).items():
            for seq in seqs:
                self.add(Dot(replica, seq))

    # -- queries -------------------------------------------------------------------

    def contains(self, dot: Dot) -> bool:
        """True if `dot` has been seen."""
        return dot.seq <= self._vv.get(dot.replica, 0) or dot.seq in self._cloud.get(dot.replica, ())

    __contains__ = contains

    def vv(self, replica: str) -> int:
        """Highest seq n of `replica` with every seq 1..n seen (0 if none)."""
        return self._vv.get(replica, 0)

    def cloud(self, replica: str) -> frozenset[int]:
        """Seen seqs of `replica` above its version-vector entry."""
        return frozenset(self._cloud.get(replica, ()))

    def top(self, replica: str) -> int:
        """The highest seq of `replica` seen (0 if none)."""
        cloud = self._cloud.get(replica)
        return max(cloud) if cloud else self._vv.get(replica, 0)

    def replicas(self) -> list[str]:
        """Every replica with at least one seen dot, sorted."""
        return sorted(set(self._vv) | set(self._cloud))

    def dots(self, replica: str) -> Iterator[int]:
        """Every seen seq of `replica`, ascending."""
        yield from range(1, self._vv.get(replica, 0) + 1)
        yield from sorted(self._cloud.get(replica, ()))

    def size(self) -> int:
        """Number of dots in the context."""
        return sum(self._vv.values()) + sum(len(c) for c in self._cloud.values())

    def missing_count(self, other: CausalContext) -> int:
        """How many dots of `other` are not in this context (ops we are behind by)."""
        total = 0
        for replica in other.replicas():
            mine_vv = self._vv.get(replica, 0)
            mine_cloud = self._cloud.get(replica, set())
            other_vv = other._vv.get(replica, 0)
            total += max(0, other_vv - mine_vv) - sum(1 for s in mine_cloud if s <= other_vv)
            total += sum(1 for s in other._cloud.get(replica, ()) if s > mine_vv and s not in mine_cloud)
        return total

    # -- updates -------------------------------------------------------------------

    def add(self, dot: Dot) -> bool:
        """Add one dot; returns False if it was already present."""
        replica, seq = dot.replica, dot.seq
        base = self._vv.get(replica, 0)
        if seq <= base:
            return False
        cloud = self._cloud.get(replica)
        if cloud is not None and seq in cloud:
            return False
        if seq == base + 1:
            base = seq
            if cloud:
                while base + 1 in cloud:  # compaction: fold the now-contiguous run
                    base += 1
                    cloud.discard(base)
                if not cloud:
                    del self._cloud[replica]
            self._vv[replica] = base
        else:
            self._cloud.setdefault(replica, set()).add(seq)
        return True

    def merge(self, other: CausalContext) -> None:
        """Union with `other` in place."""
        for replica in other.replicas():
            self.merge_replica(other, replica)

    def merge_replica(self, other: CausalContext, replica: str, *, limit: int | None = None) -> None:
        """Union with `other`'s dots of one replica, optionally only seqs <= `limit`."""
        other_vv = other._vv.get(replica, 0)
        if limit is not None:
            other_vv = min(other_vv, limit)
        if other_vv > self._vv.get(replica, 0):
            self._vv[replica] = other_vv
            cloud = self._cloud.get(replica)
            if cloud:
                remaining = {s for s in cloud if s > other_vv}
                self._cloud[replica] = remaining
                # re-fold: the raised base may now touch the cloud
                while other_vv + 1 in remaining:
                    other_vv += 1
                    remaining.discard(other_vv)
                self._vv[replica] = other_vv
                if not remaining:
                    del self._cloud[replica]
        for seq in sorted(other._cloud.get(replica, ())):
            if limit is not None and seq > limit:
                break
            self.add(Dot(replica, seq))

    def restricted(self, replicas: Iterable[str]) -> CausalContext:
        """A copy holding only the dots of `replicas`."""
        out = CausalContext()
        for replica in replicas:
            out.merge_replica(self, replica)
        return out

    def copy(self) -> CausalContext:
        return self.restricted(self.replicas())

    # -- representation ------------------------------------------------------------

    def to_rows(self) -> list[tuple[str, int, list[int]]]:
        """Canonical form: (replica, vv, sorted cloud) for every replica, sorted."""
        return [(r, self._vv.get(r, 0), sorted(self._cloud.get(r, ()))) for r in self.replicas()]

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, int, Iterable[int]]]) -> CausalContext:
        out = cls()
        for replica, vv, cloud in rows:
            if vv > 0:
                out.merge_replica(cls({replica: vv}), replica)
            for seq in cloud:
                out.add(Dot(replica, seq))
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CausalContext) and self.to_rows() == other.to_rows()

    def __hash__(self) -> int:  # pragma: no cover - contexts are mutable; not hashable
        raise TypeError("CausalContext is mutable")

    def __repr__(self) -> str:
        return f"CausalContext({self.to_rows()!r})"
