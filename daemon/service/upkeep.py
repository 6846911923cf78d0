"""Upkeep: the curator cycle and backups, on demand (the API) and on their schedules (the runtime).

A curator cycle (daemon/grimoire/curator/cycle.py) validates, decays, prunes, compresses,
consolidates episodes and promotes; the optional LLM pass runs its call off the store's
thread; then PLAYBOOK.md (the previous version kept, queued for Styx's vault layer when it
changed), the WAL checkpoint and the episode index. A backup is written to `$DATA/backups`
(sealed to the clade's keys) and, with the vault layer on, pushed to Styx. The backup
schedule's moment lives in `backup_schedule`; the runtime's backup service waits on it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from crypto import Identity
from daemon.config import Config
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.curator.cycle import CycleReport, RewriteVectors, apply_llm, llm_clusters, rewrite_news, run_cycle
from daemon.grimoire.episodes import has_episodes
from daemon.grimoire.records import NewEntry
from daemon.grimoire.write_door import Prepared
from daemon.native_memory import release_free_memory
from daemon.service.backup import create_backup, default_recipients, report_json
from daemon.service.backup_schedule import BackupSchedule
from daemon.service.curation import (
    capacity_event,
    llm_for,
    record_replays,
    render_playbook,
    replay_items,
    settings_for,
)
from daemon.service.embedding import Embedding
from daemon.service.index import SharedIndex
from daemon.service.store_access import StoreAccess
from daemon.service.styx_link import StyxLink
from daemon.service.vault_push import VaultPushes
from daemon.styx.vault import VaultPushError

__all__ = ["Upkeep"]

log = logging.getLogger("clade.state")


# The write door's preparation of new entries (service/writes.py, `Writes.prepare`).
Prepare = Callable[[Sequence[NewEntry]], Awaitable[Prepared]]


class Upkeep:
    """The curator cycle and backups; `last_curator` is the last cycle's report (None before one)."""

    def __init__(self, access: StoreAccess, embedding: Embedding, index: SharedIndex, styx: StyxLink, *,
                 data: DataDir,
                 identity: Identity, config: Callable[[], Config], counters: Counter[str],
                 publish: Callable[[str, dict[str, Any]], None], local_write: Callable[[], None],
                 now_ms: Callable[[], int], prepare: Prepare | None = None) -> None:
        self.access = access
        self.embedding = embedding
        self.index = index
        self.styx = styx
        self.data = data
        self.identity = identity
        self.config = config
        self.counters = counters
        self.publish = publish
        self.local_write = local_write
        self.now_ms = now_ms
        # The write door's preparation (service/writes.py, `Writes.prepare`): a REWRITE's vector,
        # for the repeat hold, computed off the store's thread. None: rewrites go unchecked.
        self.prepare = prepare
        self.backup_schedule = BackupSchedule()  # run by the runtime's backup service
        self.vault_pushes = VaultPushes(self._upload, publish=publish, counters=counters)  # run by it too
        self.last_curator: dict[str, Any] | None = None

    async def backup(self, *, include_identity: bool) -> dict[str, Any]:
        """Write a backup sealed to the owner and this golem (`backup.default_recipients`;
        `UsageError` before joining); publishes `backup_written`, and with Styx's vault layer on
        queues its upload (`vault_push.py`): the report says how it went (`styx`, `styx_error`), or
        that it is still going after `[styx] backup_wait_s` (`styx_pending`; `backup_pushed` or
        `backup_push_failed` follows). The local backup stands either way."""
        config = self.config()
        clade_keys, publics, names = default_recipients(self.data, share_with_clade=config.backup.share_with_clade)
        if not publics:
            raise UsageError("this golem has not joined a clade: use `clade backup --recipient …` from the CLI")
        def copy_store(target: Path) -> None:  # on a reader already open: no descriptor left behind (Grimoire.copy_to)
            trio.from_thread.run(self.access.on_reader, lambda reader: reader.copy_to(target))

        report = await trio.to_thread.run_sync(lambda: create_backup(
            self.data, clade_keys=clade_keys, x25519_recipients=publics, recipient_names=names,
            golem=self.identity.peer_id, include_identity=include_identity, keep=config.backup.keep,
            now_ms=self.now_ms(), copy_store=copy_store))
        await trio.to_thread.run_sync(release_free_memory)  # the snapshot's and zstd's buffers (native_memory.py)
        doc = report_json(report)
        self.publish("backup_written", doc)
        if self.styx.pusher is not None and config.styx.vault_enabled:
            doc.update(await self.vault_pushes.push(Path(str(doc["path"])), wait_s=config.styx.backup_wait_s))
        return doc

    async def _upload(self, path: Path) -> dict[str, object]:
        """One backup's vault upload (`VaultPushes` calls it); `VaultPushError` if Styx is off by now."""
        pusher = self.styx.pusher
        if pusher is None:
            raise VaultPushError(f"Styx is off: {path.name} was not uploaded; it is kept at {path}")
        return await pusher.upload(path, peer=self.identity.peer_id, timeout_s=max(60.0, self.config().styx.timeout_s))

    def _count_door(self, report: CycleReport) -> None:
        """What the write door did to the curator's own entries: a rewrite held as a repeat is
        announced (`warning_held`) like any warning; one written unchecked is counted."""
        if report.unchecked:
            self.counters["warning_novelty_unchecked"] += report.unchecked
        for entry_id, similarity in report.held.items():
            self.counters["warnings_held"] += 1
            self.publish("warning_held", {"id": entry_id, "similarity": round(similarity, 4)})

    async def curator_cycle(self) -> dict[str, Any]:
        """One curator cycle (the module docstring). The report is returned, kept as
        `last_curator`, published as `curator_cycle_complete` and logged."""
        started = time.monotonic()
        config = self.config().curator
        settings = settings_for(config, self.config().trust.policy())
        now = self.now_ms()
        on_writer = self.access.on_writer
        try:  # the model loads off the store's thread, only if an entry lacks a vector; no model means exact
            # duplicates only
            await self.embedding.embed_for_cycle()  # compression and admission compare every entry's vector
            # Read-only views of one index snapshot: rows that never change under the cycle.
            vectors = (await self.index.loaded(await self.embedding.space_info())).as_mapping()
        except Exception as exc:  # noqa: BLE001 - a broken model must not stop forgetting
            log.warning("curator: no vectors this cycle (%s)", exc)
            vectors = {}
        try:  # no episode ever appended: LanceDB (~70 MiB) is not imported for nothing
            episodes = [] if not has_episodes(self.data.episodes_path) else await trio.to_thread.run_sync(
                lambda: replay_items(self.data.open_episodes(), now_ms=now, settings=settings))
        except Exception as exc:  # noqa: BLE001 - the episode log is optional for a cycle
            log.warning("curator: episodes not replayed this cycle (%s)", exc)
            episodes = []
        report = await on_writer(lambda s: run_cycle(s, identity=self.identity, now_ms=now, settings=settings,
                                                     vectors=vectors, episodes=episodes))
        if report.replayed:
            try:
                await on_writer(lambda s: record_replays(self.data.open_episodes(), report))
            except Exception as exc:  # noqa: BLE001 - a replay count lost must not stop the cycle
                log.warning("curator: replay counts not recorded this cycle (%s)", exc)
        try:
            llm = llm_for(config)
        except DaemonError as exc:
            log.warning("curator: %s; running the deterministic path alone", exc)
            llm = None
        if llm is not None:
            asked = await on_writer(lambda s: llm_clusters(s, self.identity, vectors, since_ms=report.since_ms,
                                                           now_ms=now, settings=settings))
            if asked.groups:
                outcome = await trio.to_thread.run_sync(lambda: llm(asked.clusters))
                news = rewrite_news(asked, outcome)
                rewrites = None if not news or self.prepare is None else RewriteVectors.of(await self.prepare(news))
                await on_writer(lambda s: apply_llm(s, self.identity, asked, outcome, now_ms=now, report=report,
                                                    vectors=rewrites))
        self._count_door(report)
        if report.promoted or report.entries_merged or report.entries_superseded or report.llm_decisions \
                or report.episodes_consolidated:
            self.local_write()

        def finish(store: Grimoire) -> bool:
            render_playbook(store, self.data.playbook_path, now_ms=now, keep=config.playbook_keep,
                            trust=settings.trust)
            queued = self.styx.queue_playbook(store, now)
            store.checkpoint()
            return queued

        if await on_writer(finish):
            self.local_write()
        # The episode ANN index (built past 100k rows, re-merged as rows arrive) takes tens of
        # seconds: build it here, in the background, never on a request and never on the writer thread.
        try:  # no episode ever appended: no index to build, and LanceDB is not imported for it
            if has_episodes(self.data.episodes_path):
                await trio.to_thread.run_sync(lambda: self.data.open_episodes().ensure_index())
        except Exception as exc:  # noqa: BLE001 - an index build failure must not stop the cycle
            log.warning("curator: episode index maintenance failed: %s", exc)
        # What the cycle freed (every live entry read, the vectors' mapping) back to the kernel:
        # glibc keeps freed heap mapped, and the holes grew with the store (native_memory.py).
        await trio.to_thread.run_sync(release_free_memory)
        report.duration_ms = round((time.monotonic() - started) * 1000)
        for reason, count in report.promotion_refused.items():  # why fresh knowledge did not cross at once
            self.counters[f"promotion_refused_{reason}"] += count
        self.last_curator = {**report.to_json(), "entries_embedded": self.counters["entries_embedded"],
                             "at_ms": self.now_ms(), "seconds": round(time.monotonic() - started, 3)}
        log.info("curator cycle: %s", " ".join(f"{k}={v}" for k, v in report.to_json().items() if v))
        self.publish("curator_cycle_complete", self.last_curator)
        if report.entries_archived_capacity:  # the operator must hear of it (event, log, status count)
            counts = await self.access.on_reader(lambda r: r.counts())
            self.publish("entries_archived_capacity", capacity_event(report, capacity=settings.capacity,
                                                                     live=counts.entries - counts.archived))
        return self.last_curator
