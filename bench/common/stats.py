"""Summaries of samples: percentiles, latency summaries, rates, sizes; timing helpers."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .report import progress

__all__ = [
    "dist",
    "holm",
    "latency_summary",
    "least_squares_slope",
    "mean_interval",
    "paired",
    "percentile",
    "rate_summary",
    "size_summary",
    "slope_per_hour",
    "summary",
    "timed",
    "timed_calls",
]


def percentile(values: Iterable[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), p in 0..100; NaN for no values."""
    xs = sorted(values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _ms_summary(ms: Sequence[float], digits: int) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": round(percentile(ms, 50), digits),
        "p90_ms": round(percentile(ms, 90), digits),
        "p99_ms": round(percentile(ms, 99), digits),
        "max_ms": round(ms[-1], digits),
        "mean_ms": round(sum(ms) / len(ms), digits),
        "samples": len(ms),
    }


def latency_summary(ns: Sequence[int]) -> dict[str, float]:
    """p50 / p90 / p99 / max / mean of nanosecond samples, in milliseconds (4 places)."""
    return _ms_summary([v / 1e6 for v in ns], 4)


def summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p90 / p99 / max / mean of samples given in seconds, in milliseconds (3 places)."""
    return _ms_summary([s * 1e3 for s in seconds], 3)


def dist(values: Sequence[float]) -> dict[str, float]:
    """n / min / p50 / p99 / max of values already in their unit (1 place); NaNs for no values."""
    if not values:
        return {"n": 0, "p50": math.nan, "p99": math.nan, "max": math.nan, "min": math.nan}
    return {"n": len(values), "min": round(min(values), 1), "p50": round(percentile(values, 50), 1),
            "p99": round(percentile(values, 99), 1), "max": round(max(values), 1)}


def rate_summary(counts: Sequence[int], ns: Sequence[int]) -> dict[str, Any]:
    """ops/s per batch (median, min, max) plus the aggregate over all batches."""
    rates = [c / (t / 1e9) for c, t in zip(counts, ns, strict=True)]
    total_s = sum(ns) / 1e9
    return {
        "batches": len(counts), "ops": sum(counts), "ops_per_batch_median": statistics.median(counts),
        "median_ops_s": round(statistics.median(rates)), "min_ops_s": round(min(rates)),
        "max_ops_s": round(max(rates)), "aggregate_ops_s": round(sum(counts) / total_s),
        "us_per_op": round(total_s / sum(counts) * 1e6, 2), "seconds": round(total_s, 3),
    }


def size_summary(values: Sequence[float]) -> dict[str, float]:
    """median / p90 / min / max (2 places)."""
    return {"median": round(percentile(values, 50), 2), "p90": round(percentile(values, 90), 2),
            "min": round(min(values), 2), "max": round(max(values), 2)}


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` took."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_calls(calls: Iterable[Callable[[], object]], report_every: int, label: str, total: int) -> list[int]:
    """Run each call, timing it alone; returns the durations in ns (progress every `report_every`)."""
    out: list[int] = []
    clock = time.perf_counter_ns
    started = clock()
    for i, call in enumerate(calls, 1):
        t0 = clock()
        call()
        out.append(clock() - t0)
        if report_every and i % report_every == 0:
            elapsed = (clock() - started) / 1e9
            progress(f"  {label}: {i:,}/{total:,} ({elapsed:.1f}s elapsed)")
    return out


# Student's t, two-sided 95 %, by degrees of freedom (a row missing between two uses the smaller
# dof's value: the wider, conservative interval); 1.96 from 30 on.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 19: 2.093, 24: 2.064, 29: 2.045}


def mean_interval(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """Mean and its 95 % t-interval over `values` (one per seed; None and NaN skipped):
    {mean, lo, hi, n}, lo and hi None below two values."""
    xs = [v for v in values if v is not None and not math.isnan(v)]
    if not xs:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return {"mean": mean, "lo": None, "hi": None, "n": len(xs)}
    dof = len(xs) - 1
    t = _T95[max(k for k in _T95 if k <= dof)] if dof < 30 else 1.96
    half = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": len(xs)}


def paired(differences: Iterable[float | None]) -> dict[str, float | int | None]:
    """Mean of per-seed paired `differences`, its 95 % t-interval (exact t quantile) and the
    two-sided p-value of a paired t-test against 0: {mean, lo, hi, n, p}. None and NaN skipped."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]  # no stubs in the venv

    xs = [v for v in differences if v is not None and not math.isnan(v)]
    if len(xs) < 2:
        return {"mean": statistics.fmean(xs) if xs else None, "lo": None, "hi": None, "n": len(xs), "p": None}
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs)
    half = float(scipy_stats.t.ppf(0.975, len(xs) - 1)) * sd / math.sqrt(len(xs))
    p = 1.0 if sd == 0 and mean == 0 else (0.0 if sd == 0 else float(
        2 * scipy_stats.t.sf(abs(mean / (sd / math.sqrt(len(xs)))), len(xs) - 1)))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": len(xs), "p": p}


def holm(pvalues: dict[str, float | None]) -> dict[str, float | None]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979): the i-th smallest of m
    becomes max over j ≤ i of min(1, (m − j + 1)·p_(j)). None stays None and is not counted."""
    known = sorted((p, name) for name, p in pvalues.items() if p is not None)
    m = len(known)
    out: dict[str, float | None] = {name: None for name, p in pvalues.items() if p is None}
    running = 0.0
    for j, (p, name) in enumerate(known):
        running = max(running, min(1.0, (m - j) * p))
        out[name] = running
    return out


def least_squares_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x (None with fewer than 3 points or no spread in x)."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of value over time (s), per hour, as % of the mean value."""
    slope = least_squares_slope(points)
    mean = sum(v for _, v in points) / len(points) if points else 0.0
    if slope is None or mean == 0:
        return None
    return round(slope * 3600 / mean * 100, 2)


def quarter_medians(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The window's points cut into four quarters by count: each quarter's middle time and its
    median value (no quarters with fewer than 8 points)."""
    if len(points) < 8:
        return []
    n = len(points)
    parts = [points[q * n // 4:(q + 1) * n // 4] for q in range(4)]
    return [(statistics.median(t for t, _ in part), statistics.median(v for _, v in part)) for part in parts]
