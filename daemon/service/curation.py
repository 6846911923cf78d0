"""The daemon's side of the curator: what a cycle reads besides the store, and what it writes after.

`cycle_inputs` gathers, off the store's thread where it can: the vectors of live entries (the
retriever's in-memory index, current model only), the replay pool of episodes (the verified
ones' fields; payloads only for the chosen) and the LLM pass when it is configured. After the
cycle, `record_replays` counts the replay in the episode log and `capacity_event` tells the
operator what the Grimoire's budget archived. `render_playbook`
writes PLAYBOOK.md from the active warnings, anti_knowledge and heuristics that may cross
(public, released from quarantine: `playbook_rules`) and keeps the previous version. The
cycle itself is `daemon.grimoire.curator.cycle.run_cycle`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crdt import Kind, Sensitivity
from daemon.config import CuratorConfig
from daemon.errors import ConfigError
from daemon.grimoire import EpisodeLog, Grimoire
from daemon.grimoire.curator.consolidate import ReplayItem, select_replay
from daemon.grimoire.curator.cycle import CuratorSettings, CycleReport, unverified_ids
from daemon.grimoire.curator.decay import windows_with
from daemon.grimoire.curator.llm import Cluster
from daemon.grimoire.curator.llm_client import LlmConfig, LlmOutcome, propose
from daemon.grimoire.playbook import PLAYBOOK_LIMIT, playbook_text, snapshot_playbook
from daemon.grimoire.records import Entry
from daemon.grimoire.retrieval import Retriever
from daemon.grimoire.trust import TrustPolicy

__all__ = ["CYCLE_EMBED_LIMIT", "capacity_event", "llm_for", "playbook_rules", "record_replays", "render_playbook",
           "replay_items", "settings_for", "vectors_for"]

log = logging.getLogger("clade.curator")
MS_PER_DAY = 86_400_000
# Entries a cycle embeds before it compares vectors (the rest wait for the backlog embedder).
CYCLE_EMBED_LIMIT = 4096


def settings_for(config: CuratorConfig, trust: TrustPolicy | None = None) -> CuratorSettings:
    return CuratorSettings(
        windows=windows_with(config.decay_windows, every=config.window_days),
        eviction_threshold=config.eviction_threshold, capacity=config.capacity,
        replay_budget=config.replay_budget, tick_seconds=config.tick_seconds, trust=trust or TrustPolicy())


def vectors_for(store: Grimoire, retriever: Retriever, *, embed_missing: int = 0) -> dict[str, NDArray[np.float32]]:
    """Current-model entry vectors by id (the retriever's index; {} if no model can load), after
    embedding up to `embed_missing` entries that lack one (the CLI's direct path: compression and
    admission compare vectors, so an entry written a moment ago must have its own). Compression
    looks up only live ids, so archived entries' vectors do no harm here."""
    try:
        if embed_missing:
            retriever.index_missing(limit=embed_missing)
        return retriever.vectors()
    except Exception as exc:  # noqa: BLE001 - no model (not prepared, corrupt): compress by exact text only
        log.warning("curator: no vectors this cycle (%s); near-duplicates wait for the next", exc)
        return {}


def replay_items(episodes: EpisodeLog, *, now_ms: int, settings: CuratorSettings) -> list[ReplayItem]:
    """The verified episodes replay picks this cycle, with their payloads (read for the chosen
    only). Unverified episodes are never replayed: `clade episode verify ID` marks one."""
    pool = [ReplayItem(i, ms, protocol, curiosity, importance, verified, "null")
            for i, ms, protocol, curiosity, importance, verified in episodes.replay_pool(verified_only=True)]
    chosen = select_replay(pool, now_ms=now_ms, budget=settings.replay_budget,
                           recent_ms=int(settings.recent_days * MS_PER_DAY))
    payloads = episodes.payloads([e.id for e in chosen])
    return [ReplayItem(e.id, e.observed_ms, e.protocol, e.curiosity, e.importance, e.verified,
                       payloads.get(e.id, "null")) for e in chosen]


def record_replays(episodes: EpisodeLog, report: CycleReport) -> int:
    """Add one to `replay_count` of every episode the cycle replayed (one LanceDB commit), once
    the cycle's store writes are done: a crash before it loses one cycle's count, nothing else."""
    return episodes.count_replays(report.replayed)


def capacity_event(report: CycleReport, *, capacity: int, live: int) -> dict[str, Any]:
    """The `entries_archived_capacity` event of a cycle that archived entries because the
    Grimoire was over its budget, and a warning in the log: the operator must hear of it.
    `live`: live entries after the cycle."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in report.archived_capacity_by_kind.items())
    log.warning("curator: the Grimoire was over its budget of %d live entries; archived %d (%s). They stay "
                "readable and `clade unarchive ID` brings one back; raise [curator] capacity to keep more",
                capacity, report.entries_archived_capacity, kinds)
    return {"count": report.entries_archived_capacity, "by_kind": dict(report.archived_capacity_by_kind),
            "ids": list(report.archived_capacity_ids), "capacity": capacity, "live": live}


def llm_for(config: CuratorConfig, env: dict[str, str] | None = None
            ) -> Callable[[Sequence[Cluster]], LlmOutcome] | None:
    """The LLM pass when enabled and a key is at hand, else None (the deterministic path alone)."""
    llm = config.llm
    if not llm.enabled:
        return None
    env = dict(os.environ) if env is None else env
    key = env.get("ANTHROPIC_API_KEY", "")
    if llm.api_key_file is not None:
        try:
            key = Path(llm.api_key_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"[curator.llm] api_key_file {llm.api_key_file}: {exc.strerror}") from None
    if not key:
        log.warning("curator: [curator.llm] is enabled but no key was given (ANTHROPIC_API_KEY or api_key_file); "
                    "running the deterministic path alone")
        return None
    cfg = LlmConfig(api_key=key, model=llm.model, base_url=llm.base_url, max_tokens=llm.max_tokens,
                    timeout_s=llm.timeout_s, max_clusters=llm.max_clusters, usd_per_mtok_in=llm.usd_per_mtok_in,
                    usd_per_mtok_out=llm.usd_per_mtok_out)
    return partial(propose, config=cfg)


def playbook_rules(store: Grimoire, *, now_ms: int, trust: TrustPolicy) -> list[Entry]:
    """What PLAYBOOK.md holds (grimoire/playbook.py): the newest `PLAYBOOK_LIMIT` active, public
    warnings, heuristics and anti-knowledge, none a sibling's entry still in quarantine, none
    the sync gate holds (`crossing_hold`: a repeated warning, an inherited prior) and none the
    clade's evidence refuted (belief.py, read now rather than from the trust watch's date)."""
    candidates = [e for e in store.list_entries(kinds=[Kind.WARNING, Kind.HEURISTIC, Kind.ANTI_KNOWLEDGE],
                                                limit=4 * PLAYBOOK_LIMIT)
                  if e.status == "active" and e.body.sensitivity is Sensitivity.PUBLIC and e.crossing_hold is None]
    ids = [e.id for e in candidates]
    quarantined = unverified_ids(store, ids, now_ms=now_ms, policy=trust)
    pooled = store.beliefs(ids, trust, now_ms=now_ms)
    return [e for e in candidates if e.id not in quarantined and not (e.id in pooled and pooled[e.id].refuted)
            ][:PLAYBOOK_LIMIT]


def render_playbook(store: Grimoire, path: Path, *, now_ms: int, keep: int, trust: TrustPolicy) -> Path | None:
    """Rewrite PLAYBOOK.md from `playbook_rules`; returns the snapshot of the previous version, if any."""
    rules = playbook_rules(store, now_ms=now_ms, trust=trust)
    return snapshot_playbook(path, playbook_text((e.body.kind.value, e.body.content) for e in rules),
                             now_ms=now_ms, keep=keep)
