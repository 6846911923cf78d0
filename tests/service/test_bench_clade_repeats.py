"""bench_clade's `--repeats` summary (bench/bench_clade.py `repeats_summary`): each ratio to the
probe averaged over a rate's repeats with its 95 % t-interval, rates kept apart, on phases made
up here."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_clade import repeats_summary


def _phase(rate: float, warning_ms: float, probe_ms: float) -> dict[str, Any]:
    def cpu(ms: float) -> dict[str, Any]:
        return {"sibling_cpu_ms_per_msg": ms, "own": {"sibling_cpu_ms_per_msg": ms - 0.2}}

    return {"rate": rate, "ratio_p50_msg": 1.4, "ratio_p50_delivery": 1.6,
            "warnings": {"daemon_cpu": cpu(warning_ms), "per_warning_ms": {"p99": 30.0}},
            "probes": {"daemon_cpu": cpu(probe_ms), "per_probe_ms": {"p99": 20.0}}}


def test_each_rate_gets_the_mean_of_its_repeats_with_an_interval() -> None:
    rows = [_phase(10, 9.0, 6.0), _phase(10, 8.4, 6.0), _phase(10, 8.7, 6.0), _phase(50, 12.0, 6.0)]
    by_rate = {s["rate"]: s for s in repeats_summary(rows)}
    ten = by_rate[10]
    assert ten["repeats"] == 3 and ten["sibling_cpu"]["n"] == 3
    assert ten["sibling_cpu"]["mean"] == pytest.approx(1.45, abs=1e-3)  # (1.5 + 1.4 + 1.45) / 3
    assert ten["sibling_cpu"]["lo"] < 1.45 < ten["sibling_cpu"]["hi"]
    assert ten["sibling_cpu_own"]["mean"] == pytest.approx((8.8 + 8.2 + 8.5) / 3 / 5.8, abs=1e-3)
    assert ten["p99_msg"]["mean"] == pytest.approx(1.5) and ten["p50_delivery"]["mean"] == pytest.approx(1.6)
    fifty = by_rate[50]  # one phase: a mean, no interval
    assert fifty["sibling_cpu"]["mean"] == pytest.approx(2.0) and fifty["sibling_cpu"]["lo"] is None
