"""Whether a daemon runs on a data directory: the start-up lock and one liveness answer.

`DaemonLock.acquire(root, run_path)` takes an exclusive `flock` on `DATA/daemon.lock` without waiting;
`clade run` holds it from before it opens (and migrates) the store until it has removed its
socket and run.json, so two daemons started together cannot both pass the check and the second
can never delete the first's socket. The kernel drops the lock when the process ends, however
it ends (SIGKILL included): a stale lock file is never in the way.

`recorded_pid(run_path)` is the one "is that pid alive" answer the runtime, the client and
restore share: the pid run.json names, if a process with it exists. A process owned by another
user (`kill(pid, 0)` → EPERM) exists; only ESRCH means it is gone.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from daemon.errors import DaemonError

__all__ = ["LOCK_NAME", "DaemonLock", "DataDirLocked", "pid_alive", "recorded_pid"]

LOCK_NAME = "daemon.lock"


class DataDirLocked(DaemonError):
    """Another process holds the data directory's daemon lock."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def recorded_pid(run_path: Path, *, ignore_self: bool = False) -> int | None:
    """The pid `run_path` (run.json) names, if such a process exists. `ignore_self`: a daemon
    starting reads a run.json naming its own pid as stale (a container gives every incarnation
    pid 1); anyone else (the client, restore) takes any live process as the daemon."""
    try:
        pid = int(json.loads(run_path.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if ignore_self and pid == os.getpid():
        return None
    return pid if pid_alive(pid) else None


class DaemonLock:
    """The exclusive lock on `DATA/daemon.lock` (module docstring); `release` is idempotent."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, root: Path, run_path: Path) -> DaemonLock:
        """Take the lock or raise `DataDirLocked` naming the holder (its pid, from `run_path`)."""
        path = root / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = recorded_pid(run_path)
            who = f"pid {holder}" if holder is not None else "another process"
            raise DataDirLocked(f"another clade daemon ({who}) holds {path}: stop it first "
                                "(or use another --data-dir)") from None
        except OSError:
            os.close(fd)
            raise
        return cls(fd, path)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
