"""Driving the real TUI against a daemon: start it, wait on a condition, read the feed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot

from daemon.client import Endpoint
from daemon.datadir import DataDir
from tests.helpers.polling import eventually_async
from tui.app import CladeTui
from tui.widgets import FeedPanel

Body = Callable[[Pilot[Any]], Awaitable[None]]
SIZE = (120, 40)


def drive(app: CladeTui, body: Body, size: tuple[int, int] = SIZE) -> None:
    """Run `app` headless at `size` and drive it with `body`."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(pilot)

    asyncio.run(main())


async def until(pilot: Pilot[Any], predicate: Callable[[], Any], what: str, timeout: float = 30.0,
                interval: float = 0.05) -> None:
    """`polling.eventually_async`, pausing the app's pilot between tries (the app keeps running)."""
    await eventually_async(predicate, what=what, timeout=timeout, interval=interval, pause=pilot.pause)


def feed(app: CladeTui) -> list[str]:
    return app._main.query_one(FeedPanel).texts()


def screen_lines(app: CladeTui) -> list[str]:
    """What the terminal shows now, one string per row (the screen as composed for drawing:
    a widget pushed off screen or clipped is not in it)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def tui_for(data: DataDir, **kw: Any) -> CladeTui:
    return CladeTui(Endpoint(data_dir=data.root).transport, poll_s=0.5, env={}, **kw)
