"""Episode recall (episode_recall.py): time and importance bounds applied before the cut, the
four-factor rank with PAD, and the digest's episodic section within its own share of the budget."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from crdt import Kind, Pad
from crypto import Identity
from daemon.embedding.embedder import EPISODE_MODEL, get_embedder
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.digest import build_digest, tokens
from daemon.grimoire.episode_recall import EpisodeQuery, rank_episodes, recall_episodes
from daemon.grimoire.episodes import Episode, EpisodeLog
from daemon.grimoire.retrieval import Retriever
from tests.helpers.seed import seed_one

ME = Identity(b"\x21" * 32)
DAY = 86_400_000
NOW = 1_800_000_000_000


def unit(v: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in v / np.linalg.norm(v))


def test_bounds_apply_before_the_cut(tmp_path: Path) -> None:
    """300 episodes; the five inside the window are the farthest from the query, far beyond the
    64 nearest: a filter after the cut would return none of them."""
    rng = np.random.default_rng(7)
    query = rng.normal(size=384)
    log = EpisodeLog(tmp_path / "ep", create=True)
    episodes = []
    for i in range(300):
        closeness = 1.0 - i / 300  # i = 0 nearest the query; i = 299 farthest
        vector = unit(closeness * query + rng.normal(size=384) * 0.5)
        inside = i >= 295
        episodes.append(Episode(summary=f"e{i}", observed_ms=(NOW - DAY) if inside else NOW - 30 * DAY - i,
                                importance=0.9 if i % 2 else 0.2, embedding=vector))
    log.append(episodes)
    q = list(unit(query))
    window = recall_episodes(log, q, EpisodeQuery(k=5, since_ms=NOW - 2 * DAY, until_ms=NOW), now_ms=NOW)
    assert {h.episode.summary for h in window} == {f"e{i}" for i in range(295, 300)}
    important = recall_episodes(log, q, EpisodeQuery(k=5, since_ms=NOW - 2 * DAY, min_importance=0.5), now_ms=NOW)
    assert {h.episode.summary for h in important} == {"e295", "e297", "e299"}
    unbounded = recall_episodes(log, q, EpisodeQuery(k=5), now_ms=NOW)
    assert len(unbounded) == 5 and not {h.episode.summary for h in unbounded} & {f"e{i}" for i in range(295, 300)}


def test_pad_and_recency_order_equal_matches() -> None:
    v = unit(np.ones(384))
    calm = Episode(summary="calm", observed_ms=NOW, embedding=v, pad=Pad(pleasure=0.8, arousal=-0.6, dominance=0.5))
    tense = Episode(summary="tense", observed_ms=NOW, embedding=v, pad=Pad(pleasure=-0.8, arousal=0.9, dominance=-0.5))
    found = [(calm, 0.7), (tense, 0.7)]
    assert [h.episode.summary for h in rank_episodes(found, EpisodeQuery(pad=(-0.7, 0.8, -0.4)), now_ms=NOW)] == [
        "tense", "calm"]
    assert [h.episode.summary for h in rank_episodes(found, EpisodeQuery(pad=(0.7, -0.5, 0.4)), now_ms=NOW)] == [
        "calm", "tense"]
    old = Episode(summary="old", observed_ms=NOW - 20 * DAY, embedding=v)
    new = Episode(summary="new", observed_ms=NOW - DAY, embedding=v)
    ranked = rank_episodes([(old, 0.7), (new, 0.7)], EpisodeQuery(k=1), now_ms=NOW)
    assert [h.episode.summary for h in ranked] == ["new"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embedder")


def test_the_digest_episodic_section_keeps_within_its_share(tmp_path: Path, model_dir: Path) -> None:
    embedder = get_embedder(model_dir, EPISODE_MODEL)
    log = EpisodeLog(tmp_path / "ep", create=True)
    texts = [f"Swapped {n} ETH for USDC on Uniswap v3 at 0.05% and paid {n + 3} bps of slippage" for n in range(12)]
    log.append([Episode(summary=t, observed_ms=NOW - (i + 1) * DAY, embedding=unit(v))
                for i, (t, v) in enumerate(zip(texts, embedder.embed(texts), strict=True))])
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: NOW) as store:
        warning = seed_one(store, NewEntry(kind=Kind.WARNING, content="Uniswap v3 ETH/USDC slippage doubles in "
                                           "the US open"), identity=ME).id
        retriever = Retriever(store, lambda: get_embedder(model_dir))
        query = "what did my ETH to USDC swaps cost"
        hits = recall_episodes(log, list(map(float, embedder.embed([query])[0])), EpisodeQuery(k=12), now_ms=NOW)
        assert len(hits) == 12

        def digest(fmt: str, episode_tokens: int, budget: int = 3000) -> dict[str, object]:
            return build_digest(retriever, text=query, now_ms=NOW, budget_tokens=budget, k=10, fmt=fmt,
                                include_sensitive=False, namespace="n", episodes=hits, episode_tokens=episode_tokens)

        off = digest("xml", 0)
        assert off["episodes"] == [] and "<episode" not in str(off["document"]) and off["entries"] == [warning]
        on = digest("xml", 200)
        root = ET.fromstring(str(on["document"]))
        shown = [m for m in root if m.tag == "episode"]
        assert root[0].tag == "memory" and shown  # entries first, then the episodic section
        assert [m.attrib["id"] for m in shown] == on["episodes"] == [h.episode.id for h in hits][:len(shown)]
        assert sum(len(ET.tostring(m, encoding="unicode")) for m in shown) <= 200 * 4 < len(hits) * 80
        day = {h.episode.id: datetime.fromtimestamp(h.episode.observed_ms / 1000, UTC).strftime("%Y-%m-%d")
               for h in hits}
        assert [m.attrib["date"] for m in shown] == [day[m.attrib["id"]] for m in shown]
        for fmt in ("xml", "json", "search-results"):
            for budget in (20, 60, 150, 400):
                doc = digest(fmt, 200, budget)
                assert int(doc["tokens"]) <= budget and tokens(str(doc["document"])) <= budget  # type: ignore[arg-type]
