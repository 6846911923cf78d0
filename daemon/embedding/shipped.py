"""Vectors shipped with gossip: the author's own embedding of its entry, quantised to int8.

A sibling that receives a warning used to embed it itself (~7-20 ms of MiniLM on one core,
most of its CPU per received warning: step 27). Instead the author, which embedded the entry
when it wrote it, ships that vector in the same gossip message, in the same vector space
(`space`: model, version, preprocessing — a receiver in another space ignores it and embeds).
The receiver uses it at once and checks a deterministic sample of them later, at idle
priority (`sampled`, `matches`): a vector that does not match its text (below
`MATCH_COSINE`) is replaced by the receiver's own and makes its author suspect, since only
the author can have shipped it (the section rides in the author's signed envelope, and a
vector is accepted only for an entry of the envelope's sender).

How many are checked follows a continuous sampling plan per author (check_plan.py).

Quantisation: symmetric per vector, `q = round(v / max|v| * 127)`, scale `max|v| / 127`;
dequantised and renormalised, the cosine with the original is above 0.9999 for MiniLM's
unit vectors (tests/embedding/test_shipped.py), so recall does not move (bench_locomo).

Wire form of the section (msgpack, decoded strictly by `decode_section`):

    [space, [[entry id, scale, q], …]]     q: `dim` bytes (int8), scale: a float > 0

This module is pure: no store, no model, no I/O.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from crdt import RemoteProtocolError

from .check_plan import CheckPlan
from .embedder import EmbeddingInfo

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["CHECK_BATCH", "CHECK_WAIT_S", "MATCH_COSINE", "MAX_DIM", "MAX_SHIPPED", "CheckBatcher", "Shipped",
           "VectorShipping", "decode_section", "dequantize", "encode_section", "matches", "quantize", "sampled",
           "space_name"]

MAX_DIM = 2048  # the fused space is 1,152-d; anything longer is refused
MAX_SHIPPED = 4096  # one per entry of a delta at most (a delta carries at most 4,096 ops)
MAX_SPACE_CHARS = 512
# A shipped vector and the receiver's own embedding of the same text, in the same space: the
# int8 round trip alone leaves them above 0.9999; 0.98 leaves room for a CPU's float
# differences and none for another text (two different warnings rarely pass 0.95 in MiniLM).
MATCH_COSINE = 0.98
# Checks are embedded together: one MiniLM text alone costs ~9.5 ms of CPU, ~6.6 ms in a batch
# of 16 (bench: a sibling re-embedding an eighth of 10 warnings a second one at a time spent
# 1.6 ms of its ~12 ms per received warning on it). A check waits for a batch while more keep
# arriving, at most `CHECK_WAIT_S`; once arrivals pause it runs with what is there.
CHECK_BATCH = 16
CHECK_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class VectorShipping:
    """What gossip ships and accepts: vectors of `info`'s space; of the accepted ones, the
    share `plan` gives for their author's record is checked here (`sampled`)."""

    info: EmbeddingInfo
    plan: CheckPlan

    @property
    def space(self) -> str:
        """The space's name on the wire: model, version, preprocessing and dimension."""
        return space_name(self.info)


def space_name(info: EmbeddingInfo) -> str:
    """A vector space's name on the wire (two spaces with one name are the same space)."""
    return f"{info.model}|{info.model_version}|{info.preprocess_hash}|{info.dim}"


@dataclass(frozen=True, slots=True)
class Shipped:
    """The vectors one message carried: their space and, by entry id, each unit vector."""

    space: str
    vectors: Mapping[str, NDArray[np.float32]]


def quantize(vector: NDArray[np.float32]) -> tuple[float, bytes]:
    """(scale, int8 bytes) of a vector: `dequantize(scale, q)` is close to its direction."""
    peak = float(np.max(np.abs(vector))) if vector.size else 0.0
    if not math.isfinite(peak) or peak <= 0.0:
        raise ValueError("a shipped vector must be finite and not zero")
    q = np.clip(np.rint(vector / peak * 127.0), -127, 127).astype(np.int8)
    return peak / 127.0, q.tobytes()


def dequantize(scale: float, q: bytes) -> NDArray[np.float32]:
    """The unit vector of (scale, q) (the scale only says the vector was not zero)."""
    vector = np.frombuffer(q, dtype=np.int8).astype(np.float32) * np.float32(scale)
    norm = float(np.linalg.norm(vector))
    if norm <= 0.0 or not math.isfinite(norm):
        raise ValueError("a shipped vector dequantises to zero")
    unit: NDArray[np.float32] = (vector / np.float32(norm)).astype(np.float32, copy=False)
    return unit


def encode_section(space: str, vectors: Mapping[str, NDArray[np.float32]]) -> list[Any]:
    """The msgpack-ready section for `vectors` (entry id -> unit vector) of `space`."""
    return [space, [[entry_id, *quantize(vec)] for entry_id, vec in vectors.items()]]


def decode_section(raw: object, *, dim: int | None = None) -> Shipped:
    """Parse a section from decoded msgpack. Every field is checked; raises
    `RemoteProtocolError("malformed_vectors", …)` for anything else. With `dim`, vectors of
    another length are refused too (they are not of the receiver's space)."""

    def bad(why: str) -> RemoteProtocolError:
        return RemoteProtocolError("malformed_vectors", why)

    if not isinstance(raw, list) or len(raw) != 2:
        raise bad("a vectors section is [space, [[entry id, scale, q], …]]")
    space, items = raw
    if not isinstance(space, str) or not 0 < len(space) <= MAX_SPACE_CHARS:
        raise bad("the vector space is a short non-empty string")
    if not isinstance(items, list) or len(items) > MAX_SHIPPED:
        raise bad(f"at most {MAX_SHIPPED} vectors a message")
    vectors: dict[str, NDArray[np.float32]] = {}
    for item in items:
        if not isinstance(item, list) or len(item) != 3:
            raise bad("a shipped vector is [entry id, scale, q]")
        entry_id, scale, q = item
        if not isinstance(entry_id, str) or not 0 < len(entry_id) <= 128:
            raise bad("a shipped vector's entry id is a short string")
        if type(scale) is not float or not (math.isfinite(scale) and scale > 0.0):
            raise bad(f"the scale of {entry_id}'s vector is not a positive float")
        if not isinstance(q, bytes) or not 0 < len(q) <= MAX_DIM or (dim is not None and len(q) != dim):
            raise bad(f"{entry_id}'s vector has {len(q) if isinstance(q, bytes) else '?'} components"
                      + (f", not {dim}" if dim is not None else ""))
        try:
            vectors[entry_id] = dequantize(scale, q)
        except ValueError as exc:
            raise bad(f"{entry_id}: {exc}") from None
    return Shipped(space, vectors)


def sampled(entry_id: str, salt: str, rate: float) -> bool:
    """Whether this receiver checks this entry's shipped vector: a fixed draw per (entry,
    receiver) — an author cannot know which of its vectors a sibling checks, and a sibling
    checks the same ones after a restart. `rate` 1: every one; 0: none."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = hashlib.blake2b(f"{salt}\0{entry_id}".encode(), digest_size=8, person=b"clade.vcheck").digest()
    return int.from_bytes(h, "big") / 2**64 < rate


@dataclass(slots=True)
class CheckBatcher:
    """When to run the pending checks (`due`): a full batch, arrivals that paused (as many
    pending as at the last look), or the first of them waiting `wait_s`. Times are the
    caller's clock (trio.current_time() in the daemon), so MockClock drives it."""

    batch: int = CHECK_BATCH
    wait_s: float = CHECK_WAIT_S
    _last_pending: int = 0
    _waiting_since: float | None = None

    def due(self, pending: int, now: float) -> bool:
        """Whether to check now, with `pending` checks waiting (0: nothing to do)."""
        previous, self._last_pending = self._last_pending, pending
        if pending <= 0:
            self._waiting_since = None
            return False
        if self._waiting_since is None:
            self._waiting_since = now
        if pending >= self.batch or pending == previous or now - self._waiting_since >= self.wait_s:
            self._waiting_since, self._last_pending = None, 0
            return True
        return False


def matches(shipped: NDArray[np.float32], own: NDArray[np.float32]) -> bool:
    """Whether a shipped vector is the receiver's own embedding of the same text (both unit)."""
    return shipped.shape == own.shape and float(np.dot(shipped, own)) >= MATCH_COSINE
