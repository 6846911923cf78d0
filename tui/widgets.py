"""The main screen's panels. Each keeps what it shows in reactive attributes (set by the app
from a poll or an event) and renders with `tui.format`; none does I/O.

Colour never carries meaning alone: every state is also a word (`up`/`down`, `ok`, `stale`,
`100%`/`99.9% (3 behind)`), so the panels read the same on a monochrome terminal.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Label, Sparkline, Static
from textual.widgets.data_table import RowDoesNotExist

from tui.client import PeerView, Snapshot
from tui.format import (
    SPARK_SERIES,
    FeedItem,
    Level,
    RateTracker,
    ago,
    bars,
    completion,
    duration,
    human_bytes,
    short_id,
)
from tui.header import HeaderState, header_lines

__all__ = ["FeedPanel", "HeaderBar", "KnowledgePanel", "OpsPanel", "SiblingsTable", "TrafficPanel"]

_RICH = {Level.OK: "", Level.WARN: "bold", Level.BAD: "bold reverse", Level.INFO: "", Level.OFF: "dim"}


def _esc(text: str) -> str:
    return text.replace("[", r"\[")


class HeaderBar(Static):
    """The top two lines, docked: who (golem, clade, uptime, entries, siblings, vitality) and
    the status strip (daemon, curator, Styx, backup, alerts). Each line is fitted to the width
    (`tui.header`), never wrapped, so the strip is drawn at every size from 80×24 up. While the
    daemon is unreachable, or no poll got through for `silent_after_ms`, the uptime is marked
    stale, counting from the last good poll (`seen_ms`); the header is redrawn every second."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    link: reactive[str] = reactive("connecting")
    problem: reactive[str] = reactive("")
    seen_ms: reactive[int | None] = reactive(None)
    silent_after_ms = 5_000  # the app sets it from its poll interval

    def __init__(self, now_ms: Callable[[], int], **kw: Any) -> None:
        super().__init__(**kw)
        self._now_ms = now_ms

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.refresh()  # the stale age counts up, and a daemon that stops answering shows

    def render(self) -> str:
        state = HeaderState(self.snapshot, self.link, self.problem, self.seen_ms, self._now_ms(),
                            self.silent_after_ms)
        return "\n".join(header_lines(state, self.size.width))


class SiblingsTable(DataTable[Any]):
    """kubo-style peer table; a sibling that drops stays listed, dimmed, with its last figures."""

    peers: reactive[list[PeerView]] = reactive(list, always_update=True)
    ops: reactive[int | None] = reactive(None)

    # Fixed widths: a table sized from its content redraws later, once measured (and a
    # snapshot could catch the first frame).
    COLUMNS = (("link", 13), ("sibling", 9), ("seen", 13), ("rtt", 6), ("sync", 18), ("msgs in/out", 13),
               ("bytes in/out", 21), ("address", 40))

    def __init__(self, now_ms: Callable[[], int], **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._now_ms = now_ms

    def on_mount(self) -> None:
        for name, width in self.COLUMNS:
            self.add_column(name, key=name, width=width)

    def watch_peers(self, peers: list[PeerView]) -> None:
        if not self.columns:
            return
        selected = self.selected_peer()
        self.clear()
        now = self._now_ms()
        ordered = sorted(peers, key=lambda p: (not p.connected, not p.member, p.peer_id))
        for p in ordered:
            done = completion(self.ops, p.behind, p.ahead)
            style = "" if p.connected else "dim"
            link = "up" if p.connected else "down"
            role = "" if p.member else (" refused" if p.refused else " stranger")
            cells = [f"{link}{role}", short_id(p.peer_id), ago(p.last_seen, now),
                     "-" if p.rtt_ms is None else f"{p.rtt_ms:.0f}ms",
                     done.text if p.behind is None or p.behind == 0 else f"{done.text}",
                     f"{p.msgs_in}/{p.msgs_out}", f"{human_bytes(p.bytes_in)}/{human_bytes(p.bytes_out)}",
                     p.addrs[0] if p.addrs else "-"]
            row = [Text(c, style=_RICH[done.level] if i == 4 and p.connected else style)
                   for i, c in enumerate(cells)]
            self.add_row(*row, key=p.peer_id)
        if selected is not None:
            with contextlib.suppress(RowDoesNotExist):
                self.move_cursor(row=self.get_row_index(selected.peer_id))
        self._by_id = {p.peer_id: p for p in peers}

    def selected_peer(self) -> PeerView | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except (RowDoesNotExist, IndexError):
            return None
        return getattr(self, "_by_id", {}).get(key)


class FeedTable(DataTable[Any]):
    """The feed's lines. The cursor follows the newest line until the operator moves it (keys or
    mouse); then it stays on the line they chose while new lines arrive. End follows again."""

    class FollowChanged(Message):
        """`following` changed (the panel's state line says which)."""

    following: reactive[bool] = reactive(True)

    def watch_following(self) -> None:
        self.post_message(self.FollowChanged())

    def _hold(self) -> None:
        self.following = False

    def action_cursor_up(self) -> None:
        self._hold()
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        self._hold()
        super().action_cursor_down()

    def action_page_up(self) -> None:
        self._hold()
        super().action_page_up()

    def action_page_down(self) -> None:
        self._hold()
        super().action_page_down()

    def action_scroll_top(self) -> None:
        self._hold()
        super().action_scroll_top()

    def action_scroll_bottom(self) -> None:
        super().action_scroll_bottom()
        self.following = True

    def action_scroll_end(self) -> None:  # End: the row cursor has no columns to go to; follow
        self.action_scroll_bottom()

    async def _on_click(self, event: Any) -> None:
        self._hold()
        await super()._on_click(event)


class FeedPanel(Vertical):
    """The live feed: newest last, pausable (new lines wait), filterable by kind or text; the
    cursor follows new lines unless the operator has moved it (`FeedTable`)."""

    class EntryChosen(Message):
        """The operator picked a feed line that names an entry."""

        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    paused: reactive[bool] = reactive(False)
    filter_text: reactive[str] = reactive("")
    waiting: reactive[int] = reactive(0)

    KEEP = 1000
    SHOWN = 300

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.items: deque[FeedItem] = deque(maxlen=self.KEEP)
        self._held: list[FeedItem] = []
        self._rows: deque[str] = deque()
        self._ids: dict[str, str | None] = {}
        self._seq = 0

    def compose(self) -> ComposeResult:
        yield Label("", id="feed-state")
        yield FeedTable(cursor_type="row", id="feed-table", show_header=False)

    def on_mount(self) -> None:
        table = self.query_one(FeedTable)
        table.add_column("time", key="time", width=8)  # fixed widths: see SiblingsTable.COLUMNS
        table.add_column("kind", key="kind", width=8)
        table.add_column("what", key="what", width=160)
        self.call_after_refresh(self._show_state)

    def add(self, items: Iterable[FeedItem]) -> None:
        """New feed lines: shown at once, or held while paused."""
        fresh = list(items)
        if not fresh:
            return
        if self.paused:
            self._held.extend(fresh)
            self.waiting = len(self._held)
            return
        self._append(fresh)

    def _append(self, fresh: list[FeedItem]) -> None:
        self.items.extend(fresh)
        table = self.query_one(FeedTable)
        held = None if table.following else self._cursor_key(table)
        for item in fresh:
            if item.matches(self.filter_text):
                self._add_row(table, item)
        trimmed = False
        while len(self._rows) > self.SHOWN:
            old = self._rows.popleft()
            self._ids.pop(old, None)
            table.remove_row(old)
            trimmed = True
        if not table.row_count:
            return
        if table.following:
            table.move_cursor(row=table.row_count - 1, animate=False)
        elif trimmed:  # lines left at the top: keep the cursor on the operator's line (or the oldest)
            with contextlib.suppress(RowDoesNotExist):
                table.move_cursor(row=table.get_row_index(held) if held in self._ids else 0, animate=False)

    @staticmethod
    def _cursor_key(table: DataTable[Any]) -> str | None:
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except (RowDoesNotExist, IndexError):
            return None

    def _add_row(self, table: DataTable[Any], item: FeedItem) -> None:
        self._seq += 1
        key = str(self._seq)
        style = _RICH[item.level]
        stamp = Text(_clock(item.at_ms), style="dim")
        table.add_row(stamp, Text(item.kind, style=style), Text(item.text, style=style), key=key)
        self._rows.append(key)
        self._ids[key] = item.entry_id

    def watch_paused(self, paused: bool) -> None:
        if not paused and self._held:
            held, self._held = self._held, []
            self.waiting = 0
            self._append(held)
        self._show_state()

    def watch_filter_text(self) -> None:
        if not self.is_mounted:
            return
        table = self.query_one(FeedTable)
        table.clear()
        table.following = True  # a new selection of lines: start at its newest
        self._rows.clear()
        self._ids.clear()
        for item in list(self.items)[-self.SHOWN * 4:]:
            if item.matches(self.filter_text):
                self._add_row(table, item)
        while len(self._rows) > self.SHOWN:
            table.remove_row(self._rows.popleft())
        if table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self._show_state()

    def watch_waiting(self) -> None:
        self._show_state()

    def on_feed_table_follow_changed(self, message: FeedTable.FollowChanged) -> None:
        message.stop()
        self._show_state()

    def _show_state(self) -> None:
        if not self.is_mounted:
            return
        state = f"[b reverse] PAUSED [/] {self.waiting} new waiting (p resumes)" if self.paused else "live"
        shown = f"  filter: [b]{_esc(self.filter_text)}[/] (/ changes)" if self.filter_text else "  / filters"
        held = "" if self.query_one(FeedTable).following else "  cursor held (end follows)"
        self.query_one("#feed-state", Label).update(f"{state}{shown}{held}")

    def selected_entry(self) -> str | None:
        return self._ids.get(self._cursor_key(self.query_one(FeedTable)) or "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        entry_id = self._ids.get(event.row_key.value or "")
        if entry_id:
            self.post_message(self.EntryChosen(entry_id))

    def texts(self) -> list[str]:
        """The feed lines on screen, oldest first (for tests and benchmarks)."""
        table = self.query_one(FeedTable)
        return [str(table.get_cell(k, "what")) for k in self._rows]


def _clock(at_ms: int) -> str:
    seconds = (at_ms // 1000) % 86400
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class KnowledgePanel(Static):
    """Live entries by kind and a confidence histogram."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def render(self) -> str:
        snap = self.snapshot
        if snap is None:
            return "knowledge: waiting for the daemon…"
        st = snap.status
        by_kind = snap.stats.by_kind if snap.stats else st.by_kind
        lines = [f"[b]{st.entries}[/b] live entries, {st.archived} archived"
                 + (f" ([b]{st.archived_for_capacity}[/b] over budget)" if st.archived_for_capacity else "")]
        kinds = sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
        for i in range(0, len(kinds), 2):
            pair = kinds[i:i + 2]
            lines.append("  ".join(f"{k:<16} {n:>6}" for k, n in pair))
        if snap.stats is not None:
            width = max(4, min(40, self.size.width - 16))
            lines.append("[b]confidence[/b]")
            hist = snap.stats.confidence_histogram
            for i, (count, bar) in enumerate(zip(hist, bars(hist, width), strict=True)):
                lines.append(f"{i / len(hist):.1f}–{(i + 1) / len(hist):.1f} {count:>5} {bar}")
        return "\n".join(lines)


class TrafficPanel(Vertical):
    """Gossip and sync messages and bytes per second (the daemon's counters, one point per poll)."""

    def __init__(self, rates: RateTracker, **kw: Any) -> None:
        super().__init__(**kw)
        self.rates = rates

    def compose(self) -> ComposeResult:
        for i, name in enumerate(SPARK_SERIES):
            yield Label(name, id=f"spark-label-{i}", classes="spark-label")
            yield Sparkline([], id=f"spark-{i}", summary_function=max)

    def refresh_rates(self) -> None:
        for i, name in enumerate(SPARK_SERIES):
            series = list(self.rates.history[name])
            # A fixed window that starts at zero: the sparkline scales from its minimum, so the
            # padding keeps bar heights proportional to the rate (and an idle link flat).
            window = [0.0] * (self.rates.keep - len(series)) + series
            now = self.rates.latest(name)
            peak = max(window)
            figure = human_bytes(now) + "/s" if "bytes" in name else f"{now:.1f}/s"
            top = human_bytes(peak) + "/s" if "bytes" in name else f"{peak:.1f}/s"
            self.query_one(f"#spark-label-{i}", Label).update(f"{name.split('/')[0]}: now {figure}, peak {top}")
            self.query_one(f"#spark-{i}", Sparkline).data = window


class OpsPanel(Static):
    """Backups (last, size, next due) and the Styx outbox (depth, oldest, parked, spend)."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, now_ms: Callable[[], int], **kw: Any) -> None:
        super().__init__(**kw)
        self._now_ms = now_ms

    def render(self) -> str:
        snap = self.snapshot
        if snap is None:
            return "backups and Styx: waiting for the daemon…"
        now = self._now_ms()
        lines = ["[b]backups[/b]"]
        b = snap.backups
        if b is None:
            lines.append("  unknown (this daemon has no GET /v1/backups)")
        else:
            last = "none yet" if b.last is None else f"{ago(b.last.at_ms, now)}, {human_bytes(b.last.bytes)}"
            due = "not scheduled (no clade)" if b.next_due_ms is None else ago(b.next_due_ms, now)
            lines += [f"  last     {last}", f"  kept     {b.count} of {b.keep} ({human_bytes(b.total_bytes)})",
                      f"  next due {due} (every {b.interval_hours:g} h)"]
        lines.append("[b]styx[/b]")
        s = snap.status.styx
        if s is None:
            lines.append("  off")
        else:
            oldest = "-" if s.oldest_age_s is None else duration(s.oldest_age_s)
            lines += [f"  outbox   {s.queue_depth} waiting, oldest {oldest}",
                      f"  parked   {s.parked}", f"  spend    {s.spend_month_usd:.4f} USD this month"
                      + ("" if s.budget_month_usd is None else f" of {s.budget_month_usd:g}")
                      + (" (paused by budget)" if s.paused_by_budget else ""),
                      f"  pushed   {s.delivered} items, {s.failures} failed calls"]
            if s.last_error:
                lines.append(f"  [$error]last error: {_esc(s.last_error)}[/]")
        return "\n".join(lines)
