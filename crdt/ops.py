"""Signed single-writer slot ops: their values, canonical encoding, signing and opening.

An op is one write to one slot of one entry:

- `BODY`     the immutable body; written by the entry's author (the id hashes it);
- `AUTHOR`   {confidence, status, superseded_by}; written only by the entry's author;
- `ENDORSE`  {confirms, contradicts} of replica r about someone else's entry; written only by r;
- `EVIDENCE` {positive, negative}: the tally of replica r's outcomes on an entry (its own or
             another's); written only by r, counts only grow. The outcome itself (metric,
             value, note, episode, time) is soma and never becomes an op.

On the wire an op is `(writer, signed, signature)`. `signed` is the canonical msgpack of
`[version, seq, hlc, entry id, slot, value]` and the Ed25519 signature covers
`DOMAIN ‖ signed` exactly as received, so a receiver checks the signature *before*
decoding what it covers, and never has to re-encode to verify. The writer is not inside
`signed`: the signature under the writer's key already binds it, and leaving it out saves
52 bytes an op. Signing and verifying are injected (`crypto` does them) so this stays pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import msgpack

from .body import EntryBody, check_peer_id
from .context import Dot
from .errors import InvalidValue, RemoteProtocolError
from .hlc import Timestamp

__all__ = [
    "DOMAIN",
    "MAX_OP_BYTES",
    "AuthorValue",
    "EndorseValue",
    "EvidenceValue",
    "Op",
    "Signer",
    "SlotKind",
    "Status",
    "Value",
    "Verifier",
    "make_op",
    "open_op",
    "unpack_strict",
]

OP_VERSION = 1
DOMAIN = b"clade.op.v1\x00"
MAX_OP_BYTES = 8 * 1024
MAX_COUNT = (1 << 31) - 1
SIGNATURE_BYTES = 64

Signer = Callable[[bytes], bytes]
"""Signs a message with the local replica's key; returns a 64-byte signature."""
Verifier = Callable[[str, bytes, bytes], bool]
"""`verify(writer peer id, message, signature)`: True iff the writer signed the message."""


class SlotKind(IntEnum):
    BODY = 0
    AUTHOR = 1
    ENDORSE = 2
    EVIDENCE = 3


class Status(IntEnum):
    ACTIVE = 0
    RETRACTED = 1

    @property
    def label(self) -> str:
        return self.name.lower()


def _check_entry_id(name: str, value: object) -> str:
    if not isinstance(value, str) or len(value) != 32:
        raise InvalidValue(name, f"must be 32 hex characters, got {value!r}")
    try:
        bytes.fromhex(value)
    except ValueError:
        raise InvalidValue(name, f"must be 32 hex characters, got {value!r}") from None
    return value.lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorValue:
    """The author's mutable view of an entry."""

    confidence: float
    status: Status = Status.ACTIVE
    superseded_by: str | None = None

    def __post_init__(self) -> None:
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or not 0 <= c <= 1:
            raise InvalidValue("confidence", f"must be a number in 0..1, got {c!r}")
        object.__setattr__(self, "confidence", float(c) + 0.0)  # no -0.0 (see body.check_unit)
        if type(self.status) is not Status:  # Status(...) is an Enum call (~10x a type test)
            object.__setattr__(self, "status", Status(self.status))
        if self.superseded_by is not None:
            object.__setattr__(self, "superseded_by", _check_entry_id("superseded_by", self.superseded_by))

    def to_wire(self) -> list[Any]:
        sup = None if self.superseded_by is None else bytes.fromhex(self.superseded_by)
        return [self.confidence, int(self.status), sup]


def _check_counts(value: object, names: tuple[str, ...]) -> None:
    """A tally's counts: each an int in 0..MAX_COUNT (`InvalidValue` names the first that is not)."""
    for name in names:
        v = getattr(value, name)
        if type(v) is not int or not 0 <= v <= MAX_COUNT:
            raise InvalidValue(name, f"must be an integer in 0..{MAX_COUNT}, got {v!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EndorseValue:
    """One replica's running tally of confirmations and contradictions of an entry."""

    confirms: int = 0
    contradicts: int = 0

    def __post_init__(self) -> None:
        _check_counts(self, ("confirms", "contradicts"))

    def to_wire(self) -> list[Any]:
        return [self.confirms, self.contradicts]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceValue:
    """One replica's running tally of its positive and negative outcomes on an entry."""

    positive: int = 0
    negative: int = 0

    def __post_init__(self) -> None:
        _check_counts(self, ("positive", "negative"))

    def covers(self, other: EvidenceValue) -> bool:
        """Whether this tally is at least `other` in both counts (a tally only grows)."""
        return self.positive >= other.positive and self.negative >= other.negative

    def to_wire(self) -> list[Any]:
        return [self.positive, self.negative]


Value = EntryBody | AuthorValue | EndorseValue | EvidenceValue
_VALUE_TYPES: dict[SlotKind, type] = {
    SlotKind.BODY: EntryBody,
    SlotKind.AUTHOR: AuthorValue,
    SlotKind.ENDORSE: EndorseValue,
    SlotKind.EVIDENCE: EvidenceValue,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """A verified (or locally made) slot write, with the exact bytes its signature covers."""

    writer: str
    seq: int
    hlc: Timestamp
    entry_id: str
    slot: SlotKind
    value: Value
    signed: bytes
    signature: bytes
    _dot: Dot | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def dot(self) -> Dot:
        """(writer, seq), built once: joining an op asks for it several times."""
        dot = self._dot
        if dot is None:
            dot = Dot(self.writer, self.seq)
            object.__setattr__(self, "_dot", dot)
        return dot

    @property
    def key(self) -> tuple[str, int, str]:
        """The slot this op writes: (entry id, slot kind, writer)."""
        return (self.entry_id, int(self.slot), self.writer)

    @property
    def wire_size(self) -> int:
        """Bytes this op adds to a batch (signed part, signature, framing)."""
        return len(self.signed) + SIGNATURE_BYTES + 6


def _encode_signed(seq: int, hlc: Timestamp, entry_id: str, slot: SlotKind, value: Value) -> bytes:
    return msgpack.packb(
        [OP_VERSION, seq, hlc.pack(), bytes.fromhex(entry_id), int(slot), value.to_wire()],
        use_bin_type=True,
        use_single_float=False,
    )


def make_op(
    *, writer: str, seq: int, hlc: Timestamp, entry_id: str, slot: SlotKind, value: Value, sign: Signer
) -> Op:
    """Build and sign a local op. Raises `InvalidValue` if the parts do not fit together."""
    check_peer_id("writer", writer)
    Dot(writer, seq)
    entry_id = _check_entry_id("entry_id", entry_id)
    if not isinstance(value, _VALUE_TYPES[slot]):
        raise InvalidValue("value", f"slot {slot.name} takes {_VALUE_TYPES[slot].__name__}, got {value!r}")
    if isinstance(value, EntryBody):
        if value.id != entry_id:
            raise InvalidValue("entry_id", "does not match the body's hash")
        if value.author != writer:
            raise InvalidValue("writer", "only the author writes an entry's body")
    signed = _encode_signed(seq, hlc, entry_id, slot, value)
    if len(signed) > MAX_OP_BYTES:
        raise InvalidValue("op", f"encodes to {len(signed)} bytes, over the {MAX_OP_BYTES}-byte cap")
    signature = sign(DOMAIN + signed)
    if len(signature) != SIGNATURE_BYTES:
        raise InvalidValue("signature", f"signer returned {len(signature)} bytes, expected {SIGNATURE_BYTES}")
    return Op(writer=writer, seq=seq, hlc=hlc, entry_id=entry_id, slot=slot, value=value,
              signed=signed, signature=signature)


def _refuse_ext(code: int, data: bytes) -> object:
    raise RemoteProtocolError("malformed", f"msgpack extension type {code} is not allowed")


def unpack_strict(data: bytes, *, max_len: int, max_array: int = 64) -> Any:
    """msgpack-decode untrusted bytes with every length capped and no maps or extensions.

    Raises `RemoteProtocolError("malformed", …)` for anything that is not exactly one
    well-formed msgpack object within the caps.
    """
    try:
        return msgpack.unpackb(
            data, raw=False, use_list=True, strict_map_key=True, ext_hook=_refuse_ext,
            max_str_len=max_len, max_bin_len=max_len,
            max_array_len=max_array, max_map_len=0, max_ext_len=0,
        )
    except RemoteProtocolError:
        raise
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        raise RemoteProtocolError("malformed", f"undecodable msgpack: {type(exc).__name__}: {exc}") from None


def open_op(writer: object, signed: object, signature: object, verify: Verifier) -> Op:
    """Check and decode an op received from a peer.

    Order: types and sizes, then the signature over the raw bytes, then decoding. Raises
    `RemoteProtocolError` with reason `malformed`, `oversized`, `unknown_version`,
    `bad_signature` or `invalid` (a decoded value breaks a rule, e.g. body/id mismatch).
    """
    if not isinstance(writer, str) or not isinstance(signed, bytes) or not isinstance(signature, bytes):
        raise RemoteProtocolError("malformed", "an op is (writer text, signed bytes, signature bytes)")
    if len(signed) > MAX_OP_BYTES:
        raise RemoteProtocolError("oversized", f"op of {len(signed)} bytes exceeds {MAX_OP_BYTES}")
    try:
        check_peer_id("writer", writer)
    except InvalidValue as exc:
        raise RemoteProtocolError("malformed", str(exc)) from None
    if len(signature) != SIGNATURE_BYTES or not verify(writer, DOMAIN + signed, signature):
        raise RemoteProtocolError("bad_signature", f"op signature does not verify for writer {writer}")
    fields = unpack_strict(signed, max_len=MAX_OP_BYTES)
    if not isinstance(fields, list) or len(fields) != 6:
        raise RemoteProtocolError("malformed", "an op is a list of 6 fields")
    version, seq, hlc, entry_id, slot, value = fields
    if version != OP_VERSION or type(version) is not int:
        raise RemoteProtocolError("unknown_version", f"op version {version!r} (this clade speaks {OP_VERSION})")
    try:
        if type(seq) is not int or type(hlc) is not int or type(slot) is not int:
            raise InvalidValue("op", "seq, hlc and slot must be integers")
        if not isinstance(entry_id, bytes) or len(entry_id) != 16:
            raise InvalidValue("entry_id", "must be 16 bytes")
        kind = _SLOT_KINDS.get(slot)
        if kind is None:
            raise InvalidValue("slot", f"unknown slot kind {slot}")
        decoded = _decode_value(kind, value)
        dot = Dot(writer, seq)  # checks the seq; kept as the op's dot, which joining it reads
        op = Op(writer=writer, seq=seq, hlc=Timestamp.unpack(hlc), entry_id=entry_id.hex(),
                slot=kind, value=decoded, signed=signed, signature=signature)
        object.__setattr__(op, "_dot", dot)
        if isinstance(decoded, EntryBody):
            if decoded.id != op.entry_id:
                raise InvalidValue("body", f"hashes to {decoded.id}, not to its id {op.entry_id}")
            if decoded.author != writer:
                raise InvalidValue("body", f"authored by {decoded.author} but written by {writer}")
    except InvalidValue as exc:
        raise RemoteProtocolError("invalid", str(exc)) from None
    return op


def open_stored_op(writer: str, signed: bytes, signature: bytes) -> Op:
    """Decode an op from this replica's own store: it was checked (signature, format, rules)
    when it arrived, so nothing is verified, validated or re-hashed again — extraction for a
    peer is a read, not a second admission. Never use it on bytes from a peer: that is `open_op`."""
    _, seq, hlc, entry_id, slot, value = msgpack.unpackb(signed, raw=False)
    kind = _SLOT_KINDS[slot]
    entry = entry_id.hex()
    decoded: Value
    if kind is SlotKind.BODY:
        decoded = EntryBody.from_trusted_wire(value, entry)
    elif kind is SlotKind.AUTHOR:
        confidence, status, sup = value
        decoded = object.__new__(AuthorValue)
        for name, field_value in (("confidence", confidence), ("status", _STATUSES[status]),
                                  ("superseded_by", None if sup is None else sup.hex())):
            object.__setattr__(decoded, name, field_value)
    elif kind is SlotKind.ENDORSE:
        decoded = object.__new__(EndorseValue)
        object.__setattr__(decoded, "confirms", value[0])
        object.__setattr__(decoded, "contradicts", value[1])
    else:
        decoded = object.__new__(EvidenceValue)
        object.__setattr__(decoded, "positive", value[0])
        object.__setattr__(decoded, "negative", value[1])
    return Op(writer=writer, seq=seq, hlc=Timestamp.unpack_trusted(hlc), entry_id=entry, slot=kind, value=decoded,
              signed=signed, signature=signature)


_SLOT_KINDS = {k.value: k for k in SlotKind}
_STATUSES = {s.value: s for s in Status}


def _decode_value(kind: SlotKind, value: object) -> Value:
    if kind is SlotKind.BODY:
        return EntryBody.from_wire(value)
    if not isinstance(value, list):
        raise InvalidValue("value", "must be a list")
    if kind is SlotKind.AUTHOR:
        if len(value) != 3:
            raise InvalidValue("value", "author value is [confidence, status, superseded_by]")
        confidence, status, sup = value
        if type(status) is not int or status not in (0, 1):
            raise InvalidValue("status", f"unknown status {status!r}")
        if sup is not None and (not isinstance(sup, bytes) or len(sup) != 16):
            raise InvalidValue("superseded_by", "must be 16 bytes or nil")
        return AuthorValue(confidence=confidence, status=_STATUSES[status],
                           superseded_by=None if sup is None else sup.hex())
    if len(value) != 2:
        raise InvalidValue("value", f"{kind.name.lower()} value is a pair of counts")
    if kind is SlotKind.EVIDENCE:
        return EvidenceValue(positive=value[0], negative=value[1])
    return EndorseValue(confirms=value[0], contradicts=value[1])
