"""Threaded stages for the vault pipeline: each stage a thread, bounded channels between them.

    backup:   caller (tar: file reads) → compress (zstd) → seal (secretstream, file writes)
    verify:   open (file reads, secretstream) → inflate (zstd) → caller (tar)
    restore:  open → inflate → caller (tar: file writes) → fsync

python-zstandard and PyNaCl (cffi) release the GIL inside zstd and libsodium, so the
stages run on separate cores; what stays serial is the Python glue around those calls.
Memory is bounded: a channel holds at most `depth` blocks, a block at most `block_bytes`
(plus one block in the hands of each end).

Errors: the first exception in a stage reaches the thread that drives the pipeline as the
same exception object (a `VaultError` from a tampered chunk, an `OSError` from a full
disk): from a `ReadStage` where the serial code would have raised it (the blocks before
the failure are delivered first), from a `WriteStage` at the producer's next `write` or
`close`, so a producer stops within a channel's depth. `Stages.close()` (the context
manager's exit) cancels every channel and joins every thread, so no stage outlives the
call that started it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

__all__ = ["BLOCK_BYTES", "DEPTH", "ReadStage", "Stages", "WriteStage", "live_stage_threads"]

BLOCK_BYTES = 64 * 1024  # = the vault chunk; 256 KiB blocks: ~6 MiB more peak RSS, about the same CPU
DEPTH = 4
_PREFIX = "clade-vault-"


class Cancelled(Exception):
    """The pipeline was shut down (internal: a stage's thread exits quietly on it)."""


_END = object()  # end of the stream
_CANCEL = object()  # the channel was cancelled


class _Channel:
    """A bounded FIFO between two threads; `cancel` wakes and fails both ends for good.

    Two C-level queues and no Python lock: `items` carries the blocks, `credits` one token
    per free slot (a block handed over takes one, a block taken gives it back). A handoff
    costs two queue operations, which matters at 64 KiB blocks (thousands per backup)."""

    def __init__(self, depth: int) -> None:
        self._items: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._credits: queue.SimpleQueue[object] = queue.SimpleQueue()
        for _ in range(depth):
            self._credits.put(None)
        self._cancelled = False

    def put(self, item: object) -> None:
        if self._credits.get() is _CANCEL or self._cancelled:
            self._credits.put(_CANCEL)  # for any other waiter
            raise Cancelled
        self._items.put(item)

    def get(self) -> object:
        item = self._items.get()
        if item is _CANCEL or self._cancelled:
            self._items.put(_CANCEL)
            raise Cancelled
        self._credits.put(None)
        return item

    def cancel(self) -> None:
        self._cancelled = True
        while True:  # drop what is queued (memory), then wake both ends
            try:
                self._items.get_nowait()
            except queue.Empty:
                break
        self._items.put(_CANCEL)
        self._credits.put(_CANCEL)


class _Stage:
    def __init__(self, name: str, depth: int) -> None:
        self._channel = _Channel(depth)
        self._thread = threading.Thread(target=self._run, name=_PREFIX + name, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Stop the stage's thread and wait for it (idempotent; raises nothing)."""
        self._channel.cancel()
        self.join()

    def join(self) -> None:
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()


class WriteStage(_Stage):
    """A write-only binary file object whose data `step` consumes, in blocks of about
    `block_bytes`, on a thread of its own; `end` runs there after the last block.

    `write` raises the stage's error (the original exception) once the stage has failed;
    `close` hands over the rest, waits for `end`, and raises the stage's error if any.
    """

    def __init__(self, name: str, step: Callable[[bytes], object], end: Callable[[], object], *,
                 block_bytes: int = BLOCK_BYTES, depth: int = DEPTH) -> None:
        super().__init__(name, depth)
        self._step = step
        self._end = end
        self._block = block_bytes
        self._buffer = bytearray()
        self._written = 0
        self._error: BaseException | None = None
        self._closed = False
        self.start()

    def _run(self) -> None:
        try:
            while (item := self._channel.get()) is not _END:
                assert isinstance(item, bytes)
                self._step(item)
            self._end()
        except Cancelled:
            return
        except BaseException as exc:  # noqa: BLE001 — carried to the writer's thread, raised there
            self._error = exc
            self._channel.cancel()

    def _put(self, block: bytes) -> None:
        try:
            self._channel.put(block)
        except Cancelled:
            if self._error is not None:
                raise self._error from None
            raise

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError(f"write to a closed stage ({self._thread.name})")
        n = len(data)
        self._written += n
        if not self._buffer and n >= self._block and isinstance(data, bytes):
            self._put(data)  # a whole block already: hand it over as it is (bytes are immutable)
            return n
        self._buffer += data
        if len(self._buffer) >= self._block:
            block = bytes(self._buffer)
            self._buffer.clear()
            self._put(block)
        return n

    def tell(self) -> int:
        """Bytes written so far (tarfile asks)."""
        return self._written

    def flush(self) -> None:
        """Nothing to do: blocks go to the stage as they fill; `close` sends the rest."""

    def close(self) -> None:
        """Hand over what is buffered, wait until `end` has run; raise the stage's error."""
        if self._closed:
            return
        self._closed = True
        if self._buffer:
            self._put(bytes(self._buffer))
            self._buffer.clear()
        self._put(_END)  # type: ignore[arg-type]
        self.join()
        if self._error is not None:
            raise self._error

    def writable(self) -> bool:
        return True


class ReadStage(_Stage):
    """A read-only binary file object whose data `produce` makes on a thread of its own,
    a block per call (b"" at the end), at most `depth` blocks ahead of the reader.

    An exception in `produce` is raised by `read` once the blocks before it are consumed:
    the reader sees what the serial code would have seen, in the same order.
    """

    def __init__(self, name: str, produce: Callable[[], bytes], *, depth: int = DEPTH) -> None:
        super().__init__(name, depth)
        self._produce = produce
        self._current = b""
        self._offset = 0
        self._eof = False
        self.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    block = self._produce()
                except BaseException as exc:  # noqa: BLE001 — delivered in order, after the blocks before it
                    self._channel.put(exc)
                    return
                if not block:
                    self._channel.put(_END)
                    return
                self._channel.put(block)
        except Cancelled:
            return

    def _next(self) -> bool:
        """Load the next block; False at the end of the stream."""
        if self._eof:
            return False
        item = self._channel.get()
        if item is _END:
            self._eof = True
            self.join()
            return False
        if isinstance(item, BaseException):
            self._eof = True
            self.join()
            raise item
        assert isinstance(item, bytes)
        self._current, self._offset = item, 0
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = [self._current[self._offset:]]
            self._current, self._offset = b"", 0
            while self._next():
                parts.append(self._current)
            self._current = b""
            return b"".join(parts)
        if self._offset >= len(self._current) and not self._next():
            return b""
        if self._offset == 0 and size >= len(self._current):
            out = self._current  # the whole block, no copy
            self._current = b""
            return out
        out = self._current[self._offset:self._offset + size]
        self._offset += len(out)
        return out

    def readable(self) -> bool:
        return True

    def drain(self) -> None:
        """Consume the rest of the stream (raising its error, if any)."""
        self._current, self._offset = b"", 0
        while self._next():
            self._current = b""


_S = TypeVar("_S", bound=_Stage)


class Stages:
    """The stages of one pipeline: on exit, every channel cancelled and every thread joined."""

    def __init__(self) -> None:
        self._stages: list[_Stage] = []

    def add(self, stage: _S) -> _S:
        self._stages.append(stage)
        return stage

    def close(self) -> None:
        for stage in self._stages:
            stage._channel.cancel()
        for stage in self._stages:
            stage.join()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def live_stage_threads() -> list[str]:
    """Names of the pipeline threads still running (for tests: none after a call returns)."""
    return [t.name for t in threading.enumerate() if t.name.startswith(_PREFIX) and t.is_alive()]
