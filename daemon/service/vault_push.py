"""Backups uploaded to the Styx vault one at a time, behind the request that made them.

An upload retries with backoff (6 attempts, each up to a minute: `styx.vault.push_backup`), so
against a hanging or failing Styx it can take minutes; the soak's `POST /v1/backup` during a
Styx outage went unanswered for 90 s. The local backup is written and stands whatever Styx does,
so the request never waits for more than `wait_s` (`[styx] backup_wait_s`): `push` queues the
file and answers with the upload's outcome if it ended by then, else `{"styx_pending": True}`,
and the upload goes on here. Its end is published either way: `backup_pushed`, or
`backup_push_failed` (counted `styx_vault_failed`, the backup kept where it was written).

At most `QUEUED` files wait behind the upload running; a backup beyond them is not queued
(`styx_error` says so; counted `styx_vault_queue_full`): the next backup carries the same
store, newer. `run` is the uploader, one task, started by the daemon's backup service.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from daemon.errors import DaemonError
from daemon.styx.vault import VaultPushError

__all__ = ["QUEUED", "VaultPushes"]

log = logging.getLogger("clade.styx")

QUEUED = 4


@dataclass
class _Job:
    path: Path
    done: trio.Event = field(default_factory=trio.Event)
    outcome: dict[str, Any] = field(default_factory=dict)


class VaultPushes:
    """The vault uploads of the daemon's backups (the module doc). `upload(path)` uploads one
    file and returns the pusher's report, raising `VaultPushError` or `DaemonError`."""

    def __init__(self, upload: Callable[[Path], Awaitable[dict[str, object]]], *,
                 publish: Callable[[str, dict[str, Any]], None], counters: Counter[str]) -> None:
        self._upload = upload
        self._publish = publish
        self._counters = counters
        self._send, self._receive = trio.open_memory_channel[_Job](QUEUED)

    async def push(self, path: Path, *, wait_s: float) -> dict[str, Any]:
        """Queue `path` for upload and wait up to `wait_s` for it: `{"styx": report}`,
        `{"styx_error": why}` or, still uploading, `{"styx_pending": True}`."""
        job = _Job(path)
        try:
            self._send.send_nowait(job)
        except trio.WouldBlock:
            self._counters["styx_vault_queue_full"] += 1
            return {"styx_error": f"{QUEUED} backups are already waiting for Styx: {path.name} was not queued "
                                  f"(it is kept at {path}; the next backup is uploaded when Styx answers)"}
        with trio.move_on_after(wait_s):
            await job.done.wait()
        return job.outcome if job.done.is_set() else {"styx_pending": True}

    async def run(self) -> None:
        """Upload the queued files one after the other, until cancelled."""
        while True:
            job = await self._receive.receive()
            try:
                pushed = await self._upload(job.path)
            except (VaultPushError, DaemonError) as exc:
                self._counters["styx_vault_failed"] += 1
                log.warning("styx: %s", exc)
                job.outcome = {"styx_error": str(exc)}
                self._publish("backup_push_failed", {"path": str(job.path), "error": str(exc)})
            else:
                job.outcome = {"styx": pushed}
                self._publish("backup_pushed", pushed)
            finally:
                job.done.set()
