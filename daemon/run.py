"""`clade run` for now: open the store, print its status and wait for SIGINT/SIGTERM.

The daemon-runtime issue replaces this with the supervisor (control API, p2p, curator).
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import trio

from .datadir import DataDir

__all__ = ["run_foreground"]


async def _serve(data: DataDir) -> str:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            return signal.Signals(signum).name
    raise AssertionError("signal receiver ended")  # pragma: no cover


def run_foreground(data: DataDir, status: dict[str, Any], *, json_output: bool) -> dict[str, Any]:
    """Hold the store open until a stop signal; returns the final status document."""
    store = data.open_store()
    try:
        # Readiness goes to stderr (one JSON line) so stdout stays one document with --json.
        print(json.dumps({"event": "ready", **status}), file=sys.stderr, flush=True)
        if not json_output:
            print(
                f"clade: running on {data.root} as {status['peer_id']} "
                f"({status['entries']} entries, {status['episodes']} episodes); Ctrl-C stops",
                file=sys.stderr, flush=True,
            )
        stopped_by = trio.run(_serve, data)
        store.checkpoint()
    finally:
        store.close()
    return {**status, "stopped_by": stopped_by}
