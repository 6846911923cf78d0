"""The Styx outbox in grimoire.db: written with its cause, drained by the pusher, never truncated.

`OutboxWriter` is the store's hook (`Grimoire.outbox`): inside the transaction of a local
write it looks at the ops written and enqueues, per crossing entry (wire.py's table: a
warning, anti_knowledge, regime shift or death reflection when written; an insight, fact,
causal link, heuristic or constraint when the curator promotes it, its body re-emitted under
a fresh dot), at most two items: one for its enabled private layers (vault, clade; key
`WRITER:SEQ` of the body op that caused it; the item lists every layer) and one anonymised
item for the public lethe layer when that is enabled (`wire.public_item_json`). Only what
may cross to a sibling is enqueued: public, a kind that may cross, active, not held
(`crossing_hold`), not refuted (`refuted_ms`). Private and sensitive entries, raw episodes
and kinds that never cross never are.

The outbox's rows are the Grimoire's (daemon/grimoire/styx_store.py: `outbox_due`,
`outbox_delivered`, `outbox_retry_later`, `outbox_park`, `outbox_unpark`, `outbox_status`):
what is here makes the items. Nothing deletes an undelivered item; only an acknowledged one
leaves the table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crdt import Op, SlotKind
from crdt.body import EntryBody
from daemon.grimoire.styx_store import OutboxItem, OutboxRow

from .wire import (
    LAYERS,
    PUBLIC_LAYERS,
    at_once,
    item_json,
    layers_for,
    playbook_item,
    public_item_json,
)

if TYPE_CHECKING:
    from daemon.config import StyxConfig
    from daemon.grimoire.store import Grimoire

__all__ = ["OutboxItem", "OutboxWriter", "enqueue_entry", "enqueue_playbook", "writer_for"]


class OutboxWriter:
    """The `Grimoire.outbox` hook: enqueue what crosses to the enabled layers."""

    def __init__(self, *, layers: Sequence[str] = LAYERS, now_ms: Any = None) -> None:
        self.layers = tuple(layers)
        self._now_ms = now_ms

    def __call__(self, store: Grimoire, ops: Sequence[Op], me: str) -> None:
        """Inside the write transaction of `ops`: reads through the store, enqueues through
        `Grimoire.outbox_add` (in that transaction)."""
        for op in ops:
            if op.writer != me or op.slot is not SlotKind.BODY or not isinstance(op.value, EntryBody):
                continue
            body = op.value
            promoted = store.leaving(body.id)  # a held (a repeat, inherited) or refuted entry crosses nowhere
            if promoted is None:
                continue
            if not (at_once(body.kind) or promoted):
                continue
            layers = layers_for(body.kind, body.sensitivity.value, enabled=self.layers)
            if not layers:
                continue
            created = op.hlc.ms if self._now_ms is None else int(self._now_ms())
            doc = store.get(body.id).to_json()
            enqueue_entry(store, writer=op.writer, seq=op.seq, kind=doc["kind"], layers=layers, entry=doc,
                          created_ms=created)


def writer_for(styx: StyxConfig) -> OutboxWriter | None:
    """The outbox hook for this `[styx]` config: None when Styx is off, else a writer for the
    enabled layers. The daemon and every CLI write without a daemon install the same one, so
    what a write enqueues does not depend on whether a daemon was running."""
    if not styx.enabled:
        return None
    return OutboxWriter(layers=[n for n, on in (("vault", styx.vault_enabled), ("clade", styx.clade_enabled),
                                                 ("lethe", styx.lethe_enabled)) if on])


def enqueue_entry(store: Grimoire, *, writer: str, seq: int, kind: str, layers: Sequence[str],
                  entry: dict[str, Any], created_ms: int) -> list[str]:
    """Queue one entry's items for `layers` (in the store's open write transaction, if any): one
    item for its private layers, one anonymised item for the public layer; each at most once
    per cause. Returns the keys queued (or already waiting)."""
    private = [layer for layer in layers if layer not in PUBLIC_LAYERS]
    rows: list[OutboxRow] = []
    if private:
        rows.append(OutboxRow(f"{writer}:{seq}", kind, private[0],
                              item_json(writer=writer, seq=seq, layers=private, entry=entry)))
    if PUBLIC_LAYERS & set(layers):
        text = public_item_json(secret=store.lethe_secret(), writer=writer, seq=seq, entry=entry)
        rows.append(OutboxRow(json.loads(text)["idempotency_key"], kind, "lethe", text))
    return store.outbox_add(rows, created_ms=created_ms)


def enqueue_playbook(store: Grimoire, *, golem: str, text: str, now_ms: int, created_at: str) -> str:
    """Queue a PLAYBOOK.md snapshot for the vault layer (once per distinct text while it waits); returns its key."""
    key, item = playbook_item(golem=golem, text=text, created_at=created_at)
    store.outbox_add([OutboxRow(key, "playbook", "vault", item)], created_ms=now_ms)
    return key


