"""`CladeTui`: the operator's Textual app. It owns the API clients, polls the daemon, follows
its event stream, and runs actions after a confirmation dialog.

Two loops (Textual workers on the app's asyncio loop): the poll reads status, peers, stats
and backups every `poll_s` (sooner after an event that changes them); the event loop reads
`GET /v1/events` into the feed, batched every 0.1 s. Losing the daemon (a refused or dropped
connection on either loop) turns the strip's badge into "disconnected — retrying" at once, at
every size (the header is docked and fitted: `tui.header`), marks the uptime stale with the
age of the last good poll, and titles the siblings "when last seen". A daemon that hangs
refuses nothing (its requests time out after 10 s, the event stream never): once no poll got
through for `silent_after_ms(poll_s)` it reads "not answering", its uptime stale. Both loops
retry with backoff (0.5 s doubling to 5 s) and re-resolve the socket from the data dir, so a
restarted daemon is picked up by itself (the event stream reconnects as soon as a poll gets
through, and the feed says that events from the outage are missing: the stream has no replay).
Nothing the daemon sends can crash the app: bad answers become `BadResponse`, shown in the
header, and the last good data stays on screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from textual import work
from textual.app import App
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import Label

from daemon.grimoire.store import wall_clock_ms
from tui.client import ApiError, BadResponse, PeerView, Snapshot, TransportFactory, TuiClient, Unreachable
from tui.format import FeedItem, Level, RateTracker, feed_item, human_bytes, short_id
from tui.keys import allowed, bindings, check_keymap
from tui.screens import (
    BackupAsked,
    ConfirmScreen,
    CuratorAsked,
    EntryActionAsked,
    HelpScreen,
    MainScreen,
    PeerActionAsked,
    ScreenContext,
)
from tui.themes import THEMES, pick_theme
from tui.widgets import FeedPanel, HeaderBar, KnowledgePanel, OpsPanel, SiblingsTable, TrafficPanel

__all__ = ["CladeTui"]

# Events after which the status/peers/stats are worth reading again at once.
REFRESH_EVENTS = frozenset({"entry_written", "entries_received", "entry_forgotten", "entry_retracted",
                            "entry_endorsed", "entry_unarchived", "peer_up", "peer_down", "peer_refused",
                            "sync_complete", "curator_cycle_complete", "entries_archived_capacity", "backup_written",
                            "backup_pushed", "suspect_author"})
MIN_POLL_GAP_S = 0.25
SILENT_AFTER_S = 5.0  # at least: a daemon whose polls go unanswered this long shows as "not answering"


def silent_after_ms(poll_s: float) -> int:
    """How old the last good poll may be, while connected, before the daemon counts as not
    answering: three poll intervals, and never under `SILENT_AFTER_S`."""
    return int(1000 * max(SILENT_AFTER_S, 3 * poll_s))

HOLD_S = 600.0


class CladeTui(App[None]):
    """The operator TUI for one daemon. `transport` makes a connection (see `tui.client.Endpoint`)."""

    CSS_PATH = "clade.tcss"
    TITLE = "clade"
    ENABLE_COMMAND_PALETTE = False  # every command is a listed binding (see `?`)
    BINDINGS = bindings("app")

    link: reactive[str] = reactive("connecting")
    problem: reactive[str] = reactive("")

    def __init__(self, transport: TransportFactory, *, read_only: bool = False,
                 keymap: Mapping[str, str] | None = None, theme: str = "auto", poll_s: float = 1.0,
                 now_ms: Callable[[], int] = wall_clock_ms, monotonic: Callable[[], float] = time.monotonic,
                 env: Mapping[str, str] | None = None, rates: RateTracker | None = None) -> None:
        super().__init__()
        self.api = TuiClient(transport)
        self._events_api = TuiClient(transport)
        self.read_only = read_only
        self._keymap_config = dict(keymap or {})
        self.applied_keymap: dict[str, str] = {}
        self._theme_choice = theme
        self._env = os.environ if env is None else env
        self.poll_s = poll_s
        self._now_ms = now_ms
        self._monotonic = monotonic
        self.rates = rates or RateTracker()
        self.snapshot: Snapshot | None = None
        self.seen_ms: int | None = None  # when `snapshot` was read (now_ms): its age once the daemon is gone
        self.polls = 0
        self.events_seen = 0
        self.event_connects = 0  # times the event stream (re)connected
        self.events_live = False  # the event stream is connected now
        self.action_log: list[str] = []
        self.problem_log: deque[str] = deque(maxlen=50)  # recent problems, newest last
        self._pending: list[FeedItem] = []
        self._wake = asyncio.Event()
        self._retry_events = asyncio.Event()  # the poll saw the daemon back: reconnect the stream now
        self._main = MainScreen(ScreenContext(api=self.api, now_ms=self.now_ms, rates=self.rates,
                                              read_only=read_only))

    def now_ms(self) -> int:
        return self._now_ms()

    # -- start and stop ---------------------------------------------------------------------

    def on_mount(self) -> None:
        for theme in THEMES.values():
            self.register_theme(theme)
        self.theme = pick_theme(self._theme_choice, self._env)
        self.applied_keymap, problems = check_keymap(self._keymap_config)
        self.set_keymap(self.applied_keymap)
        for problem in problems:
            self.notify(problem, severity="warning", timeout=10)
        self.push_screen(self._main)
        self.set_interval(0.1, self._flush_feed)
        self.poll_loop()
        self.event_loop()

    async def on_unmount(self) -> None:
        await self.api.aclose()
        await self._events_api.aclose()

    # -- the two loops ----------------------------------------------------------------------

    @work(exclusive=True, group="poll")
    async def poll_loop(self) -> None:
        backoff = 0.5
        while True:
            started = self._monotonic()
            try:
                snap = await self.api.snapshot()
            except Unreachable as exc:
                self._lost(str(exc))
                wait, backoff = backoff, min(5.0, backoff * 2)
            except BadResponse as exc:
                self.link, self.problem = "up", str(exc)
                wait = self.poll_s
            else:
                backoff, wait = 0.5, self.poll_s
                self.link = "up"
                self._show(snap)
                if not self.events_live:  # the daemon answers: the event stream need not wait out its backoff
                    self._retry_events.set()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            gap = MIN_POLL_GAP_S - (self._monotonic() - started)
            if gap > 0:  # a burst of events must not turn into a burst of polls
                await asyncio.sleep(gap)

    @work(exclusive=True, group="events")
    async def event_loop(self) -> None:
        backoff = 0.5
        while True:
            try:
                async for name, data in self._events_api.events():
                    backoff = 0.5
                    self._on_event(name, data)
                raise Unreachable("the event stream ended")
            except Unreachable as exc:
                self._lost(str(exc))
            except BadResponse as exc:
                self.problem = str(exc)
            finally:
                self.events_live = False
            self._retry_events.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry_events.wait(), backoff)
            backoff = min(5.0, backoff * 2)

    def _lost(self, why: str) -> None:
        self.link = "down"
        self.problem = why

    def _on_event(self, name: str, data: Any) -> None:
        self.events_seen += 1
        if name == "connected":
            self.link = "up"
            self.events_live = True
            self.event_connects += 1
            if self.event_connects > 1:  # the stream has no replay: say what the feed cannot show
                self._pending.append(FeedItem(self.now_ms(), "link", "event stream reconnected — events while "
                                              "disconnected are not in this feed", Level.WARN))
            self._wake.set()
            return
        if name == "malformed":
            item: FeedItem | None = FeedItem(self.now_ms(), "error", f"malformed event from the daemon: {data}",
                                             Level.BAD)
        else:
            item = feed_item(name, data, self.now_ms())
        if item is not None:
            self._pending.append(item)
        if name in REFRESH_EVENTS:
            self._wake.set()

    def _flush_feed(self) -> None:
        if self._pending and self._main.is_mounted:
            try:
                feed = self._main.query_one(FeedPanel)
            except NoMatches:  # not composed yet: the lines wait for the next flush
                return
            pending, self._pending = self._pending, []
            feed.add(pending)

    def _show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self.seen_ms = self.now_ms()
        self.polls += 1
        self.problem = ""
        self.rates.sample(self._monotonic(), snap.status.counters)
        self.render_snapshot()

    def render_snapshot(self) -> None:
        """Put the last snapshot on the main screen (also called when that screen mounts)."""
        snap = self.snapshot
        if snap is None or not self._main.is_mounted:
            return
        try:
            self._render_snapshot(snap)
        except NoMatches:  # mounted but its widgets not composed yet (or being torn down): on_mount renders
            return

    def _render_snapshot(self, snap: Snapshot) -> None:
        main = self._main
        header = main.query_one(HeaderBar)
        header.silent_after_ms = silent_after_ms(self.poll_s)
        header.seen_ms, header.snapshot = self.seen_ms, snap
        table = main.query_one(SiblingsTable)
        table.ops = snap.stats.ops if snap.stats else None
        table.peers = snap.peers
        up = sum(p.connected for p in snap.peers)
        title = f"siblings: {up} connected of {len(snap.peers)} known"
        if self.link == "down":  # the daemon is gone: these are its last figures, not live ones
            title += " when last seen"
        elif not snap.peers:
            title += " — none yet (not in a clade, or none reachable)"
        main.query_one("#siblings-title", Label).update(title)
        main.query_one(KnowledgePanel).snapshot = snap
        main.query_one(OpsPanel).snapshot = snap
        main.query_one(TrafficPanel).refresh_rates()

    def watch_link(self, link: str) -> None:
        if self._main.is_mounted:
            with contextlib.suppress(NoMatches):  # not composed yet: the header reads `link` when it is
                self._main.query_one(HeaderBar).link = link
        if link == "down":
            self.title = "clade — disconnected — retrying"
        else:
            self.title = "clade"
        self.render_snapshot()  # the siblings title says whether its figures are live

    def watch_problem(self, problem: str) -> None:
        if problem:
            self.problem_log.append(problem)
        if self._main.is_mounted:
            with contextlib.suppress(NoMatches):
                self._main.query_one(HeaderBar).problem = problem

    # -- keys -------------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.applied_keymap, self.read_only))

    def allowed(self, action: str) -> bool:
        """False for every action while `--read-only` (Textual then disables its binding)."""
        return allowed(action, read_only=self.read_only)

    # -- what the screens ask (messages that bubble up from them) ---------------------------

    def on_main_screen_shown(self, _message: MainScreen.Shown) -> None:
        with contextlib.suppress(NoMatches):  # torn down meanwhile: nothing to show on
            header = self._main.query_one(HeaderBar)
            header.link, header.problem = self.link, self.problem
        self._main.call_after_refresh(self.render_snapshot)

    def on_backup_asked(self, _message: BackupAsked) -> None:
        self.confirm_backup()

    def on_curator_asked(self, _message: CuratorAsked) -> None:
        self.confirm_curator()

    def on_peer_action_asked(self, message: PeerActionAsked) -> None:
        self.confirm_peer(message.what, message.peer)

    def on_entry_action_asked(self, message: EntryActionAsked) -> None:
        self.confirm_entry(message.what, message.entry_id, message.target, message.after)

    # -- actions: each asks first, naming its target ----------------------------------------

    def _golem(self) -> str:
        if self.snapshot is None:
            return "this golem"
        st = self.snapshot.status
        return f"golem {short_id(st.peer_id)}" + (f" of clade {st.clade.name}" if st.clade else "")

    def _ask(self, question: str, target: str, verb: str, then: Callable[[], Any]) -> None:
        if self.read_only:
            self.notify("read-only: actions are off", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                then()
            else:
                self._report(f"cancelled: {verb.lower()} {target}")

        self.push_screen(ConfirmScreen(question, target, verb), answered)

    def confirm_backup(self) -> None:
        self._ask("Write an encrypted backup now, for", self._golem(), "Back up", self._backup)

    def confirm_curator(self) -> None:
        self._ask("Run a curator cycle now (decay, prune, merge, promote) on", self._golem(), "Run curator",
                  self._curator)

    def confirm_peer(self, what: str, peer: PeerView | None) -> None:
        if peer is None:
            self.notify("select a sibling first (arrows in the siblings table)", severity="warning")
            return
        if what == "hold":
            self._ask(f"Drop and refuse for {HOLD_S / 60:.0f} minutes the sibling", peer.peer_id, "Hold off",
                      lambda: self._peer_hold(peer.peer_id))
        elif what == "distrust":
            self._ask("Distrust (quarantine here every entry of; nothing deleted; T undoes) the sibling",
                      peer.peer_id, "Distrust", lambda: self._peer_trust(peer.peer_id, distrusted=True))
        elif what == "trust":
            self._ask("Trust again (lift the quarantine and the alert of) the sibling", peer.peer_id, "Trust",
                      lambda: self._peer_trust(peer.peer_id, distrusted=False))
        else:
            self._ask("Dial again the sibling", peer.peer_id, "Reconnect", lambda: self._peer_reconnect(peer))

    def confirm_entry(self, what: str, entry_id: str, target: str, after: Callable[[], Any]) -> None:
        questions = {"forget": ("Forget (archive here; siblings keep it)", "Forget"),
                     "endorse": ("Endorse (count a confirmation; siblings learn of it)", "Endorse"),
                     "contradict": ("Contradict (count a contradiction; siblings learn of it)", "Contradict")}
        question, verb = questions[what]
        self._ask(question, target, verb, lambda: self._entry_action(what, entry_id, after))

    @work(group="actions")
    async def _backup(self) -> None:
        try:
            out = await self.api.backup()
        except ApiError as exc:
            self._report(f"backup failed: {exc}", error=True)
        else:
            self._report(f"backup written: {out.path} ({human_bytes(out.bytes)})")

    @work(group="actions")
    async def _curator(self) -> None:
        try:
            out = await self.api.curator_run()
        except ApiError as exc:
            self._report(f"curator cycle failed: {exc}", error=True)
        else:
            self._report(f"curator cycle done in {out.seconds:.2f} s: {out.entries_pruned} pruned, "
                      f"{out.entries_merged} merged")

    @work(group="actions")
    async def _peer_hold(self, peer_id: str) -> None:
        try:
            out = await self.api.hold_peer(peer_id, HOLD_S)
        except ApiError as exc:
            self._report(f"hold off failed: {exc}", error=True)
        else:
            self._report(f"held off {short_id(out.peer_id)} for {out.held_s:.0f} s")
        self._wake.set()

    @work(group="actions")
    async def _peer_trust(self, peer_id: str, *, distrusted: bool) -> None:
        verb = "distrust" if distrusted else "trust"
        try:
            out = await self.api.distrust_peer(peer_id, distrusted=distrusted)
        except ApiError as exc:
            self._report(f"{verb} failed: {exc}", error=True)
        else:
            self._report(f"{verb}: {short_id(out.author)} ({out.entries} of its entries held here"
                         + (", quarantined)" if distrusted else ")"))
        self._wake.set()

    @work(group="actions")
    async def _peer_reconnect(self, peer: PeerView) -> None:
        if not peer.addrs:
            self._report(f"reconnect {short_id(peer.peer_id)}: no known address", error=True)
            return
        addr = peer.addrs[0] if "/p2p/" in peer.addrs[0] else f"{peer.addrs[0]}/p2p/{peer.peer_id}"
        try:
            out = await self.api.connect_peer(addr)
        except ApiError as exc:
            self._report(f"reconnect failed: {exc}", error=True)
        else:
            self._report(f"dialing {short_id(out.peer_id)} at {out.dialing}")
        self._wake.set()

    @work(group="actions")
    async def _entry_action(self, what: str, entry_id: str, after: Callable[[], Any]) -> None:
        try:
            if what == "forget":
                await self.api.forget(entry_id)
            else:
                await self.api.endorse(entry_id, confirm=what == "endorse")
        except ApiError as exc:
            self._report(f"{what} {entry_id} failed: {exc}", error=True)
        else:
            self._report(f"{what}: done for {entry_id}")
        after()

    def _report(self, message: str, *, error: bool = False) -> None:
        self.action_log.append(message)
        self.notify(message, severity="error" if error else "information", timeout=6)
