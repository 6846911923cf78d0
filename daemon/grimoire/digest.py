"""The memory digest for the golem's next LLM call: `<agent_memory>` XML, Anthropic
`search_result` content blocks, or JSON — pure, deterministic, within a token budget.

Tokens are counted as ⌈characters / 4⌉ of the rendered output, and the budget is a hard
ceiling on the whole document: entries are taken in rank order and one that does not fit
is skipped (a smaller one further down may still fit). Per-kind limits cap how many
entries of one kind get in, so one chatty kind cannot crowd out the warnings. Sibling
text is data, never instructions: every character that could close a tag or open markup
is escaped, and control characters are replaced.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crdt import Kind

from .records import Entry
from .retrieval import RecallQuery, Retriever
from .scoring import age_days

__all__ = [
    "DEFAULT_PER_KIND", "DigestItem", "build_digest", "render_json", "render_search_results", "render_xml", "tokens",
]

DEFAULT_BUDGET_TOKENS = 3_000
DEFAULT_PER_KIND: Mapping[Kind, int] = {
    Kind.WARNING: 4, Kind.ANTI_KNOWLEDGE: 3, Kind.REGIME_SHIFT: 2, Kind.DEATH_REFLECTION: 2, Kind.HEURISTIC: 3,
    Kind.INSIGHT: 4, Kind.CAUSAL_LINK: 2, Kind.FACT: 3, Kind.CONSTRAINT: 2, Kind.PREFERENCE: 2,
    Kind.STRATEGY_OUTCOME: 2, Kind.EPISODE_SUMMARY: 2,
}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def tokens(text: str) -> int:
    """The budget's token estimate: one token per 4 characters, rounded up."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class DigestItem:
    """An entry as it enters the digest (rank order is the caller's)."""

    entry: Entry
    score: float


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


def _select(items: Sequence[DigestItem], *, k: int, per_kind: Mapping[Kind, int],
            include_sensitive: bool) -> list[DigestItem]:
    counts: Counter[Kind] = Counter()
    chosen = []
    for item in items:
        kind = item.entry.body.kind
        if item.entry.body.sensitivity.value == "sensitive" and not include_sensitive:
            continue
        if counts[kind] >= per_kind.get(kind, k):
            continue
        counts[kind] += 1
        chosen.append(item)
    return chosen


Piece = tuple[DigestItem, str]


def _fit(pieces: Sequence[Piece], frame: int, budget_tokens: int, k: int) -> list[Piece]:
    """Take pieces in order while the whole document stays within the budget."""
    limit = budget_tokens * 4  # characters
    used = frame
    out: list[Piece] = []
    for item, piece in pieces:
        if len(out) >= k:
            break
        if used + len(piece) <= limit:
            out.append((item, piece))
            used += len(piece)
    return out


def render_xml(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS, k: int = 10,
               per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND, include_sensitive: bool = False) -> str:
    """`<agent_memory>` with one `<memory>` per entry; never over `budget_tokens`."""
    head, tail = "<agent_memory>\n", "</agent_memory>\n"
    pieces = []
    for item in _select(items, k=k, per_kind=per_kind, include_sensitive=include_sensitive):
        e, b = item.entry, item.entry.body
        piece = (
            f'<memory type="{b.kind.value}" importance="{b.importance:.2f}" confidence="{e.local_confidence:.2f}" '
            f'age="{_age(age_days(b.created.ms, now_ms))}" source="{_escape(e.provenance)}" id="{b.id}">'
            f"{_escape(b.content)}</memory>\n"
        )
        pieces.append((item, piece))
    if len(head) + len(tail) > budget_tokens * 4:
        return ""
    fitted = _fit(pieces, len(head) + len(tail), budget_tokens, k)
    return head + "".join(p for _, p in fitted) + tail


def _block(item: DigestItem, namespace: str) -> dict[str, Any]:
    b = item.entry.body
    title = " ".join(b.content.split())[:80]
    return {
        "type": "search_result",
        "source": f"grimoire://{namespace}/{b.kind.value}/{b.id}",
        "title": title,
        "content": [{"type": "text", "text": b.content}],
        "citations": {"enabled": True},
    }


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def render_search_results(items: Sequence[DigestItem], *, namespace: str, budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                          k: int = 10, per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND,
                          include_sensitive: bool = False) -> str:
    """A JSON array of Anthropic `search_result` blocks (citations enabled); within budget."""
    pieces = [(item, _dump(_block(item, namespace)))
              for item in _select(items, k=k, per_kind=per_kind, include_sensitive=include_sensitive)]
    # "[" + ",".join(...) + "]": each piece costs its length plus one separator
    fitted = _fit([(i, p + ",") for i, p in pieces], 2, budget_tokens, k)
    return "[" + ",".join(p[:-1] for _, p in fitted) + "]" if budget_tokens * 4 >= 2 else ""


def render_json(items: Sequence[DigestItem], *, now_ms: int, budget_tokens: int = DEFAULT_BUDGET_TOKENS, k: int = 10,
                per_kind: Mapping[Kind, int] = DEFAULT_PER_KIND, include_sensitive: bool = False) -> str:
    """A JSON array of {id, type, importance, confidence, age, source, score, content}; within budget."""
    pieces = []
    for item in _select(items, k=k, per_kind=per_kind, include_sensitive=include_sensitive):
        e, b = item.entry, item.entry.body
        pieces.append((item, _dump({
            "id": b.id, "type": b.kind.value, "importance": round(b.importance, 3),
            "confidence": round(e.local_confidence, 3), "age": _age(age_days(b.created.ms, now_ms)),
            "source": e.provenance, "score": round(item.score, 6), "content": b.content,
        }) + ","))
    fitted = _fit(pieces, 2, budget_tokens, k)
    return "[" + ",".join(p[:-1] for _, p in fitted) + "]" if budget_tokens * 4 >= 2 else ""


def build_digest(retriever: Retriever, *, text: str, now_ms: int, budget_tokens: int, k: int, fmt: str,
                 include_sensitive: bool, namespace: str, embed_limit: int | None = None) -> dict[str, Any]:
    """Rank (wider than k: per-kind limits and the budget skip some), render `fmt`, bump access
    counts of what made it in; returns {format, tokens, budget_tokens, entries, document}."""
    wide = RecallQuery(text=text, k=max(4 * k, 40), include_sensitive=include_sensitive)
    hits = retriever.recall(wide, now_ms=now_ms, touch=False, embed_limit=embed_limit)
    items = [DigestItem(h.entry, h.score) for h in hits]
    if fmt == "xml":
        document = render_xml(items, now_ms=now_ms, budget_tokens=budget_tokens, k=k,
                              include_sensitive=include_sensitive)
    elif fmt == "json":
        document = render_json(items, now_ms=now_ms, budget_tokens=budget_tokens, k=k,
                               include_sensitive=include_sensitive)
    else:
        document = render_search_results(items, namespace=namespace, budget_tokens=budget_tokens, k=k,
                                         include_sensitive=include_sensitive)
    included = [h.entry.id for h in hits if h.entry.id in document]
    if included:
        retriever.store.touch(included, now_ms)
    return {"format": fmt, "tokens": tokens(document), "budget_tokens": budget_tokens, "entries": included,
            "document": document}
