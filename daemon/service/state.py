"""The daemon's parts, wired in one place: what the services and the control API share.

`DaemonState` builds the parts below and hands each the others it needs (nothing else wires
them); it is the `ports.DaemonPort` the p2p node uses, and the one object the API routes take.
Each part owns its state:

    StoreAccess  the store behind one writer thread and a pool of readers   store_access.py
    EventHub     publish/subscribe for `GET /v1/events`, observers, counts   hub.py
    Peering      the running p2p node, the clade keys, revocations, peers    peering.py
    StyxLink     the Styx pusher, queries to Styx, the outbox's status       styx_link.py
    Embedding    the model, the backlog of entries waiting for a vector      embedding.py
    Writes       own entries and episodes, the repeat hold, the nudge after  writes.py
    Search       recall, the digest, citation feedback                      search.py
    Upkeep       the curator cycle, backups and their schedule               upkeep.py

Parts depend downward only (a part takes the parts above it in this list, never this module).
The methods here are the daemon's surface for the routes, the runtime and the p2p node: each
hands the call to the part that owns it; `status` alone reads them all.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import asdict
from typing import Any, TypeVar

import trio

from crypto import Identity, KeyRing, Membership
from daemon.config import Config
from daemon.datadir import DataDir
from daemon.embedding.shipped import VectorShipping
from daemon.grimoire import Episode, Grimoire, NewEntry
from daemon.grimoire.episode_recall import EpisodeHit, EpisodeQuery
from daemon.grimoire.records import Entry
from daemon.grimoire.vectors import authors_cleared, checks_pending, embedding_backlog
from daemon.native_memory import heap, resident
from daemon.p2p.ports import P2PControl
from daemon.service.backup_schedule import BackupSchedule
from daemon.service.clock import Clock
from daemon.service.death import death_status
from daemon.service.embedding import Embedding
from daemon.service.hub import Event, EventHub
from daemon.service.index import SharedIndex
from daemon.service.peering import Peering
from daemon.service.search import Search
from daemon.service.store_access import StoreAccess
from daemon.service.styx_link import StyxLink
from daemon.service.upkeep import Upkeep
from daemon.service.writes import Writes
from daemon.styx.pusher import Pusher

__all__ = ["DaemonState"]

T = TypeVar("T")


class DaemonState:
    """One running daemon: its data dir, config (replaced on reload), identity, store, and parts."""

    def __init__(self, *, data: DataDir, config: Config, identity: Identity, store: Grimoire,
                 clock: Clock | None = None) -> None:
        """`clock`: the daemon's one clock (default: one on the running trio loop's clock); every
        part reads the time through `now_ms`, the store's clock should be the same (`DataDir.open_store`)."""
        self.data = data
        self.config = config  # the runtime replaces it on reload; the parts read it through `settings`
        self.identity = identity
        self.store = store
        self.clock = clock or Clock.of_trio()
        self.now_ms = self.clock.now_ms
        self.counters: Counter[str] = Counter()

        def settings() -> Config:
            return self.config

        counters, now_ms = self.counters, self.now_ms
        self.access = StoreAccess(store, busy_timeout_ms=lambda: self.config.store.busy_timeout_ms, wall_ms=now_ms)
        self.access.open_readers()  # open files fixed from the start (closed in `close`)
        self.hub = EventHub(counters)
        self.peering = Peering(data, config=settings, counters=counters, publish=self.hub.publish)
        self.styx_link = StyxLink(self.access, config=settings, counters=counters, golem=identity.peer_id,
                                  playbook_path=data.playbook_path, now_ms=now_ms)
        self.embedding = Embedding(self.access, model_dir=data.root / "embedder", config=settings,
                                   counters=counters, publish=self.hub.publish, now_ms=now_ms)
        self.index = SharedIndex(self.access, counters)  # the vector index, kept current by the writer
        self.writes = Writes(self.access, self.embedding, self.index, self.hub, self.peering, self.styx_link,
                             identity=identity, data=data, counters=counters, now_ms=now_ms)
        self.search = Search(self.access, self.embedding, self.index, self.styx_link,
                             membership=self.peering.membership,
                             config=settings, now_ms=now_ms, episodes=data.open_episodes,
                             counters=counters)
        self.upkeep = Upkeep(self.access, self.embedding, self.index, self.styx_link, data=data, identity=identity,
                             config=settings, counters=counters, publish=self.hub.publish,
                             local_write=self.writes.local_write, now_ms=now_ms, prepare=self.writes.prepare)

    # -- what the runtime sets while the daemon runs ---------------------------------

    @property
    def p2p(self) -> P2PControl | None:
        """The running p2p node (set by the runtime while sync runs)."""
        return self.peering.p2p

    @p2p.setter
    def p2p(self, node: P2PControl | None) -> None:
        self.peering.p2p = node

    @property
    def keys(self) -> KeyRing | None:
        """The clade keys gossip uses (set by the p2p service, replaced by `reload_keys`)."""
        return self.peering.keys

    @keys.setter
    def keys(self, ring: KeyRing | None) -> None:
        self.peering.keys = ring

    @property
    def styx(self) -> Pusher | None:
        """The Styx outbox's drain (set by the runtime when [styx] is enabled)."""
        return self.styx_link.pusher

    @styx.setter
    def styx(self, pusher: Pusher | None) -> None:
        self.styx_link.pusher = pusher

    @property
    def observers(self) -> list[Callable[[str, dict[str, Any]], None]]:
        """Called with every published event, synchronously (daemon/metrics); must not raise."""
        return self.hub.observers

    @property
    def backup_schedule(self) -> BackupSchedule:
        return self.upkeep.backup_schedule

    @property
    def last_curator(self) -> dict[str, Any] | None:
        return self.upkeep.last_curator

    # -- the store (StoreAccess) and ports.DaemonPort ------------------------------------

    async def on_writer(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(store)` on the single writer thread (see `StoreAccess.on_writer`)."""
        return await self.access.on_writer(fn)

    async def on_writer_short(self, fn: Callable[[Grimoire], T]) -> T:
        """Run a short, non-durable `fn(store)` on this thread once the writer is free (see
        `StoreAccess.on_writer_short`)."""
        return await self.access.on_writer_short(fn)

    async def on_reader(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(reader)` on a reader thread, read-only (see `StoreAccess.on_reader`)."""
        return await self.access.on_reader(fn)

    def membership(self) -> Membership | None:
        """This golem's membership, read once and kept (`Peering.membership`)."""
        return self.peering.membership()

    async def entry_doc(self, entry: Entry | str) -> dict[str, Any]:
        """An entry's document with its pooled belief (belief.py) under the current `[trust]`
        policy; an id (or a unique prefix of one) is read first (`NotFound` if unknown,
        `UsageError` if the prefix is ambiguous)."""
        policy = self.config.trust.policy()
        now = self.now_ms()

        def read(r: Grimoire) -> dict[str, Any]:
            found = r.get(r.resolve_id(entry)) if isinstance(entry, str) else entry
            return r.with_beliefs([found], policy, now_ms=now)[0].to_json()

        return await self.access.on_reader(read)

    def ingesting(self) -> AbstractContextManager[None]:
        """Mark a catch-up round being joined (see `ports.DaemonPort.ingesting`)."""
        return self.embedding.ingesting()

    def vector_shipping(self) -> VectorShipping | None:
        """See `ports.DaemonPort.vector_shipping` (`Embedding.vector_shipping`)."""
        return self.embedding.vector_shipping()

    async def ingest_idle(self, *, at_most_s: float) -> None:
        """Return once no catch-up round is being joined, or after `at_most_s`."""
        await self.embedding.ingest_idle(at_most_s=at_most_s)

    def close_readers(self) -> None:
        """Close the read connections and the background embedder thread (at shutdown, once no read runs)."""
        self.access.close()
        self.embedding.close()

    # -- events (EventHub) ------------------------------------------------------------

    def publish(self, event: str, data: dict[str, Any]) -> None:
        self.hub.publish(event, data)

    def subscribe(self) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Event]]:
        return self.hub.subscribe()

    # -- writes (Writes) --------------------------------------------------------------

    async def remember(self, new: NewEntry) -> Entry:
        return await self.writes.remember(new)

    async def retract(self, entry_id: str, *, superseded_by: str | None = None) -> Entry:
        return await self.writes.retract(entry_id, superseded_by=superseded_by)

    async def endorse(self, entry_id: str, *, confirm: bool) -> Entry:
        return await self.writes.endorse(entry_id, confirm=confirm)

    async def outcome(self, entry_id: str, effect: str, *, metric: str, value: float | None,
                      episode_id: str | None, note: str | None) -> Entry:
        return await self.writes.outcome(entry_id, effect, metric=metric, value=value, episode_id=episode_id,
                                         note=note, now_ms=self.now_ms())

    def local_write(self) -> None:
        self.writes.local_write()

    async def append_episode(self, episode: Episode) -> Episode:
        return await self.writes.append_episode(episode)

    # -- search (Search, Embedding: recall and the digest are `search`'s own) -----------

    async def search_episodes(self, text: str, query: EpisodeQuery) -> list[EpisodeHit]:
        return await self.search.episodes(text, query)

    async def feedback(self, *, cited: list[str], injected: list[str], response: str | None) -> dict[str, Any]:
        return await self.search.feedback(cited=cited, injected=injected, response=response)

    def backlog_batch(self) -> int:
        return self.embedding.backlog_batch()

    async def embed_backlog(self, *, batch: int | None = None) -> int:
        return await self.embedding.embed_backlog(batch=batch)

    # -- Styx (StyxLink) --------------------------------------------------------------

    def styx_queried(self, *, sensitive: bool = False) -> bool:
        return self.styx_link.queried(sensitive=sensitive)

    def styx_status(self, store: Grimoire) -> dict[str, Any]:
        """`clade styx status`; run it on the writer: `await state.on_writer(state.styx_status)`."""
        return self.styx_link.status(store)

    async def styx_retry(self, key: str | None) -> int:
        """Put parked Styx items back in the queue (one by idempotency key, or all) and wake the pusher."""
        n = await self.styx_link.unpark(key)
        self.local_write()
        return n

    # -- the clade (Peering) ----------------------------------------------------------

    def peers(self) -> list[dict[str, Any]]:
        return self.peering.peers()

    def node(self) -> P2PControl:
        return self.peering.node()

    def connect_peer(self, addr: str) -> dict[str, Any]:
        return self.peering.connect_peer(addr)

    async def disconnect_peer(self, peer_id: str, *, hold_s: float) -> dict[str, Any]:
        return await self.peering.disconnect_peer(peer_id, hold_s=hold_s)

    async def sync_now(self, peer_id: str | None) -> dict[str, Any]:
        return await self.peering.sync_now(peer_id)

    def key_grace_ms(self) -> int:
        return self.peering.key_grace_ms()

    async def reload_keys(self) -> dict[str, Any]:
        return await self.peering.reload_keys()

    async def install_revocations(self, data: bytes) -> dict[str, Any]:
        return await self.peering.install_revocations(data)

    # -- upkeep (Upkeep) --------------------------------------------------------------

    async def backup(self, *, include_identity: bool) -> dict[str, Any]:
        return await self.upkeep.backup(include_identity=include_identity)

    async def curator_cycle(self) -> dict[str, Any]:
        return await self.upkeep.curator_cycle()

    # -- all of them ------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """`GET /v1/status`: a reading of every part."""
        counts = await self.on_reader(lambda r: r.counts())
        membership = self.peering.membership()
        return {
            "peer_id": self.identity.peer_id,
            "data_dir": str(self.data.root),
            "uptime_s": round(self.clock.uptime_s(), 3),
            "entries": counts.entries - counts.archived,
            "archived": counts.archived,
            "archived_for_capacity": counts.archived_for_capacity,
            "by_kind": counts.by_kind,
            "embedding_backlog": await self.on_reader(embedding_backlog),
            "vector_checks_pending": await self.on_reader(checks_pending),
            "vector_check_authors_cleared": 0 if (shipping := self.vector_shipping()) is None
            else await self.on_reader(functools.partial(authors_cleared, plan=shipping.plan)),
            "clade": None if membership is None else {"name": membership.clade_name, "id": membership.clade_id},
            "peers": len(self.peers()),
            "p2p": None if self.p2p is None else self.p2p.status(),
            "last_curator_cycle": self.last_curator,
            "styx": None if self.styx is None else await self.on_writer(self.styx_status),
            "vitality": await self.on_reader(lambda r: r.vitality().to_json()),
            "counters": dict(self.counters),
            "death": await trio.to_thread.run_sync(death_status, self.data),
            "trust": asdict(await self.on_reader(lambda r: r.trust_alerts())),
            "memory": {**resident().to_json(), **heap().to_json(), **self.embedding.host_memory(),
                       "model_loaded": self.embedding.loaded,
                       "model_error": self.embedding.model_error,
                       "drift": await self.embedding.drift_doc()},
        }
