"""The daemon's own writes that cross: remember, retract, endorse; episodes; the nudge after each.

Every committed own op is followed by `local_write`: the p2p publisher gossips what crosses at
once and the Styx pusher pushes what the write enqueued. A warning or anti_knowledge goes
through the repeat check (holds.py says which): its vector is computed off the store's thread
*before* the write, so the hold is committed with the entry and the publisher never sees it
unheld (daemon/grimoire/crossing.py, remember_warning). Without a model (not prepared,
corrupt) the warning is written unchecked and the miss is counted (`warning_novelty_unchecked`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import trio

from crypto import Identity
from daemon.datadir import DataDir
from daemon.grimoire import Entry, Episode, NewEntry
from daemon.grimoire.crossing import remember_warning
from daemon.service import events
from daemon.service.embedding import Embedding
from daemon.service.holds import checks_repeats
from daemon.service.hub import EventHub
from daemon.service.peering import Peering
from daemon.service.store_access import StoreAccess
from daemon.service.styx_link import StyxLink

__all__ = ["Writes"]

log = logging.getLogger("clade.crossing")


class Writes:
    """Own entries and episodes written through the store's writer, announced, and gossiped."""

    def __init__(self, access: StoreAccess, embedding: Embedding, hub: EventHub, peering: Peering, styx: StyxLink,
                 *, identity: Identity, data: DataDir, counters: Counter[str], now_ms: Callable[[], int]) -> None:
        self.access = access
        self.embedding = embedding
        self.hub = hub
        self.peering = peering
        self.styx = styx
        self.identity = identity
        self.data = data
        self.counters = counters
        self.now_ms = now_ms

    def local_write(self) -> None:
        """Own ops were committed: let the p2p publisher gossip those that cross at once, and
        the Styx pusher push what the write enqueued."""
        self.peering.local_write()
        self.styx.wake()

    async def remember(self, new: NewEntry) -> Entry:
        """Write an own entry (a warning that repeats a recent one is held); publishes `entry_written`."""
        if checks_repeats(new):
            entry = await self._remember_checked(new)
        else:
            entry = await self.access.on_writer(lambda s: s.remember(new, identity=self.identity))
        self.hub.publish("entry_written", events.entry_written(entry))
        self.local_write()
        return entry

    async def _remember_checked(self, new: NewEntry) -> Entry:
        """Write a warning-kind entry, held if it repeats a recent one; publishes `warning_held`."""
        try:
            embedder = await self.embedding.model()
            vector = (await trio.to_thread.run_sync(lambda: embedder.embed([new.content])))[0]
        except Exception as exc:  # noqa: BLE001 - no model: the warning still crosses, unchecked
            log.warning("warning written without the repeat check (no embedding model: %s)", exc)
            self.counters["warning_novelty_unchecked"] += 1
            return await self.access.on_writer(lambda s: s.remember(new, identity=self.identity))
        retriever = self.embedding.retriever
        entry, similarity = await self.access.on_writer(lambda s: remember_warning(
            s, new, self.identity, vector=vector, info=embedder.info, now_ms=self.now_ms(),
            index=retriever.vector_index))
        self.counters["entries_embedded"] += 1  # its vector was written with it: the embedder never sees it
        if similarity is not None:
            self.counters["warnings_held"] += 1
            self.hub.publish("warning_held", {"id": entry.id, "similarity": round(similarity, 4)})
        return entry

    async def retract(self, entry_id: str, *, superseded_by: str | None = None) -> Entry:
        """Retract an own entry (an op that crosses to siblings). Raises `NotFound`, and
        `crdt.InvalidValue` if another golem wrote it."""
        entry = await self.access.on_writer(
            lambda s: s.retract(entry_id, identity=self.identity, superseded_by=superseded_by))
        self.hub.publish("entry_retracted", {"id": entry.id})
        self.local_write()
        return entry

    async def endorse(self, entry_id: str, *, confirm: bool) -> Entry:
        """Confirm or contradict a sibling's entry (an op that crosses). Raises `NotFound`, and
        `crdt.InvalidValue` for one's own entry."""
        entry = await self.access.on_writer(lambda s: s.endorse(entry_id, identity=self.identity, confirm=confirm))
        self.hub.publish("entry_endorsed", {"id": entry.id, "confirm": confirm})
        self.local_write()
        return entry

    async def outcome(self, entry_id: str, effect: str, *, metric: str, value: float | None,
                      episode_id: str | None, note: str | None, now_ms: int) -> Entry:
        """Record an outcome (the row stays home: soma); on an entry that may cross, this golem's
        evidence slot grows by one and crosses (belief.py). Raises `NotFound`, `crdt.InvalidValue`."""
        entry = await self.access.on_writer(lambda s: s.record_outcome(
            entry_id, effect, metric=metric, value=value, episode_id=episode_id, note=note, now_ms=now_ms,
            identity=self.identity))
        self.hub.publish("outcome_recorded", {"id": entry.id, "effect": effect, "metric": metric.strip(),
                                              "local_confidence": entry.local_confidence})
        self.local_write()
        return entry

    async def append_episode(self, episode: Episode) -> None:
        """Append an episode to the log (soma: it never crosses) on the writer thread; publishes `episode_written`."""
        await self.access.on_writer(lambda s: self.data.open_episodes().append([episode]))
        self.hub.publish("episode_written", {"id": episode.id})
