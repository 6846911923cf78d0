"""Compression, pure: near-duplicates merge, newer self-learned knowledge supersedes what it contradicts.

Two entries of one kind are **duplicates** when their normalised text is equal (case,
Unicode form, punctuation and spacing ignored), or when their vectors' cosine is at least
`near` (0.92) *and* the token-overlap guard holds: the same numbers (a "5%" is not a "50%")
and the same polarity (neither says "never"/"not"/"avoid" where the other does not), with at
least `min_overlap` of their content words shared (Jaccard). Duplicates form clusters (union
find); each cluster merges into its strongest member — own before a sibling's, verified before
quarantined (trust.py), then higher base confidence, more evidence, older, smaller id — which
takes the others' evidence (a quarantined member's evidence excepted); the others are
superseded by it. No entry changes author: the winner keeps its body, the losers stay readable.

Two of this golem's own entries of a contradictable kind **contradict** when they are about
the same thing (cosine ≥ `related`, content overlap ≥ `min_overlap`) but the guard fails:
their numbers differ or their polarity flips ("the USDC pool's fee tier is 0.05%" then
"… is 0.3%"). The newer supersedes the older, which stays readable, as Graphiti keeps
invalidated facts. A sibling's entry is never superseded by contradiction here: its author
may know better, and the sibling's own curator decides. Warnings, strategy outcomes and
episode summaries are records of different moments and never contradict each other.

Exact duplicates are found over every live entry (a dictionary of normalised texts); vectors
are compared only in pairs with at least one `fresh` entry (new or changed since the last
cycle), so a cycle costs O(fresh × live), not O(live²), once the first has run.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from crdt import Kind

__all__ = [
    "CONTRADICTABLE",
    "Merge",
    "Similar",
    "Supersede",
    "find_contradictions",
    "find_merges",
    "normalised_text",
    "numbers_in",
    "polarity",
]

NEAR_DUPLICATE = 0.92
RELATED = 0.85
MIN_OVERLAP = 0.5
CONTRADICTABLE = frozenset({Kind.FACT, Kind.INSIGHT, Kind.CAUSAL_LINK, Kind.HEURISTIC, Kind.CONSTRAINT,
                            Kind.PREFERENCE})
_BLOCK = 512

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?\s*(?:%|bps|[kmb]\b)?", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z0-9_-]+")
_NEGATIONS = frozenset({"not", "no", "never", "avoid", "dont", "don't", "cannot", "can't", "without", "stop",
                        "isn't", "aren't", "won't", "doesn't", "neither", "nor"})
_STOP = frozenset({"the", "and", "for", "with", "that", "this", "from", "into", "when", "than", "then", "are",
                   "was", "were", "has", "have", "had", "its", "per", "our", "any", "all", "but", "out", "off",
                   "over", "under", "after", "before", "via", "on", "in", "of", "to", "at", "by", "is", "be"})


@dataclass(frozen=True, slots=True)
class Similar:
    """A live entry as compression sees it."""

    id: str
    kind: Kind
    content: str
    own: bool
    base_confidence: float
    evidence: int
    created_ms: int
    verified: bool = True  # not a sibling's entry still in quarantine (trust.py)


@dataclass(frozen=True, slots=True)
class Merge:
    """`loser` is superseded by `winner`, which takes `evidence` (its own plus the cluster's)."""

    winner: str
    loser: str
    reason: str  # "exact" | "near"
    evidence: int


@dataclass(frozen=True, slots=True)
class Supersede:
    newer: str
    older: str
    reason: str  # "numbers" | "polarity"


def normalised_text(text: str) -> str:
    """Case, Unicode form, punctuation and spacing removed; digits, %, . and $ kept."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w%$.]+|(?<!\d)\.|\.(?!\d)", " ", folded).split())


def numbers_in(text: str) -> tuple[str, ...]:
    """The numbers a text states, normalised ("$100,000" and "100000" agree; "5 %" is "5%"), sorted."""
    found = (m.group(0).replace(",", "").replace(" ", "").lower() for m in _NUMBER.finditer(text))
    return tuple(sorted(found))


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold().replace("’", "'")) if w not in _STOP)


def polarity(text: str) -> bool:
    """True when the text negates (an odd number of negation words)."""
    words = re.findall(r"[a-z']+", text.casefold().replace("’", "'"))
    return sum(w in _NEGATIONS for w in words) % 2 == 1


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _strength(s: Similar) -> tuple[bool, bool, float, int, int, str]:
    # max() picks the strongest: own, verified (a quarantined entry never absorbs a released one: an
    # attacker's near-copy cannot launder itself into the honest entry's place), confident, evidenced,
    # older (−created: the author's clock, so it comes last), smaller id (inverted below)
    return (s.own, s.verified, s.base_confidence, s.evidence, -s.created_ms, _invert(s.id))


def _invert(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(ch)) for ch in text)


class _Groups:
    """Union-find over 0..n-1 (path halving; the smaller index is a group's root)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> int | None:
        """Join the groups of a and b; the new root, or None if they were one group already."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return None
        self.parent[max(ra, rb)] = min(ra, rb)
        return min(ra, rb)

    def groups(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            out.setdefault(self.find(i), []).append(i)
        return out


def _groups_by_kind(items: Iterable[Similar]) -> list[list[Similar]]:
    """The entries of each kind, sorted by id; kinds in a fixed order (the results are deterministic)."""
    by_kind: dict[Kind, list[Similar]] = {}
    for s in sorted(items, key=lambda s: s.id):
        by_kind.setdefault(s.kind, []).append(s)
    return [group for _kind, group in sorted(by_kind.items())]


def _close_pairs(
    group: Sequence[Similar], vectors: Mapping[str, NDArray[np.float32]], fresh: Collection[str], threshold: float
) -> list[tuple[int, int, float]]:
    """(i, j, cosine), i < j, for pairs with a vector each, one of them fresh, cosine ≥ threshold."""
    index = [i for i, s in enumerate(group) if s.id in vectors]
    if len(index) < 2:
        return []
    matrix = np.stack([vectors[group[i].id] for i in index]).astype(np.float32, copy=False)
    fresh_rows = [k for k, i in enumerate(index) if group[i].id in fresh]
    pairs: set[tuple[int, int, float]] = set()
    for start in range(0, len(fresh_rows), _BLOCK):
        rows = fresh_rows[start:start + _BLOCK]
        sims = matrix[rows] @ matrix.T
        for r, k in enumerate(rows):
            for other in np.flatnonzero(sims[r] >= threshold):
                if int(other) != k:
                    a, b = sorted((index[k], index[int(other)]))
                    pairs.add((a, b, round(float(sims[r, other]), 6)))
    return sorted(pairs)


def find_merges(
    live: Sequence[Similar],
    vectors: Mapping[str, NDArray[np.float32]],
    *,
    fresh: Collection[str] | None = None,
    near: float = NEAR_DUPLICATE,
    min_overlap: float = MIN_OVERLAP,
) -> list[Merge]:
    """Every duplicate cluster's losers, each with its winner; deterministic for the same input."""
    fresh_ids = {s.id for s in live} if fresh is None else set(fresh)
    merges: list[Merge] = []
    for group in _groups_by_kind(live):
        uf = _Groups(len(group))
        near_roots: set[int] = set()
        first: dict[str, int] = {}
        for i, s in enumerate(group):
            key = normalised_text(s.content)
            if key in first:  # a dictionary lookup: exact duplicates are checked over every live entry
                uf.union(first[key], i)
            first.setdefault(key, i)
        for i, j, _cos in _close_pairs(group, vectors, fresh_ids, near):
            a, b = group[i].content, group[j].content
            if (numbers_in(a) == numbers_in(b) and polarity(a) == polarity(b)
                    and _overlap(_words(a), _words(b)) >= min_overlap):
                root = uf.union(i, j)
                near_roots.add(uf.find(i) if root is None else root)
        reason = {root: "near" if any(uf.find(r) == root for r in near_roots) else "exact"
                  for root in uf.groups()}
        for root, members in sorted(uf.groups().items()):
            if len(members) < 2:
                continue
            winner = max((group[i] for i in members), key=_strength)
            # The winner is never more trusted than its least-trusted source: a quarantined member's
            # evidence does not pass to it.
            total = sum(group[i].evidence for i in members if group[i].verified or group[i].id == winner.id)
            merges.extend(Merge(winner.id, group[i].id, reason[root], total)
                          for i in sorted(members, key=lambda i: group[i].id) if group[i].id != winner.id)
    return merges


def find_contradictions(
    live: Sequence[Similar],
    vectors: Mapping[str, NDArray[np.float32]],
    *,
    fresh: Collection[str] | None = None,
    related: float = RELATED,
    min_overlap: float = MIN_OVERLAP,
) -> list[Supersede]:
    """Each older own entry contradicted by a newer own one, superseded by the newest that contradicts it."""
    fresh_ids = {s.id for s in live} if fresh is None else set(fresh)
    newest: dict[str, tuple[int, str, str]] = {}  # older id -> (created_ms, newer id, reason)
    for group in _groups_by_kind(s for s in live if s.own and s.kind in CONTRADICTABLE):
        for i, j, _cos in _close_pairs(group, vectors, fresh_ids, related):
            a, b = group[i], group[j]
            if a.created_ms == b.created_ms or _overlap(_words(a.content), _words(b.content)) < min_overlap:
                continue
            if numbers_in(a.content) != numbers_in(b.content):
                why = "numbers"
            elif polarity(a.content) != polarity(b.content):
                why = "polarity"
            else:
                continue
            older, newer = (a, b) if a.created_ms < b.created_ms else (b, a)
            best = newest.get(older.id)
            if best is None or (newer.created_ms, newer.id) > best[:2]:
                newest[older.id] = (newer.created_ms, newer.id, why)
    return [Supersede(newer, older, why) for older, (_ms, newer, why) in sorted(newest.items())]


def related_clusters(
    live: Sequence[Similar],
    vectors: Mapping[str, NDArray[np.float32]],
    *,
    fresh: Collection[str] | None = None,
    related: float = RELATED,
    max_size: int = 8,
) -> list[tuple[str, ...]]:
    """Groups of one kind whose members are pairwise-linked at cosine ≥ `related` (what the
    optional LLM pass is asked about), each sorted, at most `max_size` members, in a stable order."""
    fresh_ids = {s.id for s in live} if fresh is None else set(fresh)
    out: list[tuple[str, ...]] = []
    for group in _groups_by_kind(live):
        uf = _Groups(len(group))
        for i, j, _cos in _close_pairs(group, vectors, fresh_ids, related):
            uf.union(i, j)
        out.extend(tuple(sorted(group[i].id for i in members)[:max_size])
                   for members in uf.groups().values() if len(members) > 1)
    return sorted(out)
