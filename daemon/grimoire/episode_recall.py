"""Recall over episodes: the nearest episodes to a query vector, ranked like entries.

Episodes are soma (daemon/grimoire/episodes.py): this golem's own raw observations in
LanceDB, never replicated, never sent to Styx. `recall_episodes` is the one search over them
(`POST /v1/episodes/search`, the agent and MCP tool `episode_search`, the digest's episodic
section, `clade episode search`): LanceDB returns the nearest `max(64, 5k)` episodes by cosine
whose observed time is within the bounds and whose importance is at least the floor (both
applied inside the search, before the cut), and `rank_episodes` orders them with the entries'
four-factor rank (scoring.py) — semantic (the cosine), temporal (age of the observation),
importance (the episode's own, aged; replays do not count as uses) and PAD (the query's
affect against the episode's) — with source 1.0: every episode is first-hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import scoring
from .episodes import Episode, EpisodeLog

__all__ = ["CANDIDATES", "EpisodeHit", "EpisodeQuery", "rank_episodes", "recall_episodes"]

CANDIDATES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeQuery:
    """What an episode search asks: `k` results; `pad` the golem's current affect (None: the PAD
    factor is neutral); `since_ms` / `until_ms` bound the observed time (Unix ms, inclusive);
    `min_importance` the episode's own importance."""

    k: int = 10
    pad: tuple[float, float, float] | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    min_importance: float | None = None


@dataclass(frozen=True, slots=True)
class EpisodeHit:
    episode: Episode
    similarity: float  # the cosine of the query and the episode's summary
    score: float
    factors: scoring.Factors


def rank_episodes(found: Sequence[tuple[Episode, float]], query: EpisodeQuery, *, now_ms: int) -> list[EpisodeHit]:
    """The best `query.k` of `found` ((episode, cosine) pairs) by the four-factor rank, ties by id. Pure."""
    raw = [scoring.Factors(
        semantic=max(0.0, cosine),
        temporal=scoring.temporal(scoring.age_days(episode.observed_ms, now_ms)),
        importance=scoring.importance(explicit=episode.importance, access_count=0,
                                      days=scoring.age_days(episode.observed_ms, now_ms)),
        pad=scoring.pad_similarity(query.pad, None if episode.pad is None else episode.pad.as_tuple()),
        source=1.0,
    ) for episode, cosine in found]
    ranked = sorted(zip(found, scoring.normalise(raw), strict=True), key=lambda pf: (-pf[1].score, pf[0][0].id))
    return [EpisodeHit(episode, cosine, f.score, f) for (episode, cosine), f in ranked[:query.k]]


def recall_episodes(log: EpisodeLog, vector: Sequence[float], query: EpisodeQuery, *,
                    now_ms: int) -> list[EpisodeHit]:
    """The `query.k` best episodes for a query's embedding (`vector`, the episodes' model)."""
    found = log.search(vector, k=max(CANDIDATES, 5 * query.k), since_ms=query.since_ms, until_ms=query.until_ms,
                       min_importance=query.min_importance)
    return rank_episodes(found, query, now_ms=now_ms)
