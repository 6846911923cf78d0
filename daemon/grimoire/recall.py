"""Recall, the one path every ranked read takes: gather a query's evidence, then rank it.

`Recall.hits(query, reader, vector)` is what `POST /v1/memory/search`, the digest, the agent and
MCP tools and the offline CLI all call (docs/design/retrieval.md):

1. **gather** (I/O, on one read snapshot of the store and one snapshot of the vector index):
   the entries nearest the query's vector (`IndexSnapshot.nearest`, filtered by kind, category
   and sensitivity before the cut), its best keyword matches (FTS5) with its stems' weights,
   then the filters that depend on the moment — archived, faded, thresholds, time bounds,
   siblings' entries in quarantine and entries the clade's evidence refuted (unless
   `include_unverified`: trust.py, belief.py) — widening the vector search while too few pass
   (`_widen`), so a flood that fails them cannot push a released entry out;
2. **rank** (pure): each candidate's relevance (`fusion.relevance` of its cosine and its
   lexical coverage of the query; keyword-only: BM25 relative to the best), the other factors
   (`scoring`), normalised over the candidates, at most `unverified_per_author` entries on
   trial per author.

Recall has no side effect: it writes nothing (a vector, an access count), so a CLI may run it
while a daemon owns the store. An entry's access count grows when it is *used* (cited, or fed
back: `retrieval.apply_feedback`), never because it appeared in a list.

The query's vector comes from the caller (the daemon embeds it on a worker thread, beside the
FTS5 lookup); None is a keyword-only recall.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from crdt import Category, Kind, Sensitivity
from daemon.errors import UsageError

from . import fusion, lexical, scoring
from .belief import Belief, BeliefPolicy
from .curator.decay import RETRIEVAL_THRESHOLD
from .evidence_store import beliefs
from .keywords import query_terms
from .records import Entry
from .rows import RankFields
from .trust import CAUTIONS, Release, TrustPolicy
from .trust_store import entry_states
from .vector_index import Eligible, IndexSnapshot

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .store import Grimoire

__all__ = ["CANDIDATES", "MAX_EXAMINED", "Evidence", "Halves", "Hit", "Keywords", "Ranked", "Recall", "RecallPolicy",
           "RecallQuery", "factors_of", "gather", "keywords", "passes", "rank", "vector_half"]

CANDIDATES = 64
# Widening stops here once k candidates passed (a filter that holds back nearly everything).
MAX_EXAMINED = 1_024


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuery:
    text: str
    k: int = 10
    kinds: tuple[Kind, ...] = ()
    categories: tuple[Category, ...] = ()
    min_importance: float | None = None
    min_confidence: float | None = None
    include_sensitive: bool = False
    pad: tuple[float, float, float] | None = None
    keyword_only: bool = False
    include_unverified: bool = False  # also what digests withhold: a sibling's unverified entries (trust.py)
    # and entries the clade's evidence refuted (belief.py)
    # Time bounds (Unix ms, inclusive) on each entry's time: its event time where one is given,
    # else when it was written (`RankFields.event_ms`). None: unbounded.
    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Keywords:
    """A query's keyword evidence: its best FTS5 matches, (id, BM25) best first, and the IDF of
    each of its informative stems (what lexical coverage weighs an entry's words by)."""

    candidates: list[tuple[str, float]]
    weights: dict[str, float]


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    score: float
    factors: scoring.Factors
    via: str  # "vector", "keyword" or "both"
    release: str = "own"  # trust.Release: own, corroborated, aged, unverified


@dataclass(frozen=True, slots=True)
class RecallPolicy:
    """What ranking follows, from config: `[trust]` (quarantine, trial), how siblings' evidence
    pools (belief.py), and the lexical weight of fusion (0: cosine alone)."""

    trust: TrustPolicy = field(default_factory=TrustPolicy)
    belief: BeliefPolicy = field(default_factory=BeliefPolicy)
    lexical_weight: float = fusion.LEXICAL_WEIGHT


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one query gathered: the candidates that passed the filters (rank fields and
    searchable text) with how each was found (`via`), BM25 scores, cosines and the query's stem
    weights, each one's release (trust.Release) and pooled belief, and those on trial."""

    query: RecallQuery  # keyword_only when there was no vector
    now_ms: int
    rows: list[tuple[RankFields, str]]
    via: dict[str, str]
    bm25: dict[str, float]
    cosines: dict[str, float]
    weights: dict[str, float]
    releases: dict[str, str]
    pooled: dict[str, Belief]
    trial: dict[str, str]  # siblings' entries on trial: id -> author


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked candidate, before its entry is read."""

    id: str
    score: float
    factors: scoring.Factors
    via: str
    release: str
    belief: Belief | None


def wanted(query: RecallQuery) -> int:
    """How many candidates each half of the search brings: max(64, 5k)."""
    return max(CANDIDATES, 5 * query.k)


def eligible(query: RecallQuery) -> Eligible:
    return Eligible(kinds=query.kinds, categories=query.categories, include_sensitive=query.include_sensitive)


def keywords(query: RecallQuery, reader: Grimoire) -> Keywords:
    """The query's best FTS5 matches (kind, category and sensitivity filtered before the cut)
    and its stems' weights, from one lookup of its words in the index's vocabulary; empty when
    the query has no searchable word (a `UsageError` then only if keyword-only)."""
    try:
        terms = query_terms(reader.connection, query.text)
    except UsageError:
        if query.keyword_only:
            raise
        return Keywords([], {})
    found = reader.keyword_scores(query.text, k=wanted(query), kinds=query.kinds, terms=terms,
                                  categories=query.categories, include_sensitive=query.include_sensitive)
    return Keywords(found, terms.weights)


@dataclass(slots=True)
class _Admitted:
    rows: list[tuple[RankFields, str]] = field(default_factory=list)
    releases: dict[str, str] = field(default_factory=dict)
    pooled: dict[str, Belief] = field(default_factory=dict)
    trial: dict[str, str] = field(default_factory=dict)

    def add(self, more: _Admitted) -> None:
        self.rows += more.rows
        self.releases.update(more.releases)
        self.pooled.update(more.pooled)
        self.trial.update(more.trial)


@dataclass(frozen=True, slots=True)
class Halves:
    """A query's two halves of candidates, found apart (the daemon finds them side by side):
    its vector with the index snapshot searched and the nearest eligible entries (None: a
    keyword-only recall), and its keyword evidence."""

    vector: NDArray[np.float32] | None
    index: IndexSnapshot | None
    nearest: list[tuple[str, float]]
    found: Keywords


def vector_half(query: RecallQuery, index: IndexSnapshot | None, vector: NDArray[np.float32] | None
                ) -> tuple[NDArray[np.float32] | None, IndexSnapshot | None, list[tuple[str, float]]]:
    """The entries of `index` nearest `vector`, eligible for `query` (kind, category and
    sensitivity filtered before the cut): max(64, 5k) of them. No vector or no index: none."""
    if vector is None or index is None or query.keyword_only:
        return None, None, []
    return vector, index, index.nearest(vector, wanted(query), eligible=eligible(query))


def gather(query: RecallQuery, reader: Grimoire, halves: Halves, policy: RecallPolicy, *, now_ms: int) -> Evidence:
    """The evidence for `query` (the module docstring, step 1) from its two `halves`, the filters
    read on `reader` (call inside its `read_snapshot`); no vector: a keyword-only recall."""
    vector, index = halves.vector, halves.index
    if vector is None or index is None:
        query = replace(query, keyword_only=True)
    via = dict.fromkeys((i for i, _ in halves.nearest), "vector")
    bm25: dict[str, float] = {}
    for entry_id, score in halves.found.candidates:
        via[entry_id] = "both" if entry_id in via else "keyword"
        bm25[entry_id] = score
    admitted = _admit(reader, list(via), query, policy, now_ms)
    cosines: dict[str, float] = {}
    if vector is not None and index is not None:
        _widen(query, vector, index, reader, policy, now_ms, via, admitted, examined=len(halves.nearest))
        cosines = index.cosines([c.id for c, _ in admitted.rows], vector)
    return Evidence(query, now_ms, admitted.rows, via, bm25, cosines, halves.found.weights, admitted.releases,
                    admitted.pooled, admitted.trial)


def rank(evidence: Evidence, policy: RecallPolicy) -> list[Ranked]:
    """The candidates by score, best first, at most `query.k` (the module docstring, step 2). Pure."""
    query, rows = evidence.query, evidence.rows
    by_vector = not query.keyword_only
    weights = evidence.weights if by_vector and policy.lexical_weight else {}
    # candidate id -> its stems (coverage needs them only when the query has a weighted stem)
    held = lexical.stem_sets({c.id: text for c, text in rows}) if weights else {}
    reach = lexical.reach(weights, held.values()) if weights else 0.0  # what any candidate covers
    best = max(evidence.bm25.values(), default=0.0)
    candidates = [c for c, _ in rows]
    raw = []
    for cand in candidates:
        if by_vector:
            # Relevance: cosine and lexical coverage, fused (fusion.py says how and why).
            covered = lexical.coverage(weights, held[cand.id]) if cand.id in held else 0.0
            semantic = fusion.relevance(evidence.cosines.get(cand.id), covered, reach, weight=policy.lexical_weight)
        else:  # keyword-only: BM25 relative to the best match
            semantic = evidence.bm25.get(cand.id, 0.0) / best if best > 0 else 0.0
        raw.append(factors_of(cand, semantic, query.pad, evidence.now_ms))
    ordered = sorted(zip(candidates, scoring.normalise(raw), strict=True), key=lambda cf: (-cf[1].score, cf[0].id))
    out: list[Ranked] = []
    taken: dict[str, int] = {}
    for cand, factors in ordered:
        # A member with no record takes one slot of an answer, not all of them (trust.py).
        author = evidence.trial.get(cand.id)
        if author is not None:
            if taken.get(author, 0) >= policy.trust.unverified_per_author:
                continue
            taken[author] = taken.get(author, 0) + 1
        out.append(Ranked(cand.id, factors.score, factors, evidence.via[cand.id],
                          evidence.releases.get(cand.id, "own"), evidence.pooled.get(cand.id)))
        if len(out) == query.k:
            break
    return out


def hits(reader: Grimoire, ranked: list[Ranked]) -> list[Hit]:
    """The ranked candidates' entries, in rank order (one read; an entry gone meanwhile is skipped)."""
    full = {e.id: e for e in reader.get_many([r.id for r in ranked])}
    return [Hit(replace(full[r.id], belief=r.belief), r.score, r.factors, r.via, r.release)
            for r in ranked if r.id in full]


class Recall:
    """Recall under a policy that follows the config (`policy()` is read at each call, so a
    SIGHUP that changes `[trust]` reaches the next search) over one vector index (`index()`:
    its current snapshot, None before it is loaded)."""

    def __init__(self, policy: Callable[[], RecallPolicy], index: Callable[[], IndexSnapshot | None]) -> None:
        self.policy = policy
        self.index = index

    def hits(self, query: RecallQuery, reader: Grimoire, vector: NDArray[np.float32] | None, *,
             now_ms: int) -> list[Hit]:
        """The top `query.k` entries for `query` (its `vector`: None for keyword-only), both halves
        and the filters read on one snapshot of `reader`. Raises `UsageError` for an empty query,
        or a keyword-only one without a searchable word."""
        _check(query)
        with reader.read_snapshot():
            found = keywords(query, reader)
            return self.ranked(query, reader, Halves(*vector_half(query, self.index(), vector), found), now_ms=now_ms)

    def ranked(self, query: RecallQuery, reader: Grimoire, halves: Halves, *, now_ms: int) -> list[Hit]:
        """`hits` from halves found apart (the daemon's: side by side); the filters read on `reader`."""
        _check(query)
        policy = self.policy()
        with reader.read_snapshot():
            return hits(reader, rank(gather(query, reader, halves, policy, now_ms=now_ms), policy))


def _check(query: RecallQuery) -> None:
    if not query.text.strip():
        raise UsageError("query must not be empty")


def _admit(reader: Grimoire, ids: list[str], query: RecallQuery, policy: RecallPolicy, now: int) -> _Admitted:
    """Of `ids`, the entries the query's filters let through: `passes` (live, kind,
    sensitivity, faded, thresholds, time), then quarantine and refutation unless
    `include_unverified`; with each one's release and pooled belief."""
    rows = [(c, text) for c, text in reader.rank_rows(ids) if passes(c, query, now)]
    out = _Admitted()
    if not rows:
        return out
    view = reader.trust_view(policy.trust, now_ms=now)
    if view is not None:
        states = entry_states(reader.connection, [c.id for c, _ in rows], view, now_ms=now, policy=policy.trust)
        out.releases = {i: release.value for i, (_, release, _) in states.items()}
        if not query.include_unverified:
            rows = [(c, text) for c, text in rows if c.id not in states or states[c.id][2]]
            out.trial = {i: facts.author for i, (facts, release, shown) in states.items()
                         if shown and release is Release.UNVERIFIED and facts.kind not in CAUTIONS}
    out.pooled = beliefs(reader.connection, [c.id for c, _ in rows], view, policy.belief)
    if not query.include_unverified:  # refuted by the clade's evidence (belief.py): withheld
        rows = [(c, text) for c, text in rows if not (c.id in out.pooled and out.pooled[c.id].refuted)]
    out.rows = rows
    return out


def _widen(query: RecallQuery, vec: NDArray[np.float32], index: IndexSnapshot, reader: Grimoire,
           policy: RecallPolicy, now: int, via: dict[str, str], admitted: _Admitted, *, examined: int) -> None:
    """Widen the vector search past its first `examined` while fewer than `wanted(query)` of its
    candidates passed the filters: the next page (as large as all examined so far), until
    enough pass, the index runs out, or `MAX_EXAMINED` were looked at with at least k passed (a
    filter that holds back nearly everything costs at most that, unless fewer than k passed:
    then it goes on to the end). Adds to `via` and `admitted` what it finds. Entries on trial do
    not count as passing, so a flood of them cannot stop the search before the released answer."""
    want = wanted(query)
    passed = sum(1 for c, _ in admitted.rows if via[c.id] != "keyword" and c.id not in admitted.trial)
    if examined < want:
        return  # the first page was not full: every eligible entry was seen
    while passed < want and not (examined >= MAX_EXAMINED and passed >= query.k):
        page = index.nearest(vec, examined, eligible=eligible(query), offset=examined)
        if not page:
            break
        examined += len(page)
        fresh = [i for i, _ in page if i not in via]
        for entry_id in fresh:
            via[entry_id] = "vector"
        for entry_id, _ in page:
            if via[entry_id] == "keyword":
                via[entry_id] = "both"
        more = _admit(reader, fresh, query, policy, now)
        passed += sum(1 for c, _ in more.rows if c.id not in more.trial)
        admitted.add(more)
        if len(page) < examined // 2:
            break  # the last page came back short: the index ran out


def composite_importance(c: RankFields, now: int) -> float:
    return scoring.importance(explicit=c.importance, access_count=c.access_count,
                              days=scoring.age_days(c.created_ms, now))


def passes(c: RankFields, q: RecallQuery, now: int) -> bool:
    if c.archived or c.status != "active":
        return False
    if q.kinds and c.kind not in q.kinds:
        return False
    if q.categories and c.category not in q.categories:
        return False
    if c.sensitivity is Sensitivity.SENSITIVE and not q.include_sensitive:
        return False
    if c.local_confidence < min(RETRIEVAL_THRESHOLD, c.base_confidence):
        return False  # faded by decay (curator/decay.py): archived soon unless used; a low base alone never hides
    if q.min_confidence is not None and c.local_confidence < q.min_confidence:
        return False
    if (q.since_ms is not None and c.event_ms < q.since_ms) or (q.until_ms is not None and c.event_ms > q.until_ms):
        return False
    return q.min_importance is None or composite_importance(c, now) >= q.min_importance


def factors_of(c: RankFields, semantic: float, pad: tuple[float, float, float] | None, now: int) -> scoring.Factors:
    return scoring.Factors(
        semantic=semantic,
        # Recency from the entry's time: its event time where one is given (an import of last
        # week's trades is a week old), else when it was written; a later use or validation renews it.
        temporal=scoring.temporal(scoring.age_days(scoring.entry_last_touched(
            event_ms=c.event_ms, created_ms=c.created_ms, used_ms=c.last_used_ms, validated_ms=c.validated_ms), now)),
        importance=composite_importance(c, now),
        pad=scoring.pad_similarity(pad, c.pad),
        source=scoring.source_factor(provenance=c.provenance, origin=c.origin, generation=c.generation,
                                     bloodstain=c.bloodstain),
    )
