"""Pure formatting and arithmetic for the operator TUI: no I/O, no Textual, no clock reads.

Everything here takes its inputs (including "now") as arguments so the tests can give exact
values and check exact outputs: completion %, badges, ages and sizes, traffic rates, the
confidence histogram's bars, and how a daemon event becomes a line of the live feed.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from daemon.service.events import preview

__all__ = [
    "SPARK_SERIES",
    "Badge",
    "Completion",
    "FeedItem",
    "Level",
    "RateTracker",
    "ago",
    "backup_badge",
    "bars",
    "completion",
    "curator_badge",
    "daemon_badge",
    "duration",
    "embedding_note",
    "entry_ref",
    "feed_item",
    "human_bytes",
    "short_id",
    "styx_badge",
    "suspect_banner",
    "vitality_text",
]


class Level(StrEnum):
    """How a badge or a feed line should look; the word on it must say the same without colour."""

    OK = "ok"
    WARN = "warn"
    BAD = "bad"
    OFF = "off"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Badge:
    """A labelled state, e.g. `styx: ok`. `text` is readable on a monochrome terminal."""

    label: str
    word: str
    level: Level

    @property
    def text(self) -> str:
        return f"{self.label}: {self.word}"


def vitality_text(phase: str, hayflick_ratio: float | None, legacy: bool) -> str:
    """The header's vitality: `vitality declining (Hayflick 0.9, legacy)`."""
    notes = ([] if hayflick_ratio is None else [f"Hayflick {hayflick_ratio:g}"]) + (["legacy"] if legacy else [])
    return f"vitality {phase}" + (f" ({', '.join(notes)})" if notes else "")


def short_id(peer_id: str, n: int = 8) -> str:
    """The distinctive tail of a peer id (`12D3KooW…` is common to all ed25519 ids)."""
    return peer_id if len(peer_id) <= n + 1 else "…" + peer_id[-n:]


def entry_ref(entry_id: str, n: int = 8) -> str:
    """An entry's id as lines show it: its first `n` hex characters, as git shows a commit (every
    command that takes an id accepts a unique prefix; the full id stays in the entry's detail)."""
    return entry_id[:n]


def human_bytes(n: float | None) -> str:
    """`1.5 KiB`, `0 B`, `-` for unknown."""
    if n is None or not math.isfinite(n):
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def duration(seconds: float | None, *, coarse: bool = False) -> str:
    """A short span: `42s`, `5m 03s`, `3h 07m`, `2d 04h` (`coarse`: the first unit only, `5m`);
    `-` for unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        span = f"{s // 60}m {s % 60:02d}s"
    elif s < 86400:
        span = f"{s // 3600}h {s % 3600 // 60:02d}m"
    else:
        span = f"{s // 86400}d {s % 86400 // 3600:02d}h"
    return span.split(" ")[0] if coarse else span


def ago(at_ms: int | None, now_ms: int, *, coarse: bool = False) -> str:
    """`never`, `just now`, `5m 03s ago` (`coarse`: `5m ago`), or `in 2h 00m` for a time ahead
    of `now_ms`."""
    if at_ms is None:
        return "never"
    delta = (now_ms - at_ms) / 1000
    if abs(delta) < 1:
        return "just now"
    return f"{duration(delta, coarse=coarse)} ago" if delta > 0 else f"in {duration(-delta, coarse=coarse)}"


@dataclass(frozen=True, slots=True)
class Completion:
    """How much of a sibling's state this golem holds. `pct` is None when never compared."""

    pct: float | None
    text: str
    level: Level


def completion(ops: int | None, behind: int | None, ahead: int | None) -> Completion:
    """A sibling's completion from the version-vector comparison of the last sync.

    `behind`: ops the sibling has that we lack; `ahead`: ops we have that it lacks; `ops`: the
    ops in our causal context. The sibling holds (ops - ahead) + behind ops, of which we hold
    ops - ahead. The figure is rounded *down* and capped at 99.9 while anything is behind, so
    it never reads 100 % with a backlog (syncthing #6784); it reads 100 % exactly when behind
    is 0.
    """
    if behind is None:
        return Completion(None, "not synced", Level.OFF)
    if behind <= 0:
        return Completion(100.0, "100%", Level.OK)
    common = max(0, (ops or 0) - max(0, ahead or 0))
    pct = 100.0 * common / (common + behind)
    pct = min(99.9, math.floor(pct * 10) / 10)
    return Completion(pct, f"{pct:.1f}% ({behind} behind)", Level.WARN)


def daemon_badge(state: str) -> Badge:
    """`state`: `up`, `connecting`, `silent` (connected, but polls go unanswered) or `down`
    (the TUI's link to the daemon)."""
    if state == "up":
        return Badge("daemon", "up", Level.OK)
    if state == "connecting":
        return Badge("daemon", "connecting", Level.INFO)
    if state == "silent":
        return Badge("daemon", "not answering", Level.WARN)
    return Badge("daemon", "disconnected — retrying", Level.BAD)


def styx_badge(styx: Mapping[str, Any] | None) -> Badge:
    """From `GET /v1/status`'s `styx` (None: Styx is off)."""
    if styx is None:
        return Badge("styx", "off", Level.OFF)
    if styx.get("last_error") and (styx.get("last_success_ms") is None or styx.get("failures", 0)):
        return Badge("styx", "failing", Level.BAD)
    if styx.get("paused_by_budget"):
        return Badge("styx", "paused (budget)", Level.WARN)
    if styx.get("outbox_warning") or styx.get("parked", 0):
        return Badge("styx", "backlog", Level.WARN)
    return Badge("styx", "ok", Level.OK)


def backup_badge(backups: Mapping[str, Any] | None, now_ms: int) -> Badge:
    """From `GET /v1/backups`: ok while the newest backup is younger than 1.5 intervals."""
    if backups is None:
        return Badge("backup", "unknown", Level.OFF)
    last = backups.get("last")
    scheduled = backups.get("next_due_ms") is not None
    if last is None:
        return Badge("backup", "none yet", Level.WARN if scheduled else Level.OFF)
    age_h = (now_ms - int(last["at_ms"])) / 3_600_000
    if age_h > 1.5 * float(backups.get("interval_hours", 24.0)):
        return Badge("backup", "stale", Level.WARN)
    return Badge("backup", "ok", Level.OK)


def curator_badge(last: Mapping[str, Any] | None, now_ms: int, *, coarse: bool = False) -> Badge:
    """From `GET /v1/status`'s `last_curator_cycle`: how long ago it ran (`coarse`: `7m ago`)."""
    if last is None:
        return Badge("curator", "no cycle yet", Level.OFF)
    return Badge("curator", ago(int(last.get("at_ms", now_ms)), now_ms, coarse=coarse), Level.OK)


_BLOCKS = " ▏▎▍▌▋▊▉█"


def bars(counts: Iterable[int], width: int) -> list[str]:
    """One horizontal bar per count, scaled so the largest fills `width` cells (eighths of a cell)."""
    values = list(counts)
    top = max(values, default=0)
    out = []
    for v in values:
        eighths = 0 if top <= 0 else round(8 * width * v / top)
        if v > 0:
            eighths = max(1, eighths)  # a non-empty bucket is never drawn empty
        full, part = divmod(eighths, 8)
        out.append("█" * full + (_BLOCKS[part] if part else ""))
    return out


# Traffic series: name -> the daemon counters summed into it (daemon/p2p: broadcast, catchup).
SPARK_SERIES: dict[str, tuple[str, ...]] = {
    "gossip msgs/s": ("gossip_msgs_in", "gossip_msgs_out"),
    "gossip bytes/s": ("gossip_bytes_in", "gossip_bytes_out"),
    "sync msgs/s": ("sync_msgs_in", "sync_msgs_out"),
    "sync bytes/s": ("sync_bytes_in", "sync_bytes_out"),
}


@dataclass
class RateTracker:
    """Per-second rates of counter sums between successive samples, the last `keep` of each.

    A counter that goes down (the daemon restarted) starts a new baseline instead of a
    negative rate.
    """

    series: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(SPARK_SERIES))
    keep: int = 60
    _last: tuple[float, dict[str, int]] | None = None
    history: dict[str, deque[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.series:
            self.history.setdefault(name, deque(maxlen=self.keep))

    def sample(self, t: float, counters: Mapping[str, Any]) -> None:
        """Add a sample of the daemon's counters taken at monotonic time `t` (seconds)."""
        sums = {name: sum(_int(counters.get(c)) for c in keys) for name, keys in self.series.items()}
        if self._last is not None:
            t0, before = self._last
            dt = t - t0
            if dt > 0 and all(sums[n] >= before[n] for n in sums):
                for name, total in sums.items():
                    self.history[name].append((total - before[name]) / dt)
            elif dt <= 0:
                return  # keep the older baseline
        self._last = (t, sums)

    def latest(self, name: str) -> float:
        series = self.history.get(name)
        return series[-1] if series else 0.0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- the live feed --------------------------------------------------------------------------

FEED_KINDS = ("entry", "warning", "peer", "sync", "curator", "backup", "styx", "error", "other")


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One line of the live feed. `kind` is what `/` filters on; `entry_id` opens the detail view."""

    at_ms: int
    kind: str
    text: str
    level: Level = Level.INFO
    entry_id: str | None = None

    def matches(self, needle: str) -> bool:
        """The feed filter: empty shows all; else the kind equals it, or the text contains it."""
        needle = needle.strip().lower()
        return not needle or self.kind == needle or needle in self.text.lower()


def feed_item(event: str, data: Any, at_ms: int) -> FeedItem | None:
    """A daemon event (`GET /v1/events`) as a feed line; None for events the feed does not show
    (sync_progress, probe_received: too chatty). Never raises on odd `data`."""
    d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}

    def s(key: str, default: str = "?") -> str:
        value = d.get(key)
        return default if value is None else str(value)

    if event == "entry_written":
        kind = s("kind")
        warn = kind == "warning"
        # The daemon sends a one-line preview; cut and flattened again here: event data is not trusted.
        said = d.get("preview")
        text = f"wrote {kind} {entry_ref(s('id'))}" + (
            f": {preview(said)}" if isinstance(said, str) and said.strip() else "")
        return FeedItem(at_ms, "warning" if warn else "entry", text, Level.WARN if warn else Level.INFO,
                        _entry_id(d.get("id")))
    if event == "entries_received":
        raw = d.get("ids")
        ids: list[Any] = raw if isinstance(raw, list) else []
        first = _entry_id(ids[0]) if ids else None
        more = f" (+{len(ids) - 1} more)" if len(ids) > 1 else ""
        shown = entry_ref(first) if first else "-"
        return FeedItem(at_ms, "entry", f"received {shown}{more} from {short_id(s('from'))} via {s('via')}",
                        Level.INFO, first)
    if event in ("entry_retracted", "entry_forgotten", "entry_unarchived"):
        verb = event.removeprefix("entry_")
        return FeedItem(at_ms, "entry", f"{verb} {entry_ref(s('id'))}", Level.INFO, _entry_id(d.get("id")))
    if event == "entry_endorsed":
        verb = "endorsed" if d.get("confirm", True) else "contradicted"
        return FeedItem(at_ms, "entry", f"{verb} {entry_ref(s('id'))}", Level.INFO, _entry_id(d.get("id")))
    if event == "peer_up":
        return FeedItem(at_ms, "peer", f"peer up {short_id(s('peer_id'))}", Level.OK)
    if event == "peer_down":
        return FeedItem(at_ms, "peer", f"peer down {short_id(s('peer_id'))}", Level.WARN)
    if event == "peer_refused":
        return FeedItem(at_ms, "peer", f"peer refused {short_id(s('peer_id'))}: {s('reason')}", Level.WARN)
    if event == "sync_complete":
        return FeedItem(at_ms, "sync", f"synced with {short_id(s('peer_id'))}: {s('applied', '0')} ops applied")
    if event == "curator_cycle_complete":
        capacity = d.get("entries_archived_capacity")
        over = f" ({capacity} over budget)" if isinstance(capacity, int) and capacity else ""
        return FeedItem(at_ms, "curator", f"curator cycle: {s('entries_pruned', '0')} pruned{over}, "
                                          f"{s('entries_merged', '0')} merged, {s('entries_promoted', '0')} promoted")
    if event == "entries_archived_capacity":
        raw_kinds = d.get("by_kind")
        kinds = raw_kinds if isinstance(raw_kinds, Mapping) else {}
        parts = ", ".join(f"{n} {k}" for k, n in kinds.items())
        return FeedItem(at_ms, "curator", f"over budget ({s('capacity')} live entries): archived {s('count', '0')}"
                                          + (f" ({parts})" if parts else "") + "; clade unarchive ID undoes one",
                        Level.WARN)
    if event == "suspect_author":
        raw_reasons = d.get("reasons")
        reasons = ", ".join(str(r) for r in raw_reasons[:4]) if isinstance(raw_reasons, list) else "?"
        return FeedItem(at_ms, "warning", f"suspect sibling {short_id(s('author'))} ({preview(reasons)}): its "
                                          "unverified entries are withheld from digests; select it, D distrusts, "
                                          "T trusts again", Level.BAD)
    if event == "backup_written":
        return FeedItem(at_ms, "backup", f"backup written: {human_bytes(_num(d.get('bytes')))}", Level.OK)
    if event == "backup_pushed":
        return FeedItem(at_ms, "styx", "backup pushed to the Styx vault", Level.OK)
    if event.startswith("styx"):
        return FeedItem(at_ms, "styx", f"{event.replace('_', ' ')} {_brief(d)}".rstrip(), Level.WARN)
    if event == "error":
        return FeedItem(at_ms, "error", f"error in {s('service')}: {s('error')}", Level.BAD)
    if event in ("sync_progress", "probe_received", "episode_written", "episode_verified"):
        return None
    return FeedItem(at_ms, "other", f"{event.replace('_', ' ')} {_brief(d)}".rstrip())


def _entry_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _brief(d: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in list(d.items())[:3] if isinstance(v, str | int | float))


def suspect_banner(suspects: Sequence[str]) -> str:
    """The header's alert while a sibling is suspect and the operator has not decided."""
    named = ", ".join(short_id(a) for a in suspects[:3]) + (f" +{len(suspects) - 3}" if len(suspects) > 3 else "")
    return f"SUSPECT {named}: unverified entries withheld; select, D distrust / T trust"


def embedding_note(backlog: int) -> str:
    """After the entry count: how many entries still wait for a vector (found by keywords only
    meanwhile); nothing once the backlog has drained."""
    return f" ({backlog} awaiting embedding)" if backlog > 0 else ""
