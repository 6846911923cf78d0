"""The drift measure (daemon/embedding/drift.py) on constructed vectors, and on the real model:
its own references are stable across loads, and a changed model file moves them past critical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from daemon.embedding.drift import CRITICAL, REFERENCE_DOCS, WARNING, Drift, measure
from daemon.embedding.embedder import Embedder
from tests.helpers.model_files import change_model_file, own_model_dir


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_measure_on_constructed_vectors() -> None:
    rng = np.random.default_rng(1)
    base = _unit(rng.normal(size=(20, 64)))
    same = measure(base, base.copy())
    assert same.verdict == "healthy" and same.mean_distance == pytest.approx(0, abs=1e-6)
    assert same.neighbour_stability == 1
    slight = measure(base, _unit(base + rng.normal(scale=0.005, size=base.shape)))
    assert 0 < slight.mean_distance < WARNING and slight.max_distance >= slight.mean_distance
    assert Drift(0.019, 0.03, 0.9).verdict == "healthy" and Drift(0.02, 0.03, 0.9).verdict == "warning"
    assert Drift(0.05, 0.09, 0.9).verdict == "warning" and Drift(0.051, 0.09, 0.9).verdict == "critical"
    assert Drift(0.01, 0.02, 0.55).verdict == "critical"  # the neighbourhoods broke up, whatever the distance
    far = measure(base, _unit(base + rng.normal(scale=0.5, size=base.shape)))
    assert far.verdict == "critical" and far.mean_distance > CRITICAL
    shuffled = measure(base, base[rng.permutation(20)])  # every vector somewhere else
    assert shuffled.verdict == "critical"
    with pytest.raises(ValueError):
        measure(base, base[:, :32])  # another space: a model change, not drift


def test_a_changed_model_file_moves_the_references_past_critical(tmp_path: Path) -> None:
    own = own_model_dir(tmp_path / "minilm")
    before = Embedder(tmp_path / "cache", f"sentence-transformers/all-MiniLM-L6-v2@{own}").embed(list(REFERENCE_DOCS))
    again = Embedder(tmp_path / "cache", f"sentence-transformers/all-MiniLM-L6-v2@{own}").embed(list(REFERENCE_DOCS))
    assert measure(before, again).verdict == "healthy"  # a reload maps the references where they were
    change_model_file(own)
    after = Embedder(tmp_path / "cache", f"sentence-transformers/all-MiniLM-L6-v2@{own}").embed(list(REFERENCE_DOCS))
    drift = measure(before, after)
    # measured: mean distance 0.019 (under the warning's 0.02) but 65 % of the references lost one of
    # their five nearest: the neighbourhoods catch what the average hides
    assert drift.verdict == "critical" and drift.mean_distance > 0.005 and drift.neighbour_stability < 0.6, drift
    print(f"unchanged reload: {measure(before, again)}; changed file: {drift}")
