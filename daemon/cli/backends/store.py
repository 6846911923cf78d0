"""`StoreBackend`: the CLI's operations directly on the data dir's store (no daemon runs, or
`CLADE_NO_DAEMON` is set).

Each method opens the store for its one operation and closes it. Recall and digest ask Styx
directly when `[styx]` enables queries (the daemon would have asked it); the curator cycle
embeds what the last vectors missed first, as the daemon's curator does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from crdt import Kind
from daemon.agent import memory as am
from daemon.agent.memory import Lesson
from daemon.cli.backends.base import Backend, Doc
from daemon.client import daemon_is_live
from daemon.config import Config, StyxConfig
from daemon.contract.requests import FlushIn
from daemon.datadir import DataDir
from daemon.embedding.embedder import Embedder, get_embedder
from daemon.errors import DaemonError
from daemon.grimoire import EpisodeLog, Grimoire, NewEntry, wall_clock_ms
from daemon.grimoire.curator.cycle import run_cycle
from daemon.grimoire.digest import build_digest
from daemon.grimoire.fields import EntryFields
from daemon.grimoire.recall import RecallPolicy, RecallQuery
from daemon.grimoire.retrieval import Retriever, apply_feedback, cited_by_response, response_sentences
from daemon.grimoire.vectors import stored_vectors
from daemon.grimoire.vitality import Vitality
from daemon.grimoire.write_door import Prepared, needs_vector, prepare, write_entries
from daemon.service.curation import CYCLE_EMBED_LIMIT, record_replays, replay_items, settings_for, vectors_for
from daemon.service.embedding import INLINE_EMBED_LIMIT, INLINE_EMBED_LIMIT_OTHER
from daemon.styx import ledger
from daemon.styx.fanin import ask_direct, for_digest, merge, styx_doc
from daemon.styx.wire import QueryResult

__all__ = ["StoreBackend"]


class StoreBackend(Backend):
    """The operations on `data`'s store, opened per call (with the identity for signed writes)."""

    def __init__(self, data: DataDir) -> None:
        self.data = data

    def _embedder(self) -> Callable[[], Embedder]:
        model = self.data.load_config().embedding.space
        return lambda: get_embedder(self.data.root / "embedder", model)

    def _styx(self, *, sensitive: bool = False) -> StyxConfig | None:
        """The [styx] config when a command without a daemon should ask Styx too: queries enabled,
        and never for a request that includes sensitive entries."""
        styx = self.data.load_config().styx
        return styx if styx.enabled and styx.query_enabled and styx.url and not sensitive else None

    def _namespace(self) -> str:
        joined = self.data.load_membership()
        return joined[0].clade_name if joined else "local"

    # -- entries ---------------------------------------------------------------------------------

    def _prepare(self, news: Sequence[NewEntry]) -> Prepared:
        """The write door's vectors (daemon/grimoire/write_door.py), from the bundled model when a
        new entry needs one; a model that cannot load leaves them unchecked, said on stderr."""
        if not any(needs_vector(n) for n in news):
            return Prepared.unembedded(news)
        try:
            embedder = self._embedder()()
            return prepare(news, embedder.embed, embedder.info)
        except Exception as exc:  # noqa: BLE001 - no model: written unchecked, as the daemon does
            print(f"clade: warning: written without the repeat check (no embedding model: {exc})", file=sys.stderr)
            return Prepared.unembedded(news)

    def remember(self, doc: Doc) -> Doc:
        new = EntryFields.checked(doc).new_entry()
        identity = self.data.load_identity()
        prepared = self._prepare([new])
        with self.data.open_store(identity=identity) as store:
            entry = write_entries(store, identity, prepared, now_ms=wall_clock_ms()).created[0]
        return {"id": entry.id, "entry": entry.to_json()}

    def retract(self, entry_id: str, *, superseded_by: str | None) -> Doc:
        identity = self.data.load_identity()
        with self.data.open_store(identity=identity) as store:
            return store.retract(entry_id, identity=identity, superseded_by=superseded_by).to_json()

    def endorse(self, entry_id: str, *, confirm: bool) -> Doc:
        identity = self.data.load_identity()
        with self.data.open_store(identity=identity) as store:
            return store.endorse(entry_id, identity=identity, confirm=confirm).to_json()

    def entry(self, entry_id: str) -> Doc:
        policy = self.data.load_config().trust.policy()
        with self.data.open_store() as store:
            found = store.get(store.resolve_id(entry_id))
            return store.with_beliefs([found], policy, now_ms=wall_clock_ms())[0].to_json()

    def entries(self, *, kinds: Sequence[str], limit: int, archived: bool) -> Doc:
        with self.data.open_store() as store:
            found = store.list_entries(kinds=[Kind(k) for k in kinds], limit=limit, include_archived=archived)
        return {"entries": [e.to_json() for e in found]}

    def forget(self, entry_id: str) -> Doc:
        with self.data.open_store() as store:
            changed = store.forget(entry_id)
        return {"id": entry_id, "archived": True, "changed": changed}

    def unarchive(self, entry_id: str) -> Doc:
        with self.data.open_store() as store:
            changed = store.unarchive(entry_id)
        return {"id": entry_id, "archived": False, "changed": changed}

    def outcome(self, entry_id: str, *, effect: str, metric: str, value: float | None, episode: str | None,
                note: str | None) -> Doc:
        identity = self.data.load_identity()
        policy = self.data.load_config().trust.policy()
        with self.data.open_store(identity=identity) as store:
            now = wall_clock_ms()
            entry = store.record_outcome(entry_id, effect, metric=metric, value=value, episode_id=episode, note=note,
                                         now_ms=now, identity=identity)
            return store.with_beliefs([entry], policy, now_ms=now)[0].to_json()

    def vitality(self) -> Doc:
        with self.data.open_store() as store:
            return store.vitality().to_json()

    def set_vitality(self, phase: str | None, hayflick: float | None, *, economic: float | None = None,
                     epistemic: float | None = None, age_factor: float | None = None) -> Doc:
        checked = Vitality.checked(phase, hayflick, economic=economic, epistemic=epistemic, age_factor=age_factor)
        with self.data.open_store() as store:
            return store.set_vitality(checked, now_ms=wall_clock_ms()).to_json()

    # -- memory ----------------------------------------------------------------------------------

    def _retriever(self, store: Grimoire, config: Config) -> tuple[Retriever, int]:
        """The one recall path (grimoire/recall.py) over `store`, under `[trust]` as the daemon ranks,
        and how many of the newest entries without a vector to embed first (read-your-writes, as
        the daemon's search does): none while a daemon owns the data dir, since a CLI never writes a
        vector under a running daemon (with `CLADE_NO_DAEMON` set beside one it ranks what is there)."""
        space = config.embedding.space
        retriever = Retriever(store, lambda: get_embedder(self.data.root / "embedder", space),
                              policy=RecallPolicy(trust=config.trust.policy()))
        limit = 0 if daemon_is_live(self.data) else INLINE_EMBED_LIMIT.get(space, INLINE_EMBED_LIMIT_OTHER)
        return retriever, limit

    def recall(self, query: RecallQuery) -> Doc:
        """Every option applies; with Styx asked, `{…, styx, styx_error, merged}` besides the results."""
        styx = self._styx(sensitive=query.include_sensitive)
        since_bounded = query.since_ms is not None or query.until_ms is not None
        config = self.data.load_config()
        with self.data.open_store() as store:
            def local() -> list[dict[str, Any]]:
                retriever, limit = self._retriever(store, config)
                hits = retriever.recall(query, embed_limit=limit, now_ms=wall_clock_ms())
                return [{"score": round(h.score, 6), "via": h.via, "release": h.release,
                         "unverified": h.release == "unverified", **h.entry.to_json()} for h in hits]

            if styx is None or since_bounded:
                return {"query": query.text, "results": local()}
            results, remote, error = ask_direct(store, styx, query.text, local, k=query.k, now_ms=wall_clock_ms())
        return {"query": query.text, "results": results, "styx": [styx_doc(r) for r in remote], "styx_error": error,
                "merged": merge(results, remote, k=query.k)}

    def digest(self, query: RecallQuery, *, budget_tokens: int, fmt: str) -> Doc:
        styx = self._styx(sensitive=query.include_sensitive)
        config = self.data.load_config()
        injection, pins = config.styx.injection, config.digest
        with self.data.open_store() as store:
            remote: list[QueryResult] = []
            error = None
            if styx is not None and query.since_ms is None and query.until_ms is None:
                # asked first, within its deadline: the digest is composed from both
                _, remote, error = ask_direct(store, styx, query.text, lambda: None, k=query.k, now_ms=wall_clock_ms())
            retriever, limit = self._retriever(store, config)
            doc = build_digest(retriever, text=query.text, now_ms=wall_clock_ms(), budget_tokens=budget_tokens,
                               k=query.k, fmt=fmt, include_sensitive=query.include_sensitive,
                               namespace=self._namespace(), embed_limit=limit, pad=query.pad,
                               since_ms=query.since_ms, until_ms=query.until_ms, pinned_tags=pins.pinned_tags,
                               pinned_fact_keys=pins.pinned_fact_keys, kind_caps=pins.kind_caps,
                               external=for_digest(remote, min_confidence=injection.min_confidence),
                               external_tokens=injection.max_tokens)
        if error:
            doc["styx_error"] = error
        return doc

    def feedback(self, *, cited: Sequence[str], injected: Sequence[str], response: str | None) -> Doc:
        chosen, matched = list(cited), []
        with self.data.open_store() as store:
            if response is not None and not chosen and injected:
                retriever = Retriever(store, self._embedder())
                if not daemon_is_live(self.data):  # a CLI never writes a vector under a running daemon
                    retriever.index_missing()
                vectors = stored_vectors(store, retriever.embedder.info, list(injected))
                chosen = matched = cited_by_response(vectors, retriever.embedder.embed(response_sentences(response)))
            weights = apply_feedback(store, cited=chosen, injected=list(injected))
        return {"weights": weights, "cited": sorted(set(chosen)), "matched_by_response": matched}

    # -- agent memory ----------------------------------------------------------------------------

    def working_memory(self, session: str) -> Doc:
        with self.data.open_store() as store:
            return am.read_working_memory(store, session)

    def set_working_memory(self, session: str, content: str) -> Doc:
        with self.data.open_store() as store:
            return am.write_working_memory(store, session, content, now_ms=wall_clock_ms())

    def close_working_memory(self, session: str) -> Doc:
        identity = self.data.load_identity()
        with self.data.open_store(identity=identity) as store:
            marked = am.marked_news(store, session)
            batch = am.close_working_memory(store, identity, marked, self._prepare(marked.news), now_ms=wall_clock_ms())
        return {"session": session, "migrated": [e.id for e in batch.created], "existing": batch.existing}

    def flush(self, body: FlushIn) -> Doc:
        news = am.flush_news(body.session, body.facts)
        identity = self.data.load_identity()
        prepared = self._prepare(news)
        with self.data.open_store(identity=identity) as store:
            batch = am.flush_facts(store, identity, body.session, prepared, now_ms=wall_clock_ms())
        return {"session": body.session, "ids": batch.ids, "created": len(batch.created)}

    def import_lessons(self, name: str, lessons: Sequence[Lesson]) -> Doc:
        """A bad lesson's error names `name:LINE`."""
        def label(i: int) -> str:
            return f"{name}:{lessons[i].line}"
        news = am.lesson_news([lesson.memory for lesson in lessons], label=label)
        identity = self.data.load_identity()
        prepared = self._prepare(news)
        with self.data.open_store(identity=identity) as store:
            batch = am.import_lessons(store, identity, prepared, now_ms=wall_clock_ms(), label=label)
        return {"ids": batch.ids, "created": len(batch.created), "skipped": len(batch.ids) - len(batch.created)}

    # -- upkeep ----------------------------------------------------------------------------------

    def curator_run(self) -> Doc:
        """Episodes are replayed when the episode log opens (else a warning on stderr, and none)."""
        config = self.data.load_config()
        identity = self.data.load_identity()
        settings = settings_for(config.curator)
        now = wall_clock_ms()
        try:
            episodes: EpisodeLog | None = self.data.open_episodes()
        except DaemonError as exc:  # the episode log is optional for a cycle
            print(f"clade: warning: episodes not replayed ({exc})", file=sys.stderr)
            episodes = None
        replay = [] if episodes is None else replay_items(episodes, now_ms=now, settings=settings)
        with self.data.open_store(identity=identity) as store:
            # Entries written since their last vector (e.g. by `clade remember` without a daemon) are
            # embedded first: merging near-duplicates and the admission score compare vectors.
            model = config.embedding.space
            retriever = Retriever(store, lambda: get_embedder(self.data.root / "embedder", model))
            vectors = vectors_for(store, retriever, embed_missing=CYCLE_EMBED_LIMIT)
            report = run_cycle(store, identity=identity, now_ms=now, settings=settings, vectors=vectors,
                               episodes=replay)
        if episodes is not None:
            record_replays(episodes, report)
        return report.to_json()

    def verify_episode(self, episode_id: str) -> Doc:
        episode, changed = self.data.open_episodes().verify(episode_id)
        return {"id": episode.id, "changed": changed, "episode": episode.to_json()}

    def styx_status(self) -> Doc:
        """What waits in the store, without the pusher's counters (null)."""
        config = self.data.load_config().styx
        with self.data.open_store() as store:
            now = wall_clock_ms()
            doc = store.styx_stored_status(now_ms=now, month=ledger.month_of(now), outbox_warn=config.outbox_warn)
        cap = config.budget.monthly
        doc.update({"last_success_ms": None, "last_success_at": None, "failures": None, "delivered": None,
                    "last_error": None, "url": config.url or "(not configured)",
                    "paused_by_budget": cap is not None and doc["spend_month_usd"] >= cap, "budget_month_usd": cap})
        return doc

    def install_revocations(self, raw: bytes) -> Doc:
        new = self.data.check_revocations(raw)
        return {"version": new.version, "revoked": sorted(new.revoked), "adopted": self.data.install_revocations(new)}

    def reload_keys(self) -> Doc | None:
        """None: no daemon holds keys to reload."""
        return None
