"""`clade run` for now: open the store, announce readiness and wait for SIGINT/SIGTERM.

The daemon-runtime issue replaces this with the supervisor (control API, p2p, curator).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import trio

from .datadir import DataDir
from .grimoire import atomic_write

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
    """Hold the store open until a stop signal; returns the final status document.

    `$DATA/run.json` records the pid while running (so `clade restore` and other clients
    can tell a live daemon holds the data dir) and is removed on a clean exit.
    """
    store = data.open_store()
    atomic_write(data.run_path, json.dumps({"pid": os.getpid(), "socket": None}).encode(), mode=0o600)
    try:
        stopped_by = trio.run(_serve, status, json_output)
        store.checkpoint()
    finally:
        data.run_path.unlink(missing_ok=True)
        store.close()
    return {**status, "stopped_by": stopped_by}
