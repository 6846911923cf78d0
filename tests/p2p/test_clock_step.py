"""A sibling whose wall clock stepped: its gossip is refused for the time it carries (`stale`),
and the daemon pulls the ops from it at once instead of waiting for its turn in anti-entropy.

The victim is a real `clade run` daemon with no anti-entropy tick of its own during the test
(`VICTIM_ENV`); the sibling is Mallory (tests/helpers/mallory.py), here an honest member whose
clock is eleven minutes behind: she seals her gossip with that time, and serves her entry to
any pull.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from libp2p.abc import INetStream

from crdt import CausalContext, Delta
from crdt.codec import encode_delta
from daemon.p2p import messages
from daemon.p2p.frames import read_frame
from daemon.testing.harness import LoopbackClade
from tests.helpers.mallory import VICTIM_ENV, Mallory, frame, now_ms
from tests.helpers.stranger import call, counters, wait_until


@pytest.mark.slow
async def test_gossip_refused_for_its_time_is_pulled_from_its_publisher_at_once(tmp_path: Path) -> None:
    """Mallory's envelope, sealed 11 minutes ago, is refused as stale; the victim then pulls
    from her out of turn (`sync_pulls_prompted`) and has her entry, with its own anti-entropy
    an hour away."""
    clade = LoopbackClade(tmp_path, 1)
    (victim,) = clade.golems
    mallory_dir = clade.add_golem("mallory")
    try:
        await trio.to_thread.run_sync(lambda: clade.start(victim, bootstrap=[], env=VICTIM_ENV))
        mallory = Mallory(mallory_dir, victim)
        body, ops = mallory.entry("Mallory's warning from a clock 11 minutes slow: bridge Y paused")

        async def serve_entry(stream: INetStream) -> None:
            assert isinstance(messages.decode(await read_frame(stream)), messages.Want)
            await stream.write(frame(messages.DeltaFrame(encode_delta(Delta(tuple(ops), CausalContext())))))
            await stream.write(frame(messages.End(False, CausalContext())))

        async with mallory.running():
            await mallory.connect()

            async def settled() -> bool:  # the pulls after a new connection (at once, 2 s, 6 s) are done
                return (await counters(victim))["sync_pulls"] >= 3

            await wait_until("the victim's pulls after connecting", settled)
            before = await counters(victim)
            assert before["sync_pulls_prompted"] == 0
            mallory.sync_reply = serve_entry  # from now on a pull from her brings the entry
            await mallory.publish(mallory.seal(ops, sent_ms=now_ms() - 11 * 60_000))

            async def arrived() -> bool:  # ops count as each delta commits; the pull itself when it ends
                now = await counters(victim)
                return (now["gossip_rejected_stale"] == 1 and now["sync_ops_applied"] == len(ops)
                        and now["sync_pulls"] > before["sync_pulls"])

            await wait_until("the stale gossip refused, then its ops pulled", arrived)
            after = await counters(victim)
            assert after["sync_pulls_prompted"] == 1
            assert after["sync_pulls"] == before["sync_pulls"] + 1
            assert after["gossip_accepted"] == before["gossip_accepted"]  # it came by the pull, not by gossip
            assert (await call(victim, "GET", f"/v1/entries/{body.id}"))["content"] == body.content
        assert victim.running and not mallory.errors, mallory.errors
    finally:
        await trio.to_thread.run_sync(clade.close)
