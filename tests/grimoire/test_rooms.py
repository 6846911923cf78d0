"""The rooms' named writes (daemon/grimoire/rooms.py) on a real store: each one transaction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crdt import Kind
from crypto import Identity
from daemon.embedding.drift import REFERENCE_DOCS
from daemon.embedding.embedder import EmbeddingInfo
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.drift_store import DriftState, space_key
from daemon.grimoire.vectors import write_vectors
from tests.helpers.seed import seed_one

INFO = EmbeddingInfo(model="test", model_version="1", preprocess_hash="h", dim=4)
ME = Identity(b"\x52" * 32)


def test_a_drift_record_takes_the_baseline_first_then_judges_against_it(tmp_path: Path) -> None:
    refs = np.eye(len(REFERENCE_DOCS), INFO.dim, dtype=np.float32)
    seen: list[np.ndarray | None] = []

    def verdict(baseline: np.ndarray | None) -> DriftState:
        seen.append(baseline)
        return DriftState(space_key(INFO), "baseline" if baseline is None else "healthy", 1, {})

    with Grimoire.open(tmp_path / "g.db", create=True) as store:
        assert store.record_drift(INFO, refs, verdict).verdict == "baseline"
        assert store.record_drift(INFO, refs * 2, verdict).verdict == "healthy"
        first, second = seen
        assert first is None and second is not None and np.array_equal(second, refs)  # the first stay the baseline
        state = store.drift_state()
        assert state is not None and state.verdict == "healthy"
        baseline = store.drift_baseline(INFO)
        assert baseline is not None and np.array_equal(baseline, refs)


def test_clearing_the_vectors_drops_every_vector_and_the_baseline(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "g.db", create=True) as store:
        entry = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Funding flips before CPI"), identity=ME)
        write_vectors(store, INFO, [entry.id], np.ones((1, INFO.dim), dtype=np.float32))
        store.record_drift(INFO, np.eye(len(REFERENCE_DOCS), INFO.dim, dtype=np.float32),
                           lambda _: DriftState(space_key(INFO), "baseline", 1, {}))
        store.clear_vectors()
        (left,) = store.connection.execute("SELECT count(*) FROM entries WHERE embedding IS NOT NULL").fetchone()
        assert left == 0 and store.drift_baseline(INFO) is None and store.drift_state() is None
