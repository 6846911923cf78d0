"""systemd notification protocol (sd_notify): datagrams to `$NOTIFY_SOCKET`.

A path starting with "@" is in the abstract namespace. Without `$NOTIFY_SOCKET` (not
under systemd) every call is a no-op. Sending never raises: a supervisor that went away
must not take the daemon down; failures are counted and logged once. Sending never
blocks either (MSG_DONTWAIT): a receiver whose queue is full (a stalled supervisor, a test
harness that stopped reading) costs one dropped notification, not a frozen event loop; the
next watchdog ping follows half a `WatchdogSec` later.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

__all__ = ["Notifier", "watchdog_interval"]

log = logging.getLogger("clade.notify")


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Half of `$WATCHDOG_USEC` in seconds (when the watchdog is for this process), else None."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return max(0.01, int(usec) / 2_000_000)
    except ValueError:
        return None


class Notifier:
    """Sends `KEY=value` lines to the service manager."""

    def __init__(self, path: str | None = None) -> None:
        raw = os.environ.get("NOTIFY_SOCKET") if path is None else path
        self.address: str | None = None
        if raw:
            self.address = "\0" + raw[1:] if raw.startswith("@") else raw
        self.failures = 0
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: str | int) -> bool:
        """Send one notification, e.g. `send(READY=1, STATUS="…")`; True if delivered."""
        if self.address is None:
            return False
        message = "\n".join(f"{k}={v}" for k, v in fields.items()).encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(message, socket.MSG_DONTWAIT, self.address)
            return True
        except OSError as exc:
            self.failures += 1
            if self.failures == 1:
                log.warning("sd_notify to %s failed: %s", self.address.lstrip("\0"), exc)
            return False

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
