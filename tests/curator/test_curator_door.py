"""The curator writes its own entries through the write door (daemon/grimoire/write_door.py,
`Writer.CURATOR`): an LLM REWRITE of a warning is held by the repeat hold like any warning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crdt import Kind
from crypto import Identity
from daemon.embedding.embedder import EmbeddingInfo
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator.cycle import Consultation, CycleReport, RewriteVectors, apply_llm, rewrite_news
from daemon.grimoire.curator.llm import Cluster, Member, accept
from daemon.grimoire.curator.llm_client import LlmOutcome
from daemon.grimoire.write_door import Prepared, Writer, prepare
from tests.helpers.seed import seed_one, seed_warning

ME = Identity(b"\x41" * 32)
T0 = 1_800_000_000_000
INFO = EmbeddingInfo(model="test", model_version="1", preprocess_hash="h", dim=3)
REWRITE = "Pool X drained right now"


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _rewrite_asked(store: Grimoire) -> tuple[Consultation, LlmOutcome, list[str]]:
    """Two own warnings in one cluster, and the model's REWRITE of them into `REWRITE`."""
    ids = [seed_one(store, NewEntry(kind=Kind.WARNING, content=c), identity=ME).id
           for c in ("Pool X drains under withdrawals", "Withdrawals drain pool X")]
    cluster = Cluster(tuple(Member(i, True, "warning", 0.7, T0, store.get(i).body.content) for i in ids))
    decisions, refused = accept({"decisions": [{"cluster": 0, "action": "REWRITE", "text": REWRITE,
                                                "evidence": ids}]}, [cluster])
    assert decisions and not refused
    return Consultation([tuple(ids)], [cluster]), LlmOutcome(decisions, refused), ids


def test_a_curators_rewrite_of_a_warning_is_held_as_a_repeat(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        gossiped, _ = seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X is being drained"), ME,
                                   vector=unit(1, 0, 0), info=INFO, now_ms=T0)
        asked, outcome, ids = _rewrite_asked(store)
        news = rewrite_news(asked, outcome)
        assert [(n.kind, n.content) for n in news] == [(Kind.WARNING, REWRITE)]
        vectors = RewriteVectors.of(prepare(news, lambda texts: np.stack([unit(1, 0.1, 0)] * len(texts)), INFO))
        assert vectors is not None
        report = CycleReport()
        apply_llm(store, ME, asked, outcome, now_ms=T0 + 1000, report=report, vectors=vectors)
        new = store.get(ids[0]).superseded_by
        assert new is not None and store.get(new).body.content == REWRITE
        assert store.get(new).crossing_hold == "near_duplicate"  # held: it repeats the warning gossiped
        assert report.held == {new: pytest.approx(float(unit(1, 0.1, 0)[0]))} and report.unchecked == 0
        gate = store.sync_gate(ME.peer_id)
        assert gate(gossiped.body) and not gate(store.get(new).body)


def test_a_curators_rewrite_without_a_vector_is_written_unchecked_and_counted(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: T0) as store:
        seed_warning(store, NewEntry(kind=Kind.WARNING, content="Pool X is being drained"), ME,
                     vector=unit(1, 0, 0), info=INFO, now_ms=T0)
        asked, outcome, ids = _rewrite_asked(store)
        report = CycleReport()
        apply_llm(store, ME, asked, outcome, now_ms=T0 + 1000, report=report)  # no model at hand
        new = store.get(ids[0]).superseded_by
        assert new is not None and store.get(new).crossing_hold is None
        assert report.held == {} and report.unchecked == 1
        assert "held" not in report.to_json() and "unchecked" not in report.to_json()  # the event is unchanged


def test_without_a_model_a_preparation_gives_no_rewrite_vectors() -> None:
    assert RewriteVectors.of(Prepared.unembedded([NewEntry(kind=Kind.WARNING, content=REWRITE)])) is None
    assert Writer.CURATOR.value == "curator"
