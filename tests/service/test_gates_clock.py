"""The rule gate's age, on the daemon's one clock (daemon/service/clock.py): a heuristic with
enough positive outcomes crosses once it is ten curator ticks old, and that age is read on the
clock trio moves. The daemon's parts run in-process on a `MockClock` standing still, so the
ten ticks pass with `jump`, not a sleep on the wall clock.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from crdt import Kind, Timestamp
from daemon.datadir import DataDir
from daemon.grimoire import NewEntry
from daemon.grimoire.promotion import RULE_TICKS
from daemon.service.clock import Clock
from daemon.service.state import DaemonState

TICK_S = 0.5


async def test_a_heuristic_crosses_once_ten_ticks_old_on_the_daemons_clock(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    data = DataDir(tmp_path / "data")
    data.init()
    data.config_path.write_text(f"[curator]\ntick_seconds = {TICK_S}\ncycle_ticks = 100000\n")
    clock, config, identity = Clock.of_trio(), data.load_config(), data.load_identity()
    store = data.open_store(config, identity=identity, wall_ms=clock.now_ms)
    state = DaemonState(data=data, config=config, identity=identity, store=store, clock=clock)
    try:
        good = await state.remember(NewEntry(kind=Kind.HEURISTIC, confidence=0.8,
                                             content="Split swaps above 100k USDC into five blocks on Arbitrum"))
        for _ in range(2):
            await state.outcome(good.id, "positive", metric="pnl_usd", value=None, episode_id=None, note=None)
        young = await state.curator_cycle()
        assert young["entries_promoted"] == 0
        assert (await state.entry_doc(good.id))["promoted_reason"] is None
        mock_clock.jump(RULE_TICKS * TICK_S + 0.01)  # ten ticks of the daemon's time (and 10 ms); no wall time
        old = await state.curator_cycle()
        assert old["entries_promoted"] == 1
        assert (await state.entry_doc(good.id))["promoted_reason"] == "validated"
        created_ms, promoted_ms = await state.on_reader(lambda r: r.connection.execute(
            "SELECT created_hlc, promoted_ms FROM entries WHERE id = ?", (good.id,)).fetchone())
        assert promoted_ms - Timestamp.unpack(created_ms).ms >= RULE_TICKS * TICK_S * 1000
        assert state.clock.uptime_s() >= RULE_TICKS * TICK_S
    finally:
        state.close_readers()
        store.close()
