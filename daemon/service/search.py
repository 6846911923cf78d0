"""Search, digest and citation feedback: the read side of the Grimoire as the API serves it.

A search's two kinds of evidence are computed side by side, each on its own thread: the
query's vector (after the read-your-writes tail, embedding.py) then its nearest entries (the
vector top-k, on a reader), and its keyword candidates with its stems' weights (FTS5 and the
index's vocabulary, on another reader). The ranking then runs on a reader. On 2 cores the two
halves take about as long as each other at 50,000 entries (the model and the top-k ~15-20 ms,
FTS5 ~10-20 ms: bench/RESULTS.md), so neither waits long for the other. With Styx's queries
on, a digest also asks Styx in parallel, within the deadline.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import trio

from crdt import Category, Kind
from crypto import Membership
from daemon.config import Config
from daemon.embedding.embedder import ModelIntegrityError
from daemon.errors import StoreError, UsageError
from daemon.grimoire.digest import build_digest, digest_query
from daemon.grimoire.episode_recall import EpisodeHit, EpisodeQuery, recall_episodes
from daemon.grimoire.episodes import EpisodeLog
from daemon.grimoire.retrieval import (
    Hit,
    Keywords,
    RecallQuery,
    apply_feedback,
    cited_by_response,
    response_sentences,
)
from daemon.grimoire.vectors import stored_vectors
from daemon.service.embedding import Embedding
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


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What a search ranks from (`Retriever.recall`'s `query_vector`, `nearest`, `keyword`);
    without a model, `vector` is None and `query` is keyword-only."""

    query: RecallQuery
    vector: NDArray[np.float32] | None
    nearest: list[tuple[str, float]] | None
    keyword: Keywords

    @property
    def degraded(self) -> str | None:
        return KEYWORD_ONLY if self.vector is None else None


class Search:
    """Recall (`POST /v1/search`), the digest (`POST /v1/digest`) and feedback on what was cited."""

    def __init__(self, access: StoreAccess, embedding: Embedding, styx: StyxLink, *,
                 membership: Callable[[], Membership | None], config: Callable[[], Config],
                 now_ms: Callable[[], int], episodes: Callable[[], EpisodeLog] | None = None,
                 counters: Counter[str] | None = None) -> None:
        self.access = access
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.open_episodes = episodes  # this golem's episode log (soma), for episode search
        self.embedding = embedding
        self.styx = styx
        self.membership = membership  # read once and kept (Peering.membership): never a file read per digest
        self.config = config
        self.now_ms = now_ms

    async def _prepared(self, query: RecallQuery) -> _Evidence:
        """The query's vector (after the read-your-writes tail) and its nearest entries, and its
        keyword evidence, computed side by side: the model on a worker thread then the vector
        top-k on a reader, FTS5 on another reader. When the model is not loaded within
        `MODEL_WAIT_S` or cannot load, the evidence is the keywords' alone (`degraded`), counted
        as `searches_keyword_only`: a missing model never fails a search."""
        if not query.text.strip():
            raise UsageError("query must not be empty")
        found: dict[str, Any] = {"vector": None, "nearest": None}
        retriever = self.embedding.retriever

        async def vector() -> None:
            if await self.embedding.model_within() is None:
                return
            try:
                vec = await self.embedding.query_vector(query.text)
            except ModelIntegrityError:  # unloaded and failed to load again meanwhile
                return
            found["nearest"] = await self.access.on_reader(lambda r: retriever.nearest(query, vec, store=r))
            found["vector"] = vec

        async def keyword() -> None:
            found["keyword"] = await self.access.on_reader(lambda r: retriever.keywords(query, store=r))

        async with trio.open_nursery() as tasks:
            tasks.start_soon(vector)
            tasks.start_soon(keyword)
        if found["vector"] is None:
            self.embedding.counters["searches_keyword_only"] += 1
            return _Evidence(replace(query, keyword_only=True), None, None, found["keyword"])
        return _Evidence(query, found["vector"], found["nearest"], found["keyword"])

    async def recall(self, text: str, *, k: int, kinds: tuple[Kind, ...] = (),
                     categories: tuple[Category, ...] = (),
                     min_importance: float | None = None, pad: tuple[float, float, float] | None = None,
                     include_unverified: bool = False, since_ms: int | None = None,
                     until_ms: int | None = None) -> tuple[list[Hit], str | None]:
        """The `k` best live entries for `text` (meaning and keywords fused) of `kinds` and
        `categories` (empty: any), and how the answer is degraded (`KEYWORD_ONLY` without a model,
        else None); `UsageError` if empty. Quarantined entries (daemon/grimoire/trust.py) only
        with `include_unverified`; `since_ms` / `until_ms` bound each entry's time (event time,
        else written time)."""
        query = RecallQuery(text=text, k=k, kinds=kinds, categories=categories, min_importance=min_importance,
                            pad=pad, include_unverified=include_unverified, since_ms=since_ms, until_ms=until_ms)
        got = await self._prepared(query)
        retriever = self.embedding.retriever
        hits = await self.access.on_reader(lambda r: retriever.recall(
            got.query, embed_limit=0, query_vector=got.vector, nearest=got.nearest, keyword=got.keyword, store=r))
        return hits, got.degraded

    async def digest(self, text: str, *, budget_tokens: int, k: int, fmt: str,
                     include_sensitive: bool, pad: tuple[float, float, float] | None = None,
                     since_ms: int | None = None, until_ms: int | None = None) -> dict[str, Any]:
        """The digest; with Styx on, its answer (asked in parallel, within the deadline) fills
        at most `[styx.injection] max_tokens` after the local entries. `since_ms` / `until_ms`
        bound the entries' time (event time, else written time) and the episodes' observed time;
        with them, Styx is not asked (its answers carry no time to bound)."""
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
                episodic.extend(await self.episodes(text, EpisodeQuery(k=pins.episode_k, pad=pad, since_ms=since_ms,
                                                                       until_ms=until_ms)))
            except (ModelIntegrityError, StoreError) as exc:  # the section is extra: the entries still answer
                self.counters["digest_episodes_failed"] += 1
                log.warning("digest without its episodic section: %s", exc)

        async with trio.open_nursery() as group:
            if self.styx.queried(sensitive=include_sensitive) and since_ms is None and until_ms is None:
                group.start_soon(ask)
            if pins.episode_tokens > 0 and self.open_episodes is not None:
                group.start_soon(find_episodes)
            got = await self._prepared(digest_query(text, k=k, include_sensitive=include_sensitive, pad=pad))
        injection = config.styx.injection
        external = for_digest(remote.get("results", []), min_confidence=injection.min_confidence)
        retriever = self.embedding.retriever
        doc = await self.access.on_reader(lambda r: build_digest(
            retriever, text=text, now_ms=self.now_ms(), budget_tokens=budget_tokens, k=k, fmt=fmt,
            include_sensitive=include_sensitive, namespace=namespace, embed_limit=0, query_vector=got.vector,
            nearest=got.nearest, keyword=got.keyword, pinned_tags=pins.pinned_tags,
            pinned_fact_keys=pins.pinned_fact_keys, external=external, external_tokens=injection.max_tokens,
            store=r, pad=pad, kind_caps=pins.kind_caps, keyword_only=got.vector is None, since_ms=since_ms,
            until_ms=until_ms, episodes=episodic, episode_tokens=pins.episode_tokens))
        if got.degraded is not None:
            doc["degraded"] = got.degraded
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
