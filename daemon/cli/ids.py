"""The entry ids a CLI command hands its backend: what the user typed, or resolved offline.

Every command that takes an entry id takes a unique prefix of one (daemon/grimoire/short_ids.py).
Through a daemon the text goes as typed: the daemon resolves it in the same call that uses it
(no extra round trip). On the store (no daemon) the store backend's writes take full ids, so the
prefix is resolved here first, by the same `Grimoire.resolve_id` (through `Backend.entry`).
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.cli.backends import Backend, DaemonBackend

__all__ = ["ID_HELP", "entry_id", "entry_ids"]

ID_HELP = "the id or a unique prefix of it (at least 4 hex characters)"


def entry_id(backend: Backend, given: str) -> str:
    """What to pass as an entry id: `given` itself to a daemon, the full id it names to the store
    (raises `NotFound`, or `UsageError` for an ambiguous or too short prefix)."""
    if isinstance(backend, DaemonBackend):
        return given
    return str(backend.entry(given)["id"])


def entry_ids(backend: Backend, given: Sequence[str]) -> list[str]:
    """`entry_id` of each, in order."""
    return [entry_id(backend, g) for g in given]
