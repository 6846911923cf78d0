"""Search, digest and citation feedback: the read side of the Grimoire as the API serves it.

Every search and digest takes the one recall path (grimoire/recall.py): its two halves of
candidates are found side by side — the query's vector (after the read-your-writes tail,
embedding.py) then its nearest entries in the current index snapshot (service/index.py) on a
worker thread, and its keyword candidates with its stems' weights (FTS5) on a reader — then the
filters, the ranking and the entries are read on one snapshot of one reader. On 2 cores the two
halves take about as long as each other at 50,000 entries (bench/RESULTS.md), so neither waits
long for the other. With Styx's queries on, a digest also asks Styx in parallel, within the deadline.

Routes hand a `RecallQuery` straight here (contract/requests.py builds it); nothing relays its
fields.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import trio

from crypto import Membership
from daemon.config import Config
from daemon.embedding.embedder import ModelIntegrityError
from daemon.errors import StoreError, UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.digest import compose_digest, digest_query
from daemon.grimoire.episode_recall import EpisodeHit, EpisodeQuery, recall_episodes
from daemon.grimoire.episodes import EpisodeLog
from daemon.grimoire.recall import Halves, Hit, Recall, RecallPolicy, RecallQuery, keywords, vector_half
from daemon.grimoire.retrieval import apply_feedback, cited_by_response, response_sentences
from daemon.grimoire.vectors import stored_vectors
from daemon.service.embedding import Embedding
from daemon.service.index import SharedIndex
from daemon.service.store_access import StoreAccess
from daemon.service.styx_link import StyxLink
from daemon.styx.fanin import for_digest

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["KEYWORD_ONLY", "Search"]


# `degraded` of a search or digest answered from keywords alone: the model is still loading
# (`embedding.MODEL_WAIT_S`) or cannot load. Counted as `searches_keyword_only`.
KEYWORD_ONLY = "keyword_only"

log = logging.getLogger("clade.search")


class Search:
    """Recall (`POST /v1/memory/search`), the digest (`POST /v1/digest`), episode search and
    feedback on what was cited. Owns the daemon's `Recall`, built from the running config."""

    def __init__(self, access: StoreAccess, embedding: Embedding, index: SharedIndex, styx: StyxLink, *,
                 membership: Callable[[], Membership | None], config: Callable[[], Config],
                 now_ms: Callable[[], int], episodes: Callable[[], EpisodeLog] | None = None,
                 counters: Counter[str] | None = None) -> None:
        self.access = access
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.open_episodes = episodes  # this golem's episode log (soma), for episode search
        self.embedding = embedding
        self.index = index
        self.styx = styx
        self.membership = membership  # read once and kept (Peering.membership): never a file read per digest
        self.config = config
        self.now_ms = now_ms
        self.recall_path = Recall(self.policy, index.current)

    def policy(self) -> RecallPolicy:
        """Ranking's policy from the running config (a SIGHUP that changes `[trust]` reaches the next search)."""
        return RecallPolicy(trust=self.config().trust.policy())

    async def _halves(self, query: RecallQuery) -> Halves:
        """The query's two halves of candidates, side by side: the model on a worker thread then
        the nearest entries in the index snapshot (`vector_half`), and FTS5 on a reader. When the
        model is not loaded within `MODEL_WAIT_S` or cannot load, the vector half is empty and the
        recall keyword-only, counted as `searches_keyword_only`: a missing model never fails a search."""
        if not query.text.strip():
            raise UsageError("query must not be empty")
        found: dict[str, Any] = {"vector": (None, None, [])}

        async def vector() -> None:
            if query.keyword_only or await self.embedding.model_within() is None:
                return
            try:
                vec = await self.embedding.query_vector(query.text)
                snapshot = await self.index.loaded((await self.embedding.model()).info)
            except ModelIntegrityError:  # unloaded and failed to load again meanwhile
                return
            found["vector"] = await trio.to_thread.run_sync(lambda: vector_half(query, snapshot, vec))

        async def keyword() -> None:
            found["keyword"] = await self.access.on_reader(lambda r: keywords(query, r))

        async with trio.open_nursery() as tasks:
            tasks.start_soon(vector)
            tasks.start_soon(keyword)
        vec, snapshot, nearest = found["vector"]
        if vec is None and not query.keyword_only:
            self.counters["searches_keyword_only"] += 1
        return Halves(vec, snapshot, nearest, found["keyword"])

    async def recall(self, query: RecallQuery) -> tuple[list[Hit], str | None]:
        """The `query.k` best live entries for `query` (meaning and keywords fused; its filters
        applied before the cut), and how the answer is degraded (`KEYWORD_ONLY` without a model,
        else None); `UsageError` if empty."""
        halves = await self._halves(query)
        now = self.now_ms()
        hits = await self.access.on_reader(lambda r: self.recall_path.ranked(query, r, halves, now_ms=now))
        return hits, _degraded(query, halves.vector)

    async def digest(self, query: RecallQuery, *, budget_tokens: int, fmt: str) -> dict[str, Any]:
        """The digest of `query.k` entries (`query`: text, k, include_sensitive, pad, time bounds;
        the recall behind it is `digest_query`'s, wider). With Styx on, its answer (asked in
        parallel, within the deadline) fills at most `[styx.injection] max_tokens` after the
        local entries. The time bounds bound the entries' time (event time, else written time)
        and the episodes' observed time; with them, Styx is not asked (its answers carry no time)."""
        text, k = query.text, query.k
        membership = self.membership()
        namespace = membership.clade_name if membership is not None else "local"
        remote: dict[str, Any] = {}

        async def ask() -> None:
            remote["results"], remote["error"] = await self.styx.ask(text, k=k)

        config = self.config()
        pins = config.digest
        episodic: list[EpisodeHit] = []

        async def find_episodes() -> None:
            try:
                episodic.extend(await self.episodes(text, EpisodeQuery(k=pins.episode_k, pad=query.pad,
                                                                       since_ms=query.since_ms,
                                                                       until_ms=query.until_ms)))
            except (ModelIntegrityError, StoreError) as exc:  # the section is extra: the entries still answer
                self.counters["digest_episodes_failed"] += 1
                log.warning("digest without its episodic section: %s", exc)

        wide = digest_query(text, k=k, include_sensitive=query.include_sensitive, pad=query.pad,
                            keyword_only=query.keyword_only, since_ms=query.since_ms, until_ms=query.until_ms)
        bounded = query.since_ms is not None or query.until_ms is not None
        async with trio.open_nursery() as group:
            if self.styx.queried(sensitive=query.include_sensitive) and not bounded:
                group.start_soon(ask)
            if pins.episode_tokens > 0 and self.open_episodes is not None:
                group.start_soon(find_episodes)
            halves = await self._halves(wide)
        injection = config.styx.injection
        external = for_digest(remote.get("results", []), min_confidence=injection.min_confidence)
        policy, now = self.policy(), self.now_ms()

        def compose(reader: Grimoire) -> dict[str, Any]:
            with reader.read_snapshot():
                hits = self.recall_path.ranked(wide, reader, halves, now_ms=now)
                return compose_digest(
                    hits, reader, policy.trust, now_ms=now, budget_tokens=budget_tokens, k=k, fmt=fmt,
                    include_sensitive=query.include_sensitive, namespace=namespace, pinned_tags=pins.pinned_tags,
                    pinned_fact_keys=pins.pinned_fact_keys, external=external, external_tokens=injection.max_tokens,
                    kind_caps=pins.kind_caps, episodes=episodic, episode_tokens=pins.episode_tokens)

        doc = await self.access.on_reader(compose)
        degraded = _degraded(wide, halves.vector)
        if degraded is not None:
            doc["degraded"] = degraded
        if remote.get("error"):
            doc["styx_error"] = remote["error"]
        return doc

    async def episodes(self, text: str, query: EpisodeQuery) -> list[EpisodeHit]:
        """This golem's own episodes most like `text` (episode_recall.py), best first; `UsageError`
        if `text` is blank. Episodes are soma: this reads the local log only — never a sibling's
        (they are never replicated) and never Styx."""
        if not text.strip():
            raise UsageError("query must not be empty")
        if self.open_episodes is None:
            return []
        opener = self.open_episodes
        vector = (await self.embedding.episode_vectors([text]))[0]
        now = self.now_ms()
        # A LanceDB read: its own snapshot, safe beside the writer; on a reader thread like recall.
        return await self.access.on_reader(lambda r: recall_episodes(opener(), [float(x) for x in vector], query,
                                                                     now_ms=now))

    async def feedback(self, *, cited: list[str], injected: list[str], response: str | None) -> dict[str, Any]:
        """Citation feedback from the golem's last LLM call. Without citations, `response` (the
        model's text) counts as cited each injected entry within cosine 0.8 of one of its sentences."""
        matched: list[str] = []
        if response is not None and not cited and injected:
            sentences = response_sentences(response)
            await self.embedding.embed_pending(limit=self.embedding.inline_limit(), newest_first=True)
            embedder = await self.embedding.model()
            vectors = await self.access.on_writer(lambda s: stored_vectors(s, embedder.info, injected))
            said = await trio.to_thread.run_sync(lambda: embedder.embed(sentences))
            matched = cited_by_response(vectors, said)
            cited = matched
        weights = await self.access.on_writer(
            lambda s: apply_feedback(s, cited=cited, injected=injected, now_ms=self.now_ms()))
        return {"weights": weights, "cited": sorted(set(cited)), "matched_by_response": matched}


def _degraded(query: RecallQuery, vector: NDArray[np.float32] | None) -> str | None:
    """`KEYWORD_ONLY` when a recall by meaning had to answer from keywords (no model)."""
    return KEYWORD_ONLY if vector is None and not query.keyword_only else None
