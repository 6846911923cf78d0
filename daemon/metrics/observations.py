"""Histograms and counters the daemon's events feed (pure: no I/O, no clock, no prometheus_client).

`Observations.record(event, data)` is called for every event the daemon publishes
(`DaemonState.observers`), synchronously on the trio thread, so nothing is missed the way a
lagging event subscriber would miss it. It keeps, in fixed buckets:

- `gossip_delivery_seconds`: for ops that arrived by gossip (`entries_received`, via gossip),
  the commit time minus each op's HLC time (its author's clock: skew shows up here too, within
  `p2p.max_skew_ms`; a negative difference counts as 0);
- `antientropy_pull_seconds` and `antientropy_pull_bytes`: per pull (`sync_complete`);
- `curator_cycle_seconds` (`curator_cycle_complete`), and `curator_outcomes[outcome]`: the
  cycle report's counts (`entries_pruned` → `pruned`, …) summed over cycles.
A malformed event (a field missing or of the wrong type) is skipped and counted in `skipped`.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUCKETS", "Histogram", "Observations"]

# Upper bounds (le) per histogram, in base units (seconds, bytes).
BUCKETS: Mapping[str, tuple[float, ...]] = {
    "gossip_delivery_seconds": (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
    "antientropy_pull_seconds": (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    "antientropy_pull_bytes": (1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9),
    "curator_cycle_seconds": (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0),
}
MAX_OPS_PER_EVENT = 100  # delivery times taken from one `entries_received` at most
_OUTCOME = re.compile(r"^(entries|episodes|heuristics)_([a-z_]{1,40})$")


@dataclass
class Histogram:
    """Counts per bucket (not cumulative; `cumulative()` is), their sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if list(self.bounds) != sorted(set(self.bounds)) or not self.bounds:
            raise ValueError("histogram bounds must be strictly increasing")
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)

    def observe(self, value: float) -> None:
        """Add one observation (NaN is refused by the caller; a value equal to a bound falls in it)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(le, observations ≤ le) for every bound, then (inf, count)."""
        out, running = [], 0
        for le, n in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += n
            out.append((le, running))
        return out


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class Observations:
    """What the events told us since the daemon started (see the module docstring)."""

    histograms: dict[str, Histogram] = field(
        default_factory=lambda: {name: Histogram(bounds) for name, bounds in BUCKETS.items()})
    curator_outcomes: Counter[str] = field(default_factory=Counter)
    curator_cycles: int = 0
    last_curator_ms: int | None = None
    skipped: int = 0

    def record(self, event: str, data: Mapping[str, Any]) -> None:
        """Take what one event says; never raises for a malformed one (counted in `skipped`)."""
        handler = {"entries_received": self._received, "sync_complete": self._pulled,
                   "curator_cycle_complete": self._curated}.get(event)
        if handler is not None and not handler(data):
            self.skipped += 1

    def _received(self, data: Mapping[str, Any]) -> bool:
        if data.get("via") != "gossip":
            return True
        committed, written = _number(data.get("committed_ms")), data.get("op_ms")
        if committed is None or not isinstance(written, Sequence) or isinstance(written, str | bytes):
            return False
        times = [_number(ms) for ms in list(written)[:MAX_OPS_PER_EVENT]]
        if any(t is None for t in times):
            return False
        for ms in times:
            assert ms is not None
            self.histograms["gossip_delivery_seconds"].observe(max(0.0, committed - ms) / 1000)
        return True

    def _pulled(self, data: Mapping[str, Any]) -> bool:
        seconds, size = _number(data.get("seconds")), _number(data.get("bytes_in"))
        if seconds is None or size is None or seconds < 0 or size < 0:
            return False
        self.histograms["antientropy_pull_seconds"].observe(seconds)
        self.histograms["antientropy_pull_bytes"].observe(size)
        return True

    def _curated(self, data: Mapping[str, Any]) -> bool:
        seconds = _number(data.get("seconds"))
        if seconds is None or seconds < 0:
            return False
        self.histograms["curator_cycle_seconds"].observe(seconds)
        self.curator_cycles += 1
        at = _number(data.get("at_ms"))
        self.last_curator_ms = None if at is None else int(at)
        for key, value in data.items():
            match = _OUTCOME.match(key)
            n = _number(value)
            if match and n is not None and n >= 0 and not isinstance(value, float) and key != "entries_embedded":
                self.curator_outcomes[match[2]] += int(n)
        return True
