"""The daemon's side of the curator: what a cycle reads besides the store, and what it writes after.

`cycle_inputs` gathers, off the store's thread where it can: the vectors of live entries (the
retriever's in-memory index, current model only), the replay pool of episodes (their fields;
payloads only for the chosen) and the LLM pass when it is configured. `render_playbook`
writes PLAYBOOK.md from the active warnings, anti_knowledge and heuristics and keeps the
previous version. The cycle itself is `daemon.grimoire.curator.cycle.run_cycle`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from crdt import Kind
from daemon.config import CuratorConfig
from daemon.errors import ConfigError
from daemon.grimoire import EpisodeLog, Grimoire
from daemon.grimoire.curator.consolidate import ReplayItem, select_replay
from daemon.grimoire.curator.cycle import CuratorSettings
from daemon.grimoire.curator.decay import windows_with
from daemon.grimoire.curator.llm import Cluster
from daemon.grimoire.curator.llm_client import LlmConfig, LlmOutcome, propose
from daemon.grimoire.playbook import snapshot_playbook
from daemon.grimoire.retrieval import Retriever

__all__ = ["llm_for", "render_playbook", "replay_items", "settings_for", "vectors_for"]

log = logging.getLogger("clade.curator")
MS_PER_DAY = 86_400_000


def settings_for(config: CuratorConfig) -> CuratorSettings:
    return CuratorSettings(
        windows=windows_with(config.decay_windows, every=config.window_days),
        eviction_threshold=config.eviction_threshold,
        capacity={"rules": config.capacity_rules, "knowledge": config.capacity_knowledge,
                  "summaries": config.capacity_summaries},
        replay_budget=config.replay_budget, tick_seconds=config.tick_seconds)


def vectors_for(store: Grimoire, retriever: Retriever) -> dict[str, NDArray[np.float32]]:
    """Current-model entry vectors by id (the retriever's index; {} if no model can load).
    Compression looks up only live ids, so archived entries' vectors do no harm here."""
    try:
        return retriever.vectors()
    except Exception as exc:  # noqa: BLE001 - no model (not prepared, corrupt): compress by exact text only
        log.warning("curator: no vectors this cycle (%s); near-duplicates wait for the next", exc)
        return {}


def replay_items(episodes: EpisodeLog, *, now_ms: int, settings: CuratorSettings) -> list[ReplayItem]:
    """The episodes replay picks this cycle, with their payloads (read for the chosen only)."""
    pool = [ReplayItem(i, ms, protocol, curiosity, importance, verified, "null")
            for i, ms, protocol, curiosity, importance, verified in episodes.replay_pool()]
    chosen = select_replay(pool, now_ms=now_ms, budget=settings.replay_budget,
                           recent_ms=int(settings.recent_days * MS_PER_DAY))
    payloads = episodes.payloads([e.id for e in chosen])
    return [ReplayItem(e.id, e.observed_ms, e.protocol, e.curiosity, e.importance, e.verified,
                       payloads.get(e.id, "null")) for e in chosen]


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


def render_playbook(store: Grimoire, path: Path, *, now_ms: int, keep: int) -> Path | None:
    """Rewrite PLAYBOOK.md from the active rules; returns the snapshot of the previous version, if any."""
    lines = ["# PLAYBOOK", "", "Active warnings and heuristics of this golem's Grimoire.", ""]
    for entry in store.list_entries(kinds=[Kind.WARNING, Kind.HEURISTIC, Kind.ANTI_KNOWLEDGE], limit=200):
        if entry.status == "active":
            lines.append(f"- [{entry.body.kind.value}] {' '.join(entry.body.content.split())}")
    return snapshot_playbook(path, "\n".join(lines) + "\n", now_ms=now_ms, keep=keep)
