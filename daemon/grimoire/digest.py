"""The memory digest for the golem's next LLM call: `<agent_memory>` XML, Anthropic
`search_result` content blocks, or JSON — pure, deterministic, within a token budget.

Tokens are counted as ⌈characters / 4⌉ of the rendered output, and the budget is a hard
ceiling on the whole document. Entries are taken in priority order and one that does not
fit is skipped (a smaller one further down may still fit), up to `k` (default 10):

1. pinned entries (config `digest.pinned_tags` / `digest.pinned_fact_keys`: structured
   lookup before search);
2. ranked hits within their kind's cap (`DEFAULT_PER_KIND`, overridden by `[digest] kind_caps`:
   `per_kind_caps`), so one chatty kind cannot
   crowd out the warnings when other kinds compete;
3. then the hits the caps held back, in rank order: caps reserve room for other kinds only
   when there are other kinds to fill it — slots are never left empty.

Siblings' entries still in quarantine (trust.py) reach the ranked hits only on trial (a
member's new entry, or a warning of an author who is not suspect), marked
(`verified="false"`, `"unverified": true`, an `[unverified]` title); one sibling holds at most
`max(1, ⌊0.3·k⌋)` of the ranked hits and one unverified entry, and a sibling without a proven
record here (`trust.proven`) one entry in all (`diverse_hits`).

The document lists pinned entries first, then the rest in rank order with the external
results (Styx's answer, `ExternalItem`, at their own four-factor rank: scoring.external_rank)
placed among them by rank, a tie to the local entry; then the episodic section (this golem's own
episodes, `EpisodeHit`, ranked by episode_recall.py; config `digest.episode_tokens`, off by
default). The external results and the episodes each take at most their own share of the budget
(`[styx.injection] max_tokens`, `digest.episode_tokens`) and never crowd the local entries out
of `k`. Each entry shows its date (its event time's UTC day, else its written day) in XML and
JSON. The same store
and query give the same bytes. Sibling text is data, never instructions: every character that
could close a tag or open markup is escaped, and control characters are replaced.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from crdt import Kind

from .episode_recall import EpisodeHit
from .recall import Hit, RecallQuery
from .records import Entry
from .retrieval import Retriever
from .scoring import age_days
from .store import Grimoire
from .trust import Release, TrustPolicy, diversify, proven

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_PER_KIND", "DigestItem", "ExternalItem", "build_digest", "compose_digest", "compose_json",
    "compose_search_results", "compose_xml", "digest_query", "diverse_hits", "per_kind_caps", "render_json",
    "render_search_results", "render_xml", "tokens",
]

DEFAULT_BUDGET_TOKENS = 3_000
DEFAULT_PER_KIND: Mapping[Kind, int] = {
    Kind.WARNING: 4, Kind.ANTI_KNOWLEDGE: 3, Kind.REGIME_SHIFT: 2, Kind.DEATH_REFLECTION: 2, Kind.HEURISTIC: 3,
    Kind.INSIGHT: 4, Kind.CAUSAL_LINK: 2, Kind.FACT: 3, Kind.CONSTRAINT: 2, Kind.PREFERENCE: 2,
    Kind.STRATEGY_OUTCOME: 2, Kind.EPISODE_SUMMARY: 2,
}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def per_kind_caps(overrides: Mapping[str, int] | None) -> dict[Kind, int]:
    """`DEFAULT_PER_KIND` with `overrides` (kind name → cap: config `[digest] kind_caps`) applied."""
    return {**DEFAULT_PER_KIND, **{Kind(kind): cap for kind, cap in (overrides or {}).items()}}


def tokens(text: str) -> int:
    """The budget's token estimate: one token per 4 characters, rounded up."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class DigestItem:
    """An entry as it enters the digest (rank order is the caller's)."""

    entry: Entry
    score: float
    pinned: bool = False
    unverified: bool = False  # a sibling's entry shown before corroboration (trust.py): marked in every format


@dataclass(frozen=True, slots=True)
class ExternalItem:
    """A result from outside the Grimoire (Styx) as it enters the digest: data, never instructions."""

    id: str
    kind: str
    content: str
    confidence: float
    score: float
    source: str  # "styx:<layer>"


def _escape(text: str) -> str:
    text = _CONTROL.sub("\ufffd", text)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&apos;"))


def _age(days: float) -> str:
    if days < 1 / 24:
        return f"{max(0, int(days * 1440))}m"
    if days < 1:
        return f"{int(days * 24)}h"
    return f"{int(days)}d"


def _date(ms: int) -> str:
    """A day in UTC (YYYY-MM-DD): what the digest shows of an entry's or an episode's time."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def entry_time_ms(e: Entry) -> int:
    """An entry's time as the digest shows it: its event time where one is given, else when written."""
    b = e.body
    return b.created.ms if b.occurred_ms is None else b.occurred_ms


def _select(items: Sequence[DigestItem], *, k: int, per_kind: Mapping[Kind, int],
            include_sensitive: bool) -> list[tuple[int, DigestItem]]:
    """(position in `items`, item) in priority order: pinned, ranked within the kind caps, the rest."""
    counts: Counter[Kind] = Counter()
    pinned: list[tuple[int, DigestItem]] = []
    capped: list[tuple[int, DigestItem]] = []
    overflow: list[tuple[int, DigestItem]] = []
    seen: set[str] = set()
    for position, item in enumerate(items):
        if item.entry.id in seen:
            continue
        seen.add(item.entry.id)
        if item.entry.body.sensitivity.value == "sensitive" and not include_sensitive:
            continue
        if item.pinned:
            pinned.append((position, item))
            continue
        kind = item.entry.body.kind
        if counts[kind] >= per_kind.get(kind, k):
            overflow.append((position, item))
            continue
        counts[kind] += 1
        capped.append((position, item))
    return pinned + capped + overflow


def _compose(items: Sequence[DigestItem], render: Callable[[DigestItem], str], *, head: str, sep: str, tail: str,
             budget_tokens: int, k: int, per_kind: Mapping[Kind, int],
             include_sensitive: bool) -> tuple[str, list[str]]:
    """The document and the ids in it: pieces taken in priority order while the whole stays within
    the budget (one that does not fit is skipped), laid out pinned first, then in rank order."""
    document, ids, _, _ = _compose_with(items, render, head=head, sep=sep, tail=tail, budget_tokens=budget_tokens, k=k,
                                     per_kind=per_kind, include_sensitive=include_sensitive)
    return document, ids


def _share(pieces: Sequence[tuple[str, str]], *, tokens_share: int, room: int, sep: str) -> list[tuple[str, str]]:
    """The (id, piece) pairs taken in order within `tokens_share` tokens and `room` characters."""
    share = min(tokens_share * 4, room)
    taken: list[tuple[str, str]] = []
    spent = 0
    for piece_id, piece in pieces:
        cost = len(piece) + len(sep)  # a separator, at most, joins it to the rest
        if spent + cost <= share:
            taken.append((piece_id, piece))
            spent += cost
    return taken


def _compose_with(items: Sequence[DigestItem], render: Callable[[DigestItem], str], *, head: str, sep: str,
                  tail: str, budget_tokens: int, k: int, per_kind: Mapping[Kind, int], include_sensitive: bool,
                  external: Sequence[tuple[str, str, float]] = (), external_tokens: int = 0,
                  episodes: Sequence[tuple[str, str]] = (), episode_tokens: int = 0,
                  ) -> tuple[str, list[str], list[str], list[str]]:
    """`_compose`, plus external (id, piece, rank) triples in their order within `external_tokens`,
    each laid out before the first unpinned local entry it outranks (a tie: after it), and episode
    (id, piece) pairs within `episode_tokens`, after the local entries; all within the budget.
    Returns the document and the local, external and episode ids."""
    limit = budget_tokens * 4  # characters
    if len(head) + len(tail) > limit:
        return "", [], [], []
    used = len(head) + len(tail)
    rank_of = {ext_id: rank for ext_id, _, rank in external}
    outside = [(i, p, rank_of[i]) for i, p in _share([(i, p) for i, p, _ in external],
                                                      tokens_share=external_tokens, room=limit - used, sep=sep)]
    used += sum(len(p) + len(sep) for _, p, _ in outside)
    episodic = _share(episodes, tokens_share=episode_tokens, room=limit - used, sep=sep)
    used += sum(len(p) + len(sep) for _, p in episodic)
    taken: list[tuple[int, DigestItem, str]] = []
    for position, item in _select(items, k=k, per_kind=per_kind, include_sensitive=include_sensitive):
        if len(taken) >= k:
            break
        piece = render(item)
        cost = len(piece) + (len(sep) if taken else 0)
        if used + cost <= limit:
            taken.append((position, item, piece))
            used += cost
    taken.sort(key=lambda t: (not t[1].pinned, t[0]))
    waiting = sorted(outside, key=lambda x: -x[2])  # best first, stable
    pieces: list[str] = []
    for _, item, piece in taken:
        while waiting and not item.pinned and waiting[0][2] > item.score:
            pieces.append(waiting.pop(0)[1])
        pieces.append(piece)
    pieces += [p for _, p, _ in waiting] + [p for _, p in episodic]
    return (head + sep.join(pieces) + tail, [item.entry.id for _, item, _ in taken], [i for i, _, _ in outside],
            [i for i, _ in episodic])


def shown_confidence(e: Entry) -> float:
    """The confidence a digest shows the agent: the pooled belief (belief.py) where recall
    computed it, else this golem's local confidence (a pinned entry). A sibling's entry on
    trial (trust.py) shows its provenance's confidence — the pooled belief over the author's
    stated confidence — and is marked unverified (`verified="false"`, `"unverified": true`)."""
    return e.local_confidence if e.belief is None else e.belief.belief


def _xml_piece(item: DigestItem, now_ms: int) -> str:
    e, b = item.entry, item.entry.body
    mark = ' verified="false"' if item.unverified else ""
    return (
        f'<memory type="{b.kind.value}" importance="{b.importance:.2f}" confidence="{shown_confidence(e):.2f}" '
        f'age="{_age(age_days(b.created.ms, now_ms))}" date="{_date(entry_time_ms(e))}" '
        f'source="{_escape(e.provenance)}"{mark} id="{b.id}">'
        f"{_escape(b.content)}</memory>\n"
    )


def _xml_external(item: ExternalItem) -> str:
    return (f'<memory type="{_escape(item.kind)}" confidence="{item.confidence:.2f}" source="{_escape(item.source)}" '
            f'id="{_escape(item.id)}">{_escape(item.content)}</memory>\n')


def _json_external(item: ExternalItem) -> str:
    return _dump({"id": item.id, "type": item.kind, "confidence": round(item.confidence, 3), "source": item.source,
                  "score": round(item.score, 6), "pinned": False, "content": item.content})


def _block_external(item: ExternalItem) -> str:
    layer = item.source.partition(":")[2] or "styx"
    return _dump({"type": "search_result", "source": f"styx://{layer}/{item.kind}/{item.id}",
                  "title": " ".join(item.content.split())[:80], "content": [{"type": "text", "text": item.content}],
                  "citations": {"enabled": True}})


def _xml_episode(hit: EpisodeHit) -> str:
    ep = hit.episode
    protocol = "" if ep.protocol is None else f' protocol="{_escape(ep.protocol)}"'
    return (f'<episode date="{_date(ep.observed_ms)}" importance="{ep.importance:.2f}"{protocol} '
            f'id="{ep.id}">{_escape(ep.summary)}</episode>\n')


def _json_episode(hit: EpisodeHit) -> str:
    ep = hit.episode
    return _dump({"id": ep.id, "type": "episode", "date": _date(ep.observed_ms), "importance": round(ep.importance, 3),
                  "protocol": ep.protocol, "score": round(hit.score, 6), "content": ep.summary})


def _block_episode(hit: EpisodeHit) -> str:
    ep = hit.episode
    return _dump({"type": "search_result", "source": f"episode://local/{ep.id}",
                  "title": f"{_date(ep.observed_ms)} " + " ".join(ep.summary.split())[:80],
                  "content": [{"type": "text", "text": ep.summary}], "citations": {"enabled": True}})


def compose_xml(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                k: int = 10, per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND,
                include_sensitive: bool = False) -> tuple[str, list[str]]:
    """`<agent_memory>` with one `<memory>` per entry, never over `budget_tokens`; and the ids in it."""
    return _compose(items, lambda item: _xml_piece(item, now_ms), head="<agent_memory>\n", sep="",
                    tail="</agent_memory>\n", budget_tokens=budget_tokens, k=k, per_kind=per_kind,
                    include_sensitive=include_sensitive)


def render_xml(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS, k: int = 10,
               per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND, include_sensitive: bool = False) -> str:
    """`<agent_memory>` with one `<memory>` per entry; never over `budget_tokens`."""
    return compose_xml(items, now_ms=now_ms, budget_tokens=budget_tokens, k=k, per_kind=per_kind,
                       include_sensitive=include_sensitive)[0]


def _block(item: DigestItem, namespace: str) -> dict[str, Any]:
    b = item.entry.body
    title = ("[unverified] " if item.unverified else "") + " ".join(b.content.split())[:80]
    return {
        "type": "search_result",
        "source": f"grimoire://{namespace}/{b.kind.value}/{b.id}",
        "title": title,
        "content": [{"type": "text", "text": b.content}],
        "citations": {"enabled": True},
    }


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def compose_search_results(items: Sequence[DigestItem], *, namespace: str,
                           budget_tokens: int = DEFAULT_BUDGET_TOKENS, k: int = 10,
                           per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND,
                           include_sensitive: bool = False) -> tuple[str, list[str]]:
    """A JSON array of Anthropic `search_result` blocks (citations enabled), within budget; and the ids."""
    return _compose(items, lambda item: _dump(_block(item, namespace)), head="[", sep=",", tail="]",
                    budget_tokens=budget_tokens, k=k, per_kind=per_kind, include_sensitive=include_sensitive)


def render_search_results(items: Sequence[DigestItem], *, namespace: str, budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                          k: int = 10, per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND,
                          include_sensitive: bool = False) -> str:
    """A JSON array of Anthropic `search_result` blocks (citations enabled); within budget."""
    return compose_search_results(items, namespace=namespace, budget_tokens=budget_tokens, k=k, per_kind=per_kind,
                                  include_sensitive=include_sensitive)[0]


def _json_piece(item: DigestItem, now_ms: int) -> str:
    e, b = item.entry, item.entry.body
    return _dump({
        "id": b.id, "type": b.kind.value, "importance": round(b.importance, 3),
        "confidence": round(shown_confidence(e), 3), "age": _age(age_days(b.created.ms, now_ms)),
        "date": _date(entry_time_ms(e)),
        "source": e.provenance, "score": round(item.score, 6), "pinned": item.pinned, "content": b.content,
        **({"unverified": True} if item.unverified else {}),
    })


def compose_json(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                 k: int = 10, per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND,
                 include_sensitive: bool = False) -> tuple[str, list[str]]:
    """A JSON array of {id, type, importance, confidence, age, source, score, pinned, content}; and the ids."""
    return _compose(items, lambda item: _json_piece(item, now_ms), head="[", sep=",", tail="]",
                    budget_tokens=budget_tokens, k=k, per_kind=per_kind, include_sensitive=include_sensitive)


def render_json(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS, k: int = 10,
                per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND, include_sensitive: bool = False) -> str:
    """A JSON array of {id, type, importance, confidence, age, source, score, pinned, content}; within budget."""
    return compose_json(items, now_ms=now_ms, budget_tokens=budget_tokens, k=k, per_kind=per_kind,
                        include_sensitive=include_sensitive)[0]


def digest_query(text: str, *, k: int, include_sensitive: bool,
                 pad: tuple[float, float, float] | None = None, keyword_only: bool = False,
                 since_ms: int | None = None, until_ms: int | None = None) -> RecallQuery:
    """The recall a digest of `k` entries ranks from: wider than k, since caps and the budget skip
    some; `pad`, the golem's current affect, feeds the rank's PAD factor (None: neutral);
    `keyword_only`: ranked from keywords alone (no embedding model); `since_ms`..`until_ms`:
    the entries' time bounds (event time, else written time)."""
    return RecallQuery(text=text, k=max(4 * k, 40), include_sensitive=include_sensitive, pad=pad,
                       keyword_only=keyword_only, since_ms=since_ms, until_ms=until_ms)


def diverse_hits(hits: Sequence[Hit], *, k: int, policy: TrustPolicy,
                 limited: Collection[str] = ()) -> list[DigestItem]:
    """`hits` as digest items, within the per-sibling caps (`trust.diversify`; `limited`:
    authors held to one entry), unverified ones marked."""
    unverified = [h.release == Release.UNVERIFIED.value for h in hits]
    keep = diversify([(h.entry.body.author, h.entry.provenance == "clade", u) for h, u in zip(hits, unverified,
                                                                                            strict=True)],
                     k=k, policy=policy, limited=limited) if policy.enabled else range(len(hits))
    return [DigestItem(hits[i].entry, hits[i].score, unverified=unverified[i]) for i in keep]


def build_digest(retriever: Retriever, *, text: str, now_ms: int, budget_tokens: int, k: int, fmt: str,
                 include_sensitive: bool, namespace: str, embed_limit: int | None = None,
                 query_vector: NDArray[np.float32] | None = None, store: Grimoire | None = None,
                 pad: tuple[float, float, float] | None = None, keyword_only: bool = False,
                 since_ms: int | None = None, until_ms: int | None = None, **compose: Any) -> dict[str, Any]:
    """The digest for a caller that owns its store (`Retriever`: the CLI without a daemon,
    tests, benches): `Retriever.recall` of `digest_query` within `since_ms`..`until_ms`, then
    `compose_digest` (its keyword arguments pass through)."""
    wide = digest_query(text, k=k, include_sensitive=include_sensitive, pad=pad, keyword_only=keyword_only,
                        since_ms=since_ms, until_ms=until_ms)
    hits = retriever.recall(wide, now_ms=now_ms, embed_limit=embed_limit, query_vector=query_vector, store=store)
    return compose_digest(hits, store or retriever.store, retriever.trust, now_ms=now_ms,
                          budget_tokens=budget_tokens, k=k, fmt=fmt, include_sensitive=include_sensitive,
                          namespace=namespace, **compose)


def compose_digest(hits: Sequence[Hit], reader: Grimoire, policy: TrustPolicy, *, now_ms: int, budget_tokens: int,
                   k: int, fmt: str, include_sensitive: bool, namespace: str, pinned_tags: Sequence[str] = (),
                   pinned_fact_keys: Sequence[str] = (), external: Sequence[ExternalItem] = (),
                   external_tokens: int = 0, kind_caps: Mapping[str, int] | None = None,
                   episodes: Sequence[EpisodeHit] = (), episode_tokens: int = 0) -> dict[str, Any]:
    """Pinned entries (read on `reader`), then `hits` (a recall of `digest_query`: wider than k,
    as caps and the budget skip some) within the per-sibling caps, with `external` results
    placed among them by rank within `external_tokens`, then `episodes` (this golem's own,
    ranked: episode_recall.py) within `episode_tokens`, rendered as `fmt`; returns {format,
    tokens, budget_tokens, entries, pinned, external, episodes, document}. Has no side effect:
    what the model then cites is reported back through `apply_feedback`."""
    pinned = reader.pinned(tags=pinned_tags, fact_keys=pinned_fact_keys) if (pinned_tags or pinned_fact_keys) else []
    items = [DigestItem(e, 1.0, pinned=True) for e in pinned]
    view = reader.trust_view(policy, now_ms=now_ms) if hits else None
    siblings = {h.entry.body.author for h in hits if h.entry.provenance == "clade"}
    limited = {a for a in siblings if view is None or a not in view.authors
               or not proven(view.authors[a], policy)}
    items += diverse_hits(hits, k=k, policy=policy, limited=limited)
    local_ids = {item.entry.id for item in items}
    outside = [x for x in external if x.id not in local_ids]  # our own entry, back from Styx: once is enough
    render_local: Callable[[DigestItem], str]
    render_episode: Callable[[EpisodeHit], str]
    if fmt == "xml":
        render_local, render_external = (lambda item: _xml_piece(item, now_ms)), _xml_external
        render_episode = _xml_episode
        head, sep, tail = "<agent_memory>\n", "", "</agent_memory>\n"
    elif fmt == "json":
        render_local, render_external, render_episode = (lambda item: _json_piece(item, now_ms)), _json_external, \
            _json_episode
        head, sep, tail = "[", ",", "]"
    else:
        render_local, render_external = (lambda item: _dump(_block(item, namespace))), _block_external
        render_episode = _block_episode
        head, sep, tail = "[", ",", "]"
    document, chosen, chosen_external, chosen_episodes = _compose_with(
        items, render_local, head=head, sep=sep, tail=tail, budget_tokens=budget_tokens, k=k,
        per_kind=per_kind_caps(kind_caps), include_sensitive=include_sensitive,
        external=[(x.id, render_external(x), x.score) for x in outside], external_tokens=external_tokens,
        episodes=[(h.episode.id, render_episode(h)) for h in episodes], episode_tokens=episode_tokens)
    return {"format": fmt, "tokens": tokens(document), "budget_tokens": budget_tokens, "entries": chosen,
            "pinned": [e.id for e in pinned if e.id in chosen], "external": chosen_external,
            "episodes": chosen_episodes, "document": document}
