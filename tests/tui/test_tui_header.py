"""The header's two lines fitted to the width (`tui.header`): never wider than the terminal,
never wrapped, the daemon, curator and Styx badges always on the strip from 80 columns up, and
a gone daemon's uptime shown as stale — exact inputs, exact outputs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.content import Content

from daemon.contract.responses import BackupsOut, KnowledgeStatsOut, StatusOut
from tests.helpers.tui_fake import NOW_MS, backups_doc, peers_doc, stats_doc, status_doc
from tui.client import PeerView, Snapshot
from tui.header import HeaderState, Part, fit, header_lines

SNAP = Snapshot(status=StatusOut.model_validate(status_doc()),
                peers=[PeerView.model_validate(p) for p in peers_doc()["peers"]],
                stats=KnowledgeStatsOut.model_validate(stats_doc()), backups=BackupsOut.model_validate(backups_doc()))


def plain(markup: str) -> str:
    return Content.from_markup(markup).plain


def lines(width: int, *, link: str = "up", problem: str = "", seen_ms: int | None = NOW_MS,
          now_ms: int = NOW_MS, snap: Snapshot | None = SNAP) -> tuple[str, str]:
    first, second = header_lines(HeaderState(snap, link, problem, seen_ms, now_ms), width)
    return plain(first), plain(second)


def test_at_80_columns_both_lines_fit_and_the_strip_carries_daemon_curator_and_styx() -> None:
    # 80 columns less the header's padding of one cell each side.
    first, second = lines(78)
    assert first == "golem …AAGolem0  clade demo  up 3h 45m  entries 412  vitality stable"
    assert second == "[daemon: up] [curator: 7m 00s ago] [styx: backlog] [backup: ok]"


def test_a_gone_daemon_reads_disconnected_and_its_uptime_stale_at_80_columns() -> None:
    first, second = lines(78, link="down", problem="event stream: connection refused", now_ms=NOW_MS + 12_000)
    assert first == "golem …AAGolem0  clade demo  up 3h 45m (stale: seen 12s ago)  entries 412"
    assert second == "[daemon: disconnected — retrying] [curator: 7m ago] [styx: backlog]"
    wide_first, wide_second = lines(158, link="down", problem="event stream: connection refused",
                                    now_ms=NOW_MS + 12_000)
    assert "vitality stable (Hayflick 0.3)" in wide_first and "up 3h 45m (stale: seen 12s ago)" in wide_first
    assert wide_second.endswith("[backup: ok]  event stream: connection refused")


def test_before_the_first_poll_the_strip_still_says_where_the_daemon_is() -> None:
    assert lines(78, link="down", snap=None, problem="connection refused") == (
        "clade  waiting for the daemon…", "[daemon: disconnected — retrying]  connection refused")
    assert lines(78, link="connecting", snap=None)[1] == "[daemon: connecting]"


def test_a_long_problem_or_alert_is_cut_with_an_ellipsis_not_wrapped() -> None:
    reason = "GET /v1/status: unexpected answer (peer_id: Input should be a valid string) " * 3
    _, second = lines(98, problem=reason)
    assert cell_len(second) == 98 and second.endswith("…")
    assert second.startswith("[daemon: up] [curator: 7m 00s ago] [styx: backlog] [backup: ok]  GET /v1/status")


@given(width=st.integers(0, 240), link=st.sampled_from(["up", "down", "connecting"]),
       problem=st.text(max_size=200), stale_s=st.integers(0, 10**6))
def test_no_line_is_ever_wider_than_the_terminal(width: int, link: str, problem: str, stale_s: int) -> None:
    first, second = lines(width, link=link, problem=problem, now_ms=NOW_MS + stale_s * 1000)
    assert cell_len(first) <= width and cell_len(second) <= width
    assert "\n" not in first and "\n" not in second
    if width >= 78:  # 80 columns and up: the golem, its state, and the three badges always there
        assert first.startswith("golem …AAGolem0") or first.startswith("clade  golem …AAGolem0")
        shown = "silent" if link == "up" and stale_s > 5 else link  # the default silent_after_ms: 5 s
        assert ("stale: seen" in first) == (shown != "up")
        badge = {"up": "[daemon: up]", "silent": "[daemon: not answering]", "connecting": "[daemon: connecting]",
                 "down": "[daemon: disconnected — retrying]"}[shown]
        assert second.startswith(f"{badge} [curator: ") and "[styx: backlog]" in second


def test_fit_gives_way_lowest_rank_first_and_keeps_what_must_stay() -> None:
    parts = [Part(((("alpha", ""),), (("a", ""),)), rank=1), Part(((("beta", "b"),),), rank=0),
             Part(((("GAMMA", ""),),), rank=9, keep=True)]
    assert plain(fit(parts, 40)) == "alpha  beta  GAMMA"
    assert plain(fit(parts, 14)) == "alpha  GAMMA"  # beta (rank 0) went first
    assert plain(fit(parts, 8)) == "a  GAMMA"
    assert plain(fit(parts, 5)) == "GAMMA"  # kept
    assert plain(fit(parts, 3)) == "GA…"  # the last resort: cut at the width
    assert fit(parts, 40).count("[b]") == 1  # styles survive


def test_a_daemon_silent_past_the_threshold_reads_not_answering_and_stale() -> None:
    state = HeaderState(SNAP, "up", "", NOW_MS, NOW_MS + 5_000, silent_after_ms=5_000)
    assert state.shown_link == "up"
    first, second = (plain(line) for line in header_lines(state, 78))
    assert "up 3h 45m  " in first and second.startswith("[daemon: up]")
    state = HeaderState(SNAP, "up", "", NOW_MS, NOW_MS + 5_001, silent_after_ms=5_000)
    first, second = (plain(line) for line in header_lines(state, 78))
    assert state.shown_link == "silent" and "up 3h 45m (stale: seen 5s ago)" in first
    assert second.startswith("[daemon: not answering] [curator: ")
