"""The daemon's heap after startup: collected once, then left out of every later collection.

CPython's full (generation-2) collection walks every tracked object: a started daemon holds
~130,000 (modules, classes, pydantic schemas, the API's routes), and one full collection cost
~125 ms of CPU, landing every few hundred searches on one of them (the bench's max latency).
`freeze_startup` collects what startup left behind and moves the rest to the permanent
generation (`gc.freeze`): later collections, full ones included, walk only what was allocated
since. What startup built lives as long as the daemon, so nothing that would have been freed
is kept.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup"]


def freeze_startup() -> int:
    """Collect startup's garbage, then freeze every object left (call once, when ready);
    returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
