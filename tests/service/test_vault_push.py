"""The vault uploads behind `POST /v1/backup` (daemon/service/vault_push.py), on trio's MockClock:
the request waits at most `wait_s`, the upload goes on and its end is published, the queue is
bounded. The daemon-level case (a hanging Styx) is tests/styx/test_styx_push.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from daemon.service.vault_push import QUEUED, VaultPushes
from daemon.styx.vault import VaultPushError


class _Styx:
    """An upload that takes `took` seconds of the (mock) clock, or fails with `fail`."""

    def __init__(self) -> None:
        self.took = 0.0
        self.fail: str | None = None
        self.release = trio.Event()
        self.hold = False
        self.uploaded: list[Path] = []
        self.all_uploaded = trio.Event()  # set once `expect` uploads have ended
        self.expect = 0

    async def upload(self, path: Path) -> dict[str, object]:
        if self.hold:
            await self.release.wait()
        await trio.sleep(self.took)
        if self.fail:
            raise VaultPushError(self.fail)
        self.uploaded.append(path)
        if self.expect and len(self.uploaded) >= self.expect:
            self.all_uploaded.set()
        return {"url": f"styx/{path.name}", "bytes": 1, "attempts": 1}


def _pushes(styx: _Styx) -> tuple[VaultPushes, list[tuple[str, dict[str, Any]]], Counter[str]]:
    events: list[tuple[str, dict[str, Any]]] = []
    counters: Counter[str] = Counter()
    return VaultPushes(styx.upload, publish=lambda e, d: events.append((e, d)), counters=counters), events, counters


async def test_an_upload_that_ends_in_time_is_the_answer(autojump_clock: trio.testing.MockClock) -> None:
    styx = _Styx()
    styx.took = 3.0
    pushes, events, _ = _pushes(styx)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pushes.run)
        doc = await pushes.push(Path("/b/one.clade-backup"), wait_s=20.0)
        nursery.cancel_scope.cancel()
    assert doc == {"styx": {"url": "styx/one.clade-backup", "bytes": 1, "attempts": 1}}
    assert events == [("backup_pushed", doc["styx"])]


async def test_a_slow_upload_answers_pending_after_wait_s_and_goes_on(autojump_clock: trio.testing.MockClock) -> None:
    styx = _Styx()
    styx.took = 300.0  # six attempts against a hanging Styx
    pushes, events, _ = _pushes(styx)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pushes.run)
        started = trio.current_time()
        doc = await pushes.push(Path("/b/slow.clade-backup"), wait_s=20.0)
        assert doc == {"styx_pending": True}
        assert trio.current_time() - started == pytest.approx(20.0)
        assert events == []  # the upload has not ended yet
        with trio.fail_after(400):
            while not events:
                await trio.sleep(1.0)  # mock time
        nursery.cancel_scope.cancel()
    assert events == [("backup_pushed", {"url": "styx/slow.clade-backup", "bytes": 1, "attempts": 1})]
    assert trio.current_time() - started == pytest.approx(300.0, abs=1.0)


async def test_a_failed_upload_is_counted_and_published(autojump_clock: trio.testing.MockClock) -> None:
    styx = _Styx()
    styx.fail = "Styx did not take the backup after 6 attempts (HTTP 503)"
    pushes, events, counters = _pushes(styx)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pushes.run)
        doc = await pushes.push(Path("/b/x.clade-backup"), wait_s=20.0)
        nursery.cancel_scope.cancel()
    assert doc == {"styx_error": styx.fail}
    assert counters["styx_vault_failed"] == 1
    assert events == [("backup_push_failed", {"path": "/b/x.clade-backup", "error": styx.fail})]


async def test_backups_beyond_the_queue_are_refused_with_the_reason(autojump_clock: trio.testing.MockClock) -> None:
    styx = _Styx()
    styx.hold = True
    styx.expect = QUEUED + 1
    pushes, events, counters = _pushes(styx)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pushes.run)
        first = await pushes.push(Path("/b/0.clade-backup"), wait_s=1.0)  # taken by the uploader, held
        assert first == {"styx_pending": True}
        queued = [await pushes.push(Path(f"/b/{i}.clade-backup"), wait_s=0.0) for i in range(1, QUEUED + 1)]
        assert queued == [{"styx_pending": True}] * QUEUED
        refused = await pushes.push(Path("/b/late.clade-backup"), wait_s=0.0)
        assert "late.clade-backup was not queued" in refused["styx_error"]
        assert counters["styx_vault_queue_full"] == 1
        styx.release.set()
        with trio.fail_after(60):
            await styx.all_uploaded.wait()
        nursery.cancel_scope.cancel()
    assert [p.name for p in styx.uploaded] == [f"{i}.clade-backup" for i in range(QUEUED + 1)]
    assert [e for e, _ in events] == ["backup_pushed"] * (QUEUED + 1)
