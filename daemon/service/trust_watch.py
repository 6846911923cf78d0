"""The `suspect_author` alert: watch siblings' trust and budgets, say so once per turn.

After entries arrive from siblings (`entries_received`, coalesced: at most one check per
`MIN_GAP_S`) and every `IDLE_S` otherwise, `check_authors` reads every author's view
(trust_store.author_views), persists the alert state (a burst over budget is remembered until
the operator runs `clade peers trust`), and for each author that turned suspect: counts
`suspect_author`, POSTs {event: suspect_author, golem, at_ms, author, trust, reasons, good,
bad, fresh_arrivals, arrivals, distrusted} to the `[death] webhook` if one is set (the owner's
alert channel; one attempt, failures counted as `suspect_webhook_failed`), then publishes the
same document on the event hub as `suspect_author`. Nothing is
dropped or deleted here: what suspicion does to an author's entries is trust.py's.

In the same turns (and after an outcome recorded here), `check_refuted` reads the pooled belief
(belief.py) of every entry with negative evidence, dates those that turned refuted (withheld
from digests and default searches) and clears those that no longer are: each turn is counted
(`entries_refuted`, `entries_refute_lifted`), logged and published (`entry_refuted`,
`entry_refute_lifted` with id, author, belief and the evidence).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import httpx
import trio

from daemon.grimoire import Grimoire
from daemon.grimoire.trust import AuthorView

if TYPE_CHECKING:
    from .state import DaemonState

__all__ = ["check_authors", "check_refuted", "suspect_doc", "trust_watch_service"]

log = logging.getLogger("clade.trust")
MIN_GAP_S = 2.0
IDLE_S = 60.0


def suspect_doc(view: AuthorView) -> dict[str, Any]:
    e = view.evidence
    return {"author": view.author, "trust": view.trust, "reasons": list(view.reasons), "good": e.good, "bad": e.bad,
            "fresh_arrivals": e.fresh_arrivals, "arrivals": e.arrivals, "distrusted": e.distrusted}


async def check_authors(state: DaemonState) -> list[dict[str, Any]]:
    """One check (module docstring); returns the documents of the authors that turned suspect."""
    policy = state.config.trust.policy()
    if not policy.enabled:
        return []
    now = state.now_ms()

    turned = [suspect_doc(v) for v in await state.on_writer(lambda store: store.record_suspects(policy, now_ms=now))]
    for doc in turned:
        state.counters["suspect_author"] += 1
        log.warning("suspect author %s (%s): its unverified entries are withheld from digests; check it, then "
                    "`clade peers distrust %s` or `clade peers trust %s`", doc["author"], ", ".join(doc["reasons"]),
                    doc["author"], doc["author"])
        await _webhook(state, doc)
        state.publish("suspect_author", doc)
    return turned


async def check_refuted(state: DaemonState) -> tuple[list[str], list[str]]:
    """One refutation check (module docstring); returns (turned refuted, lifted)."""
    policy = state.config.trust.policy()
    now = state.now_ms()

    def run(store: Grimoire) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        found, turned, lifted = store.refresh_refuted(policy, now_ms=now)
        authors = {e.id: e.body.author for e in store.get_many([*turned, *lifted])}
        return ([{"id": i, "author": authors.get(i), **found[i].to_json()} for i in turned],
                [{"id": i, "author": authors.get(i), **found[i].to_json()} for i in lifted])

    turned, lifted = await state.on_writer(run)
    for doc in turned:
        state.counters["entries_refuted"] += 1
        log.warning("entry %s (by %s) refuted by the clade's evidence (belief %.2f): withheld from digests and "
                    "default searches; `clade show %s` has the evidence", doc["id"], doc["author"], doc["belief"],
                    doc["id"])
        state.publish("entry_refuted", doc)
    for doc in lifted:
        state.counters["entries_refute_lifted"] += 1
        log.info("entry %s is no longer refuted (belief %.2f)", doc["id"], doc["belief"])
        state.publish("entry_refute_lifted", doc)
    return [d["id"] for d in turned], [d["id"] for d in lifted]


async def _webhook(state: DaemonState, doc: dict[str, Any]) -> None:
    cfg = state.config.death
    if cfg.webhook is None:
        return
    payload = {"event": "suspect_author", "golem": state.identity.peer_id, "at_ms": state.now_ms(), **doc}
    ok = False
    with trio.move_on_after(cfg.webhook_timeout_s):
        try:
            async with httpx.AsyncClient(timeout=cfg.webhook_timeout_s) as client:
                ok = 200 <= (await client.post(cfg.webhook, json=payload)).status_code < 300
        except httpx.HTTPError as exc:
            log.warning("suspect_author webhook failed: %s", exc)
    if not ok:
        state.counters["suspect_webhook_failed"] += 1


async def trust_watch_service(state: DaemonState, stop: trio.Event) -> None:
    """Run `check_authors` and `check_refuted` after arrivals and outcomes (coalesced) and every
    `IDLE_S`, until `stop`."""
    arrived = trio.Event()
    box = {"event": arrived}

    def observe(event: str, data: dict[str, Any]) -> None:
        if event in ("entries_received", "outcome_recorded"):
            box["event"].set()

    state.observers.append(observe)
    try:
        while not stop.is_set():
            await check_authors(state)
            await check_refuted(state)
            with trio.move_on_after(MIN_GAP_S):
                await stop.wait()
            with trio.move_on_after(IDLE_S):
                await box["event"].wait()
            box["event"] = trio.Event()
    finally:
        state.observers.remove(observe)
