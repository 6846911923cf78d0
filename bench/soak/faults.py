"""bench_soak's faults and how recovery from them is seen: g0's data dir on a tmpfs of its own
(`Volume`: filled, remounted read-only), a partition held through the daemon (`hold`), and the
probes that time a recovery (`probe`: a fresh warning on every sibling; `styx_drained`: every
Styx outbox empty)."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from daemon.testing.harness import Golem

from .load import Load, now

__all__ = ["Volume", "hold", "on_all", "probe", "styx_drained"]


class Volume:
    """g0's data dir on a tmpfs of its own (root only), for disk-full and read-only faults."""

    def __init__(self, path: Path, size_mib: int) -> None:
        self.path = path
        self.size_mib = size_mib
        self.mounted = False

    def mount(self) -> bool:
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m", "tmpfs", str(self.path)],
                              capture_output=True, check=False)
        self.mounted = done.returncode == 0
        return self.mounted

    def fill(self) -> Path:
        """A file taking every free byte of the volume (unbuffered: nothing waits to be flushed)."""
        filler = self.path / "filler.bin"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (1 << 20, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
        finally:
            os.close(fd)
        return filler

    def remount(self, mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(self.path)], check=True, capture_output=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)


def hold(golem: Golem, other: Golem, seconds: float) -> None:
    with contextlib.suppress(RuntimeError):  # it does not know the other yet: nothing to hold
        golem.call("POST", "/v1/peers/disconnect", json={"peer_id": other.peer_id, "hold_s": round(seconds, 3)})


def on_all(golems: Sequence[Golem], entry_id: str) -> bool:
    for golem in golems:
        try:
            if golem.request("GET", f"/v1/entries/{entry_id}").status_code != 200:
                return False
        except (httpx.HTTPError, RuntimeError):
            return False
    return True


def probe(load: Load, golem: Golem, siblings: Sequence[Golem], *, timeout: float) -> float | None:
    """Seconds until a fresh warning written on `golem` is acknowledged and on every sibling."""
    start = now()
    entry_id = None
    while entry_id is None and now() - start < timeout:
        entry_id = load.write(golem, "warning", f"probe {start:.3f} from {golem.name}: Aave oracle on "
                                               f"Base drifted {random.randint(10, 999)} bps")
        if entry_id is None:
            time.sleep(0.5)  # poll pacing while the golem refuses writes
    while entry_id is not None and now() - start < timeout:
        if on_all(siblings, entry_id):
            return round(now() - start, 2)
        time.sleep(0.25)  # poll pacing
    return None


def styx_drained(golems: Sequence[Golem], *, timeout: float) -> float | None:
    start = now()
    while now() - start < timeout:
        depths = []
        for golem in golems:
            try:
                depths.append(int(golem.call("GET", "/v1/styx/status")["queue_depth"]))
            except (RuntimeError, httpx.HTTPError, ValueError):
                depths.append(-1)
        if all(d == 0 for d in depths):
            return round(now() - start, 2)
        time.sleep(0.5)  # poll pacing
    return None
