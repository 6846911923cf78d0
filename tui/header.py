"""The main screen's two top lines, fitted to the terminal's width: pure (no Textual, no I/O, no
clock reads: "now" and the width are arguments).

Line 1 says who: golem, clade, uptime, entries, siblings, vitality. Line 2 is the status strip:
the daemon, curator, Styx and backup badges, a suspect alert and the last problem. Neither
line ever wraps (a wrapped line pushed the strip off an 80-column screen): each `Part` has a
few forms, widest first, and a rank; while a line is too wide, the lowest-ranked part that
can still give way takes its next form, or goes. Parts marked `keep` never go — the golem's id,
the uptime or its staleness, and the daemon, curator and Styx badges — and a part with
`min_cells` may instead be cut with "…" down to that width. A line that still does not fit
is cut at the width, so `fit` never returns a line wider than it was asked for.

While the daemon is unreachable, or has not answered a poll for `silent_after_ms` (a hung
daemon refuses nothing; its requests only time out), the uptime is not shown as if alive: the
line says `up 3h 45m (stale: seen 12s ago)`, counting from the last good poll, and the daemon
badge `disconnected — retrying` or `not answering`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len

from tui.client import Snapshot
from tui.format import (
    Badge,
    Level,
    ago,
    backup_badge,
    curator_badge,
    daemon_badge,
    duration,
    embedding_note,
    short_id,
    styx_badge,
    suspect_banner,
    vitality_text,
)

__all__ = ["HeaderState", "Part", "badge_markup", "fit", "header_lines", "identity_parts", "strip_parts"]

Span = tuple[str, str]
"""Plain text and the Textual content-markup style it is drawn in ("" for none)."""

ELLIPSIS = "…"
STYLES = {Level.OK: "$success", Level.WARN: "$warning", Level.BAD: "bold $error", Level.INFO: "$primary",
          Level.OFF: "$foreground 60%"}


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a header line. `forms` are its renderings, widest first (each a run of
    spans); `rank`: a lower rank gives way first; `keep`: never dropped (its last form stays);
    `min_cells`: it may be cut with "…" down to this many cells instead of giving way."""

    forms: tuple[tuple[Span, ...], ...]
    rank: int
    keep: bool = False
    min_cells: int | None = None


@dataclass(frozen=True, slots=True)
class HeaderState:
    """What the header shows: the last snapshot (None before the first poll), the link to the
    daemon (`up`, `connecting`, `down`), the last problem, when the snapshot was read
    (`seen_ms`, the app's clock), now, and how old a snapshot may be while the link is up
    before the daemon counts as not answering (a hung daemon refuses nothing: its requests
    only time out)."""

    snapshot: Snapshot | None
    link: str
    problem: str
    seen_ms: int | None
    now_ms: int
    silent_after_ms: int = 5_000

    @property
    def shown_link(self) -> str:
        """`link`, or `silent` while it is up but no poll got through for `silent_after_ms`."""
        if self.link == "up" and self.seen_ms is not None and self.now_ms - self.seen_ms > self.silent_after_ms:
            return "silent"
        return self.link


def _esc(text: str) -> str:
    return text.replace("[", r"\[")


def badge_markup(badge: Badge) -> str:
    """`[word]` in the badge's colour; the brackets and the word survive without colour."""
    return _markup(((f"[{badge.text}]", STYLES[badge.level]),))


def _markup(spans: Sequence[Span]) -> str:
    return "".join(f"[{style}]{_esc(text)}[/]" if style else _esc(text) for text, style in spans if text)


def _width(spans: Sequence[Span]) -> int:
    return sum(cell_len(text) for text, _ in spans)


def _cut(spans: Sequence[Span], cells: int) -> tuple[Span, ...]:
    """The spans cut to at most `cells` cells, ending in "…" when anything was cut."""
    if _width(spans) <= cells:
        return tuple(spans)
    if cells <= 0:
        return ()
    out: list[Span] = []
    room = cells - 1
    for text, style in spans:
        kept = ""
        for char in text:
            if cell_len(kept + char) > room:
                break
            kept += char
        room -= cell_len(kept)
        out.append((kept, style))
        if len(kept) < len(text):
            break
    last_style = out[-1][1] if out else ""
    return (*out, (ELLIPSIS, last_style))


def fit(parts: Sequence[Part], width: int, sep: str = "  ") -> str:
    """The parts on one line of at most `width` cells, as content markup (see the module's doc)."""
    step = [0] * len(parts)  # index into each part's forms; len(forms) = dropped

    def claimed(i: int) -> int:
        part = parts[i]
        cells = _width(part.forms[step[i]])
        return cells if part.min_cells is None else min(cells, part.min_cells)

    def shown() -> list[int]:
        return [i for i, part in enumerate(parts) if step[i] < len(part.forms)]

    def total() -> int:
        on = shown()
        return sum(claimed(i) for i in on) + cell_len(sep) * max(0, len(on) - 1)

    order = sorted(range(len(parts)), key=lambda i: parts[i].rank)
    while total() > width:
        for i in order:
            last = len(parts[i].forms) - 1
            if step[i] < last or (step[i] == last and not parts[i].keep):
                step[i] += 1
                break
        else:
            break  # every part at its narrowest: the cut below ends the line
    on = shown()
    room = width - sum(_width(parts[i].forms[step[i]]) for i in on) - cell_len(sep) * max(0, len(on) - 1)
    line: list[Span] = []
    for n, i in enumerate(on):
        spans = parts[i].forms[step[i]]
        if parts[i].min_cells is not None and room < 0:  # an elastic part gives back what overflows
            keep = max(parts[i].min_cells or 0, _width(spans) + room)
            room += _width(spans) - keep
            spans = _cut(spans, keep)
        if n:
            line.append((sep, ""))
        line.extend(spans)
    return _markup(_cut(line, width))


def _form(*spans: Span) -> tuple[Span, ...]:
    return spans


def identity_parts(state: HeaderState) -> list[Part]:
    """Line 1: who this golem is and how it is, from the last snapshot."""
    snap = state.snapshot
    if snap is None:
        return [Part((_form(("clade", "b")),), 9, keep=True), Part((_form(("waiting for the daemon…", "")),), 8)]
    st = snap.status
    golem = short_id(st.peer_id)
    parts = [Part((_form(("clade", "b")),), 0),
             Part((_form(("golem ", ""), (golem, "b")), _form((golem, "b"))), 9, keep=True)]
    clade = st.clade.name if st.clade else None
    parts.append(Part((_form(("clade ", ""), (clade, "b")), _form((clade, "b"))) if clade
                      else (_form(("no clade", "")),), 5))
    up = duration(st.uptime_s)
    if state.shown_link == "up":
        parts.append(Part((_form((f"up {up}", "")),), 6, keep=True))
    else:  # the daemon is gone: its uptime is only the last thing it said
        seen = "seen " + ("never" if state.seen_ms is None else ago(state.seen_ms, state.now_ms))
        parts.append(Part((_form((f"up {up} ", "$foreground 60%"), (f"(stale: {seen})", "$warning")),
                           _form((f"stale: {seen}", "$warning"))), 8, keep=True))
    parts.append(Part((_form((f"entries {st.entries}{embedding_note(st.embedding_backlog)}", "")),
                       _form((f"entries {st.entries}", ""))), 4))
    parts.append(Part((_form((f"siblings {len(snap.peers)}", "")),), 2))
    # The golem's phase (PUT /v1/vitality), legacy marked; never shortened to the bare phase
    # word, which would read as the daemon's state ("stable").
    if st.vitality is not None:
        v = st.vitality
        parts.append(Part((_form((vitality_text(v.phase, v.hayflick_ratio, v.legacy), "")),
                           _form((vitality_text(v.phase, None, v.legacy), ""))), 3))
    return parts


def _badge_part(badges: Sequence[Badge], rank: int, *, keep: bool = False) -> Part:
    """A badge in one or more forms (widest first; duplicates collapse)."""
    texts = list(dict.fromkeys(f"[{b.text}]" for b in badges))
    return Part(tuple(_form((text, STYLES[badges[0].level])) for text in texts), rank, keep=keep)


def strip_parts(state: HeaderState) -> list[Part]:
    """Line 2, the status strip: the daemon badge always, then the curator and Styx badges,
    the backup badge, a suspect alert and the last problem as room allows."""
    parts = [_badge_part([daemon_badge(state.shown_link)], 9, keep=True)]
    snap = state.snapshot
    if snap is not None:
        st = snap.status
        cycle = st.last_curator_cycle.model_dump() if st.last_curator_cycle else None
        parts.append(_badge_part([curator_badge(cycle, state.now_ms), curator_badge(cycle, state.now_ms, coarse=True)],
                                 3, keep=True))
        parts.append(_badge_part([styx_badge(st.styx.model_dump() if st.styx else None)], 8, keep=True))
        parts.append(_badge_part([backup_badge(snap.backups.model_dump() if snap.backups else None, state.now_ms)],
                                 1))
        if st.trust.suspect:
            parts.append(Part((_form((" ", ""), (suspect_banner(st.trust.suspect), "$error")),), 7, min_cells=24))
    problem = " ".join(state.problem.split())  # one line, whatever the error's text held
    if problem:  # set apart by two spaces: it is not a badge
        parts.append(Part((_form((" ", ""), (problem, "$warning")),), 4, min_cells=16))
    return parts


def header_lines(state: HeaderState, width: int) -> tuple[str, str]:
    """The two lines (content markup), each at most `width` cells."""
    return fit(identity_parts(state), width), fit(strip_parts(state), width, sep=" ")
