"""Snapshot tests of every TUI screen (pytest-textual-snapshot): fixed data from
`tests/helpers/tui_fake.py`, so the pictures depend on neither peer ids nor time. Each docstring says
what a reviewer should see in the SVG under `tests/tui/__snapshots__/test_tui_snapshots/`.
Update after an intended change with `pytest tests/tui/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot

from tests.helpers.tui_drive import until
from tests.helpers.tui_fake import NOW_MS, Outage, fake_transport, seeded_rates, transport_factory
from tui.app import CladeTui
from tui.widgets import FeedPanel

SMALL = (80, 24)
MEDIUM = (100, 30)
GRID = (120, 40)  # the smallest size with the 2×2 grid
BIG = (160, 48)
Compare = Callable[..., bool]


def make_app(theme: str = "truecolor", transport: httpx.AsyncBaseTransport | None = None,
             now_ms: Callable[[], int] = lambda: NOW_MS) -> CladeTui:
    return CladeTui(transport_factory(transport or fake_transport()), now_ms=now_ms, poll_s=3600,
                    theme=theme, env={}, rates=seeded_rates())


async def frozen_when(pilot: Pilot[Any], problem: str) -> None:
    """Wait until the app has lost the daemon, stop its poll and event loops in the same step, and
    show `problem` as the reason: both loops retry a gone daemon, each with its own message (the
    stream's end, its refused reconnect, the status poll's refusal), and which one is on screen
    at the picture is a race (under load the stream's refusal could be overwritten every time
    before it was looked at). The picture is of the gone daemon, with the stream's reason."""
    app = pilot.app
    assert isinstance(app, CladeTui)
    await until(pilot, lambda: app.link == "down", "the daemon shown gone", timeout=15)
    app.workers.cancel_group(app, "poll")
    app.workers.cancel_group(app, "events")
    await pilot.pause()
    app._lost(problem)  # the reason the event loop gives at its next refused reconnect
    await pilot.pause()


def ready(*keys: str, then: Callable[[Pilot[Any]], bool] | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """run_before: wait for the first poll and all 11 canned feed lines, press `keys`, then wait for `then`."""

    async def run(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, CladeTui)
        await until(pilot, lambda: app.polls >= 1 and len(app._main.query_one(FeedPanel).texts()) == 11,
                    "the first poll and the 11 canned feed lines", timeout=15)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if then is not None:
            await until(pilot, lambda: then(pilot), "the state after the keys", timeout=15)
        await pilot.pause()

    return run


def test_main_80x24(snap_compare: Compare) -> None:
    """Main screen at 80×24, truecolor: two header lines, neither wrapped — `golem …AAGolem0
    clade demo  up 3h 45m  entries 412  vitality stable` (the `clade` brand, the sibling
    count and the Hayflick ratio give way) and the strip `[daemon: up] [curator: 7m 00s ago]
    [styx: backlog] [backup: ok]` — the siblings title on one line, the siblings table with
    …BSibOne1 `100%`, …CSibTwo2 `99.9% (3 behind)` and …DSibThr3 dimmed `down` / `not synced`,
    the tab strip `1 feed` selected, and the 11 feed lines, the warning and error lines in
    bold. The footer shows s search, p pause, q quit, ? help."""
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready())


def test_main_100x30(snap_compare: Compare) -> None:
    """Main screen at 100×30: the header line now has room for the sibling count and
    `vitality stable (Hayflick 0.3)`; the strip as at 80×24; one panel at a time."""
    assert snap_compare(make_app(), terminal_size=MEDIUM, run_before=ready())


def test_main_120x40(snap_compare: Compare) -> None:
    """Main screen at 120×40, the smallest grid: the whole header line (`clade golem …AAGolem0
    clade demo  up 3h 45m  entries 412  siblings 3  vitality stable (Hayflick 0.3)`), the
    strip, the siblings table, and the four panels in a 2×2 grid."""
    assert snap_compare(make_app(), terminal_size=GRID, run_before=ready())


def test_main_160x48(snap_compare: Compare) -> None:
    """Main screen at 160×48, truecolor: the same header and siblings (address column
    visible), then a 2×2 grid: live feed, knowledge (412 live, kinds in two columns, a
    10-bucket confidence histogram peaking at 0.7–0.8 with 97), traffic (four sparklines,
    gossip busy throughout, sync in one burst), backups · styx (last 3h 00m ago 9.2 MiB, 5 of
    7 kept, next due in 21h 00m; outbox 17 waiting, oldest 42s, 1 parked, spend 0.0421 USD)."""
    assert snap_compare(make_app(), terminal_size=BIG, run_before=ready())


def test_main_80x24_16_colours(snap_compare: Compare) -> None:
    """The 80×24 main screen in the 16-colour theme (`clade-16`, the terminal's ANSI palette):
    same content as test_main_80x24; every state still reads as a word."""
    assert snap_compare(make_app("16"), terminal_size=SMALL, run_before=ready())


def test_main_160x48_16_colours(snap_compare: Compare) -> None:
    """The 160×48 grid in the 16-colour theme: same content as test_main_160x48."""
    assert snap_compare(make_app("16"), terminal_size=BIG, run_before=ready())


def test_main_mono(snap_compare: Compare) -> None:
    """The 80×24 main screen in the monochrome theme: greys only, the badges' words and the
    `down` / `99.9% (3 behind)` cells carry every state."""
    assert snap_compare(make_app("mono"), terminal_size=SMALL, run_before=ready())


@pytest.mark.parametrize("panel", ["2", "3", "4"])
def test_narrow_panels(snap_compare: Compare, panel: str) -> None:
    """80×24 with panel 2 (knowledge: counts and the confidence histogram), 3 (traffic: four
    labelled sparklines with now/peak figures) or 4 (backups and Styx) selected in the tab strip."""
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready(panel))


def test_help(snap_compare: Compare) -> None:
    """`?` at 80×24: the help dialog lists every binding — keys, id (for [tui] keymap), what it
    does — starting with `q quit (exit status 0)` and `? help`."""
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready("question_mark"))


def test_confirm_backup(snap_compare: Compare) -> None:
    """`B` at 80×24: the confirmation dialog asks to write an encrypted backup now and names
    its target, `golem …AAGolem0 of clade demo`; `Cancel (n)` has the focus, `Back up (y)`."""
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready("B"))


def test_filter(snap_compare: Compare) -> None:
    """`/` at 80×24: the feed filter dialog with the list of kinds and an empty input."""
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready("slash"))


def test_feed_filtered_and_paused(snap_compare: Compare) -> None:
    """80×24 after filtering on `peer` and pausing: the feed state line reads `PAUSED 0 new
    waiting` and `filter: peer`; only the three peer lines remain."""
    keys = ("slash", "p", "e", "e", "r", "enter", "p")
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=ready(*keys))


def test_search_and_entry(snap_compare: Compare) -> None:
    """Search (`s`, typed `funding`, results after the debounce), then enter: the entry view of
    01JD…WARN — kind warning, author, provenance sibling, confidence 0.80 (local 0.74),
    endorsements 2 confirm 0 contradict, superseded_by -, tags perps, risk, and its content."""
    def shown(pilot: Pilot[Any]) -> bool:
        return pilot.app.screen.__class__.__name__ == "EntryScreen" and "warning" in str(
            pilot.app.screen.query_one("#entry-body").render())

    async def run(pilot: Pilot[Any]) -> None:
        await ready("s")(pilot)
        await pilot.press(*"funding")
        await until(pilot, lambda: pilot.app.screen.query_one("#results").row_count == 2,  # type: ignore[attr-defined]
                    "two search results", timeout=15)
        await pilot.press("tab", "enter")
        await until(pilot, lambda: shown(pilot), "the entry shown", timeout=15)

    assert snap_compare(make_app(), terminal_size=SMALL, run_before=run)


def test_search_results(snap_compare: Compare) -> None:
    """Search at 80×24 after typing `funding`: `2 result(s) for “funding”`, a table with
    score, kind, confidence and content (0.913 warning first, 0.702 insight second)."""
    async def run(pilot: Pilot[Any]) -> None:
        await ready("s")(pilot)
        await pilot.press(*"funding")
        await until(pilot, lambda: pilot.app.screen.query_one("#results").row_count == 2,  # type: ignore[attr-defined]
                    "two search results", timeout=15)

    assert snap_compare(make_app(), terminal_size=SMALL, run_before=run)


def test_disconnected(snap_compare: Compare) -> None:
    """No daemon answers: the header reads `clade waiting for the daemon…` and the badge
    `[daemon: disconnected — retrying]`, with the reason beside it; the panels wait."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    app = make_app(transport=httpx.MockTransport(refuse))

    async def run(pilot: Pilot[Any]) -> None:
        await frozen_when(pilot, "event stream: connection refused")

    assert snap_compare(app, terminal_size=SMALL, run_before=run)


@pytest.mark.parametrize("size", [SMALL, MEDIUM, GRID], ids=["80x24", "100x30", "120x40"])
def test_daemon_gone(snap_compare: Compare, size: tuple[int, int]) -> None:
    """The daemon answered, then went away (12 s before the picture): the strip reads
    `[daemon: disconnected — retrying]` with the curator and Styx badges (and, as room allows,
    the backup badge and the reason); the header line no longer shows the uptime as live:
    `up 3h 45m (stale: seen 12s ago)`, greyed then in the warning colour. The siblings and the
    feed keep their last figures."""
    outage = Outage(after_s=12)
    app = make_app(transport=fake_transport(outage=outage), now_ms=outage.now_ms)

    async def run(pilot: Pilot[Any]) -> None:
        await ready()(pilot)
        outage.stop()
        await frozen_when(pilot, "event stream: connection refused")

    assert snap_compare(app, terminal_size=size, run_before=run)
