"""Join a sibling's delta frames while they are still being verified.

Joining a catch-up round costs two kinds of work per op: unpacking and checking its Ed25519
signature (~2/3 of the CPU; PyNaCl releases the GIL while libsodium runs), and the SQLite
writes (SQLite releases it too). `apply_frames` verifies on `VERIFIERS` pool threads and
joins on the caller's thread (the store's writer), so on two cores the two overlap instead
of adding up. A small unpacking thread reads the frames in order and hands the writer, through
a pipe, each frame's start (its context), its ops in pieces of `PIECE_OPS` (as the pool's
futures, in order) and its end:

    unpacker:   unpack 1 ─ submit 1..256, 257..512, … ─ unpack 2 ─ submit …
    verifiers:  open 1..256 │ open 257..512 │ open 513..768 │ …
    writer:                  join 1..256 ─── join 257..512 ─ … ─ finish 1 ─ join …

The pipe is `DEPTH` pieces deep, so memory stays bounded whichever side is slower. Only the
unpacker iterates the frames; it tells the writer each frame's size and when none follows.
Each frame is one transaction (`Grimoire.join_delta`), committed after its last piece: a
frame whose structure is bad raises `RemoteProtocolError` when the writer reaches it, after
the frames before it are committed (as applying them one by one did). The writer closes the
pipe whatever happens, which stops the unpacker; the pool's unstarted pieces are cancelled.
Catch-up never hands this frames still in flight: the writer must not wait for the network.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from crdt import ApplyReport, CausalContext, Verifier
from crdt.codec import open_ops, unpack_delta

from .replication import Piece
from .store import DEFAULT_MAX_SKEW_MS, Grimoire

__all__ = ["DEPTH", "PIECE_OPS", "VERIFIERS", "FrameReport", "apply_frames"]

PIECE_OPS = 256
DEPTH = 16
VERIFIERS = 2  # verifying is ~2/3 of a joined op's CPU (libsodium, outside the GIL): two keep up with one writer
_STALL_S = 300.0  # an unpacker that sends nothing this long is stuck (a bug): the writer gives up


@dataclass(slots=True)
class FrameReport:
    """What joining one frame did (`report`), and its size on the wire."""

    report: ApplyReport
    size: int


@dataclass(slots=True)
class _Start:
    context: CausalContext
    size: int


@dataclass(slots=True)
class _End:
    pass


@dataclass(slots=True)
class _Done:
    """No frame follows."""


@dataclass(slots=True)
class _Failed:
    error: BaseException


_Message = _Start | Future[Piece] | _End | _Done | _Failed


class _Closed(Exception):
    """The writer closed the pipe: the unpacker stops."""


@dataclass
class _Pipe:
    """A bounded queue the writer can close from its end."""

    items: queue.Queue[_Message] = field(default_factory=lambda: queue.Queue(DEPTH))
    closed: threading.Event = field(default_factory=threading.Event)

    def put(self, item: _Message) -> None:
        while True:
            if self.closed.is_set():
                raise _Closed
            try:
                self.items.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def get(self) -> _Message:
        try:
            return self.items.get(timeout=_STALL_S)
        except queue.Empty:
            raise RuntimeError(f"the delta unpacker sent nothing for {_STALL_S:.0f} s") from None


def _unpack(frames: Iterable[bytes], verify: Verifier, pipe: _Pipe, pool: ThreadPoolExecutor) -> None:
    """The unpacking thread: per frame a start (its context and size), the pieces of its ops
    as the verifiers' futures (in order), an end; after the last frame, done."""
    try:
        for frame in frames:
            if pipe.closed.is_set():
                return
            packed = unpack_delta(frame)
            pipe.put(_Start(packed.context, len(frame)))
            raw = packed.raw_ops
            for at in range(0, len(raw), PIECE_OPS):
                pipe.put(pool.submit(open_ops, raw[at:at + PIECE_OPS], verify))
            pipe.put(_End())
        pipe.put(_Done())
    except _Closed:
        return
    except BaseException as exc:  # noqa: BLE001 - handed to the writer, which raises it
        try:
            pipe.put(_Failed(exc))
        except _Closed:
            return


def _pieces(pipe: _Pipe) -> Iterator[Piece]:
    while True:
        item = pipe.get()
        if isinstance(item, _End):
            return
        if isinstance(item, _Failed):
            raise item.error
        if isinstance(item, _Start | _Done):
            raise RuntimeError("the delta unpacker started a frame, or stopped, inside another")
        yield item.result()


def apply_frames(store: Grimoire, frames: Iterable[bytes], verify: Verifier, *, local_replica: str | None = None,
                 max_skew_ms: int = DEFAULT_MAX_SKEW_MS, sender: str | None = None,
                 on_frame: Callable[[FrameReport], None] | None = None) -> list[FrameReport]:
    """Unpack, verify and join `frames` in order, one transaction each (see the module doc).

    Run on the store's writer thread; `on_frame` is called there after each frame commits.
    Raises `RemoteProtocolError` for a frame that is unusable as a whole (the frames before
    it stay joined); ops that fail their own checks are counted in the frame's report, as
    `Grimoire.apply_delta` counts them.
    """
    pipe = _Pipe()
    pool = ThreadPoolExecutor(VERIFIERS, thread_name_prefix="clade-verify")
    unpacker = threading.Thread(target=_unpack, args=(frames, verify, pipe, pool), name="clade-verify-unpack",
                                daemon=True)
    unpacker.start()
    reports: list[FrameReport] = []
    try:
        while not isinstance(start := pipe.get(), _Done):
            if isinstance(start, _Failed):
                raise start.error
            if not isinstance(start, _Start):
                raise RuntimeError("the delta unpacker sent a piece before its frame's start")
            report = store.join_delta(start.context, _pieces(pipe), local_replica=local_replica,
                                      max_skew_ms=max_skew_ms, sender=sender)
            reports.append(FrameReport(report, start.size))
            if on_frame is not None:
                on_frame(reports[-1])
    finally:
        pipe.closed.set()
        unpacker.join()
        pool.shutdown(wait=True, cancel_futures=True)
    return reports
