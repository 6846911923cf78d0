"""`clade run` for now: open the store, announce readiness and wait for SIGINT/SIGTERM.

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


async def _serve(status: dict[str, Any], json_output: bool) -> str:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        # Announce readiness only once the stop signals are ours: a supervisor that
        # signals right after "ready" must get a clean stop, not a default-action kill.
        # The line goes to stderr so stdout stays one document with --json.
        print(json.dumps({"event": "ready", **status}), file=sys.stderr, flush=True)
        if not json_output:
            print(
                f"clade: running on {status['data_dir']} as {status['peer_id']} "
                f"({status['entries']} entries, {status['episodes']} episodes); Ctrl-C stops",
                file=sys.stderr, flush=True,
            )
        async for signum in signals:
            return signal.Signals(signum).name
    raise AssertionError("signal receiver ended")  # pragma: no cover


def run_foreground(data: DataDir, status: dict[str, Any], *, json_output: bool) -> dict[str, Any]:
    """Hold the store open until a stop signal; returns the final status document."""
    store = data.open_store()
    try:
        stopped_by = trio.run(_serve, status, json_output)
        store.checkpoint()
    finally:
        store.close()
    return {**status, "stopped_by": stopped_by}
