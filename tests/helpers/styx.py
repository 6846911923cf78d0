"""A daemon pushing to the reference Styx server: its environment, a burst of writes, polling."""

from __future__ import annotations

from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN


def styx_env(styx: StyxServer, *, priced: bool = False, query: bool = False) -> dict[str, str]:
    """The environment of a daemon pushing to `styx` (fast backoff), its clade layer opted in,
    and (`query`) its searches and digests sent to Styx too (off by default, as shipped).
    Unless `priced`, Styx is free: these tests are about delivery, and the default prices' caps
    (tests/styx/test_styx_month.py) would space a fault test's attempts a tick apart."""
    free = {} if priced else {f"CLADE_STYX__PRICES__{p}": "0" for p in ("PER_CALL", "PER_ITEM", "PER_QUERY",
                                                                       "PER_UPLOAD", "PER_MIB")}
    return {"CLADE_STYX__ENABLED": "true", "CLADE_STYX__URL": styx.url, "CLADE_STYX__TOKEN": STYX_TOKEN,
            "CLADE_STYX__CLADE_ENABLED": "true", "CLADE_STYX__BACKOFF_CAP_S": "0.5",
            "CLADE_STYX__BACKOFF_BASE_S": "0.1", **({"CLADE_STYX__QUERY_ENABLED": "true"} if query else {}), **free}


def flush_warnings(daemon: DaemonProc, start: int, count: int, *, kind: str = "warning", private: bool = False) -> None:
    """POST /v1/memory/flush of `count` numbered facts (from `start`) of `kind`; asserts 200."""
    facts = [{"content": f"Warning number {i}: never LP in pool {i} under $100K TVL", "memory_type": kind,
              **({"sensitivity": "private"} if private else {})} for i in range(start, start + count)]
    answer = daemon.request("POST", "/v1/memory/flush", json={"session": f"s{start}", "facts": facts})
    assert answer.status_code == 200, answer.text
