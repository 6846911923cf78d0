"""The TUI's screens: the dashboard, search, one entry, help, the confirmation dialog and the
feed filter. Screens lay out widgets and read through the API client they are given
(`ScreenContext`); an action the operator asks for (back up, run the curator, hold or reconnect
a sibling, forget/endorse/contradict an entry) is a message (`BackupAsked`, `CuratorAsked`,
`PeerActionAsked`, `EntryActionAsked`) that bubbles to the app, which confirms and runs it.
The screens know nothing of the app (`tui.app` imports them, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

from daemon.contract.responses import EntryDoc
from tui.client import ApiError, PeerView, Refused, TuiClient
from tui.format import FEED_KINDS, RateTracker
from tui.keys import KEYS, allowed, bindings, effective_keys
from tui.widgets import FeedPanel, HeaderBar, KnowledgePanel, OpsPanel, SiblingsTable, TrafficPanel

__all__ = ["BackupAsked", "ConfirmScreen", "CuratorAsked", "EntryActionAsked", "EntryScreen", "FilterScreen",
           "HelpScreen", "MainScreen", "PeerActionAsked", "ScreenContext", "SearchScreen"]

PANELS = ("feed", "knowledge", "traffic", "ops")


@dataclass(frozen=True, slots=True)
class ScreenContext:
    """What the screens are given by the app: the API client (reads only: entry, search), the
    wall clock, the traffic rates, and whether actions are off (`--read-only`)."""

    api: TuiClient
    now_ms: Callable[[], int]
    rates: RateTracker
    read_only: bool


# -- what a screen asks of the app: each bubbles up; the app confirms first, then acts ---------


class BackupAsked(Message):
    """Write an encrypted backup now."""


class CuratorAsked(Message):
    """Run a curator cycle now."""


class PeerActionAsked(Message):
    """Hold off, dial again, distrust or trust again a sibling (`peer` None: none is selected)."""

    def __init__(self, what: Literal["hold", "reconnect", "distrust", "trust"], peer: PeerView | None) -> None:
        super().__init__()
        self.what = what
        self.peer = peer


class EntryActionAsked(Message):
    """Forget, endorse or contradict an entry; `after` runs once the daemon answered."""

    def __init__(self, what: Literal["forget", "endorse", "contradict"], entry_id: str, target: str,
                 after: Callable[[], Any]) -> None:
        super().__init__()
        self.what = what
        self.entry_id = entry_id
        self.target = target
        self.after = after


class _AppScreen(Screen[None]):
    def __init__(self, context: ScreenContext) -> None:
        super().__init__()
        self.context = context


class MainScreen(_AppScreen):
    """Header, siblings, then the feed, knowledge, traffic and ops panels: a 2×2 grid on a big
    terminal, one at a time (1–4) below 120×40."""

    BINDINGS = bindings("main")
    panel: reactive[str] = reactive("feed")

    class Shown(Message):
        """The dashboard is mounted: the app puts its link state and last snapshot on it."""

    def compose(self) -> ComposeResult:
        context = self.context
        yield HeaderBar(context.now_ms, id="header")
        yield Label("siblings", classes="title", id="siblings-title")
        yield SiblingsTable(context.now_ms, id="siblings")
        yield Static("", id="tabs")
        with Container(id="panels"):
            yield FeedPanel(id="feed", classes="panel")
            yield KnowledgePanel(id="knowledge", classes="panel")
            yield TrafficPanel(context.rates, id="traffic", classes="panel")
            yield OpsPanel(context.now_ms, id="ops", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        for name, title in zip(PANELS, ("live feed", "knowledge", "traffic", "backups · styx"), strict=True):
            self.query_one(f"#{name}").border_title = title
        self.watch_panel(self.panel)
        self.on_resize()
        self.post_message(self.Shown())

    def on_resize(self, _event: Any = None) -> None:
        self.set_class(self.size.width < 120 or self.size.height < 40, "narrow")

    def watch_panel(self, panel: str) -> None:
        for name in PANELS:
            self.query_one(f"#{name}").set_class(name == panel, "shown")
        self.query_one("#tabs", Static).update("  ".join(
            f"[reverse] {i} {n} [/]" if n == panel else f" {i} {n} " for i, n in enumerate(PANELS, 1)))

    def action_panel(self, name: str) -> None:
        if name in PANELS:
            self.panel = name
            if name == "feed":
                self.query_one("#feed-table").focus()

    def action_toggle_pause(self) -> None:
        feed = self.query_one(FeedPanel)
        feed.paused = not feed.paused

    def action_filter(self) -> None:
        feed = self.query_one(FeedPanel)

        def done(value: str | None) -> None:
            if value is not None:
                feed.filter_text = value.strip()

        self.app.push_screen(FilterScreen(feed.filter_text), done)

    def action_search(self) -> None:
        self.app.push_screen(SearchScreen(self.context))

    def action_open_selected(self) -> None:
        entry_id = self.query_one(FeedPanel).selected_entry()
        if entry_id:
            self.app.push_screen(EntryScreen(self.context, entry_id))

    @on(FeedPanel.EntryChosen)
    def _open(self, message: FeedPanel.EntryChosen) -> None:
        self.app.push_screen(EntryScreen(self.context, message.entry_id))

    def action_backup(self) -> None:
        self.post_message(BackupAsked())

    def action_curator(self) -> None:
        self.post_message(CuratorAsked())

    def action_reconnect(self) -> None:
        self.post_message(PeerActionAsked("reconnect", self.query_one(SiblingsTable).selected_peer()))

    def action_hold(self) -> None:
        self.post_message(PeerActionAsked("hold", self.query_one(SiblingsTable).selected_peer()))

    def action_distrust(self) -> None:
        self.post_message(PeerActionAsked("distrust", self.query_one(SiblingsTable).selected_peer()))

    def action_trust(self) -> None:
        self.post_message(PeerActionAsked("trust", self.query_one(SiblingsTable).selected_peer()))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return allowed(action, read_only=self.context.read_only)


class EntryScreen(_AppScreen):
    """One entry: content, provenance, confidence, endorsements, superseded_by; F/E/X act on it."""

    BINDINGS = bindings("entry")
    doc: reactive[EntryDoc | None] = reactive(None, always_update=True)
    problem: reactive[str] = reactive("")

    def __init__(self, context: ScreenContext, entry_id: str) -> None:
        super().__init__(context)
        self.entry_id = entry_id

    def compose(self) -> ComposeResult:
        yield Label(f"entry {self.entry_id}", classes="title")
        with VerticalScroll():
            yield Static("loading…", id="entry-body")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    RETRY_S = 2.0  # a failed fetch (the daemon busy or restarting) is tried again this often

    @work(exclusive=True, group="entry")
    async def load(self) -> None:
        try:
            self.doc = await self.context.api.entry(self.entry_id)
            self.problem = ""
        except Refused as exc:  # the daemon said no (e.g. no such entry): retrying will not help
            self.problem = str(exc)
        except ApiError as exc:
            self.problem = f"{exc} — retrying"
            self.set_timer(self.RETRY_S, self.load)

    def watch_problem(self, problem: str) -> None:
        if problem:
            self.query_one("#entry-body", Static).update(f"cannot show {self.entry_id}: {problem}")

    def watch_doc(self, doc: EntryDoc | None) -> None:
        if doc is None or not self.is_mounted:
            return
        rows = [
            ("kind", doc.kind), ("author", doc.author), ("provenance", doc.provenance),
            ("confidence", f"{doc.confidence:.2f} (local {doc.local_confidence:.2f})"),
            ("importance", f"{doc.importance:.2f}"),
            ("endorsements", f"{doc.confirms} confirm, {doc.contradicts} contradict"),
            ("status", doc.status + (" (archived: forgotten here)" if doc.archived else "")),
            ("superseded_by", doc.superseded_by or "-"), ("created", doc.created_at),
            ("tags", ", ".join(doc.metadata.tags) or "-"),
        ]
        text = "\n".join(f"[b]{k:<14}[/b]{_esc(str(v))}" for k, v in rows)
        self.query_one("#entry-body", Static).update(f"{text}\n\n[b]content[/b]\n{_esc(doc.content)}")

    def _target(self) -> str:
        doc = self.doc
        snippet = "" if doc is None else f" “{doc.content[:40]}{'…' if len(doc.content) > 40 else ''}”"
        return f"entry {self.entry_id}{snippet}"

    def action_forget(self) -> None:
        self.post_message(EntryActionAsked("forget", self.entry_id, self._target(), self.load))

    def action_endorse(self) -> None:
        self.post_message(EntryActionAsked("endorse", self.entry_id, self._target(), self.load))

    def action_contradict(self) -> None:
        self.post_message(EntryActionAsked("contradict", self.entry_id, self._target(), self.load))

    def action_back(self) -> None:
        self.dismiss()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return allowed(action, read_only=self.context.read_only)


class SearchScreen(_AppScreen):
    """Recall as you type (debounced), results in a table; enter opens one."""

    BINDINGS = bindings("search")
    DEBOUNCE_S = 0.3

    def __init__(self, context: ScreenContext) -> None:
        super().__init__(context)
        self._timer: Timer | None = None
        self._ids: list[str] = []

    def compose(self) -> ComposeResult:
        yield Label("search knowledge — type to recall; enter on a result opens it; escape goes back",
                    classes="title")
        yield Input(placeholder="what do we know about…", id="query")
        yield Label("", id="search-state")
        yield DataTable(cursor_type="row", id="results")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#results", DataTable)
        for name, width in (("score", 6), ("kind", 16), ("conf", 5), ("content", 200)):
            table.add_column(name, width=width)  # fixed: see SiblingsTable.COLUMNS
        self.query_one("#query", Input).focus()

    @on(Input.Changed, "#query")
    def _changed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.DEBOUNCE_S, lambda: self.run_search(event.value))

    @on(Input.Submitted, "#query")
    def _submitted(self) -> None:
        table = self.query_one("#results", DataTable)
        if table.row_count:
            table.focus()

    @work(exclusive=True, group="search")
    async def run_search(self, query: str) -> None:
        state = self.query_one("#search-state", Label)
        if not query.strip():
            state.update("")
            return
        state.update("searching…")
        try:
            found = await self.context.api.search(query)
        except ApiError as exc:
            state.update(f"search failed: {_esc(str(exc))}")
            return
        table = self.query_one("#results", DataTable)
        table.clear()
        self._ids = []
        for hit in found.results:
            table.add_row(f"{hit.score:.3f}", hit.kind, f"{hit.local_confidence:.2f}",
                          hit.content.replace("\n", " ")[:200], key=hit.id)
            self._ids.append(hit.id)
        state.update(f"{len(found.results)} result(s) for “{_esc(query)}”")

    @on(DataTable.RowSelected, "#results")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.push_screen(EntryScreen(self.context, event.row_key.value))

    def action_back(self) -> None:
        self.dismiss()


class HelpScreen(ModalScreen[None]):
    """Every binding with its id (for `[tui] keymap`), its keys now, and where it applies."""

    BINDINGS = bindings("help")

    def __init__(self, keymap: dict[str, str], read_only: bool) -> None:
        super().__init__()
        self._keymap = keymap
        self._read_only = read_only

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            ro = "  [b]read-only[/b]: actions are off" if self._read_only else ""
            yield Label(f"[b]keys[/b] — escape closes; remap any id in \\[tui] keymap{ro}")
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for name, width in (("keys", 10), ("id", 17), ("does", 56), ("where", 7)):
            table.add_column(name, width=width)  # fixed: see SiblingsTable.COLUMNS
        keys = effective_keys(self._keymap)
        for spec in KEYS:
            table.add_row(", ".join(_pretty(k) for k in keys[spec.id]), spec.id, spec.description, spec.scope,
                          key=spec.id)
        table.focus()

    def action_close(self) -> None:
        self.dismiss()


class ConfirmScreen(ModalScreen[bool]):
    """Asks before any action, naming its target. Cancel has the focus; `y` confirms."""

    BINDINGS = bindings("dialog")

    def __init__(self, question: str, target: str, verb: str) -> None:
        super().__init__()
        self.question = question
        self.target = target
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(_esc(self.question), id="question")
            yield Label(f"[b]{_esc(self.target)}[/b]", id="target")
            with Horizontal(id="buttons"):
                yield Button("Cancel (n)", id="no")
                yield Button(f"{self.verb} (y)", id="yes", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class FilterScreen(ModalScreen[str | None]):
    """The feed filter: a kind (entry, warning, peer, …) or any text; empty shows everything."""

    BINDINGS = bindings("filter")

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box"):
            yield Label("filter the feed: a kind or any text; empty shows all; enter applies, escape cancels")
            yield Label("kinds: " + ", ".join(FEED_KINDS), classes="dim")
            yield Input(value=self.current, placeholder="e.g. warning", id="filter-input")

    @on(Input.Submitted)
    def _apply(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _esc(text: str) -> str:
    return text.replace("[", r"\[")


_PRETTY = {"question_mark": "?", "slash": "/", "escape": "esc"}


def _pretty(key: str) -> str:
    return _PRETTY.get(key, key)

