"""The daemon's write path for warnings: embed first, then write and (maybe) hold, in one go.

A warning or anti_knowledge crosses at once — unless it repeats (cosine ≥ 0.95) one this golem
gossiped in the last 24 h (daemon/grimoire/crossing.py, remember_warning). Its vector is
computed off the store's thread *before* the write, so the hold is committed with the entry
and the publisher never sees it unheld. Without a model (not prepared, corrupt) the warning is
written unchecked and the miss is counted (`warning_novelty_unchecked`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from crdt import Sensitivity
from daemon.grimoire import Entry, NewEntry
from daemon.grimoire.crossing import remember_warning
from daemon.grimoire.promotion import REPEATABLE_KINDS

if TYPE_CHECKING:
    from daemon.service.state import DaemonState

__all__ = ["checks_repeats", "remember_checked"]

log = logging.getLogger("clade.crossing")


def checks_repeats(new: NewEntry) -> bool:
    """Whether a local write goes through the repeat check (public warnings and anti_knowledge)."""
    return new.kind in REPEATABLE_KINDS and new.sensitivity is Sensitivity.PUBLIC


async def remember_checked(state: DaemonState, new: NewEntry) -> Entry:
    """Write a warning-kind entry, held if it repeats a recent one; publishes `warning_held`."""
    try:
        embedder = await anyio.to_thread.run_sync(lambda: state.retriever.embedder)
        vector = (await anyio.to_thread.run_sync(lambda: embedder.embed([new.content])))[0]
    except Exception as exc:  # noqa: BLE001 - no model: the warning still crosses, unchecked
        log.warning("warning written without the repeat check (no embedding model: %s)", exc)
        state.counters["warning_novelty_unchecked"] += 1
        return await state.db(lambda s: s.remember(new, identity=state.identity))
    entry, similarity = await state.db(lambda s: remember_warning(
        s, new, state.identity, vector=vector, info=embedder.info, now_ms=state.now_ms()))
    if similarity is not None:
        state.counters["warnings_held"] += 1
        state.publish("warning_held", {"id": entry.id, "similarity": round(similarity, 4)})
    return entry
