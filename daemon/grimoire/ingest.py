"""Join a sibling's delta frames while they are still being verified.

Joining a catch-up round costs three kinds of work per op (bench_catchup_ceiling, thread CPU):
checking its Ed25519 signature (~75 µs; libsodium runs without the GIL), opening it (~15 µs of
checks and decoding, GIL held) and joining it (~37 µs, mostly SQLite, which releases the GIL
too). `apply_frames` verifies and opens on `VERIFIERS` pool threads and joins on the caller's
thread (the store's writer), so on two cores the two overlap instead of adding up. A small
unpacking thread reads the frames in order and hands the writer, through a pipe, each frame's
start (its context), its ops in pieces of `PIECE_OPS` (as the pool's futures, in order) and
its end:

    unpacker:   unpack 1 ─ submit 1..256, 257..512, … ─ unpack 2 ─ submit …
    verifiers:  open 1..256 │ open 257..512 │ open 513..768 │ …
    writer:                  join 1..256 ─── join 257..512 ─ … ─ finish 1 ─ join …

The pipe is `DEPTH` pieces deep, so memory stays bounded whichever side is slower. Only the
unpacker iterates the frames; it tells the writer each frame's size with its start.
Each frame is one transaction (`Grimoire.join_delta`), committed after its last piece
without waiting for the disk (what siblings sent: grimoire/store.py's durability contract): a
frame whose structure is bad raises `RemoteProtocolError` when the writer reaches it, after
the frames before it are committed (as applying them one by one did). The writer closes the
pipe whatever happens, which stops the unpacker; the pool's unstarted pieces are cancelled.
`RoundJoin` keeps one unpacker and its verifiers for a whole catch-up round: frames are added
as the network delivers them and verified at once, while the writer joins only frames already
added, so it never waits for the network.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from crdt import ApplyReport, CausalContext, Delta, Verifier
from crdt.codec import open_ops, unpack_delta
from crdt.seals import Seal, SealedOps, SealTally, sealed_verifier
from daemon.embedding.shipped import Shipped, VectorShipping

from .replication import Piece
from .store import DEFAULT_MAX_SKEW_MS, Grimoire
from .vectors import accept_shipped_vectors

__all__ = ["DEPTH", "PIECE_OPS", "VERIFIERS", "FrameReport", "RoundJoin", "apply_frames", "join_gossip"]

PIECE_OPS = 256
DEPTH = 16
VERIFIERS = 2  # verifying + opening is ~2/3 of a joined op's CPU (mostly outside the GIL): two keep up with one writer
_STALL_S = 300.0  # an unpacker that sends nothing this long is stuck (a bug): the writer gives up


@dataclass(slots=True)
class FrameReport:
    """What joining one frame did (`report`), its size on the wire, how many of its ops a seal
    vouched for (no signature check of their own) and how many seals it brought (checked)."""

    report: ApplyReport
    size: int
    sealed_ops: int = 0
    seals: int = 0


@dataclass(slots=True)
class _Start:
    context: CausalContext
    size: int
    seals: list[Seal] = field(default_factory=list)  # checked
    bad_seals: int = 0
    tally: SealTally = field(default_factory=SealTally)  # the frame's ops a seal of the round vouched for


@dataclass(slots=True)
class _End:
    pass


@dataclass(slots=True)
class _Failed:
    error: BaseException


_Message = _Start | Future[Piece] | _End | _Failed


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


def _check_seals(seals: list[Seal], verify: Verifier) -> tuple[list[Seal], int]:
    good = [seal for seal in seals if seal.check(verify)]
    return good, len(seals) - len(good)


def _unpack(frames: Iterable[bytes], verify: Verifier, pipe: _Pipe, pool: ThreadPoolExecutor,
            accept_seals: bool) -> None:
    sealed = SealedOps()  # the round's checked seals: one may vouch for ops of a later frame
    """The unpacking thread: per frame a start (its context, size and checked seals), the
    pieces of its ops as the verifiers' futures (in order), an end. A frame's seals are
    checked here before its ops are handed out, which are then checked against them and the round's
    earlier seals (`crdt.seals.sealed_verifier`): an op a seal covers costs a hash, not a
    signature check."""
    try:
        for frame in frames:
            if pipe.closed.is_set():
                return
            packed = unpack_delta(frame, sealed=accept_seals)
            seals, bad = _check_seals(packed.seals, verify)  # a few per frame; libsodium runs without the GIL
            for seal in seals:
                sealed.add(seal)
            tally = SealTally()
            pipe.put(_Start(packed.context, len(frame), seals, bad, tally))
            check = sealed_verifier(sealed, verify, tally)
            raw = packed.raw_ops
            for at in range(0, len(raw), PIECE_OPS):
                pipe.put(pool.submit(open_ops, raw[at:at + PIECE_OPS], check))
            pipe.put(_End())
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
        if isinstance(item, _Start):
            raise RuntimeError("the delta unpacker started a frame inside another")
        yield item.result()


class RoundJoin:
    """One round's frames, verified as they come and joined when the writer gets to them.

    `add(frame)` (the caller's thread, never blocks) hands a frame to the unpacker, which
    starts verifying it at once, even while the writer is joining an earlier one; `join_added`
    (the writer's thread) joins every frame added so far, in order, including those added
    while it runs, and returns as soon as none is left: the writer never waits for a frame
    still on the network. `close()` stops the threads (whatever happened; idempotent).
    """

    def __init__(self, verify: Verifier, *, local_replica: str | None = None, max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
                 sender: str | None = None, on_frame: Callable[[FrameReport], None] | None = None,
                 sealed: bool = False) -> None:
        self._local_replica, self._max_skew_ms, self._sender = local_replica, max_skew_ms, sender
        self._on_frame = on_frame
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pipe = _Pipe()
        self._pool = ThreadPoolExecutor(VERIFIERS, thread_name_prefix="clade-verify")
        self._unpacker = threading.Thread(target=_unpack, args=(iter(self._frames.get, None), verify, self._pipe,
                                                                self._pool, sealed),
                                          name="clade-verify-unpack", daemon=True)
        self._unpacker.start()
        self.added = 0
        self.joined = 0
        self._closed = False

    def add(self, frame: bytes) -> None:
        if self._closed:
            raise RuntimeError("the round's join is closed")
        self.added += 1
        self._frames.put(frame)

    @property
    def pending(self) -> bool:
        return self.joined < self.added

    def join_added(self, store: Grimoire) -> list[FrameReport]:
        """Join the frames added and not yet joined, one transaction each; `on_frame` after
        each commits. Raises `RemoteProtocolError` for a frame unusable as a whole (the
        frames before it stay joined); the round is then over: `close()` it."""
        reports: list[FrameReport] = []
        while self.pending:
            start = self._pipe.get()
            if isinstance(start, _Failed):
                raise start.error
            if not isinstance(start, _Start):
                raise RuntimeError("the delta unpacker sent a piece before its frame's start")
            report = store.join_delta(start.context, _pieces(self._pipe), local_replica=self._local_replica,
                                      max_skew_ms=self._max_skew_ms, sender=self._sender, durable=False,
                                      seals=start.seals)
            if start.bad_seals:
                report.rejected["bad_seal"] += start.bad_seals
            self.joined += 1
            reports.append(FrameReport(report, start.size, start.tally.count, len(start.seals)))
            if self._on_frame is not None:
                self._on_frame(reports[-1])
        return reports

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pipe.closed.set()
        self._frames.put(None)  # an unpacker waiting for the next frame wakes and ends
        self._unpacker.join()
        self._pool.shutdown(wait=True, cancel_futures=True)


def apply_frames(store: Grimoire, frames: Iterable[bytes], verify: Verifier, *, local_replica: str | None = None,
                 max_skew_ms: int = DEFAULT_MAX_SKEW_MS, sender: str | None = None,
                 on_frame: Callable[[FrameReport], None] | None = None, sealed: bool = False) -> list[FrameReport]:
    """Unpack, verify and join `frames` in order, one transaction each (see the module doc):
    a `RoundJoin` given them all at once.

    Run on the store's writer thread; `on_frame` is called there after each frame commits.
    Raises `RemoteProtocolError` for a frame that is unusable as a whole (the frames before
    it stay joined); ops that fail their own checks are counted in the frame's report, as
    `Grimoire.apply_delta` counts them.
    """
    join = RoundJoin(verify, local_replica=local_replica, max_skew_ms=max_skew_ms, sender=sender, on_frame=on_frame,
                     sealed=sealed)
    try:
        for frame in frames:
            join.add(frame)
        return join.join_added(store)
    finally:
        join.close()


def join_gossip(store: Grimoire, delta: Delta, *, withheld: CausalContext, local_replica: str, max_skew_ms: int,
                shipping: VectorShipping | None, shipped: Sequence[tuple[str, Shipped]]) -> tuple[ApplyReport, int]:
    """Join gossip's verified ops and its senders' withheld declarations, then store the
    vectors their authors shipped, in one transaction that does not wait for the disk (what
    siblings sent: grimoire/store.py's durability contract). Returns the join's report and
    how many vectors were used. Run on the store's writer thread."""
    with store._write(durable=False):
        report = store.apply_delta(delta, local_replica=local_replica, max_skew_ms=max_skew_ms, withheld=withheld)
        used = accept_shipped_vectors(store, shipping, shipped, salt=local_replica) if shipping and shipped else 0
    return report, used
