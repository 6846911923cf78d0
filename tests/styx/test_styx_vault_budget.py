"""Vault uploads are charged and capped like pushes (daemon/styx/pusher.py `Pusher.upload`,
daemon/styx/metering.py for the CLI), against the reference Styx server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from daemon.config import StyxConfig
from daemon.grimoire import Grimoire
from daemon.styx import ledger
from daemon.styx.metering import push_metered
from daemon.styx.policy import budget_for
from daemon.styx.pusher import Pusher
from daemon.styx.vault import VaultPushError
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN

T = TypeVar("T")
NOW = 1_800_000_000_000
MONTH = ledger.month_of(NOW)


def test_the_daemons_upload_is_charged_then_refused_past_the_monthly_cap(tmp_path: Path, styx: StyxServer) -> None:
    backup = tmp_path / "backup-1.clade"
    backup.write_bytes(b"\x00" * (3 * 1024 * 1024 + 1))  # four started MiB
    config = StyxConfig(enabled=True, url=styx.url, budget={"monthly": 0.0025, "death_reserve": 0})
    budget = budget_for(config)
    cost = budget.transfer_cost(backup.stat().st_size)
    assert cost == pytest.approx(0.001 + 4 * 0.0001)  # the default prices
    events: list[str] = []
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: NOW) as store:
        async def on_writer(fn: Callable[[Grimoire], T]) -> T:
            return fn(store)

        async def main() -> None:
            pusher = Pusher(on_writer, url=styx.url, token=STYX_TOKEN, golem="G", wall_ms=lambda: NOW, budget=budget,
                            on_event=lambda name, data: events.append(name))
            first = await pusher.upload(backup, peer="G", timeout_s=10)
            assert first["bytes"] == backup.stat().st_size and not pusher.paused_by_budget
            with pytest.raises(VaultPushError, match="monthly Styx budget is reached"):
                await pusher.upload(backup, peer="G", timeout_s=10)  # 2 × 0.0014 > 0.0025
            assert pusher.paused_by_budget and events == ["styx_budget_reached"]

        trio.run(main)
        assert store.styx_spend_summary(MONTH)["usd"] == pytest.approx(cost)  # the refused one: not charged
        assert store.styx_spend_summary(MONTH)["calls"] == 1
    assert styx.stats()["vault_uploads"] == 1 and backup.exists()  # the backup is kept either way


def test_the_clis_upload_uses_the_stores_ledger_and_its_cap(tmp_path: Path, styx: StyxServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLADE_STYX__TOKEN", STYX_TOKEN)
    backup = tmp_path / "backup-2.clade"
    backup.write_bytes(b"x" * 100)
    config = StyxConfig(enabled=True, url=styx.url, token=STYX_TOKEN,
                        budget={"monthly": 0.0015})
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: NOW) as store:
        done = push_metered(store, config, backup, peer="G", now_ms=NOW)
        assert done["usd"] == pytest.approx(0.0011)
        with pytest.raises(VaultPushError, match="nothing was transferred"):
            push_metered(store, config, backup, peer="G", now_ms=NOW)
        assert store.styx_spent(MONTH) == pytest.approx(0.0011)
    assert styx.stats()["vault_uploads"] == 1
