"""The bounded neighbourhood with real daemons: six `clade run` on 127.0.0.1, each keeping 2
siblings connected (cap 4) and swapping one every 5 s, all bootstrapped from the first (which
trims its inbound to the cap): every golem stays within the cap, rotation happens, and every
warning reaches every golem."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.testing.harness import Golem, LoopbackClade
from tests.helpers.clade import ids_on, write
from tests.helpers.polling import eventually

pytestmark = pytest.mark.slow

ENV = {"CLADE_P2P__NEIGHBOURS": "2", "CLADE_P2P__ROTATE_S": "5", "CLADE_P2P__SYNC_INTERVAL_S": "2"}


def counters(golem: Golem) -> dict[str, int]:
    return dict(golem.call("GET", "/v1/status")["counters"])


def test_six_daemons_with_two_neighbours_stay_within_the_cap_rotate_and_converge(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 6)
    try:
        first = clade.start(clade.golems[0], env=ENV)
        for golem in clade.golems[1:]:
            clade.start(golem, bootstrap=[first], env=ENV)
        eventually(lambda: all(g.members_connected() for g in clade.golems), what="every golem has a neighbour",
                   timeout=60, state=lambda: {g.name: len(g.members_connected()) for g in clade.golems})
        ids = {write(golem, f"gas above {80 + i} gwei on chain {i}: delay swaps") for i, golem in
               enumerate(clade.golems)}
        sizes: list[int] = []

        def everywhere() -> bool:
            sizes.extend(len(g.members_connected()) for g in clade.golems)
            return all(ids <= ids_on(g) for g in clade.golems)

        eventually(everywhere, what="every warning on every golem", timeout=90,
                   state=lambda: {g.name: len(ids & ids_on(g)) for g in clade.golems})
        eventually(lambda: sum(counters(g).get("neighbours_rotated", 0) for g in clade.golems) >= 3,
                   what="rotations", timeout=60)
        # The cap, 4 (not the 5 siblings each): an inbound connection beyond it lives only until the
        # dialer's next pass, so a poll seldom sees it.
        assert max(sizes) <= 5 and sum(s > 4 for s in sizes) <= len(sizes) // 10, sizes
        assert sum(counters(g).get("neighbours_trimmed", 0) for g in clade.golems) >= 1  # the first: 5 inbound
    finally:
        clade.close()
