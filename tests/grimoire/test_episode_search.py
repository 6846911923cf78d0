"""Episode vector search in LanceDB: flat below the threshold, IVF-PQ above it, and the index
absorbs rows appended after it was built."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from daemon.grimoire.episodes import Episode, EpisodeLog


def vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def add(log: EpisodeLog, vecs: np.ndarray, start: int) -> None:
    log.append([Episode(summary=f"e{start + i}", observed_ms=start + i, embedding=tuple(float(x) for x in v))
                for i, v in enumerate(vecs)])


def test_flat_then_indexed_search_and_reindex(tmp_path: Path) -> None:
    log = EpisodeLog(tmp_path / "ep", create=True)
    vecs = vectors(3000, 1)
    add(log, vecs[:1500], 0)
    log.append([Episode(summary="no vector", observed_ms=1)])
    assert log.search(list(map(float, vecs[10])), k=1)[0][0].summary == "e10"  # flat, exact
    assert log.ensure_index(threshold=10_000) is False  # below the threshold: stays flat
    assert log.ensure_index(threshold=1_000) is True and log.has_vector_index()
    assert log.ensure_index(threshold=1_000) is False  # nothing new to merge
    add(log, vecs[1500:], 1500)
    assert log.ensure_index(threshold=1_000) is True  # 1,500 unindexed rows (> 10%): merged
    for probe in (10, 2500):
        found, similarity = log.search(list(map(float, vecs[probe])), k=3)[0]
        assert found.summary == f"e{probe}" and similarity > 0.99  # refined: exact re-ranking
    assert all(e.summary != "no vector" for e, _ in log.search(list(map(float, vecs[0])), k=50))
