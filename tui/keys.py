"""Every key binding of the TUI in one table: id (what `[tui] keymap` remaps), default keys,
where it applies, and whether it changes anything on the daemon.

Actions (`ACTION_IDS`) are on shifted letters and always open a confirmation dialog; the
destructive ones (`DESTRUCTIVE_IDS`) may never sit on a navigation key, even through the
keymap (k9s #1121: a destructive key one slip from a common one): `check_keymap` drops such
a remapping and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding, BindingType

__all__ = ["ACTION_IDS", "ACTION_METHODS", "DESTRUCTIVE_IDS", "KEYS", "NAVIGATION_KEYS", "KeySpec", "allowed",
           "bindings", "check_keymap", "effective_keys"]


@dataclass(frozen=True, slots=True)
class KeySpec:
    id: str
    keys: str
    action: str
    description: str
    scope: str  # "app", "main", "entry", "search", "dialog", "help", "filter"
    show: bool = True  # in the footer
    label: str = ""  # the footer's word (default: the description's first word)


KEYS: tuple[KeySpec, ...] = (
    KeySpec("quit", "q", "quit", "quit (exit status 0)", "app"),
    KeySpec("help", "question_mark", "help", "help: every binding", "app", label="help"),
    KeySpec("search", "s", "search", "search knowledge (recall as you type)", "main"),
    KeySpec("feed.pause", "p", "toggle_pause", "pause / resume the live feed", "main", label="pause"),
    KeySpec("feed.filter", "slash", "filter", "filter the feed by kind or text", "main", show=False),
    KeySpec("feed.open", "o", "open_selected", "open the entry of the selected feed line", "main", show=False),
    KeySpec("panel.feed", "1", "panel('feed')", "show the live feed", "main", show=False),
    KeySpec("panel.knowledge", "2", "panel('knowledge')", "show knowledge (kinds, confidence)", "main", show=False),
    KeySpec("panel.traffic", "3", "panel('traffic')", "show traffic sparklines", "main", show=False),
    KeySpec("panel.ops", "4", "panel('ops')", "show backups and Styx", "main", show=False),
    KeySpec("action.backup", "B", "backup", "back up now (asks first)", "main", show=False),
    KeySpec("action.curator", "C", "curator", "run a curator cycle now (asks first)", "main", show=False),
    KeySpec("peer.reconnect", "R", "reconnect", "reconnect the selected sibling (asks first)", "main", show=False),
    KeySpec("peer.hold", "H", "hold", "hold off the selected sibling for 10 min (asks first)", "main", show=False),
    KeySpec("peer.distrust", "D", "distrust", "distrust the selected sibling: quarantine its entries here "
            "(asks first)", "main", show=False),
    KeySpec("peer.trust", "T", "trust", "trust the selected sibling again (asks first)", "main", show=False),
    KeySpec("entry.forget", "F", "forget", "forget (archive locally) this entry (asks first)", "entry"),
    KeySpec("entry.endorse", "E", "endorse", "endorse this entry (asks first)", "entry"),
    KeySpec("entry.contradict", "X", "contradict", "contradict this entry (asks first)", "entry"),
    KeySpec("back", "escape", "back", "back", "entry"),
    KeySpec("search.back", "escape", "back", "back", "search"),
    KeySpec("confirm.yes", "y", "answer(True)", "yes: do it", "dialog"),
    KeySpec("confirm.no", "n,escape", "answer(False)", "no: cancel (the focused button, too)", "dialog"),
    KeySpec("help.close", "escape", "close", "close help", "help"),
    KeySpec("filter.cancel", "escape", "cancel", "cancel the filter", "filter"),
)

ACTION_IDS = frozenset({"action.backup", "action.curator", "peer.reconnect", "peer.hold", "peer.distrust",
                        "peer.trust", "entry.forget",
                        "entry.endorse", "entry.contradict"})
DESTRUCTIVE_IDS = frozenset({"entry.forget", "entry.contradict", "peer.hold", "peer.distrust", "confirm.yes"})
ACTION_METHODS = frozenset(k.action for k in KEYS if k.id in ACTION_IDS)
NAVIGATION_KEYS = frozenset({"up", "down", "left", "right", "pageup", "pagedown", "home", "end", "enter", "tab",
                             "shift+tab", "space", "escape", "j", "k", "h", "l", "g", "G", "1", "2", "3", "4",
                             "s", "p", "slash", "o", "question_mark", "q"})


def allowed(action: str, *, read_only: bool) -> bool:
    """Whether a binding's action may run: every action (`ACTION_IDS`) is off while `--read-only`
    (Textual then disables its binding); navigation always runs."""
    return not (read_only and action in ACTION_METHODS)


def bindings(scope: str) -> list[BindingType]:
    """The Textual bindings of one scope, each with its id (so the keymap can remap it)."""
    return [Binding(k.keys, k.action, k.label or k.description.split()[0].rstrip(":"), show=k.show, id=k.id)
            for k in KEYS if k.scope == scope]


def check_keymap(keymap: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The usable part of a configured keymap and a message for each entry dropped: unknown
    ids, and destructive actions put on a navigation key."""
    known = {k.id for k in KEYS}
    kept: dict[str, str] = {}
    problems = []
    for binding_id, keys in keymap.items():
        if binding_id not in known:
            problems.append(f"[tui] keymap: no binding {binding_id!r} (see ? for the ids)")
            continue
        wanted = {_normal(k) for k in keys.split(",") if k.strip()}
        clash = wanted & NAVIGATION_KEYS
        if binding_id in DESTRUCTIVE_IDS and clash:
            problems.append(f"[tui] keymap: {binding_id} may not use navigation key(s) {', '.join(sorted(clash))}")
            continue
        kept[binding_id] = ",".join(sorted(wanted))
    return kept, problems


def effective_keys(keymap: Mapping[str, str]) -> dict[str, list[str]]:
    """Binding id -> the keys it answers to once `keymap` applies."""
    return {k.id: [_normal(x) for x in keymap.get(k.id, k.keys).split(",") if x.strip()] for k in KEYS}


_NAMES = {"?": "question_mark", "/": "slash", " ": "space"}


def _normal(key: str) -> str:
    key = key.strip()
    return _NAMES.get(key, key)
