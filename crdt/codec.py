"""Wire codec for deltas: msgpack with a schema version, strict types, hard caps.

    delta   = [VERSION, groups, context]
    groups  = [[writer, [[signed, signature], …]], …]        ops grouped by writer
    context = [[writer, vv, [seq, …]], …]                    version vector + dot cloud

Decoding never trusts a length or a type: the whole message is capped before parsing,
msgpack itself is told every cap, and each op is size-checked and signature-checked before
its contents are decoded. A structural fault refuses the whole message; a bad op is
dropped and counted by reason while the rest of the batch is used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from .body import check_peer_id
from .context import CausalContext, Dot
from .errors import InvalidValue, RemoteProtocolError
from .ops import Op, Verifier, open_op, unpack_strict
from .replica import MAX_BATCH_BYTES, MAX_BATCH_OPS, Delta

__all__ = [
    "DELTA_VERSION", "MAX_CLOUD", "MAX_REPLICAS", "PackedDelta", "RawOp", "decode_delta", "encode_delta",
    "open_ops", "unpack_delta",
]

DELTA_VERSION = 1
MAX_REPLICAS = 4096
MAX_CLOUD = 65_536


def encode_delta(delta: Delta) -> bytes:
    """Encode a delta; raises `InvalidValue` if it breaks a cap (a local bug, not a peer's)."""
    if len(delta.ops) > MAX_BATCH_OPS:
        raise InvalidValue("delta", f"{len(delta.ops)} ops exceed the {MAX_BATCH_OPS}-op cap")
    groups: dict[str, list[list[bytes]]] = {}
    for op in delta.ops:
        groups.setdefault(op.writer, []).append([op.signed, op.signature])
    data = msgpack.packb(
        [DELTA_VERSION, [[w, ops] for w, ops in groups.items()], encode_context(delta.context)],
        use_bin_type=True,
    )
    if len(data) > MAX_BATCH_BYTES:
        raise InvalidValue("delta", f"{len(data)} bytes exceed the {MAX_BATCH_BYTES}-byte cap")
    return data


def encode_context(ctx: CausalContext) -> list[Any]:
    return [[r, vv, cloud] for r, vv, cloud in ctx.to_rows()]


def decode_context(raw: object) -> CausalContext:
    """Parse a context from decoded msgpack; raises `RemoteProtocolError`."""
    if not isinstance(raw, list) or len(raw) > MAX_REPLICAS:
        raise RemoteProtocolError("malformed", f"context must be a list of at most {MAX_REPLICAS} rows")
    ctx = CausalContext()
    cloud_total = 0
    for row in raw:
        if not isinstance(row, list) or len(row) != 3:
            raise RemoteProtocolError("malformed", "context row is [writer, vv, cloud]")
        replica, vv, cloud = row
        try:
            check_peer_id("context writer", replica)
        except InvalidValue as exc:
            raise RemoteProtocolError("malformed", str(exc)) from None
        if type(vv) is not int or not 0 <= vv < (1 << 63) or not isinstance(cloud, list):
            raise RemoteProtocolError("malformed", f"context row for {replica}: bad vv or cloud")
        cloud_total += len(cloud)
        if cloud_total > MAX_CLOUD:
            raise RemoteProtocolError("oversized", f"context clouds exceed {MAX_CLOUD} seqs")
        if vv:
            ctx.merge_replica(CausalContext({replica: vv}), replica)
        for seq in cloud:
            if type(seq) is not int or not vv < seq < (1 << 63):
                raise RemoteProtocolError("malformed", f"context cloud seq {seq!r} for {replica} is not above vv")
            ctx.add(Dot(replica, seq))
    return ctx


RawOp = tuple[object, object, object]
"""(writer, signed, signature) as they came off the wire: not yet checked or verified."""


@dataclass(frozen=True, slots=True)
class PackedDelta:
    """A delta whose framing and context were checked but whose ops are not opened yet:
    `open_ops` checks and verifies them (in pieces, if the caller wants to overlap that
    work with joining the pieces already opened; see `replica.DeltaJoin`)."""

    raw_ops: list[RawOp]
    context: CausalContext


def unpack_delta(data: bytes) -> PackedDelta:
    """Check a delta's size, version, structure and context; its ops stay sealed.

    Raises `RemoteProtocolError` (reasons `oversized`, `malformed`, `unknown_version`) if
    the message as a whole is unusable.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RemoteProtocolError("malformed", "a delta is bytes")
    if len(data) > MAX_BATCH_BYTES:
        raise RemoteProtocolError("oversized", f"delta of {len(data)} bytes exceeds {MAX_BATCH_BYTES}")
    message = unpack_strict(bytes(data), max_len=MAX_BATCH_BYTES, max_array=MAX_CLOUD)
    if not isinstance(message, list) or len(message) < 1:
        raise RemoteProtocolError("malformed", "a delta is a list")
    if message[0] != DELTA_VERSION or type(message[0]) is not int:
        raise RemoteProtocolError(
            "unknown_version", f"delta version {message[0]!r} (this clade speaks {DELTA_VERSION})"
        )
    if len(message) != 3:
        raise RemoteProtocolError("malformed", "a delta is [version, groups, context]")
    _, groups, raw_context = message
    if not isinstance(groups, list) or len(groups) > MAX_REPLICAS:
        raise RemoteProtocolError("malformed", "op groups must be a list")
    raw_ops: list[RawOp] = []
    for group in groups:
        if not isinstance(group, list) or len(group) != 2 or not isinstance(group[1], list):
            raise RemoteProtocolError("malformed", "an op group is [writer, [op, …]]")
        writer, ops = group
        for item in ops:
            if not isinstance(item, list) or len(item) != 2:
                raise RemoteProtocolError("malformed", "an op is [signed, signature]")
            raw_ops.append((writer, item[0], item[1]))
            if len(raw_ops) > MAX_BATCH_OPS:
                raise RemoteProtocolError("oversized", f"delta carries more than {MAX_BATCH_OPS} ops")
    return PackedDelta(raw_ops, decode_context(raw_context))


def open_ops(raw_ops: Iterable[RawOp], verify: Verifier) -> tuple[list[Op], list[tuple[str | None, str]]]:
    """Check, verify and decode sealed ops: the ops that passed, and (writer, reason) for
    each that did not (writer None when it was not even a peer id). Never raises."""
    opened: list[Op] = []
    refused: list[tuple[str | None, str]] = []
    for writer, signed, signature in raw_ops:
        try:
            opened.append(open_op(writer, signed, signature, verify))
        except RemoteProtocolError as exc:
            refused.append((writer if isinstance(writer, str) else None, exc.reason))
    return opened, refused


def decode_delta(data: bytes, verify: Verifier) -> tuple[Delta, Counter[str]]:
    """Decode and verify a delta from a peer.

    Returns the delta of the ops that passed and a count of dropped ops by reason. Raises
    `RemoteProtocolError` (reasons `oversized`, `malformed`, `unknown_version`) if the
    message as a whole is unusable.
    """
    packed = unpack_delta(data)
    opened, refused = open_ops(packed.raw_ops, verify)
    return Delta(tuple(opened), packed.context), Counter(reason for _, reason in refused)
