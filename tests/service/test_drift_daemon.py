"""Embedding drift on a running daemon: a model file changed under its name is caught at the
first model load after the start, vector writes pause (entries wait without a vector, keywords
still find them), and `clade embeddings rebuild` accepts the model and lifts the pause."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from daemon.datadir import DataDir
from daemon.testing.process import DaemonProc
from tests.helpers.cli import clade_subprocess
from tests.helpers.daemon import search_by_meaning
from tests.helpers.model_files import change_model_file, own_model_dir


def _vector_of(data: DataDir, entry_id: str) -> bytes | None:
    with sqlite3.connect(data.db_path) as conn:
        row = conn.execute("SELECT embedding FROM entries WHERE id = ?", (entry_id,)).fetchone()
    assert row is not None
    return None if row[0] is None else bytes(row[0])


def _write(daemon: DaemonProc, text: str) -> str:
    return str(daemon.call("POST", "/v1/memory", json={"content": text, "memory_type": "insight"})["id"])


@pytest.mark.slow  # starts a daemon three times: make test-slow
def test_a_changed_model_file_pauses_vector_writes_until_accepted(data_dir: DataDir, tmp_path: Path) -> None:
    own = own_model_dir(tmp_path / "minilm")
    data_dir.config_path.write_text(f'[embedding]\nmodel_path = "{own}"\n')
    daemon = DaemonProc(data_dir)
    try:
        first = _write(daemon, "Curve stETH fees double during depegs")
        search_by_meaning(daemon, {"query": "stETH fees in a depeg"})  # the model loads: the baseline
        drift = daemon.call("GET", "/v1/status")["memory"]["drift"]
        assert drift["verdict"] == "baseline" and drift["vector_writes_paused"] is False
    finally:
        assert daemon.stop() == 0
    old_vector = _vector_of(data_dir, first)
    assert old_vector is not None

    change_model_file(own)  # same name, same place, other weights
    daemon = DaemonProc(data_dir)
    try:
        second = _write(daemon, "Aave's oracle on Base lagged during the spike")
        found = daemon.call("POST", "/v1/memory/search", json={"query": "oracle lag on Base"})
        status = daemon.call("GET", "/v1/status")
        drift = status["memory"]["drift"]  # the check ran at the load, before any vector was written
        assert drift["verdict"] == "critical" and drift["vector_writes_paused"] is True, drift
        assert status["counters"]["embedding_drift_critical"] == 1
        assert status["counters"]["embedding_writes_paused"] >= 1
        assert second in {h["id"] for h in found["results"]}  # found by its words meanwhile
        metrics = daemon.request("GET", "/metrics").text
        assert "clade_embedding_vector_writes_paused 1.0" in metrics
    finally:
        assert daemon.stop() == 0
    assert _vector_of(data_dir, second) is None  # it waits: no vector of the changed model beside old ones
    assert _vector_of(data_dir, first) == old_vector

    rebuilt = clade_subprocess(["--data-dir", str(data_dir.root), "embeddings", "rebuild"])
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert b"the drift baseline is taken again" in rebuilt.stdout
    assert _vector_of(data_dir, second) is not None and _vector_of(data_dir, first) != old_vector
    checked = clade_subprocess(["--data-dir", str(data_dir.root), "embeddings", "check"])
    assert checked.returncode == 0 and b"drift: no baseline yet" in checked.stdout, checked.stdout
