"""Errors of the `daemon` package.

`UsageError` means the operator or a client gave a bad value (CLI exit code 2, HTTP 4xx);
every other `DaemonError` is an operational failure (exit code 1). Messages are one line
that names the bad value and what to do next.
"""

from __future__ import annotations

__all__ = ["ConfigError", "Conflict", "DaemonError", "NotFound", "StoreBusy", "StoreError", "UsageError"]


class DaemonError(Exception):
    """Root of the daemon's own errors."""

    exit_code = 1


class UsageError(DaemonError):
    """Bad input from the caller: nothing was written."""

    exit_code = 2


class NotFound(UsageError):
    """The caller named something (an entry id, a file) that does not exist."""


class Conflict(UsageError):
    """The daemon's state does not allow the request now (HTTP 409): not in a clade, sync off,
    not the entry's author, a working memory changed while it was being closed."""


class ConfigError(UsageError):
    """The config file or a CLADE_* variable is invalid; says which and why."""


class StoreError(DaemonError):
    """The Grimoire could not be opened or used (corrupt, newer schema, locked)."""


class StoreBusy(StoreError):
    """A write could not begin: another connection holds the store's write lock (past the busy
    timeout, or at once where the caller chose not to wait). Nothing was written."""
