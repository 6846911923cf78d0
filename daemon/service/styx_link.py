"""The daemon's side of Styx: the outbox's pusher, queries to it, and the PLAYBOOK.md it keeps.

The runtime sets `pusher` when `[styx] enabled` is true (the outbox is hooked into the store
then); with it None, Styx is off and every method here says so (no query, nothing queued).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from crypto.membership import Membership, RevocationList
from crypto.vault import VaultKeys
from daemon.config import Config
from daemon.grimoire import Grimoire
from daemon.grimoire.records import iso_ms
from daemon.grimoire.styx_store import Spend
from daemon.service.store_access import StoreAccess
from daemon.styx import ledger
from daemon.styx import outbox as styx_outbox
from daemon.styx.boot import download_within, inherit_archive, open_archive
from daemon.styx.pusher import Pusher
from daemon.styx.wire import QueryResult

__all__ = ["StyxLink"]

log = logging.getLogger("clade.state")


class StyxLink:
    """Styx as the daemon uses it: the pusher (None while Styx is off), asking, the outbox's status."""

    def __init__(self, access: StoreAccess, *, config: Callable[[], Config], counters: Counter[str], golem: str,
                 playbook_path: Path, now_ms: Callable[[], int]) -> None:
        self.access = access
        self.config = config
        self.counters = counters
        self.golem = golem
        self.playbook_path = playbook_path
        self.now_ms = now_ms
        self.pusher: Pusher | None = None  # the Styx outbox's drain (set by the runtime when [styx] is enabled)
        self._playbook_queued: str | None = None  # the PLAYBOOK.md text last queued for Styx's vault layer

    def wake(self) -> None:
        """Own ops were committed: the pusher pushes what the write enqueued (no-op while Styx is off)."""
        if self.pusher is not None:
            self.pusher.wake()

    def queried(self, *, sensitive: bool = False) -> bool:
        """Whether this search or digest asks Styx too: Styx on and the operator enabled queries
        (`[styx] query_enabled`, off by default: the text of a search is the golem's), and the
        request is not marked sensitive (`include_sensitive`: its context is the golem's soma),
        which is counted (`styx_query_withheld_sensitive`) rather than sent."""
        if self.pusher is None or not self.config().styx.query_enabled:
            return False
        if sensitive:
            self.counters["styx_query_withheld_sensitive"] += 1
            return False
        return True

    async def ask(self, text: str, *, k: int) -> tuple[list[QueryResult], str | None]:
        """Styx's answer to a search or digest (within the deadline and the monthly budget), or ([], why)."""
        assert self.pusher is not None
        cfg = self.config().styx
        self.counters["styx_queries"] += 1
        results, error = await self.pusher.ask(text, k=k, layers=tuple(cfg.query_layers),
                                               deadline_s=cfg.query_deadline_ms / 1000)
        if error:
            self.counters["styx_query_failed"] += 1
        return results, error

    def status(self, store: Grimoire) -> dict[str, Any]:
        """`clade styx status` (on the store's thread): outbox depth and age, parked items, the pusher's counters."""
        assert self.pusher is not None
        st = self.pusher.stats
        warn = self.config().styx.outbox_warn
        now = self.now_ms()
        doc = store.styx_stored_status(now_ms=now, month=ledger.month_of(now), outbox_warn=warn)
        last_at = None if st.last_success_ms is None else iso_ms(st.last_success_ms)
        doc.update({"last_success_ms": st.last_success_ms, "last_success_at": last_at, "failures": st.failures,
                    "delivered": st.delivered, "last_error": st.last_error, "url": self.pusher.url,
                    "paused_by_budget": self.pusher.paused_by_budget,
                    "budget_month_usd": self.config().styx.budget.monthly})
        return doc

    async def inherit(self, predecessor: str, *, membership: Membership, keys: VaultKeys,
                      local_replica: str, revocations: RevocationList | None = None) -> dict[str, Any]:
        """Boot from the Styx archive (daemon/styx/boot.py): `predecessor`'s latest testament
        archive, fetched within what the month's budget pays for and charged by its real size
        (`Budget.affordable_bytes`, `transfer_cost`),
        verified off the store's thread, inherited on the writer at the archive's weight (0.3).
        Raises `BootError` (untrusted, revoked in `revocations`, nothing there) or
        `VaultPushError` (Styx failed or the budget is reached); nothing is imported then."""
        assert self.pusher is not None
        pusher, cfg, now = self.pusher, self.config().styx, self.now_ms()
        month = ledger.month_of(now)
        name, raw = await trio.to_thread.run_sync(lambda: download_within(cfg, predecessor, pusher.budget,
                                                                           month=month))
        cost = pusher.budget.charge_upload(pusher.budget.transfer_cost(len(raw)), month=month)  # its real size
        if cost:
            await self.access.on_writer(lambda s: s.styx_record_spend(Spend(month, cost, calls=1)))
        doc = await trio.to_thread.run_sync(lambda: open_archive(raw, predecessor=predecessor, membership=membership,
                                                                 keys=keys, revocations=revocations))
        report = await self.access.on_writer(lambda s: inherit_archive(
            s, doc, clade_id=membership.clade_id, local_replica=local_replica, now_ms=now))
        return {"golem": report.golem, "entries": report.entries, "applied_ops": report.applied_ops,
                "generations": {str(g): n for g, n in report.generations.items()}, "siblings": report.siblings,
                "from_styx": name, "bytes": len(raw), "via_archive": True}

    async def unpark(self, key: str | None) -> int:
        """Put parked Styx items back in the queue (one by idempotency key, or all); returns how many.
        The caller wakes the pusher."""

        return await self.access.on_writer(lambda store: store.outbox_unpark(key))

    def queue_playbook(self, store: Grimoire, now_ms: int) -> bool:
        """With Styx's vault layer on, queue the PLAYBOOK.md just written if it changed since the
        last one (on the writer thread); returns whether it queued."""
        if self.pusher is None or not self.config().styx.vault_enabled:
            return False
        text = self.playbook_path.read_text(encoding="utf-8")
        if text == self._playbook_queued:
            return False
        styx_outbox.enqueue_playbook(store, golem=self.golem, text=text, now_ms=now_ms, created_at=iso_ms(now_ms))
        self._playbook_queued = text
        return True

