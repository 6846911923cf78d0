"""The soak's verdict on descriptors (bench/bench_soak.py `check`, bench/soak/samples.py
`resources`, bench/common/stats.py `quarter_medians`), on samples made up here: files and pipes
are judged by their slope, sockets — connections, which come and go with the load — by the slope
of their quarter medians, so a burst's API connections are not read as growth but sockets that
pile up are."""

from __future__ import annotations

from typing import Any, cast

from bench import bench_soak
from bench.common.stats import quarter_medians
from bench.soak.load import Load
from bench.soak.samples import Sampler, resources

HOUR = 3600.0


def _judged(rows: list[dict[str, float]]) -> dict[str, Any]:
    sampler = Sampler(golems=[], load=cast(Load, None), every=30.0)
    sampler.samples["g0"] = rows
    res: dict[str, Any] = {"failed": [], "params": {"minutes": 120}, "resources": resources(sampler, warmup=0.0,
                                                                                           settle=0.0)}
    bench_soak.check(res)
    return res


def _rows(socket: Any, file_fds: Any = lambda i: 16.0) -> list[dict[str, float]]:
    return [{"t_s": i * 30.0, "rss_mib": 150.0, "own_rss_mib": 150.0, "fds": file_fds(i) + socket(i),
             "file_fds": file_fds(i), "socket_fds": socket(i)} for i in range(int(2 * HOUR / 30))]


def test_quarter_medians_cut_the_window_by_count() -> None:
    points = [(float(t), float(t % 4 == 0) * 40 + 12) for t in range(40)]  # a spike every 4th sample
    assert [m for _, m in quarter_medians(points)] == [12.0, 12.0, 12.0, 12.0]
    assert quarter_medians(points[:7]) == []


def test_connection_spikes_are_not_growth_but_sockets_that_pile_up_are() -> None:
    # A burst's API clients every 20 minutes, in the run's second half only: a line through the
    # samples climbs, the medians do not.
    bursts = _judged(_rows(lambda i: 51.0 if i % 40 == 39 and i >= 120 else 12.0))
    assert bursts["resources"]["g0"]["fds_slope_pct_per_h"] >= 1.0  # what the old check failed on
    assert not any("fds" in f for f in bursts["failed"]), bursts["failed"]
    piling = _judged(_rows(lambda i: 12.0 + i // 40))["failed"]  # one more socket kept every 20 minutes
    assert any("socket_fds (quarter medians) grows" in f for f in piling), piling
    leaking = _judged(_rows(lambda i: 12.0, file_fds=lambda i: 16.0 + i // 40))["failed"]
    assert any("file_fds grows" in f for f in leaking), leaking


def test_the_phase_with_no_writes_is_judged_on_its_own_samples() -> None:
    # RSS climbs for an hour of writes, then holds for an hour with none: over the second hour
    # alone (`start`, `until`) it is flat; a climb there is growth the data does not explain.
    def rows(still_growth: float) -> list[dict[str, float]]:
        out = []
        for i in range(int(2 * HOUR / 30)):
            t = i * 30.0
            rss = 150.0 + min(t, HOUR) / HOUR * 15.0 + max(0.0, t - HOUR) / HOUR * still_growth
            out.append({"t_s": t, "rss_mib": rss, "own_rss_mib": rss, "fds": 28.0, "file_fds": 16.0,
                        "socket_fds": 12.0})
        return out

    def judged(still_growth: float) -> dict[str, Any]:
        sampler = Sampler(golems=[], load=cast(Load, None), every=30.0)
        sampler.samples["g0"] = rows(still_growth)
        res: dict[str, Any] = {"failed": [], "params": {"minutes": 60},
                               "resources": resources(sampler, warmup=0.0, settle=0.0, until=HOUR),
                               "still": {"minutes": 60, "writes_acknowledged": 0,
                                         "resources": resources(sampler, warmup=HOUR, settle=0.0, start=HOUR,
                                                                until=2 * HOUR)}}
        bench_soak.check(res)
        return res

    flat = judged(0.0)
    still = flat["still"]["resources"]["g0"]
    assert still["rss_mib_first_last"] == [165.0, 165.0] and still["rss_mib_slope_pct_per_h"] == 0.0
    assert flat["resources"]["g0"]["rss_mib_first_last"] == [150.0, 165.0]  # the writes' hour, apart
    assert not any("no writes" in f for f in flat["failed"]), flat["failed"]
    leaking = judged(3.0)["failed"]  # +3 MiB an hour with nothing written: ~1.8 %/h
    assert any("rss_mib grows" in f and "with no writes" in f for f in leaking), leaking
