"""Styx's answer merged into a local search, recall or digest — pure, plus the no-daemon query.

`merge` ranks local hits and Styx's results in one list by the four-factor rank: a Styx
result enters at `scoring.external_rank` of its relevance (the server's score times its layer's
discount, `wire.parse_query`) — its recency, importance and PAD unknown here, so nothing — and
at the starting local confidence of knowledge from Styx (`scoring.EXTERNAL_CONFIDENCE`, 0.2);
a tie goes to the local entry, so a Styx result never ranks above a local entry of equal
discounted relevance. Each row says where it came from (`provenance`: `local` or
`styx:<layer>`), and a Styx result with a local entry's id (our own entry, pushed earlier) is
dropped. `for_digest` keeps the results a digest may take (their author's confidence at least
`[styx.injection] min_confidence`), ranked the same way, shown at 0.2.
`ask_direct` is the query for commands that run without a daemon (`clade recall`, `clade
digest`): the same deadline and monthly budget, its cost in the store's ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from daemon.grimoire.digest import ExternalItem
from daemon.grimoire.scoring import EXTERNAL_CONFIDENCE, external_rank
from daemon.grimoire.styx_store import Spend

from . import ledger
from .pusher import query
from .wire import QueryResult

if TYPE_CHECKING:
    from daemon.config import StyxConfig
    from daemon.grimoire import Grimoire

__all__ = ["ask_direct", "for_digest", "merge", "styx_doc"]

T = TypeVar("T")


def styx_doc(result: QueryResult) -> dict[str, Any]:
    """A Styx result as the API and the CLI show it: `confidence` is its author's, `local_confidence`
    what this golem holds it at (0.2), `relevance` the server's score × the layer's discount, and
    `score` its four-factor rank (`scoring.external_rank`)."""
    return {"id": result.id, "kind": result.kind, "content": result.content, "confidence": result.confidence,
            "local_confidence": EXTERNAL_CONFIDENCE, "layer": result.layer, "relevance": round(result.score, 6),
            "score": round(external_rank(result.score), 6), "provenance": result.provenance}


def merge(local: Sequence[Mapping[str, Any]], remote: Sequence[QueryResult], *, k: int) -> list[dict[str, Any]]:
    """The top `k` of local hits (`{"id", "kind", "content", "confidence", "score", …}`) and Styx
    results together, by score (ties: local first); Styx results duplicating a local id are dropped."""
    ids = {str(hit["id"]) for hit in local}
    rows: list[tuple[float, int, int, dict[str, Any]]] = []
    for n, hit in enumerate(local):
        rows.append((-float(hit["score"]), 0, n, {
            "id": hit["id"], "kind": hit["kind"], "content": hit["content"], "confidence": hit["confidence"],
            "score": round(float(hit["score"]), 6), "provenance": "local"}))
    for n, result in enumerate(remote):
        if result.id not in ids:
            doc = styx_doc(result)
            doc.pop("layer")
            rows.append((-external_rank(result.score), 1, n, doc))
    rows.sort(key=lambda row: row[:3])
    return [row[3] for row in rows[:k]]


def for_digest(remote: Sequence[QueryResult], *, min_confidence: float) -> list[ExternalItem]:
    """The Styx results a digest may take (their author's confidence ≥ `min_confidence`), best
    first, at their four-factor rank and shown at the starting local confidence (0.2)."""
    return [ExternalItem(r.id, r.kind, r.content, EXTERNAL_CONFIDENCE, external_rank(r.score), r.provenance)
            for r in remote if r.confidence >= min_confidence]


def ask_direct(store: Grimoire, config: StyxConfig, text: str, alongside: Callable[[], T], *, k: int, now_ms: int
               ) -> tuple[T, list[QueryResult], str | None]:
    """Run `alongside()` (the local recall, on this thread) while Styx is asked on another, for a
    command with no daemon: Styx adds at most `query_deadline_ms`; the monthly budget is the one
    recorded in `store`, and the query's cost is recorded there. Returns (local, results, error)."""
    month = ledger.month_of(now_ms)
    price = config.prices.per_query
    spent = store.styx_spent(month) if config.budget.monthly is not None else 0.0
    if config.budget.monthly is not None and spent + price > config.budget.monthly:
        return alongside(), [], "the monthly Styx budget is reached; Styx is asked again next month"
    token = config.bearer()

    def ask() -> tuple[list[QueryResult], str | None]:
        return trio.run(lambda: query(str(config.url), token, text, k=k, layers=tuple(config.query_layers),
                                      deadline_s=config.query_deadline_ms / 1000))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="styx-query") as pool:
        pending = pool.submit(ask)
        local = alongside()
        results, error = pending.result()
    if price:
        store.styx_record_spend(Spend(month, price, queries=1))
    return local, results, error
