"""The daemon's side of the embedding process (`host`): start it on first need, ask it for
vectors, stop it when the model is unloaded, start a new one when it died.

`ModelHost` owns at most one child process per model directory; `ModelHost.embedder(space)`
loads a vector space there (starting the child if none runs) and returns a `RemoteEmbedder`,
which keeps the `Embedder` contract (`info`, `embed(texts) -> float32 unit vectors`, blocking:
call it from a worker thread). The daemon itself never imports fastembed, ONNX Runtime or
tokenizers: once the child is stopped, the model's memory is the kernel's again.

- Priority: a request made from a thread running below the process's own priority (the
  background embedder's: `daemon.service.background`) is marked `low` and runs on the child's
  low-priority thread; every other request on one of its two normal threads. Up to two run
  at once, as in process.
- Failure: a child that dies (a crash, `kill -9`, the OOM killer) fails the calls waiting on it
  at once with `EmbeddingHostError` (a `ModelIntegrityError`: callers answer from keywords);
  it is counted (`embedding_host_crashes`) and logged, and the next call starts a new one
  (`embedding_host_starts`), loading its spaces again. A call not answered within its timeout
  (`LOAD_TIMEOUT_S`, `EMBED_TIMEOUT_S`, `LOW_EMBED_TIMEOUT_S`) kills the child (it is hung) and
  fails (`embedding_host_timeouts`): no caller waits for ever.
- Lifetime: the child exits when its stdin ends: at `stop()`, and when the daemon dies (the
  kernel closes the pipe), so no child outlives its daemon.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

import daemon
from daemon.embedding.catalogue import ModelIntegrityError
from daemon.embedding.embedder import EmbeddingInfo
from daemon.embedding.frames import FrameError, read_frame, write_frame
from daemon.thread_priority import thread_is_lowered

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["EMBED_TIMEOUT_S", "LOAD_TIMEOUT_S", "LOW_EMBED_TIMEOUT_S", "EmbeddingHostError", "ModelHost",
           "RemoteEmbedder"]

log = logging.getLogger("clade.embedding")

# A load is ~1-2 s of CPU (the interpreter, ONNX Runtime, the model, its hash; the first ever
# also writes model.lean.onnx, ~2 s more); MPNet's first conversion takes minutes and is done
# once, by `clade embeddings` or here.
LOAD_TIMEOUT_S = 900.0
# A normal-priority call is a query or the query tail (at most a few dozen texts: well under a
# second); the low-priority backlog can wait for a busy host's CPU much longer (background.py
# re-runs it at normal priority after its patience).
EMBED_TIMEOUT_S = 120.0
LOW_EMBED_TIMEOUT_S = 900.0
STOP_GRACE_S = 5.0  # after its stdin is closed, a child still running this long is killed


class EmbeddingHostError(ModelIntegrityError):
    """The embedding process died or did not answer: this call failed, the next starts a new one."""


class _NoAnswer(EmbeddingHostError):
    """The embedding process did not answer in time (it was killed)."""


@dataclass(slots=True)
class _Call:
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None
    error: Exception | None = None


def _child_env() -> dict[str, str]:
    """The daemon's environment, with the directory holding this `daemon` package first on the
    path (the child imports the same code, however the daemon was started), and glibc's arenas
    bounded (unless the operator set `MALLOC_ARENA_MAX`)."""
    env = dict(os.environ)
    env.setdefault("MALLOC_ARENA_MAX", "2")  # few threads allocate here: two arenas bound what glibc keeps
    # glibc's mmap threshold is left to move here: pinned (as in the daemon), every activation
    # buffer is mapped and unmapped per batch, 3-10 % more CPU per text for ~5 MiB less resident
    # (both flat over 45 minutes of the soak's load; bench/RESULTS.md).
    root = str(Path(daemon.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _describe(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class _Child:
    """One running embedding process: its pipes, the calls awaiting a reply, its loaded spaces."""

    def __init__(self, model_dir: Path, on_exit: Any) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.embedding.host", str(model_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_child_env(), close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout: IO[bytes] = self.proc.stdout
        self.spaces: dict[str, EmbeddingInfo] = {}
        self.alive = True
        self.stopping = False  # stopped on purpose: its exit is not a crash
        self.code: int | None = None
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # _calls, alive
        self._writing = threading.Lock()
        self._on_exit = on_exit
        threading.Thread(target=self._read, name=f"embed-host-{self.proc.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The child's reply to `message`; `EmbeddingHostError` if it dies or has not answered
        within `timeout` (it is then killed: a child that does not answer is hung)."""
        call = _Call()
        with self._lock:
            if not self.alive:
                raise EmbeddingHostError(f"the embedding process has exited ({_describe(self.code)})")
            rid = next(self._ids)
            self._calls[rid] = call
        try:
            with self._writing:
                write_frame(self._stdin, {**message, "id": rid})
        except FrameError as exc:  # too large to send (nothing was written)
            with self._lock:
                self._calls.pop(rid, None)
            raise EmbeddingHostError(str(exc)) from None
        except (OSError, ValueError) as exc:  # its stdin is gone: it is exiting, or must
            log.debug("cannot write to the embedding process: %r", exc)
            self.kill()  # the reader then fails this call with the exit status
        if not call.done.wait(timeout):
            with self._lock:
                self._calls.pop(rid, None)
            self.kill()
            raise _NoAnswer(f"the embedding process did not answer within {timeout:g} s; it was stopped "
                            "and the next need starts another")
        if call.error is not None:
            raise call.error
        assert call.reply is not None
        return call.reply

    def _read(self) -> None:
        """The reader thread: hand each reply to its caller; at the child's end, fail the rest."""
        why = ""
        try:
            while (reply := read_frame(self._stdout)) is not None:
                with self._lock:
                    call = self._calls.pop(reply.get("id"), None)  # type: ignore[arg-type]
                if call is not None:  # None: its caller timed out and left
                    call.reply = reply
                    call.done.set()
        except (FrameError, OSError, ValueError) as exc:
            why = f"; its replies broke off: {exc}"
            self.kill()
        try:
            code = self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:  # stdout closed but the process lingers
            self.kill()
            code = self.proc.wait()
        with self._lock:
            self.alive = False
            self.code = code
            waiting, self._calls = list(self._calls.values()), {}
        for call in waiting:
            call.error = EmbeddingHostError(f"the embedding process exited ({_describe(code)}) during the call{why}")
            call.done.set()
        for pipe in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self._on_exit(self, code, why)

    def stop(self) -> None:
        """Close its stdin (it exits at once); kill it if it is still there `STOP_GRACE_S` later."""
        self.stopping = True
        with self._writing, contextlib.suppress(OSError):
            self._stdin.close()
        timer = threading.Timer(STOP_GRACE_S, self.kill)
        timer.daemon = True
        timer.start()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()


class ModelHost:
    """The embedding process of one model directory: started on first need, stopped by `stop()`,
    started again after a crash. Thread-safe; blocking calls (all but `stop`, `pid`, `running`)
    belong on worker threads."""

    def __init__(self, model_dir: Path, *, counters: Counter[str] | None = None) -> None:
        self.model_dir = model_dir
        self.counters: Counter[str] = counters if counters is not None else Counter()
        for key in ("embedding_host_starts", "embedding_host_crashes", "embedding_host_timeouts"):
            # Counted on worker and reader threads: the keys exist first, so a count never adds a
            # key to the dict while the event loop iterates it (the status, the metrics).
            self.counters.setdefault(key, 0)
        self._child: _Child | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether a child is running now."""
        child = self._child
        return child is not None and child.alive and not child.stopping

    @property
    def pid(self) -> int | None:
        """The running child's process id (None: none runs)."""
        child = self._child
        return child.pid if child is not None and child.alive and not child.stopping else None

    @property
    def in_flight(self) -> int:
        """Calls sent to the running child and not answered yet."""
        child = self._child
        return 0 if child is None else child.in_flight

    def _live(self) -> _Child:
        with self._lock:
            child = self._child
            # poll(): a child that has exited but whose reader has not yet said so is not reused
            if child is None or not child.alive or child.stopping or child.proc.poll() is not None:
                try:
                    child = self._child = _Child(self.model_dir, self._exited)
                except OSError as exc:
                    raise EmbeddingHostError(f"cannot start the embedding process: {exc}") from None
                self.counters["embedding_host_starts"] += 1
            return child

    def _exited(self, child: _Child, code: int | None, why: str) -> None:
        """Called on the reader thread when `child` has exited."""
        if child.stopping:
            return
        self.counters["embedding_host_crashes"] += 1
        log.warning("the embedding process (pid %d) exited unasked (%s)%s; the next embedding starts another",
                    child.pid, _describe(code), why)

    def _ask(self, child: _Child, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            reply = child.request(message, timeout)
        except _NoAnswer:
            self.counters["embedding_host_timeouts"] += 1
            raise
        if "error" in reply:
            raise (ModelIntegrityError if reply.get("integrity") else EmbeddingHostError)(str(reply["error"]))
        return reply

    def _ready(self, space: str, low: bool) -> tuple[_Child, EmbeddingInfo]:
        child = self._live()
        info = child.spaces.get(space)
        if info is None:
            reply = self._ask(child, {"op": "load", "space": space, "low": low}, LOAD_TIMEOUT_S)
            model, version, preprocess, dim = reply["info"]
            info = child.spaces[space] = EmbeddingInfo(str(model), str(version), str(preprocess), int(dim))
        return child, info

    def embedder(self, space: str) -> RemoteEmbedder:
        """`space` loaded in the child (started if none runs; blocking, ~1-2 s the first time);
        `ModelIntegrityError` with the in-process message if it cannot load."""
        _, info = self._ready(space, thread_is_lowered())
        return RemoteEmbedder(self, space, info)

    def embed(self, space: str, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors of `texts` in `space` (loaded first in a new child if the last one died)."""
        low = thread_is_lowered()
        child, info = self._ready(space, low)
        reply = self._ask(child, {"op": "embed", "space": space, "texts": list(texts), "low": low},
                          LOW_EMBED_TIMEOUT_S if low else EMBED_TIMEOUT_S)
        rows, dim = int(reply["rows"]), int(reply["dim"])
        if rows != len(texts) or dim != info.dim:
            raise EmbeddingHostError(f"the embedding process answered {rows}x{dim} for {len(texts)} texts in a "
                                     f"{info.dim}-d space")
        return np.frombuffer(reply["data"], dtype=np.float32).reshape(rows, dim).copy()  # writable, as in process

    def stop(self) -> bool:
        """Stop the child (it exits at once; running calls fail); True if one was running. Never blocks."""
        with self._lock:
            child, self._child = self._child, None
        if child is None or not child.alive or child.stopping:
            return False
        child.stop()
        return True


class RemoteEmbedder:
    """A vector space loaded in the embedding process: the `Embedder` contract (`info`, `embed`)."""

    def __init__(self, host: ModelHost, space: str, info: EmbeddingInfo) -> None:
        self._host = host
        self.space = space
        self.info = info

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length vectors, one row per text (blocking: call from a worker thread)."""
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        return self._host.embed(self.space, texts)
