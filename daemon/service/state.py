"""What the daemon's services and the control API share: the store (behind one writer
thread), the retriever, counters, and the event hub for server-sent events.

All store work goes through `db()`: a worker thread with a capacity of one, so SQLite sees
one writer and the trio loop never blocks on disk or on the embedding model.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import numpy as np
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from crdt import Kind
from crypto import CryptoError, Identity, KeyRing
from daemon.config import Config, check_multiaddr
from daemon.datadir import DataDir
from daemon.errors import DaemonError, NotFound, UsageError
from daemon.grimoire import Episode, Grimoire, NewEntry
from daemon.grimoire.curator.cycle import apply_llm, llm_clusters, run_cycle
from daemon.grimoire.digest import build_digest, digest_query
from daemon.grimoire.embedder import expected_info, get_embedder
from daemon.grimoire.models import MINILM
from daemon.grimoire.records import Entry, iso_ms
from daemon.grimoire.retrieval import (
    Hit,
    RecallQuery,
    Retriever,
    apply_feedback,
    cited_by_response,
    response_sentences,
)
from daemon.grimoire.store import wall_clock_ms
from daemon.grimoire.vectors import embedding_backlog, missing_vectors, stored_vectors, write_vectors
from daemon.grimoire.vitality import read_vitality
from daemon.p2p.ports import P2PControl
from daemon.service import events
from daemon.service.background import BackgroundThread
from daemon.service.backup import create_backup, default_recipients, report_json
from daemon.service.backup_schedule import BackupSchedule
from daemon.service.curation import (
    CYCLE_EMBED_LIMIT,
    capacity_event,
    llm_for,
    record_replays,
    render_playbook,
    replay_items,
    settings_for,
    vectors_for,
)
from daemon.service.death import death_status
from daemon.service.holds import checks_repeats, remember_checked
from daemon.styx import outbox as styx_outbox
from daemon.styx.fanin import for_digest
from daemon.styx.pusher import Pusher
from daemon.styx.vault import VaultPushError, push_backup
from daemon.styx.wire import QueryResult

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["BACKLOG_BATCH", "INLINE_EMBED_LIMIT", "DaemonState"]

# Read-your-writes: a search first embeds the newest entries still without a vector, outside
# the store's thread, at most this many: about half a second of model time after a burst
# (MiniLM ~15 ms per 200-character entry; the fused space ~117 ms: bench/bench_recall_options.py).
# The embedder service works through any older backlog in batches of BACKLOG_BATCH; entries
# beyond the tail are found by keyword until it has.
INLINE_EMBED_LIMIT = {MINILM: 32}
INLINE_EMBED_LIMIT_OTHER = 8
BACKLOG_BATCH = {MINILM: 32}  # MiniLM, 32-token entries: ~7 ms each in a batch of 16, ~10 ms one by one (1 thread)
BACKLOG_BATCH_OTHER = 8  # the fused space: a batch stays under a second of model time

log = logging.getLogger("clade.state")
T = TypeVar("T")
Event = tuple[str, dict[str, Any]]
READERS = 3  # read connections; 2 cores: more only queue


@dataclass
class DaemonState:
    data: DataDir
    config: Config
    identity: Identity
    store: Grimoire
    started_monotonic: float = field(default_factory=time.monotonic)
    backup_schedule: BackupSchedule = field(default_factory=BackupSchedule)  # run by the runtime's backup service
    counters: Counter[str] = field(default_factory=Counter)
    last_curator: dict[str, Any] | None = None
    _limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(1))
    # Reads (search, digest, status, listings) on their own connections: they never wait for
    # the writer (WAL), and up to READERS run side by side.
    _read_limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(READERS))
    _readers: queue.SimpleQueue[Grimoire] = field(default_factory=queue.SimpleQueue)
    _all_readers: list[Grimoire] = field(default_factory=list)
    _subscribers: set[MemoryObjectSendStream[Event]] = field(default_factory=set)
    _retriever: Retriever | None = None
    # One query tail embedding at a time (concurrent queries would embed the same entries);
    # the backlog has its own lock and runs on a low-priority thread, so a query never waits
    # for it. The two may embed the same few newest entries once: the vectors are identical.
    _embedding: anyio.Lock = field(default_factory=anyio.Lock)
    _backlog_lock: anyio.Lock = field(default_factory=anyio.Lock)
    _background: BackgroundThread = field(default_factory=lambda: BackgroundThread("embed-backlog"))
    # Catch-up rounds being joined (`ingesting`): the backlog embedder waits for them, a while.
    _ingesting: int = 0
    _ingest_idle: anyio.Event | None = None  # set when the last round is joined; None while none is
    p2p: P2PControl | None = None  # the running p2p node (set by the runtime while sync runs)
    keys: KeyRing | None = None  # the clade keys gossip uses (set by the p2p service, replaced by reload_keys)
    styx: Pusher | None = None  # the Styx outbox's drain (set by the runtime when [styx] is enabled)
    _playbook_queued: str | None = None  # the PLAYBOOK.md text last queued for Styx's vault layer
    # Called with every published event, synchronously (daemon/metrics: histograms); must not raise.
    observers: list[Callable[[str, dict[str, Any]], None]] = field(default_factory=list)

    @staticmethod
    def now_ms() -> int:
        """Wall-clock milliseconds since the Unix epoch (the one clock: `grimoire.wall_clock_ms`)."""
        return wall_clock_ms()

    @contextmanager
    def ingesting(self) -> Iterator[None]:
        """Mark a catch-up round being joined (see `ports.Daemon.ingesting`)."""
        if self._ingest_idle is None:
            self._ingest_idle = anyio.Event()
        self._ingesting += 1
        try:
            yield
        finally:
            self._ingesting -= 1
            if not self._ingesting:
                self._ingest_idle.set()
                self._ingest_idle = None

    async def ingest_idle(self, *, at_most_s: float) -> None:
        """Return once no catch-up round is being joined, or after `at_most_s`."""
        idle = self._ingest_idle
        if idle is not None:
            with anyio.move_on_after(at_most_s):
                await idle.wait()

    async def db(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(store)` in the writer thread."""
        return await anyio.to_thread.run_sync(fn, self.store, limiter=self._limiter)

    async def read(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(reader)` on a read-only connection (a worker thread; never behind the writer).
        `fn` must not write: the connection refuses it."""
        def run() -> T:
            try:
                reader = self._readers.get_nowait()
            except queue.Empty:
                reader = Grimoire.open_reader(self.store.path, busy_timeout_ms=self.config.store.busy_timeout_ms)
                self._all_readers.append(reader)
            try:
                return fn(reader)
            finally:
                self._readers.put(reader)

        return await anyio.to_thread.run_sync(run, limiter=self._read_limiter)

    def close_readers(self) -> None:
        """Close the read connections and the background embedder thread (at shutdown, once no
        read runs)."""
        for reader in self._all_readers:
            reader.close()
        self._all_readers.clear()
        self._background.close()

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            model = self.config.embedding.model
            self._retriever = Retriever(self.store, lambda: get_embedder(self.data.root / "embedder", model))
            self._retriever.trust = self.config.trust.policy()
        return self._retriever

    # -- events ----------------------------------------------------------------------

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to every subscriber; a subscriber that lags is dropped from this one."""
        self.counters[f"event_{event}"] += 1
        for observe in self.observers:
            observe(event, data)
        for send in list(self._subscribers):
            try:
                send.send_nowait((event, data))
            except anyio.WouldBlock:
                self.counters["events_dropped"] += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(send)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        send, receive = anyio.create_memory_object_stream[Event](256)
        self._subscribers.add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()

    # -- operations used by the API and the services -----------------------------------

    async def remember(self, new: NewEntry) -> Entry:
        if checks_repeats(new):  # a warning repeating a recent one is held (daemon/service/holds.py)
            entry = await remember_checked(self, new)
        else:
            entry = await self.db(lambda s: s.remember(new, identity=self.identity))
        self.publish("entry_written", events.entry_written(entry))
        self.local_write()
        return entry

    async def retract(self, entry_id: str, *, superseded_by: str | None = None) -> Entry:
        """Retract an own entry (an op that crosses to siblings). Raises `NotFound`, and
        `crdt.InvalidValue` if another golem wrote it."""
        entry = await self.db(lambda s: s.retract(entry_id, identity=self.identity, superseded_by=superseded_by))
        self.publish("entry_retracted", {"id": entry.id})
        self.local_write()
        return entry

    async def endorse(self, entry_id: str, *, confirm: bool) -> Entry:
        """Confirm or contradict a sibling's entry (an op that crosses). Raises `NotFound`, and
        `crdt.InvalidValue` for one's own entry."""
        entry = await self.db(lambda s: s.endorse(entry_id, identity=self.identity, confirm=confirm))
        self.publish("entry_endorsed", {"id": entry.id, "confirm": confirm})
        self.local_write()
        return entry

    def local_write(self) -> None:
        """Own ops were committed: let the p2p publisher gossip those that cross at once, and
        the Styx pusher push what the write enqueued."""
        if self.p2p is not None:
            self.p2p.local_write()
        if self.styx is not None:
            self.styx.wake()

    async def append_episode(self, episode: Episode) -> None:
        await self.db(lambda s: self.data.open_episodes().append([episode]))
        self.publish("episode_written", {"id": episode.id})

    async def _embed_pending(self, *, limit: int, newest_first: bool) -> int:
        """Embed up to `limit` entries lacking a vector; the model runs *outside* the store's
        writer thread, so requests and the watchdog never wait for it. Returns how many.

        The query tail (`newest_first`) takes entries with no vector at all (an indexed
        lookup); the backlog also re-embeds vectors of another model after a model change."""
        others = not newest_first
        info = expected_info(self.config.embedding.model)
        if info is not None and not await self.read(lambda r: missing_vectors(r, info, limit=1, other_models=others)):
            return 0  # nothing to embed: do not load the model (300 MB) for nothing, nor wait for the writer
        # A query waits for its tail: normal priority. The backlog can wait: the low-priority thread.
        lock, run = ((self._embedding, anyio.to_thread.run_sync) if newest_first
                     else (self._backlog_lock, self._background.run))
        async with lock:
            # Loading the model (~1 s of CPU, once) is work that can wait too, on the backlog's path.
            embedder = await (anyio.to_thread.run_sync if newest_first else self._background.run)(
                lambda: self.retriever.embedder)
            todo = await self.read(lambda r: missing_vectors(r, embedder.info, limit=limit, newest_first=newest_first,
                                                             other_models=others))
            if not todo:
                return 0
            vectors = await run(lambda: embedder.embed([content for _, content in todo]))
            await self.db(lambda s: write_vectors(s, embedder.info, [i for i, _ in todo], vectors))
        self.counters["entries_embedded"] += len(todo)
        return len(todo)

    def _inline_limit(self) -> int:
        return INLINE_EMBED_LIMIT.get(self.config.embedding.model, INLINE_EMBED_LIMIT_OTHER)

    async def _query_vector(self, text: str) -> NDArray[np.float32]:
        """Read-your-writes, then the query's embedding: both off the store's thread."""
        await self._embed_pending(limit=self._inline_limit(), newest_first=True)
        embedder = await anyio.to_thread.run_sync(lambda: self.retriever.embedder)
        vectors: NDArray[np.float32] = await anyio.to_thread.run_sync(lambda: embedder.embed([text]))
        first: NDArray[np.float32] = vectors[0]
        return first

    async def _prepared(self, query: RecallQuery) -> tuple[NDArray[np.float32], list[tuple[str, float]]]:
        """The query's vector (after the read-your-writes tail) and its keyword candidates,
        computed side by side: the model on worker threads, FTS5 on the store's thread."""
        if not query.text.strip():
            raise UsageError("query must not be empty")
        found: dict[str, Any] = {}

        async def vector() -> None:
            found["vector"] = await self._query_vector(query.text)

        async def keyword() -> None:
            try:
                found["keyword"] = await self.read(lambda r: self.retriever.keyword_candidates(query, store=r))
            except UsageError:  # no letters or digits to match ("!!!"): the meaning alone answers
                found["keyword"] = []

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(vector)
            tasks.start_soon(keyword)
        return found["vector"], found["keyword"]

    async def recall(self, text: str, *, k: int, kinds: tuple[Kind, ...] = (),
                     min_importance: float | None = None, pad: tuple[float, float, float] | None = None,
                     include_unverified: bool = False) -> list[Hit]:
        query = RecallQuery(text=text, k=k, kinds=kinds, min_importance=min_importance, pad=pad,
                            include_unverified=include_unverified)
        vector, keyword = await self._prepared(query)
        return await self.read(lambda r: self.retriever.recall(query, embed_limit=0, query_vector=vector,
                                                               keyword=keyword, store=r))

    async def ask_styx(self, text: str, *, k: int) -> tuple[list[QueryResult], str | None]:
        """Styx's answer to a search or digest (within the deadline and the monthly budget), or ([], why)."""
        assert self.styx is not None
        cfg = self.config.styx
        results, error = await self.styx.ask(text, k=k, layers=tuple(cfg.query_layers),
                                             deadline_s=cfg.query_deadline_ms / 1000)
        if error:
            self.counters["styx_query_failed"] += 1
        return results, error

    def styx_queried(self) -> bool:
        return self.styx is not None and self.config.styx.query_enabled

    async def digest(self, text: str, *, budget_tokens: int, k: int, fmt: str,
                     include_sensitive: bool, pad: tuple[float, float, float] | None = None) -> dict[str, Any]:
        """The digest; with Styx on, its answer (asked in parallel, within the deadline) fills
        at most `[styx.injection] max_tokens` after the local entries."""
        joined = self.data.load_membership()
        namespace = joined[0].clade_name if joined else "local"
        remote: dict[str, Any] = {}

        async def ask() -> None:
            remote["results"], remote["error"] = await self.ask_styx(text, k=k)

        async with anyio.create_task_group() as group:
            if self.styx_queried():
                group.start_soon(ask)
            vector, keyword = await self._prepared(digest_query(text, k=k, include_sensitive=include_sensitive,
                                                                pad=pad))
        pins = self.config.digest
        injection = self.config.styx.injection
        external = for_digest(remote.get("results", []), min_confidence=injection.min_confidence)
        doc = await self.read(lambda r: build_digest(
            self.retriever, text=text, now_ms=self.now_ms(), budget_tokens=budget_tokens, k=k, fmt=fmt,
            include_sensitive=include_sensitive, namespace=namespace, embed_limit=0, query_vector=vector,
            keyword=keyword, pinned_tags=pins.pinned_tags, pinned_fact_keys=pins.pinned_fact_keys,
            external=external, external_tokens=injection.max_tokens, store=r, pad=pad))
        if remote.get("error"):
            doc["styx_error"] = remote["error"]
        return doc

    async def feedback(self, *, cited: list[str], injected: list[str], response: str | None) -> dict[str, Any]:
        """Citation feedback from the golem's last LLM call. Without citations, `response` (the
        model's text) counts as cited each injected entry within cosine 0.8 of one of its sentences."""
        matched: list[str] = []
        if response is not None and not cited and injected:
            sentences = response_sentences(response)
            await self._embed_pending(limit=self._inline_limit(), newest_first=True)
            embedder = await anyio.to_thread.run_sync(lambda: self.retriever.embedder)
            vectors = await self.db(lambda s: stored_vectors(s, embedder.info, injected))
            said = await anyio.to_thread.run_sync(lambda: embedder.embed(sentences))
            matched = cited_by_response(vectors, said)
            cited = matched
        weights = await self.db(lambda s: apply_feedback(s, cited=cited, injected=injected, now_ms=self.now_ms()))
        return {"weights": weights, "cited": sorted(set(cited)), "matched_by_response": matched}

    def backlog_batch(self) -> int:
        """How many entries the embedder service takes at a time for the configured model."""
        return BACKLOG_BATCH.get(self.config.embedding.model, BACKLOG_BATCH_OTHER)

    async def embed_backlog(self, *, batch: int | None = None) -> int:
        """Embed up to `batch` (default `backlog_batch()`) of the oldest entries lacking a vector;
        returns how many."""
        return await self._embed_pending(limit=batch or self.backlog_batch(), newest_first=False)

    async def status(self) -> dict[str, Any]:
        counts = await self.read(lambda r: r.counts())
        joined = self.data.load_membership()
        return {
            "peer_id": self.identity.peer_id,
            "data_dir": str(self.data.root),
            "uptime_s": round(time.monotonic() - self.started_monotonic, 3),
            "entries": counts.entries - counts.archived,
            "archived": counts.archived,
            "archived_for_capacity": counts.archived_for_capacity,
            "by_kind": counts.by_kind,
            "embedding_backlog": await self.read(embedding_backlog),
            "clade": None if joined is None else {"name": joined[0].clade_name, "id": joined[0].clade_id},
            "peers": len(self.peers()),
            "p2p": None if self.p2p is None else self.p2p.status(),
            "last_curator_cycle": self.last_curator,
            "styx": None if self.styx is None else await self.db(self.styx_status),
            "vitality": await self.read(lambda r: read_vitality(r.connection).to_json()),
            "counters": dict(self.counters),
            "death": await anyio.to_thread.run_sync(death_status, self.data),
        }

    async def styx_retry(self, key: str | None) -> int:
        """Put parked Styx items back in the queue (one by idempotency key, or all) and wake the pusher."""

        def unpark(store: Grimoire) -> int:
            with store.transaction() as conn:
                return styx_outbox.unpark(conn, key)

        n = await self.db(unpark)
        self.local_write()
        return n

    def styx_status(self, store: Grimoire) -> dict[str, Any]:
        """`clade styx status` (on the store's thread): outbox depth and age, parked items, the pusher's counters."""
        assert self.styx is not None
        st = self.styx.stats
        doc = styx_outbox.stored_status(store.connection, now_ms=self.now_ms(),
                                        outbox_warn=self.config.styx.outbox_warn)
        last_at = None if st.last_success_ms is None else iso_ms(st.last_success_ms)
        doc.update({"last_success_ms": st.last_success_ms, "last_success_at": last_at, "failures": st.failures,
                    "delivered": st.delivered, "last_error": st.last_error, "url": self.styx.url,
                    "paused_by_budget": self.styx.paused_by_budget})
        return doc

    def peers(self) -> list[dict[str, Any]]:
        """Every peer the p2p service knows (empty while sync is off)."""
        return [] if self.p2p is None else self.p2p.peers()

    def node(self) -> P2PControl:
        """The running p2p node; raises `UsageError` while sync is off."""
        if self.p2p is None:
            raise UsageError("sync is off: this golem has not joined a clade, or p2p.enabled is false")
        return self.p2p

    def connect_peer(self, addr: str) -> dict[str, Any]:
        try:
            check_multiaddr(addr, peer=True)
            peer_id = self.node().add_bootstrap(addr)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return {"peer_id": peer_id, "dialing": addr}

    async def disconnect_peer(self, peer_id: str, *, hold_s: float) -> dict[str, Any]:
        node = self.node()
        if not any(p["peer_id"] == peer_id for p in node.peers()):
            raise NotFound(f"no known peer {peer_id!r} (see `clade peers`)")
        await node.disconnect(peer_id, hold_s=hold_s)
        return {"peer_id": peer_id, "held_s": hold_s}

    async def sync_now(self, peer_id: str | None) -> dict[str, Any]:
        """Run anti-entropy now with one sibling or every connected one; returns what each brought."""
        node = self.node()
        siblings = node.siblings()
        targets = [peer_id] if peer_id else siblings
        results = []
        for target in targets:
            if target not in siblings:
                raise UsageError(f"{target} is not a connected sibling (see `clade peers`)")
            results.append(await node.sync_with(target) or {"peer_id": target, "error": "sync failed; see the log"})
        return {"synced": results}

    def key_grace_ms(self) -> int:
        """How long gossip sealed with a superseded clade key is still accepted (`p2p.key_grace_s`)."""
        return int(self.config.p2p.key_grace_s * 1000)

    async def reload_keys(self) -> dict[str, Any]:
        """Re-read the clade keys from the data dir (after `clade join` of a rotation bundle, or
        `clade keys --drop-before`): gossip is sealed with the newest epoch from now on.

        Raises `UsageError` before joining, for an unreadable keyring or one of another clade
        than the running one (switching clades needs a restart)."""
        try:
            joined = await anyio.to_thread.run_sync(self.data.load_keys)
        except CryptoError as exc:
            raise UsageError(f"clade keys not reloaded: {exc}") from None
        if joined is None:
            raise UsageError("this golem has not joined a clade (clade join BUNDLE)")
        ring = joined[1]
        previous = self.keys
        if previous is not None and previous.clade_id != ring.clade_id:
            raise UsageError(f"the data dir now names clade {ring.clade_id}, the daemon runs {previous.clade_id}: "
                             "restart it to switch clades")
        self.keys = ring
        changed = previous is None or previous.epochs != ring.epochs
        doc = {"epoch": ring.current.epoch, "epochs": ring.epochs,
               "previous_epoch": None if previous is None else previous.current.epoch, "changed": changed}
        if changed:
            self.counters["keys_reloaded"] += 1
            log.warning("clade keys reloaded: sealing with epoch %d (held: %s)", ring.current.epoch,
                        ", ".join(map(str, ring.epochs)))
        self.publish("keys_reloaded", doc)
        return doc

    async def install_revocations(self, data: bytes) -> dict[str, Any]:
        """Adopt an owner-signed revocation list (newer than ours): persisted, revoked peers dropped."""
        revocations = self.data.check_revocations(data)
        if self.p2p is not None:
            adopted = await self.p2p.adopt_revocations(revocations)
        else:
            adopted = await anyio.to_thread.run_sync(self.data.install_revocations, revocations)
        return {"version": revocations.version, "revoked": sorted(revocations.revoked), "adopted": adopted}

    async def backup(self, *, include_identity: bool) -> dict[str, Any]:
        clade_keys, publics, names = default_recipients(self.data)
        if not clade_keys:
            raise UsageError("this golem has not joined a clade: use `clade backup --recipient …` from the CLI")
        report = await anyio.to_thread.run_sync(lambda: create_backup(
            self.data, clade_keys=clade_keys, x25519_recipients=publics, recipient_names=names,
            golem=self.identity.peer_id, include_identity=include_identity, keep=self.config.backup.keep))
        doc = report_json(report)
        self.publish("backup_written", doc)
        styx = self.config.styx
        if self.styx is not None and styx.vault_enabled:
            try:
                pushed = await anyio.to_thread.run_sync(lambda: push_backup(
                    Path(str(doc["path"])), url=self.styx.url if self.styx else "", token=styx.bearer(),
                    peer=self.identity.peer_id, timeout_s=max(60.0, styx.timeout_s)))
                doc["styx"] = pushed
                self.publish("backup_pushed", pushed)
            except (VaultPushError, DaemonError) as exc:
                doc["styx_error"] = str(exc)
                self.counters["styx_vault_failed"] += 1
                log.warning("styx: %s", exc)
        return doc

    def _queue_playbook(self, store: Grimoire, now_ms: int) -> bool:
        """With Styx's vault layer on, queue the PLAYBOOK.md just written if it changed since the last one."""
        if self.styx is None or not self.config.styx.vault_enabled:
            return False
        text = self.data.playbook_path.read_text(encoding="utf-8")
        if text == self._playbook_queued:
            return False
        with store.transaction() as conn:
            styx_outbox.enqueue_playbook(conn, golem=self.identity.peer_id, text=text, now_ms=now_ms,
                                         created_at=iso_ms(now_ms))
        self._playbook_queued = text
        return True

    async def embed_for_cycle(self) -> int:
        """Embed entries lacking a vector (up to `CYCLE_EMBED_LIMIT`), the model off the store's thread."""
        done = 0
        while done < CYCLE_EMBED_LIMIT and (n := await self._embed_pending(limit=256, newest_first=True)):
            done += n
        return done

    async def curator_cycle(self) -> dict[str, Any]:
        """One curator cycle (daemon/grimoire/curator/cycle.py): validate, decay, prune, compress,
        consolidate episodes, promote; the optional LLM pass (its call off the store's thread);
        then PLAYBOOK.md (the previous version kept), the WAL checkpoint and the episode index.
        The report is returned, published as `curator_cycle_complete` and logged."""
        started = time.monotonic()
        config = self.config.curator
        settings = settings_for(config, self.config.trust.policy())
        now = self.now_ms()
        try:  # the model loads off the store's thread; no model means exact duplicates only
            await anyio.to_thread.run_sync(lambda: self.retriever.embedder)
            await self.embed_for_cycle()  # compression and admission compare every entry's vector
            vectors = await self.db(lambda s: vectors_for(s, self.retriever))
        except Exception as exc:  # noqa: BLE001 - a broken model must not stop forgetting
            log.warning("curator: no vectors this cycle (%s)", exc)
            vectors = {}
        try:
            episodes = await anyio.to_thread.run_sync(
                lambda: replay_items(self.data.open_episodes(), now_ms=now, settings=settings))
        except Exception as exc:  # noqa: BLE001 - the episode log is optional for a cycle
            log.warning("curator: episodes not replayed this cycle (%s)", exc)
            episodes = []
        report = await self.db(lambda s: run_cycle(s, identity=self.identity, now_ms=now, settings=settings,
                                                   vectors=vectors, episodes=episodes))
        if report.replayed:
            try:
                await self.db(lambda s: record_replays(self.data.open_episodes(), report))
            except Exception as exc:  # noqa: BLE001 - a replay count lost must not stop the cycle
                log.warning("curator: replay counts not recorded this cycle (%s)", exc)
        try:
            llm = llm_for(config)
        except DaemonError as exc:
            log.warning("curator: %s; running the deterministic path alone", exc)
            llm = None
        if llm is not None:
            asked = await self.db(lambda s: llm_clusters(s, self.identity, vectors, since_ms=report.since_ms,
                                                         settings=settings))
            if asked.groups:
                outcome = await anyio.to_thread.run_sync(lambda: llm(asked.clusters))
                await self.db(lambda s: apply_llm(s, self.identity, asked, outcome, now_ms=now, report=report))
        if report.promoted or report.entries_merged or report.entries_superseded or report.llm_decisions \
                or report.episodes_consolidated:
            self.local_write()

        def finish(store: Grimoire) -> bool:
            render_playbook(store, self.data.playbook_path, now_ms=now, keep=config.playbook_keep)
            queued = self._queue_playbook(store, now)
            store.checkpoint()
            return queued

        if await self.db(finish):
            self.local_write()
        # The episode ANN index (built past 100k rows, re-merged as rows arrive) takes tens of
        # seconds: build it here, in the background, never on a request and never on the writer thread.
        try:
            await anyio.to_thread.run_sync(lambda: self.data.open_episodes().ensure_index())
        except Exception as exc:  # noqa: BLE001 - an index build failure must not stop the cycle
            log.warning("curator: episode index maintenance failed: %s", exc)
        report.duration_ms = round((time.monotonic() - started) * 1000)
        self.last_curator = {**report.to_json(), "entries_embedded": self.counters["entries_embedded"],
                             "at_ms": self.now_ms(), "seconds": round(time.monotonic() - started, 3)}
        log.info("curator cycle: %s", " ".join(f"{k}={v}" for k, v in report.to_json().items() if v))
        self.publish("curator_cycle_complete", self.last_curator)
        if report.entries_archived_capacity:  # the operator must hear of it (event, log, status count)
            counts = await self.read(lambda r: r.counts())
            self.publish("entries_archived_capacity", capacity_event(report, capacity=settings.capacity,
                                                                     live=counts.entries - counts.archived))
        return self.last_curator
