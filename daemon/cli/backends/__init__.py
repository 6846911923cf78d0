"""The CLI's two ways of doing one operation, behind one interface.

`backend_for(data)` gives a `DaemonBackend` when a live daemon serves the data dir (and
`CLADE_NO_DAEMON` is unset: the rules of `DaemonClient.for_data_dir`), else a `StoreBackend`
on the store itself; a command calls one `Backend` method and renders what it returns, the
same document either way.
"""

from __future__ import annotations

from daemon.cli.backends.base import Backend, Doc, PadTuple
from daemon.cli.backends.daemon import DaemonBackend
from daemon.cli.backends.store import StoreBackend
from daemon.client import DaemonClient
from daemon.datadir import DataDir

__all__ = ["Backend", "DaemonBackend", "Doc", "PadTuple", "StoreBackend", "backend_for"]


def backend_for(data: DataDir) -> Backend:
    """The daemon serving `data` if one is live and `CLADE_NO_DAEMON` is unset, else the store."""
    client = DaemonClient.for_data_dir(data)
    return StoreBackend(data) if client is None else DaemonBackend(client)
