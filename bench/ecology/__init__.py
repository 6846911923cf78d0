"""The decision benchmark (bench/bench_ecology.py): its world (`world`, pure) and one run (`engine`).

A pool worker that runs the previous release puts that release's code first on `sys.path`
and forgets any `daemon`, `crdt` or `crypto` module the worker's start imported from this
checkout (`worker_init`; spawn re-imports the driver, and `bench.common` imports the daemon),
before the engine, and with it the daemon's packages, is imported (`job`). Every run reports
where its `daemon` package came from, and the driver checks it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["job", "worker_init"]

_DAEMON_PACKAGES = ("daemon", "crdt", "crypto")


def worker_init(code_root: str | None) -> None:
    """A pool worker's start: with `code_root`, the daemon's packages are imported from there
    (an extracted commit) from now on, and never from this checkout."""
    if code_root is None:
        return
    for name in [m for m in sys.modules if m.split(".")[0] in (*_DAEMON_PACKAGES, "bench")
                 and not m.startswith("bench.ecology") and m != "bench"]:
        del sys.modules[name]
    for name in [m for m in sys.modules if m.startswith("bench.ecology.engine")]:
        del sys.modules[name]
    sys.path.insert(0, code_root)


def job(spec: Any) -> dict[str, Any]:
    """Run one `engine.RunSpec` (imported here, after `worker_init`)."""
    from .engine import run_one

    return run_one(spec)
