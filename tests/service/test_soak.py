"""The soak's short form (bench/bench_soak.py --short): five real daemons for a few minutes at a
golem's rates with every fault on the schedule — SIGKILL, a partition, the data dir's
filesystem full, and read-only at a start (a tmpfs: root only, else skipped and said so), the wall clock
stepped an hour back and forward (libfaketime), a write flood at the budget's limit, a Styx
answering 302, 503 and never. Asserts what the issue's goals name: no acknowledged write lost,
no server error or hang, a disk fault refused with 507/503 and a reason, every fault recovered,
no traceback in any log, the stores intact, the vault backup verified, no secret anywhere, and
the gated ops equal on every golem after one sync round with the curators quiet; and that a
phase with no writes after the load (`--still-minutes`) writes nothing and is sampled."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import bench_soak

pytestmark = pytest.mark.slow


# httpcore's connect_unix_socket does not close its socket when connect() fails (a daemon killed
# or stopped by a fault refuses the connection): the bench's load client then leaves one socket to
# the garbage collector, which pytest reports as an unraisable ResourceWarning at a random point.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_short_soak_under_faults(tmp_path: Path) -> None:
    args = bench_soak.parse_args(["--short", "--minutes", "3", "--still-minutes", "0.5"])
    res = bench_soak.run(args, tmp_path)
    bench_soak.report(res)
    assert res["writes"]["acknowledged"] > 50 and res["writes"]["lost"] == 0
    assert res["requests"].get("server_error", 0) == 0, res["server_errors"]
    assert res["requests"].get("timeout", 0) == 0, res["timeouts"]
    faults = {f["fault"]: f for f in res["faults"]}
    assert set(faults) == {"kill", "partition", "disk_full", "read_only", "clock", "flood", "styx_3xx",
                           "styx_5xx", "styx_hang"}
    if os.geteuid() == 0:  # the disk faults ran: writes were refused clearly while they lasted
        assert "skipped" not in faults["disk_full"]
        assert any(k.startswith("507 insufficient_storage") for k in res["refusals"]), res["refusals"]
        assert "read-only" in faults["read_only"]["start_on_read_only"]  # refused to start, saying why
    for name, fault in faults.items():  # how fast is the bench's figure; here: that each recovers
        assert "skipped" in fault or fault["recovered_s"] is not None, (name, fault)
    assert set(res["integrity"].values()) == {"ok"}
    assert res["vault_restore"] == "ok"
    assert res["secrets_found"] == []
    assert res["tracebacks"] == 0
    assert res["convergence"]["seconds"] is not None, res["convergence"]  # every acknowledged warning everywhere
    assert 0 <= res["convergence"]["after_load_s"] <= res["convergence"]["seconds"]  # the load after the fault apart
    rounded = res["after_one_sync_round"]  # what must converge: equal after one sync round, curators quiet
    assert rounded["gated_ops_equal"], rounded
    for name, figures in res["resources"].items():  # the store's growth is sampled, for RSS per entry stored
        assert figures["entries_first_last"][1] > figures["entries_first_last"][0], (name, figures)
    still = res["still"]  # then half a minute of reads, backups and sync with no writes, sampled
    assert still["writes_acknowledged"] == 0, still
    assert set(still["resources"]) == set(res["resources"]), still
    for name, figures in still["resources"].items():
        assert figures["samples"] >= 3, (name, figures)
    # Not asserted: the 30 s recovery goal and the slopes (timings, measured by the bench and
    # quoted in bench/RESULTS.md), and the contexts' convergence (reported apart: withheld dots
    # are learnt from the writer's gossip or a direct pull, not in one round).
