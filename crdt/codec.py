"""Wire codec for deltas: msgpack with a schema version, strict types, hard caps.

    delta   = [VERSION, groups, context]
    groups  = [[writer, [[signed, signature], …]], …]        ops grouped by writer
    context = [[writer, vv, [seq, …]], …]                    version vector + dot cloud

Version 2 (`SEALED_VERSION`, sync v3 only) adds each writer's seals (`crdt.seals`) to its group;
a group may carry seals and no op (a relay catching up on seals):

    groups  = [[writer, [[signed, signature], …], [[block, leaves, signature], …]], …]

Decoding never trusts a length or a type: the whole message is capped before parsing,
msgpack itself is told every cap, and each op is size-checked and signature-checked before
its contents are decoded. A structural fault refuses the whole message; a bad op is
dropped and counted by reason while the rest of the batch is used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .body import check_peer_id
from .context import CausalContext, Dot
from .errors import InvalidValue, RemoteProtocolError
from .ops import Op, Verifier, open_op, unpack_strict
from .replica import MAX_BATCH_BYTES, MAX_BATCH_OPS, Delta
from .seals import Seal, decode_seals

__all__ = [
    "DELTA_VERSION", "MAX_CLOUD", "MAX_REPLICAS", "MAX_SEALS", "SEALED_VERSION", "PackedDelta", "RawOp", "decode_delta",
    "encode_delta", "open_ops", "unpack_delta",
]

DELTA_VERSION = 1
SEALED_VERSION = 2
MAX_REPLICAS = 4096
MAX_CLOUD = 65_536
MAX_SEALS = 128  # per delta: 128 × ~4.2 kB (~540 kB) stays well under the delta's 1 MiB cap


def encode_delta(delta: Delta, seals: Sequence[Seal] | None = None) -> bytes:
    """Encode a delta; with `seals` (even none) in version 2, each writer's seals in its group.
    Raises `InvalidValue` if it breaks a cap (a local bug, not a peer's)."""
    if len(delta.ops) > MAX_BATCH_OPS:
        raise InvalidValue("delta", f"{len(delta.ops)} ops exceed the {MAX_BATCH_OPS}-op cap")
    groups: dict[str, list[list[bytes]]] = {}
    for op in delta.ops:
        groups.setdefault(op.writer, []).append([op.signed, op.signature])
    if seals is None:
        body: list[Any] = [DELTA_VERSION, [[w, ops] for w, ops in groups.items()], encode_context(delta.context)]
    else:
        if len(seals) > MAX_SEALS:
            raise InvalidValue("delta", f"{len(seals)} seals exceed the {MAX_SEALS}-seal cap")
        by_writer: dict[str, list[list[object]]] = {}
        for seal in seals:
            groups.setdefault(seal.writer, [])
            by_writer.setdefault(seal.writer, []).append(seal.to_wire())
        body = [SEALED_VERSION, [[w, ops, by_writer.get(w, [])] for w, ops in groups.items()],
                encode_context(delta.context)]
    data = msgpack.packb(body, use_bin_type=True)
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
    seals: list[Seal] = field(default_factory=list)  # version 2: shapes checked, signatures not yet


def unpack_delta(data: bytes, *, sealed: bool = False) -> PackedDelta:
    """Check a delta's size, version, structure and context; its ops stay sealed. `sealed`:
    version 2 (with seals, sync v3) is accepted too.

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
    versions = (DELTA_VERSION, SEALED_VERSION) if sealed else (DELTA_VERSION,)
    if type(message[0]) is not int or message[0] not in versions:
        raise RemoteProtocolError(
            "unknown_version", f"delta version {message[0]!r} (this stream speaks {' or '.join(map(str, versions))})"
        )
    width = 3 if message[0] == SEALED_VERSION else 2
    if len(message) != 3:
        raise RemoteProtocolError("malformed", "a delta is [version, groups, context]")
    _, groups, raw_context = message
    if not isinstance(groups, list) or len(groups) > MAX_REPLICAS:
        raise RemoteProtocolError("malformed", "op groups must be a list")
    raw_ops: list[RawOp] = []
    seals: list[Seal] = []
    for group in groups:
        if not isinstance(group, list) or len(group) != width or not isinstance(group[1], list):
            raise RemoteProtocolError("malformed", "an op group is [writer, [op, …]]" if width == 2
                                      else "an op group is [writer, [op, …], [seal, …]]")
        writer, ops = group[0], group[1]
        if width == 3:
            try:
                check_peer_id("seal writer", writer)
            except InvalidValue as exc:
                raise RemoteProtocolError("malformed", str(exc)) from None
            seals += decode_seals(writer, group[2], limit=MAX_SEALS - len(seals))
        for item in ops:
            if not isinstance(item, list) or len(item) != 2:
                raise RemoteProtocolError("malformed", "an op is [signed, signature]")
            raw_ops.append((writer, item[0], item[1]))
            if len(raw_ops) > MAX_BATCH_OPS:
                raise RemoteProtocolError("oversized", f"delta carries more than {MAX_BATCH_OPS} ops")
    return PackedDelta(raw_ops, decode_context(raw_context), seals)


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
