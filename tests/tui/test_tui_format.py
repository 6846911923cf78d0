"""The TUI's pure parts: completion %, badges, ages and sizes, traffic rates, histogram bars,
feed lines, key bindings and theme choice — exact inputs, exact outputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.format import (
    Level,
    RateTracker,
    ago,
    backup_badge,
    bars,
    completion,
    daemon_badge,
    duration,
    embedding_note,
    feed_item,
    human_bytes,
    short_id,
    styx_badge,
)
from tui.keys import DESTRUCTIVE_IDS, KEYS, NAVIGATION_KEYS, check_keymap, effective_keys
from tui.themes import pick_theme


def test_completion_is_100_only_when_nothing_is_behind() -> None:
    assert completion(100, 0, 5).text == "100%"
    assert completion(100, None, None).text == "not synced"
    one_of_a_million = completion(1_000_000, 1, 0)
    assert one_of_a_million.pct == 99.9 and one_of_a_million.text == "99.9% (1 behind)"
    assert completion(6, 3, 1).pct == pytest.approx(62.5)  # holds 5 of the sibling's 8 ops
    assert completion(0, 4, 0).pct == 0.0


@given(ops=st.integers(0, 10**9), behind=st.integers(1, 10**9), ahead=st.integers(0, 10**9))
def test_completion_never_reads_100_with_a_backlog(ops: int, behind: int, ahead: int) -> None:
    done = completion(ops, behind, ahead)
    assert done.pct is not None and 0.0 <= done.pct <= 99.9
    assert "100" not in done.text.split("%")[0] and done.level is Level.WARN


def test_sizes_spans_and_ages() -> None:
    assert [human_bytes(0), human_bytes(1023), human_bytes(1536), human_bytes(None)] == ["0 B", "1023 B", "1.5 KiB",
                                                                                         "-"]
    assert [duration(5), duration(65), duration(3 * 3600 + 120), duration(2 * 86400 + 4 * 3600)] == [
        "5s", "1m 05s", "3h 02m", "2d 04h"]
    assert ago(None, 0) == "never" and ago(1_000, 1_500) == "just now"
    assert ago(0, 65_000) == "1m 05s ago" and ago(65_000, 0) == "in 1m 05s"
    assert [duration(42, coarse=True), duration(65, coarse=True), duration(3 * 3600 + 120, coarse=True)] == [
        "42s", "1m", "3h"]
    assert ago(0, 65_000, coarse=True) == "1m ago" and ago(65_000, 0, coarse=True) == "in 1m"
    assert short_id("12D3KooWABCDEFGHIJ") == "…CDEFGHIJ" and short_id("abc") == "abc"


def test_badges_carry_a_word() -> None:
    assert daemon_badge("down").text == "daemon: disconnected — retrying"
    assert daemon_badge("silent").text == "daemon: not answering" and daemon_badge("silent").level is Level.WARN
    assert styx_badge(None).text == "styx: off"
    assert styx_badge({"last_error": "503", "last_success_ms": None, "failures": 2}).word == "failing"
    assert styx_badge({"parked": 1}).word == "backlog"
    assert styx_badge({"last_error": None, "parked": 0}).word == "ok"
    day = 86_400_000
    assert backup_badge({"last": None, "next_due_ms": 5}, 0).word == "none yet"
    assert backup_badge({"last": {"at_ms": 0}, "interval_hours": 24}, day).word == "ok"
    assert backup_badge({"last": {"at_ms": 0}, "interval_hours": 24}, 2 * day).word == "stale"


def test_rates_per_second_and_a_restart_starts_a_new_baseline() -> None:
    rates = RateTracker(series={"g": ("a", "b")}, keep=3)
    rates.sample(0.0, {"a": 0, "b": 0})
    rates.sample(2.0, {"a": 10, "b": 4})
    assert rates.latest("g") == 7.0
    rates.sample(3.0, {"a": 1, "b": 0})  # counters went down: the daemon restarted
    assert list(rates.history["g"]) == [7.0]
    rates.sample(4.0, {"a": 6, "b": "junk"})
    assert list(rates.history["g"]) == [7.0, 5.0]


def test_histogram_bars_scale_to_the_largest_and_never_hide_a_count() -> None:
    assert bars([0, 1, 100], 10) == ["", "▏", "█" * 10]
    assert bars([4, 2], 2) == ["██", "█"]
    assert bars([], 5) == []


def test_feed_lines_from_events_and_odd_payloads() -> None:
    warn = feed_item("entry_written", {"id": "E1", "kind": "warning"}, 7)
    assert warn is not None and warn.kind == "warning" and warn.level is Level.WARN and warn.entry_id == "E1"
    assert warn.text == "wrote warning E1"  # an older daemon sends no preview
    hostile = "Morpho\nmarkets\x1b[31m " + "x" * 200
    said = feed_item("entry_written", {"id": "E2", "kind": "fact", "preview": hostile}, 7)
    assert said is not None and said.text.startswith("wrote fact E2: Morpho markets [31m xxx")
    assert len(said.text) == len("wrote fact E2: ") + 120 and said.text.endswith("…") and "\x1b" not in said.text
    assert said.matches("morpho")  # the filter finds an entry by its words
    assert feed_item("entry_written", {"id": "E3", "kind": "fact", "preview": 7}, 7).text == "wrote fact E3"  # type: ignore[union-attr]
    long = feed_item("entry_written", {"id": "3892db20" + "a" * 24, "kind": "warning", "preview": "gas above 80 gwei"},
                     7)
    # An 80-column feed line: the id's first 8 hex characters (as git shows a commit), then what was said.
    assert long is not None and long.text == "wrote warning 3892db20: gas above 80 gwei"
    assert long.entry_id == "3892db20" + "a" * 24  # the full id stays with the line (opening it)
    got = feed_item("entries_received", {"from": "12D3KooWxxxxSIBLING1", "via": "gossip", "entries": 2,
                                         "ids": ["A", "B"]}, 7)
    assert got is not None and got.entry_id == "A" and "(+1 more)" in got.text and "…SIBLING1" in got.text
    assert feed_item("sync_progress", {}, 7) is None
    for odd in (None, [], "x", {"ids": "not a list"}, {"id": 5}):
        for name in ("entry_written", "entries_received", "peer_up", "error", "backup_written", "whatever"):
            item = feed_item(name, odd, 7)
            assert item is None or isinstance(item.text, str)
    assert feed_item("error", {"service": "p2p", "error": "boom"}, 7).level is Level.BAD  # type: ignore[union-attr]
    line = feed_item("peer_down", {"peer_id": "p"}, 7)
    assert line is not None and line.matches("peer") and line.matches("DOWN") and not line.matches("backup")


def test_no_destructive_binding_sits_on_a_navigation_key() -> None:
    keys = effective_keys({})
    for binding_id in DESTRUCTIVE_IDS:
        assert not set(keys[binding_id]) & NAVIGATION_KEYS, binding_id
    assert keys["quit"] == ["q"] and keys["help"] == ["question_mark"]
    assert len({k.id for k in KEYS}) == len(KEYS)


def test_keymap_checks_refuse_unknown_ids_and_destructive_navigation_keys() -> None:
    kept, problems = check_keymap({"quit": "x, ctrl+q", "entry.forget": "enter", "nope": "z", "help": "?"})
    assert kept == {"quit": "ctrl+q,x", "help": "question_mark"}
    assert len(problems) == 2 and any("entry.forget" in p for p in problems) and any("nope" in p for p in problems)


@pytest.mark.parametrize(("choice", "env", "theme"), [
    ("auto", {"COLORTERM": "truecolor", "TERM": "xterm-256color"}, "clade-truecolor"),
    ("auto", {"TERM": "xterm-256color"}, "clade-256"),
    ("auto", {"TERM": "xterm"}, "clade-16"),
    ("auto", {"TERM": "linux"}, "clade-16"),
    ("auto", {"NO_COLOR": "1", "COLORTERM": "truecolor"}, "clade-mono"),
    ("16", {"COLORTERM": "truecolor"}, "clade-16"),
    ("mono", {}, "clade-mono"),
])
def test_theme_follows_the_terminal(choice: str, env: dict[str, str], theme: str) -> None:
    assert pick_theme(choice, env) == theme


def test_embedding_note_shows_a_backlog_and_nothing_once_drained() -> None:
    assert embedding_note(0) == ""
    assert embedding_note(1) == " (1 awaiting embedding)"
    assert embedding_note(2500) == " (2500 awaiting embedding)"
