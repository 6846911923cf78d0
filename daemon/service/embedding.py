"""Embedding in the daemon: the model and the entries waiting for a vector.

Two paths embed entries that lack a vector, both with the model *outside* the store's writer
thread, so requests and the watchdog never wait for it:

- the query tail (`newest_first`): before a search, the newest entries still without a vector,
  at most `inline_limit()` (read-your-writes), at normal priority;
- the backlog (`embed_backlog`): the embedder service works through older ones in batches of
  `backlog_batch()`, on a low-priority thread (background.py) — at normal priority once a
  batch has waited `BACKLOG_PATIENCE_S` there (a busy host starves it), until drained — and
  holds back while a catch-up round is being joined (`ingesting`).

One query tail embeds at a time (concurrent queries would embed the same entries); the backlog
has its own lock, so a query never waits for it. The two may embed the same few newest entries
once: the vectors are identical.

The model is loaded on first need (a search, a warning's repeat check, a backlog, the curator),
never at start, in its own process (`daemon.embedding.remote.ModelHost`: the daemon never imports
fastembed or ONNX Runtime), and unloaded after `[embedding] unload_after_s` unused by stopping
that process: it is most of the golem's memory (bench/bench_footprint.py). A process that dies
is started again by the next embedding (counted: `embedding_host_crashes`). A search that finds it not
loaded waits for it up to `MODEL_WAIT_S`, then answers from keywords (`model_within`); when it
cannot load at all (`model_error`), another load is tried after `MODEL_RETRY_S`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import trio

from daemon.config import Config
from daemon.embedding.catalogue import MINILM
from daemon.embedding.check_plan import CheckPlan
from daemon.embedding.drift import REFERENCE_DOCS, measure
from daemon.embedding.embedder import (
    EPISODE_MODEL,
    EmbeddingInfo,
    ModelIntegrityError,
    expected_info,
)
from daemon.embedding.remote import ModelHost, RemoteEmbedder
from daemon.embedding.shipped import CHECK_BATCH, CheckBatcher, VectorShipping, matches
from daemon.grimoire import wall_clock_ms
from daemon.grimoire.drift_store import (
    DriftState,
    space_key,
)
from daemon.grimoire.vectors import missing_vectors, settle_checks, shipped_to_check, write_vectors
from daemon.native_memory import resident
from daemon.service.background import BackgroundThread
from daemon.service.curation import CYCLE_EMBED_LIMIT
from daemon.service.query_vectors import QueryVectors
from daemon.service.store_access import StoreAccess

if TYPE_CHECKING:
    from numpy.typing import NDArray

log = logging.getLogger("clade.embedding")

__all__ = ["BACKLOG_BATCH", "BACKLOG_PATIENCE_S", "INLINE_EMBED_LIMIT", "MODEL_RETRY_S", "MODEL_WAIT_S", "Embedding"]

# A search waits this long for a model being loaded, then answers from keywords (the load goes
# on): loading MiniLM takes ~0.5-1 s on a quiet core, so a golem's first search is by meaning
# (the cold-start goal is 5 s from `clade run`); on a VM starved of CPU the load can take longer.
MODEL_WAIT_S = 5.0
# After a failed load (a corrupt or missing model file) searches answer from keywords at once;
# the load is tried again at most this often (it hashes the 23 MB model file first).
MODEL_RETRY_S = 60.0

# Read-your-writes: a search first embeds the newest entries still without a vector, outside
# the store's thread, at most this many: about half a second of model time after a burst
# (MiniLM ~15 ms per 200-character entry; the fused space ~117 ms: bench/bench_recall_options.py).
# The embedder service works through any older backlog in batches of BACKLOG_BATCH; entries
# beyond the tail are found by keyword until it has.
INLINE_EMBED_LIMIT = {MINILM: 32}
INLINE_EMBED_LIMIT_OTHER = 8
BACKLOG_BATCH = {MINILM: 32}  # MiniLM, 32-token entries: ~7 ms each in a batch of 16, ~10 ms one by one (1 thread)
BACKLOG_BATCH_OTHER = 8  # the fused space: a batch stays under a second of model time
# A backlog batch needs well under a second of CPU: one still running after this long means the
# low-priority thread is starved by a busy host, and the backlog runs at normal priority until
# it is drained (background.py; counted as `embed_backlog_starved`).
BACKLOG_PATIENCE_S = 10.0


class Embedding:
    """The embedding model of the configured space, and the work of giving entries vectors."""

    def __init__(self, access: StoreAccess, *, model_dir: Path, config: Callable[[], Config],
                 counters: Counter[str], publish: Callable[[str, dict[str, Any]], None] | None = None,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.access = access
        self.publish = publish or (lambda event, data: None)
        self.now_ms = now_ms or wall_clock_ms
        self._drift_checked_at: float | None = None  # trio.current_time() of the last drift check
        self.drift: DriftState | None = None  # the last check's verdict (this process's)
        self.model_dir = model_dir
        self.config = config
        self.counters = counters
        self._tail_lock = trio.Lock()
        self._queries = QueryVectors()  # recent queries' vectors (query_vectors.py)
        self._backlog_lock = trio.Lock()
        self._checks = CheckBatcher()  # when siblings' shipped vectors drawn for a check are re-embedded
        self._background = BackgroundThread("embed-backlog", patience_s=BACKLOG_PATIENCE_S)
        # Catch-up rounds being joined (`ingesting`): the backlog embedder waits for them, a while.
        self._ingesting = 0
        self._ingest_idle: trio.Event | None = None  # set when the last round is joined; None while none is
        # The model: loaded on first need (`model`, `model_within`) in the embedding process,
        # unloaded when unused (`unload_if_idle`: the process is stopped).
        self.host = ModelHost(model_dir, counters=counters)
        self._models: dict[str, RemoteEmbedder] = {}  # the spaces loaded since the process started
        self._loaded = False
        self._loading: trio.Event | None = None  # set when a background load (model_within) ends
        self._load_lock = trio.Lock()
        self._failed_at: float | None = None  # trio.current_time() of the last failed load
        self.model_error: str | None = None  # why the model cannot load (None: it can, or was not tried)
        self._last_used: float | None = None
        self._using = 0  # embeddings running now (the model is never unloaded under one)

    def _embedder(self) -> RemoteEmbedder:
        """The configured space's embedder; loads the model in the embedding process if it is not
        there (blocking: call that off the loop)."""
        space = self.config().embedding.space
        model = self._models.get(space)
        if model is None:
            model = self._models[space] = self.host.embedder(space)
        return model

    def _current(self) -> RemoteEmbedder | None:
        """The configured space's embedder if it is loaded (never blocks; a crashed process is
        started again by the next `embed`, not here)."""
        return self._models.get(self.config().embedding.space) if self._loaded else None

    async def space_info(self) -> EmbeddingInfo:
        """The configured vector space, known without the model for the bundled spaces (else the
        model loads: `ModelIntegrityError` if it cannot)."""
        return expected_info(self.config().embedding.space) or (await self.model()).info

    def host_rss_bytes(self) -> int:
        """The embedding process's resident memory (0: none runs)."""
        pid = self.host.pid
        return 0 if pid is None else resident(Path(f"/proc/{pid}/status")).rss_bytes

    def host_memory(self) -> dict[str, Any]:
        """The embedding process's id and resident MiB (`model_pid`, `model_rss_mib`; None when
        none runs), for the status."""
        rss = self.host_rss_bytes()
        return {"model_pid": self.host.pid, "model_rss_mib": round(rss / 2**20, 1) if rss else None}

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory now."""
        return self._loaded

    async def model(self) -> RemoteEmbedder:
        """The embedder, loaded (~1 s of CPU) on a worker thread if it is not yet; raises
        `ModelIntegrityError` when it cannot load (kept in `model_error`)."""
        return await self._load(trio.to_thread.run_sync)

    async def _load(self, run: Callable[[Callable[[], RemoteEmbedder]], Awaitable[RemoteEmbedder]]) -> RemoteEmbedder:
        """The embedder, loaded by `run` (a worker thread) if it is not; one load at a time, and
        none within `MODEL_RETRY_S` of a failed one (`ModelIntegrityError` with its reason)."""
        self._touch()
        if (ready := self._current()) is not None:
            return ready
        async with self._load_lock:
            if (ready := self._current()) is not None:
                return ready
            if self._failed_at is not None and trio.current_time() - self._failed_at < MODEL_RETRY_S:
                raise ModelIntegrityError(self.model_error or "the embedding model did not load")
            try:
                embedder = await run(lambda: self._embedder())
            except Exception as exc:
                self._failed_at = trio.current_time()
                self.model_error = str(exc)
                self.counters["embedding_model_failed_loads"] += 1
                raise
            self._loaded = True
            self._touch()  # a load of several seconds is use: the idle time starts now
            self.model_error = None
            self._failed_at = None
            self.counters["embedding_model_loads"] += 1
            await self.check_drift(embedder, run)  # every load: a model file changed since is caught here
            return embedder

    # -- drift (daemon/embedding/drift.py) ------------------------------------------------

    async def check_drift(self, embedder: RemoteEmbedder,
                          run: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None) -> DriftState | None:
        """Embed the reference documents and compare them with this space's baseline (taken now
        if there is none); record the verdict, say it (`embedding_drift` past healthy), and pause
        vector writes at critical. Never raises: a check that cannot run is logged and counted."""
        run = run or trio.to_thread.run_sync
        try:
            with self._use():
                vectors: NDArray[np.float32] = await run(lambda: embedder.embed(list(REFERENCE_DOCS)))
            now = self.now_ms()

            def verdict(baseline: NDArray[np.float32] | None) -> DriftState:
                if baseline is None:
                    return DriftState(space_key(embedder.info), "baseline", now, {})
                drift = measure(baseline, vectors)
                figures = {k: v for k, v in drift.to_json().items() if k != "verdict"}
                return DriftState(space_key(embedder.info), drift.verdict, now, figures)

            state = await self.access.on_writer(lambda store: store.record_drift(embedder.info, vectors, verdict))
        except Exception as exc:  # noqa: BLE001 - a check that fails must not take the model down
            log.warning("embedding drift check failed: %s; vector writes go on, the next load checks again", exc)
            self.counters["embedding_drift_check_failures"] += 1
            return None
        self._drift_checked_at = trio.current_time()
        self.drift = state
        self.counters["embedding_drift_checks"] += 1
        if state.verdict in ("warning", "critical"):
            self.counters[f"embedding_drift_{state.verdict}"] += 1
            self.publish("embedding_drift", state.to_json())
            say = log.error if state.paused else log.warning
            say("embedding drift %s: the reference documents moved %.4f on average (max %.4f) from their "
                "baseline%s", state.verdict, state.figures.get("mean_distance", 0.0),
                state.figures.get("max_distance", 0.0),
                "; vector writes are paused: restore the model files, or accept the model with "
                "`clade embeddings rebuild` (re-embeds every entry)" if state.paused else "")
        return state

    def vector_shipping(self) -> VectorShipping | None:
        """The space gossip ships and accepts vectors in (`[embedding] ship_vectors`), known
        without the model for the bundled spaces; None while off, for another space, or while
        vector writes are paused by a critical drift (this golem's model is not trusted)."""
        config = self.config().embedding
        info = expected_info(config.space) if config.ship_vectors else None
        if info is None or self.writes_paused:
            return None
        return VectorShipping(info, CheckPlan(screening=config.check_shipped, cleared=config.check_shipped_cleared,
                                              clearance=config.check_shipped_clearance))

    @property
    def writes_paused(self) -> bool:
        """Whether vector writes wait (the last drift check was critical)."""
        return self.drift is not None and self.drift.paused

    async def drift_doc(self) -> dict[str, Any] | None:
        """The last drift check (this process's, else the store's), for the status."""
        state = self.drift or await self.access.on_reader(lambda r: r.drift_state())
        return None if state is None else state.to_json()

    async def drift_due(self) -> None:
        """Check again when the model is loaded and the last check is `[embedding] drift_check_hours` old."""
        hours = self.config().embedding.drift_check_hours
        model = self._current()
        if model is not None and self._drift_checked_at is not None \
                and trio.current_time() - self._drift_checked_at >= hours * 3600:
            await self.check_drift(model, self._background.run)

    async def model_within(self, seconds: float = MODEL_WAIT_S) -> RemoteEmbedder | None:
        """The embedder if it is loaded or loads within `seconds`; None otherwise: still loading
        (the load goes on in the background, started here if it was not running), or it cannot
        load (`model_error`; tried again after `MODEL_RETRY_S`). Never raises for the model."""
        if (ready := self._current()) is not None:
            self._touch()
            return ready
        if self._failed_at is not None and trio.current_time() - self._failed_at < MODEL_RETRY_S:
            return None
        if self._loading is None:
            self._loading = trio.Event()
            trio.lowlevel.spawn_system_task(self._load_in_background, self._loading)
        with trio.move_on_after(seconds):
            await self._loading.wait()
        return self._current()

    async def _load_in_background(self, done: trio.Event) -> None:
        try:
            await self.model()
        except Exception:  # noqa: BLE001, S110 - recorded in model_error and counted by model()
            pass
        finally:
            self._loading = None
            done.set()

    def _touch(self) -> None:
        self._last_used = trio.current_time()

    @contextmanager
    def _use(self) -> Iterator[None]:
        """Mark an embedding running (the model is not unloaded under it) and the model used."""
        self._using += 1
        self._touch()
        try:
            yield
        finally:
            self._using -= 1
            self._touch()

    def unload_if_idle(self) -> bool:
        """Unload the model (stop the embedding process) if it has not been used for
        `[embedding] unload_after_s` (0: never) and nothing is embedding; True if it was. It
        loads again on the next need."""
        after = self.config().embedding.unload_after_s
        if (not (self._loaded or self.host.running) or after <= 0 or self._using or self._loading is not None
                or self._last_used is None or trio.current_time() - self._last_used < after):
            return False
        self._loaded = False
        self._models.clear()
        self.host.stop()
        self.counters["embedding_model_unloads"] += 1
        return True

    async def episode_vectors(self, texts: list[str]) -> NDArray[np.float32]:
        """`texts` in the episodes' space (`EPISODE_MODEL`, MiniLM: their LanceDB column is 384-d,
        whatever space the entries use), on a worker thread; raises `ModelIntegrityError` if the
        model cannot load. The process-wide embedder is shared with recall when that is MiniLM too."""
        episodes = expected_info(EPISODE_MODEL)
        if self.writes_paused and self.drift is not None and episodes is not None \
                and self.drift.space == space_key(episodes):
            raise ModelIntegrityError("vector writes are paused: the embedding model drifted (see `clade status`); "
                                      "restore the model files, or accept it with `clade embeddings rebuild`")
        host = self.host
        with self._use():  # the process is not stopped under it
            return await trio.to_thread.run_sync(lambda: host.embedder(EPISODE_MODEL).embed(texts))

    def close(self) -> None:
        """Stop the background embedder thread and the embedding process (at shutdown)."""
        self._background.close()
        self.host.stop()

    # -- catch-up rounds ---------------------------------------------------------------

    @contextmanager
    def ingesting(self) -> Iterator[None]:
        """Mark a catch-up round being joined (see `ports.DaemonPort.ingesting`)."""
        if self._ingest_idle is None:
            self._ingest_idle = trio.Event()
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
            with trio.move_on_after(at_most_s):
                await idle.wait()

    # -- entries without a vector ------------------------------------------------------

    async def embed_pending(self, *, limit: int, newest_first: bool) -> int:
        """Embed up to `limit` entries lacking a vector; the model runs *outside* the store's
        writer thread, so requests and the watchdog never wait for it. Returns how many.

        The query tail (`newest_first`) takes entries with no vector at all (an indexed
        lookup); the backlog also re-embeds vectors of another model after a model change."""
        others = not newest_first
        info = expected_info(self.config().embedding.space)
        if info is not None and not await self.access.on_reader(
                lambda r: missing_vectors(r, info, limit=1, other_models=others)):
            return 0  # nothing to embed: do not load the model (300 MB) for nothing, nor wait for the writer
        # A query waits for its tail: normal priority. The backlog can wait: the low-priority thread.
        lock, run = ((self._tail_lock, trio.to_thread.run_sync) if newest_first
                     else (self._backlog_lock, self._background.run))
        async with lock:
            # Loading the model (~1 s of CPU) is work that can wait too, on the backlog's path.
            embedder = await self._load(run)
            if self.writes_paused and await self.access.on_reader(lambda r: r.drift_state()) is None:
                await self.check_drift(embedder, run)  # accepted (`clade embeddings rebuild`): a new baseline
            if self.writes_paused:
                self.counters["embedding_writes_paused"] += 1
                return 0  # entries wait without a vector (keywords still find them) until the drift is resolved
            todo = await self.access.on_reader(lambda r: missing_vectors(
                r, embedder.info, limit=limit, newest_first=newest_first, other_models=others))
            if not todo:
                return 0
            starvations = self._background.starvations
            with self._use():
                vectors = await run(lambda: embedder.embed([content for _, content in todo]))
            await self.access.on_writer(lambda s: write_vectors(s, embedder.info, [i for i, _ in todo], vectors))
            if not newest_first:
                if self._background.starvations > starvations:
                    self.counters["embed_backlog_starved"] += 1
                if len(todo) < limit:
                    self._background.relax()  # drained: back to the low-priority thread
        self.counters["entries_embedded"] += len(todo)
        return len(todo)

    def inline_limit(self) -> int:
        """How many of the newest unembedded entries a search embeds first (read-your-writes)."""
        return INLINE_EMBED_LIMIT.get(self.config().embedding.space, INLINE_EMBED_LIMIT_OTHER)

    async def query_vector(self, text: str) -> NDArray[np.float32]:
        """Read-your-writes, then the query's embedding (read-only): both off the store's thread.
        In the bundled spaces (whose identity is known without the model) a recent query's
        vector is reused. The model loads, if it must, in the same worker call."""
        await self.embed_pending(limit=self.inline_limit(), newest_first=True)
        known = expected_info(self.config().embedding.space)  # without loading the model
        kept = None if known is None else self._queries.get(known, text)
        if kept is not None:
            return kept
        embedder = await self.model()
        with self._use():
            vector = await trio.to_thread.run_sync(lambda: embedder.embed([text])[0])
        return self._queries.put(embedder.info, text, vector)

    def backlog_batch(self) -> int:
        """How many entries the embedder service takes at a time for the configured model."""
        return BACKLOG_BATCH.get(self.config().embedding.space, BACKLOG_BATCH_OTHER)

    async def embed_backlog(self, *, batch: int | None = None) -> int:
        """Embed up to `batch` (default `backlog_batch()`) of the oldest entries lacking a vector;
        returns how many. With none to embed, the model is unloaded if it has been idle long
        enough (`unload_if_idle`)."""
        await self.drift_due()
        limit = batch or self.backlog_batch()
        done = await self.embed_pending(limit=limit, newest_first=False)
        if done < limit:
            done += await self.check_shipped(limit=limit - done)
        if not done:
            self.unload_if_idle()
        return done

    async def check_shipped(self, *, limit: int) -> int:
        """Check up to `limit` of the siblings' shipped vectors drawn for a check (shipped.py):
        re-embed their texts on the low-priority thread; one that matches is marked checked
        and lengthens its author's clean run (check_plan.py), one that does not takes this
        golem's own vector, sets the run back to 0 and makes its author suspect
        (`forged_vector`: counted, logged, published). Returns how many were checked."""
        shipping = self.vector_shipping()
        if shipping is None:
            return 0
        info = shipping.info
        todo = await self.access.on_reader(lambda r: shipped_to_check(r, info, limit=max(limit, CHECK_BATCH)))
        if not self._checks.due(len(todo), trio.current_time()):
            return 0  # a batch is filling: checked together, ~30 % cheaper each (shipped.CheckBatcher)
        todo = todo[:limit]
        async with self._backlog_lock:
            embedder = await self._load(self._background.run)
            if embedder.info != info:
                return 0
            with self._use():
                own = await self._background.run(lambda: embedder.embed([content for _, content, _, _ in todo]))
        matched: list[tuple[str, str]] = []
        forged: list[tuple[str, str, NDArray[np.float32]]] = []
        for (entry_id, _, author, vec), mine in zip(todo, own, strict=True):
            if matches(vec, mine):
                matched.append((entry_id, author))
            else:
                forged.append((entry_id, author, mine))
        now = self.now_ms()
        await self.access.on_writer(lambda s: settle_checks(s, info, matched, forged, now_ms=now))
        self.counters["shipped_vectors_checked"] += len(todo)
        self.counters["shipped_vector_check_batches"] += 1
        if forged:
            self.counters["shipped_vectors_forged"] += len(forged)
            for entry_id, author, _ in forged:
                log.warning("sibling %s shipped a vector that does not match its entry %s: replaced with this "
                            "golem's own, the author is suspect (see `clade peers trust`)", author, entry_id)
                self.publish("forged_vector", {"author": author, "entry_id": entry_id})
        return len(todo)

    async def embed_for_cycle(self) -> int:
        """Embed entries lacking a vector (up to `CYCLE_EMBED_LIMIT`), the model off the store's thread."""
        done = 0
        while done < CYCLE_EMBED_LIMIT and (n := await self.embed_pending(limit=256, newest_first=True)):
            done += n
        return done
