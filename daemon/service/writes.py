"""The daemon's own writes that cross: remember, retract, endorse; episodes; the nudge after each.

Every new own entry — one (`remember`) or a batch (`write`: flush, lessons, a working-memory
close) — passes the one write door (daemon/grimoire/write_door.py): what needs the repeat check
(public warnings and anti_knowledge) is embedded off the store's thread *before* the write, so a
hold is committed with the entry and the publisher never sees it unheld. Without a model (not
ready, cannot load) such an entry is written unchecked and the miss is counted
(`warning_novelty_unchecked`). After each commit `announce` publishes what was written and
held, and `local_write` nudges the p2p publisher (gossip at once) and the Styx pusher.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

import trio

from crypto import Identity
from daemon.datadir import DataDir
from daemon.embedding.embedder import ModelIntegrityError
from daemon.grimoire import Entry, Episode, Grimoire, NewEntry
from daemon.grimoire.repeat_hold import own_recent_near
from daemon.grimoire.write_door import Prepared, Written, needs_vector, prepare, write_entries
from daemon.service import events
from daemon.service.embedding import Embedding
from daemon.service.hub import EventHub
from daemon.service.index import SharedIndex
from daemon.service.peering import Peering
from daemon.service.store_access import StoreAccess
from daemon.service.styx_link import StyxLink

__all__ = ["Writes"]

log = logging.getLogger("clade.crossing")


class Writes:
    """Own entries and episodes written through the store's writer, announced, and gossiped."""

    def __init__(self, access: StoreAccess, embedding: Embedding, index: SharedIndex, hub: EventHub, peering: Peering,
                 styx: StyxLink, *, identity: Identity, data: DataDir, counters: Counter[str],
                 now_ms: Callable[[], int]) -> None:
        self.access = access
        self.embedding = embedding
        self.index = index
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

    async def prepare(self, news: Sequence[NewEntry]) -> Prepared:
        """The vectors the write door needs, computed off the store's thread (none needed: no model asked)."""
        wanted = [n.content for n in news if needs_vector(n)]
        if not wanted:
            return Prepared.unembedded(news)
        try:
            embedder = await self.embedding.model()
            matrix = await trio.to_thread.run_sync(lambda: embedder.embed(wanted))
        except Exception as exc:  # noqa: BLE001 - no model: the warning still crosses, unchecked
            log.warning("warning written without the repeat check (no embedding model: %s)", exc)
            return Prepared.unembedded(news)
        await self.index.loaded(embedder.info)
        # The index's current snapshot at the write, on the writer (every commit before it included),
        # read for this golem's own warnings of the window only.
        return replace(prepare(news, lambda _texts: matrix, embedder.info),
                       near=own_recent_near(self.index.current, self.identity.peer_id, self.now_ms))

    async def write(self, news: Sequence[NewEntry], op: Callable[[Grimoire, Prepared], Written]) -> Written:
        """Prepare `news`, run `op` (which writes them through the door) on the writer, announce, nudge."""
        prepared = await self.prepare(news)
        done = await self.access.on_writer(lambda s: op(s, prepared))
        self.announce(done)
        return done

    def announce(self, done: Written) -> None:
        """After a commit: `entry_written` for each entry created, `warning_held` for each held, the
        counters, and the nudge (only when something was created)."""
        if done.unchecked:
            self.counters["warning_novelty_unchecked"] += done.unchecked
        if done.embedded:  # their vectors were written with them: the embedder never sees them
            self.counters["entries_embedded"] += done.embedded
        for entry_id, similarity in done.held.items():
            self.counters["warnings_held"] += 1
            self.hub.publish("warning_held", {"id": entry_id, "similarity": round(similarity, 4)})
        for entry in done.created:
            self.hub.publish("entry_written", events.entry_written(entry))
        if done.created:
            self.local_write()

    async def remember(self, new: NewEntry) -> Entry:
        """Write one own entry through the door (a warning that repeats a recent one is held)."""
        done = await self.write([new], lambda s, p: write_entries(s, self.identity, p, now_ms=self.now_ms()))
        return done.created[0]

    async def retract(self, entry_id: str, *, superseded_by: str | None = None) -> Entry:
        """Retract an own entry (an op that crosses to siblings); either id may be a unique
        prefix (`Grimoire.resolve_id`). Raises `NotFound`, `UsageError` for an ambiguous or too
        short prefix, and `crdt.InvalidValue` if another golem wrote it."""
        entry = await self.access.on_writer(lambda s: s.retract(
            s.resolve_id(entry_id), identity=self.identity,
            superseded_by=None if superseded_by is None else s.resolve_id(superseded_by)))
        self.hub.publish("entry_retracted", {"id": entry.id})
        self.local_write()
        return entry

    async def endorse(self, entry_id: str, *, confirm: bool) -> Entry:
        """Confirm or contradict a sibling's entry (an op that crosses); `entry_id` may be a
        unique prefix. Raises `NotFound`, `UsageError` for an ambiguous or too short prefix, and
        `crdt.InvalidValue` for one's own entry."""
        entry = await self.access.on_writer(
            lambda s: s.endorse(s.resolve_id(entry_id), identity=self.identity, confirm=confirm))
        self.hub.publish("entry_endorsed", {"id": entry.id, "confirm": confirm})
        self.local_write()
        return entry

    async def outcome(self, entry_id: str, effect: str, *, metric: str, value: float | None,
                      episode_id: str | None, note: str | None, now_ms: int) -> Entry:
        """Record an outcome (the row stays home: soma); on an entry that may cross, this golem's
        evidence slot grows by one and crosses (belief.py). `entry_id` may be a unique prefix.
        Raises `NotFound`, `UsageError` (an ambiguous or too short prefix), `crdt.InvalidValue`."""
        entry = await self.access.on_writer(lambda s: s.record_outcome(
            s.resolve_id(entry_id), effect, metric=metric, value=value, episode_id=episode_id, note=note, now_ms=now_ms,
            identity=self.identity))
        self.hub.publish("outcome_recorded", {"id": entry.id, "effect": effect, "metric": metric.strip(),
                                              "local_confidence": entry.local_confidence})
        self.local_write()
        return entry

    async def append_episode(self, episode: Episode) -> Episode:
        """Embed an episode's summary (the episodes' model, off the loop: episode search finds it
        by meaning), append it to the log (soma: it never crosses) on the writer thread, publish
        `episode_written`; returns it as stored. If the model cannot load it is kept without a
        vector (counted `episodes_unembedded`): only semantic episode search misses it."""
        if episode.embedding is None:
            try:
                vector = (await self.embedding.episode_vectors([episode.summary]))[0]
                episode = replace(episode, embedding=tuple(float(x) for x in vector))
            except ModelIntegrityError as exc:
                self.counters["episodes_unembedded"] += 1
                log.warning("episode %s stored without an embedding: %s", episode.id, exc)
        stored = episode
        await self.access.on_writer(lambda s: self.data.open_episodes().append([stored]))
        self.hub.publish("episode_written", {"id": episode.id})
        return episode

