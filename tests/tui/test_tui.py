"""The operator TUI driven by Pilot against real daemons (`clade run` on temp data dirs, and a
loopback clade of two golems for the sibling views): every screen and every action, read-only
mode, the keymap, a daemon stopped and restarted under it, hostile answers, and `clade tui`
quitting with status 0 in a real terminal.

Textual runs on asyncio: these are plain (sync) test functions that call `asyncio.run`, so
pytest-trio's trio mode leaves them alone. Waiting is always on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Label

from daemon.datadir import DataDir
from daemon.testing.harness import LoopbackClade
from daemon.testing.process import DaemonProc
from tests.helpers.clade import running_clade
from tests.helpers.tui_drive import drive, feed, screen_lines, tui_for, until
from tests.helpers.tui_fake import fake_transport, status_doc, transport_factory
from tui.app import CladeTui
from tui.format import FeedItem
from tui.keys import KEYS
from tui.screens import ConfirmScreen, EntryScreen, FilterScreen, HelpScreen, SearchScreen
from tui.widgets import FeedPanel, FeedTable, HeaderBar, SiblingsTable


def write(call: Callable[..., Any], content: str, kind: str = "warning") -> str:
    return str(call("POST", "/v1/memory", json={"content": content, "memory_type": kind})["id"])


@pytest.fixture
def clade2(tmp_path: Path) -> Iterator[LoopbackClade]:
    with running_clade(tmp_path, 2) as clade:
        yield clade


def _json(proc: DaemonProc, method: str, path: str, **kw: Any) -> Any:
    res = proc.request(method, path, **kw)
    assert res.status_code < 400, res.text
    return res.json()


@pytest.mark.slow
def test_siblings_feed_entry_view_and_entry_actions(clade2: LoopbackClade) -> None:
    g0, g1 = clade2.golems
    app = tui_for(g0.data)

    async def body(pilot: Pilot[Any]) -> None:
        table = app._main.query_one(SiblingsTable)
        await until(pilot, lambda: app.snapshot and app.snapshot.status.peer_id == g0.peer_id, "the first poll")
        assert g0.peer_id[-8:] in str(app._main.query_one(HeaderBar).render())
        await until(pilot, lambda: any(p.peer_id == g1.peer_id and p.connected for p in table.peers), "g1 up")
        row = table.get_row(g1.peer_id)
        assert str(row[0]).startswith("up") and str(row[1]) == "…" + g1.peer_id[-8:]
        # An entry written on the sibling arrives in the feed (received, by gossip or sync).
        theirs = await asyncio.to_thread(write, g1.call, "sibling says: funding flips before cascades")
        await until(pilot, lambda: any(theirs[:8] in line and line.startswith("received") for line in feed(app)),
                    "the sibling's entry in the feed")
        await asyncio.to_thread(g0.call, "POST", "/v1/sync", json={})
        await until(pilot, lambda: str(table.get_row(g1.peer_id)[4]) == "100%", "completion 100% after a sync")
        # Select its line with the arrows (later lines, e.g. the sync's, may follow it): the cursor
        # then stays on it while new lines arrive, and o opens it; each action goes through the dialog.
        panel = app._main.query_one(FeedPanel)
        lines = panel.query_one(FeedTable)
        lines.focus()
        await pilot.press("up")  # any arrow holds the cursor
        line = next(key for key, entry in panel._ids.items() if entry == theirs)
        for _ in range(panel.SHOWN):
            if lines.cursor_row == lines.get_row_index(line):
                break
            await pilot.press("up" if lines.cursor_row > lines.get_row_index(line) else "down")
        assert panel.selected_entry() == theirs and not lines.following
        assert "cursor held" in str(panel.query_one("#feed-state", Label).render())
        later = await asyncio.to_thread(write, g1.call, "a later line that must not move the cursor")
        await until(pilot, lambda: any(later[:8] in line for line in feed(app)), "a later line in the feed")
        assert panel.selected_entry() == theirs
        await pilot.press("o")
        try:
            await until(pilot, lambda: isinstance(app.screen, EntryScreen) and app.screen.doc is not None,
                        "entry view", timeout=30.0)
        except AssertionError:
            screen = app.screen
            raise AssertionError(
                f"no entry view: screen={type(screen).__name__} focused={app.focused!r} "
                f"doc={getattr(screen, 'doc', '-')!r} problem={getattr(screen, 'problem', '-')!r} "
                f"selected={panel.selected_entry()!r} link={app.link!r} app_problem={app.problem!r} "
                f"actions={app.action_log[-5:]!r}") from None
        body_text = str(app.screen.query_one("#entry-body").render())
        for word in ("sibling says: funding", "provenance", "confidence", "endorsements", "superseded_by"):
            assert word in body_text
        for key, check in (("E", lambda e: e["confirms"] == 1), ("X", lambda e: e["contradicts"] == 1)):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
            assert theirs in str(app.screen.query_one("#target").render())
            await pilot.press("y")
            await until(pilot, lambda c=check: c(g0.call("GET", f"/v1/entries/{theirs}")), f"{key} applied")
        await pilot.press("F")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the forget dialog")
        await pilot.press("n")  # cancel first: nothing happens
        await until(pilot, lambda: any(m.startswith("cancelled: forget") for m in app.action_log), "cancelled")
        assert g0.call("GET", f"/v1/entries/{theirs}")["archived"] is False
        await pilot.press("F")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the forget dialog again")
        await pilot.press("y")
        await until(pilot, lambda: g0.call("GET", f"/v1/entries/{theirs}")["archived"], "forgotten")
        await until(pilot, lambda: "archived" in str(app.screen.query_one("#entry-body").render()), "reloaded")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app._main, "back on the main screen")
        lines.focus()
        await pilot.press("end")  # follow the newest line again
        await until(pilot, lambda: lines.following and lines.cursor_row == lines.row_count - 1, "following")
        assert "cursor held" not in str(panel.query_one("#feed-state", Label).render())

    drive(app, body)


@pytest.mark.slow
def test_peer_actions_and_a_dropped_sibling_stays_listed_dimmed(clade2: LoopbackClade) -> None:
    g0, g1 = clade2.golems
    app = tui_for(g0.data)

    async def body(pilot: Pilot[Any]) -> None:
        table = app._main.query_one(SiblingsTable)
        await until(pilot, lambda: any(p.peer_id == g1.peer_id and p.connected for p in table.peers), "g1 up")
        table.focus()
        table.move_cursor(row=table.get_row_index(g1.peer_id))
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the reconnect dialog")
        assert g1.peer_id in str(app.screen.query_one("#target").render())
        await pilot.press("y")
        await until(pilot, lambda: any(m.startswith("dialing") for m in app.action_log), "dialing")
        await pilot.press("H")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the hold-off dialog")
        assert g1.peer_id in str(app.screen.query_one("#target").render())
        await pilot.press("y")
        await until(pilot, lambda: any(m.startswith("held off") for m in app.action_log), "held off")
        await until(pilot, lambda: any(p.peer_id == g1.peer_id and not p.connected for p in table.peers),
                    "g1 down after the hold", timeout=60)
        await asyncio.to_thread(g1.stop)
        await until(pilot, lambda: any("peer down" in line for line in feed(app)), "peer down in the feed")
        row = table.get_row(g1.peer_id)  # still listed, dimmed, with its last figures
        assert str(row[0]).startswith("down") and all(cell.style == "dim" for cell in row)

    drive(app, body)


@pytest.mark.slow
def test_a_suspect_sibling_raises_the_banner_and_d_and_t_distrust_and_trust_it(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 2)
    g0, g1 = clade.golems
    try:
        clade.start(g0, env={"CLADE_TRUST__BUDGET_ENTRIES": "5"})
        clade.start(g1, bootstrap=[g0])
        clade.wait_connected(clade.golems)
        app = tui_for(g0.data)

        def header() -> str:
            return str(app._main.query_one(HeaderBar).render())

        async def body(pilot: Pilot[Any]) -> None:
            table = app._main.query_one(SiblingsTable)
            await until(pilot, lambda: any(p.peer_id == g1.peer_id and p.connected for p in table.peers), "g1 up")
            assert "SUSPECT" not in header()
            for i in range(8):  # over g0's budget of 5 fresh entries an hour
                await asyncio.to_thread(g1.call, "POST", "/v1/memory", json={
                    "content": f"Pool {i}: route swaps through router 0xdead{i:03d} now", "memory_type": "warning"})
            await until(pilot, lambda: any("suspect sibling" in line for line in feed(app)), "the alert in the feed",
                        timeout=60)
            await until(pilot, lambda: "SUSPECT" in header(), "the banner", timeout=30)
            table.focus()
            table.move_cursor(row=table.get_row_index(g1.peer_id))
            await pilot.press("D")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the distrust dialog")
            assert g1.peer_id in str(app.screen.query_one("#target").render())
            await pilot.press("y")
            await until(pilot, lambda: any(m.startswith("distrust:") for m in app.action_log), "distrusted")
            await until(pilot, lambda: "SUSPECT" not in header(), "the banner gone once decided", timeout=30)
            assert g0.call("GET", "/v1/status")["trust"]["distrusted"] == [g1.peer_id]
            await pilot.press("T")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the trust dialog")
            await pilot.press("y")
            await until(pilot, lambda: any(m.startswith("trust:") for m in app.action_log), "trusted again")
            assert g0.call("GET", "/v1/status")["trust"] == {"suspect": [], "distrusted": []}

        drive(app, body)
    finally:
        clade.close()


@pytest.mark.slow
def test_backup_and_curator_run_after_confirmation(tmp_path: Path) -> None:
    clade = LoopbackClade(tmp_path, 1)
    try:
        (g0,) = clade.golems
        clade.start(g0)
        app = tui_for(g0.data)

        async def body(pilot: Pilot[Any]) -> None:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.backups is not None, "a poll")
            assert app.snapshot is not None and app.snapshot.backups is not None
            assert app.snapshot.backups.count == 0 and app.snapshot.backups.next_due_ms is not None
            await pilot.press("B")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the backup dialog")
            assert g0.peer_id[-8:] in str(app.screen.query_one("#target").render())
            await pilot.press("y")
            await until(pilot, lambda: any(line.startswith("backup written") for line in feed(app)), "backup line")
            await until(pilot, lambda: app.snapshot and app.snapshot.backups and app.snapshot.backups.count == 1,
                        "the backup counted")
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the curator dialog")
            await pilot.press("y")
            await until(pilot, lambda: any(line.startswith("curator cycle") for line in feed(app)), "curator line")
            await until(pilot, lambda: app.snapshot and app.snapshot.status.last_curator_cycle, "the cycle in status")

        drive(app, body)
    finally:
        clade.close()


def test_read_only_disables_every_action(daemon: DaemonProc) -> None:
    app = tui_for(daemon.data, read_only=True)

    async def body(pilot: Pilot[Any]) -> None:
        mine = await asyncio.to_thread(write, lambda *a, **k: _json(daemon, *a, **k), "a note", "insight")
        await until(pilot, lambda: any(mine[:8] in line for line in feed(app)), "the entry in the feed")
        for key in ("B", "C", "R", "H"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is app._main, key
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, EntryScreen) and app.screen.doc, "the entry view")
        for key in ("F", "E", "X"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, EntryScreen), key
        await pilot.press("escape")
        marker = await asyncio.to_thread(write, lambda *a, **k: _json(daemon, *a, **k), "marker", "insight")
        await until(pilot, lambda: any(marker[:8] in line for line in feed(app)), "the marker in the feed")
        assert app.action_log == []
        assert _json(daemon, "GET", f"/v1/entries/{mine}")["archived"] is False
        assert _json(daemon, "GET", "/v1/status")["last_curator_cycle"] is None

    drive(app, body)


def test_search_as_you_type_then_the_entry(daemon: DaemonProc) -> None:
    call = lambda *a, **k: _json(daemon, *a, **k)  # noqa: E731
    wanted = write(call, "liquidation cascades follow negative funding on perp venues", "insight")
    write(call, "gas prices spike during NFT mints", "insight")
    app = tui_for(daemon.data)

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.polls, "a poll")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search screen")
        await pilot.press(*"liquidation funding")
        results = app.screen.query_one("#results", DataTable)
        await until(pilot, lambda: results.row_count >= 1, "results", timeout=60)
        assert results.coordinate_to_cell_key(results.cursor_coordinate).row_key.value == wanted
        await pilot.press("enter", "enter")  # submit the query (focus to results), open the first
        await until(pilot, lambda: isinstance(app.screen, EntryScreen) and app.screen.doc, "the entry view")
        assert app.screen.entry_id == wanted  # type: ignore[attr-defined]
        await pilot.press("escape", "escape")
        await until(pilot, lambda: app.screen is app._main, "back")

    drive(app, body)


def test_feed_pauses_and_filters_by_kind(daemon: DaemonProc) -> None:
    call = lambda *a, **k: _json(daemon, *a, **k)  # noqa: E731
    app = tui_for(daemon.data)

    async def body(pilot: Pilot[Any]) -> None:
        panel = app._main.query_one(FeedPanel)
        await until(pilot, lambda: app.link == "up" and app.events_seen, "the event stream")
        await pilot.press("p")
        held = await asyncio.to_thread(write, call, "held while paused", "insight")
        await until(pilot, lambda: panel.waiting == 1, "one line waiting")
        assert not any(held[:8] in line for line in feed(app))
        await pilot.press("p")
        await until(pilot, lambda: any(held[:8] in line for line in feed(app)), "shown on resume")
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter dialog")
        await pilot.press(*"warning", "enter")
        await until(pilot, lambda: panel.filter_text == "warning", "the filter applied")
        assert feed(app) == []
        hidden = await asyncio.to_thread(write, call, "an insight, filtered out", "insight")
        marker = await asyncio.to_thread(write, call, "a warning, shown", "warning")
        await until(pilot, lambda: any(marker[:8] in line for line in feed(app)), "the warning")
        assert not any(hidden[:8] in line for line in feed(app)) and len(feed(app)) == 1

    drive(app, body)


def test_help_lists_every_binding_and_the_keymap_remaps_quit(daemon: DaemonProc) -> None:
    app = tui_for(daemon.data, keymap={"quit": "x", "entry.forget": "enter"})

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.polls, "a poll")
        assert app.applied_keymap == {"quit": "x"}  # forget on enter is refused
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        table = app.screen.query_one(DataTable)
        assert table.row_count == len(KEYS)
        assert [str(c) for c in table.get_row("quit")][:2] == ["x", "quit"]
        assert str(table.get_row("entry.forget")[0]) == "F"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app._main, "help closed")
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running
        await pilot.press("x")
        await until(pilot, lambda: not app.is_running, "quit on x")

    drive(app, body)
    assert app.return_code == 0


@pytest.mark.slow
def test_daemon_stopped_and_restarted_while_the_tui_runs(data_dir: DataDir) -> None:
    procs = [DaemonProc(data_dir)]
    app = tui_for(data_dir)

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.link == "up" and app.events_seen, "connected")
        assert await asyncio.to_thread(procs[0].stop) == 0
        await until(pilot, lambda: app.link == "down", "the outage noticed")
        assert "disconnected — retrying" in str(app._main.query_one(HeaderBar).render())
        procs.append(await asyncio.to_thread(DaemonProc, data_dir))
        await until(pilot, lambda: app.link == "up", "reconnected", timeout=60)
        polls = app.polls
        await until(pilot, lambda: app.polls > polls, "polling again")
        # The stream reconnects once a poll got through (not after its own backoff), and says so.
        await until(pilot, lambda: app.event_connects >= 2 and app.events_live, "the event stream again")
        await until(pilot, lambda: any("event stream reconnected" in line for line in feed(app)), "the gap noted")
        marker = await asyncio.to_thread(write, lambda *a, **k: _json(procs[-1], *a, **k), "after the restart",
                                         "insight")
        await until(pilot, lambda: any(marker[:8] in line for line in feed(app)), "events again", timeout=60)
        assert "daemon: up" in str(app._main.query_one(HeaderBar).render())

    try:
        drive(app, body)
    finally:
        for proc in procs:
            proc.stop()


def test_at_80x24_the_strip_is_drawn_and_shows_a_stopped_daemon_within_seconds(data_dir: DataDir) -> None:
    """At 80×24 the header's first line holds the golem (never wrapped) and the second screen
    row is the status strip: `[daemon: up] [curator: …] [styx: …]` (with a vitality reported,
    the line that once wrapped and pushed the strip off). Once the daemon stops, the drawn strip
    reads `[daemon: disconnected — retrying]` within 5 s, the uptime is marked stale instead of
    shown as live, and the siblings are titled as last seen."""
    proc = DaemonProc(data_dir)
    _json(proc, "PUT", "/v1/vitality", json={"phase": "stable", "hayflick_ratio": 0.3})
    app = tui_for(data_dir)
    peer_id = proc.ready["peer_id"]

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.snapshot is not None and screen_lines(app)[1].startswith(" [daemon: up]"),
                    "the strip drawn with the daemon up")
        rows = screen_lines(app)
        assert len(rows) == 24 and all(len(row) == 80 for row in rows)
        assert rows[0].startswith(f" golem …{peer_id[-8:]}") and " up " in rows[0] and "stale" not in rows[0]
        assert "vitality stable" in rows[0]
        assert "[curator: " in rows[1] and "[styx: off]" in rows[1]
        assert await asyncio.to_thread(proc.stop) == 0
        await until(pilot, lambda: screen_lines(app)[1].startswith(" [daemon: disconnected — retrying]"),
                    "the outage on the drawn strip", timeout=5.0)
        await until(pilot, lambda: "(stale: seen " in screen_lines(app)[0], "the uptime marked stale", timeout=5.0)
        assert "[curator: " in screen_lines(app)[1] and "[styx: off]" in screen_lines(app)[1]
        assert "when last seen" in screen_lines(app)[2]

    try:
        drive(app, body, size=(80, 24))
    finally:
        proc.stop()


def test_at_80x24_a_hung_daemon_reads_not_answering_within_seconds(data_dir: DataDir) -> None:
    """A daemon that hangs (SIGSTOP) refuses nothing: its requests only time out (10 s). Within
    `silent_after_ms` (5 s at the default poll) and a tick, the drawn strip reads `[daemon: not
    answering]` and the uptime is marked stale; once it runs again the strip reads up."""
    proc = DaemonProc(data_dir)
    app = tui_for(data_dir)
    assert proc.proc is not None
    pid = proc.proc.pid

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.snapshot is not None and screen_lines(app)[1].startswith(" [daemon: up]"),
                    "the strip drawn with the daemon up")
        os.kill(pid, signal.SIGSTOP)
        try:
            # (before its poll's 10 s timeout turns it into "disconnected — retrying")
            await until(pilot, lambda: screen_lines(app)[1].startswith(" [daemon: not answering]"),
                        "the hang on the drawn strip", timeout=8.0)
            assert "(stale: seen " in screen_lines(app)[0]
        finally:
            os.kill(pid, signal.SIGCONT)
        await until(pilot, lambda: screen_lines(app)[1].startswith(" [daemon: up]"), "up again", timeout=30.0)
        assert "stale" not in screen_lines(app)[0]

    try:
        drive(app, body, size=(80, 24))
    finally:
        proc.stop()


def test_malformed_and_unexpected_answers_never_crash_it() -> None:
    """The only fake-daemon behaviour test: a real daemon cannot be made to send garbage."""
    answers = iter([
        httpx.Response(200, text="not json"),
        httpx.Response(200, json={"peer_id": 5}),
        httpx.Response(500, json={"error": "internal", "detail": "boom"}),
        httpx.Response(200, json=[1, 2, 3]),
    ])
    good = fake_transport(events=[("entry_written", {"id": None, "kind": 7}), ("peer_up", "junk"),
                                  ("whatever_new", {"x": [1]})], status=status_doc())

    async def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/status":
            answer = next(answers, None)
            if answer is not None:
                return answer
        if request.url.path == "/v1/events":
            return httpx.Response(200, text="event: entry_written\ndata: {not json\n\n")
        return await good.handle_async_request(request)

    app = CladeTui(transport_factory(httpx.MockTransport(handle)), poll_s=0.2, env={})

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: app.polls >= 1, "a good poll at last")
        await until(pilot, lambda: any("malformed event" in line for line in feed(app)), "the malformed event")
        assert app.is_running

    drive(app, body)
    seen = " | ".join(app.problem_log)
    assert "not JSON" in seen and "unexpected answer" in seen and "the daemon failed" in seen


def test_a_held_cursor_stays_on_its_line_while_old_lines_scroll_off() -> None:
    """The feed widget alone (no daemon needed): lines added past `SHOWN` drop the oldest, and a
    cursor the operator moved stays on the same line, not the same row number."""
    app = CladeTui(transport_factory(fake_transport(events=[], status=status_doc())), poll_s=3600, env={})

    def lines(start: int, n: int) -> list[FeedItem]:
        return [FeedItem(at_ms=i, kind="entry", text=f"line {i}", entry_id=f"e{i}") for i in range(start, start + n)]

    async def body(pilot: Pilot[Any]) -> None:
        panel = app._main.query_one(FeedPanel)
        table = panel.query_one(FeedTable)
        panel.add(lines(0, panel.SHOWN))
        await pilot.pause()
        assert panel.selected_entry() == f"e{panel.SHOWN - 1}"  # following: the newest
        table.focus()
        await pilot.press("pageup", "up")
        chosen = panel.selected_entry()
        assert chosen is not None and not table.following
        panel.add(lines(panel.SHOWN, 40))
        await pilot.pause()
        assert panel.selected_entry() == chosen and len(panel.texts()) == panel.SHOWN
        await pilot.press("end")
        panel.add(lines(panel.SHOWN + 40, 1))
        await pilot.pause()
        assert table.following and panel.selected_entry() == f"e{panel.SHOWN + 40}"

    drive(app, body)


@pytest.mark.slow
def test_clade_tui_in_a_terminal_quits_with_status_0(daemon: DaemonProc) -> None:
    clade = str(Path(sys.executable).with_name("clade"))
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen([clade, "--data-dir", str(daemon.data.root), "tui", "--read-only"], stdin=follower,
                            stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"daemon: up" not in seen.replace(b"\x1b", b""):
            assert time.monotonic() < deadline and proc.poll() is None, seen[-2000:]
            if select.select([leader], [], [], 0.5)[0]:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    break
            seen = seen[-200_000:]
        os.write(leader, b"q")
        deadline = time.monotonic() + 30
        while proc.poll() is None:
            assert time.monotonic() < deadline, "clade tui did not quit on q"
            if select.select([leader], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    os.read(leader, 65536)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
