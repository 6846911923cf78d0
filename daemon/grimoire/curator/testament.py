"""A dying golem's testament, pure: what goes in, how it is signed and read, what an heir believes.

    file      = vault stream (crypto/vault.py) to the clade key and the owner, of
    plaintext = msgpack ["clade.testament", 1, golem peer id, document, signature]
    document  = msgpack [clade id, created ms, reflection entry id | nil, items]
    items     = [[generation N, [[writer, signed, signature], …]], …]   one item per entry

`signature` is the golem's Ed25519 signature over "clade.testament\\0" ‖ document, checked
before the document is decoded (pynacl's rule: verify before you parse). Each item carries
the entry's own signed ops (its body and its author's latest slot), so every entry is
verified by its author's key exactly as a sibling's op is, and N says how many generations
after the golem that learned it an heir of this testament is.

Selection (`select`), the ONE function behind both ways an heir inherits (`clade testament`
→ `clade inherit`, and `clade restore --as-successor`): the soma dies with the golem. An
entry goes to an heir only if it passes the same Weismann barrier as gossip to a sibling
(`crosses_to_heir` = `crdt.may_cross`): sensitivity public, and a kind that may ever cross —
never strategy_outcome (trade outcomes, position sizes, exact P&L, strategy parameters),
preference (the owner's settings for this golem) or episode_summary (one raw episode
retold: raw episodes never cross; what the curator distilled from them — insights,
heuristics, causal links — does). Exact parameters written as any other kind must be marked
private or sensitive by their writer, which keeps them home. Of what passes, at most
`MAX_ENTRIES` (2,048), in order: the caller's `first` ids (the death reflection), every
other death reflection, every warning and anti_knowledge (by keep score if even they exceed
the cap), then causal links, validated heuristics (confirms and positive evidence — own
outcomes and siblings' weighted evidence, belief.py — outnumber contradictions and negative
evidence), then the rest above `min_confidence` by keep score. Nothing the clade's evidence
refuted is bequeathed.

Inheritance discount (`inherited_confidence`): the N-th generation holds an entry at
min(original, base × 0.85^(N−1)), base 0.4 from a direct predecessor, 0.3 through the Styx
archive (docs/design/ecology.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgpack

from crdt import Kind, Op, RemoteProtocolError, Sensitivity, Verifier, open_op
from crdt.ops import unpack_strict
from crdt.replica import NEVER_CROSS

__all__ = [
    "MAX_ENTRIES",
    "TestamentCandidate",
    "TestamentDocument",
    "TestamentError",
    "TestamentItem",
    "crosses_to_heir",
    "decode",
    "encode",
    "inherited_confidence",
    "select",
]

MAX_ENTRIES = 2048
MAX_TESTAMENT_BYTES = 64 * 1024 * 1024
MAX_OPS_PER_ITEM = 8
TAG = "clade.testament"
VERSION = 1
DOMAIN = b"clade.testament\x00"
DIRECT_BASE = 0.4
ARCHIVE_BASE = 0.3
GENERATION_DECAY = 0.85
ALWAYS = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE})


class TestamentError(ValueError):
    """A testament that cannot be trusted or read: says what was wrong. Nothing was imported."""


@dataclass(frozen=True, slots=True)
class TestamentCandidate:
    id: str
    kind: Kind
    confidence: float  # local, now
    keep_score: float
    confirms: int
    contradicts: int
    sensitivity: Sensitivity = Sensitivity.PUBLIC
    positive: float = 0.0  # outcomes: own in full, siblings' weighted (belief.py)
    negative: float = 0.0
    refuted: bool = False


@dataclass(frozen=True, slots=True)
class TestamentItem:
    generation: int  # ≥ 1: generations after the golem that learned it, for an heir of this testament
    ops: tuple[Op, ...]

    @property
    def entry_id(self) -> str:
        return self.ops[0].entry_id


@dataclass(frozen=True, slots=True)
class TestamentDocument:
    golem: str
    clade_id: str
    created_ms: int
    reflection_id: str | None
    items: tuple[TestamentItem, ...]


def crosses_to_heir(kind: Kind, sensitivity: Sensitivity) -> bool:
    """The Weismann barrier for an heir, the same as for a sibling (`crdt.may_cross`): public,
    and not a soma kind (strategy_outcome, preference, episode_summary)."""
    return sensitivity is Sensitivity.PUBLIC and kind not in NEVER_CROSS


def select(candidates: Sequence[TestamentCandidate], *, first: Sequence[str] = (), min_confidence: float = 0.3,
           limit: int = MAX_ENTRIES) -> list[str]:
    """The ids to bequeath, at most `limit` (≤ `MAX_ENTRIES`), in priority order (deterministic).
    Only candidates that pass `crosses_to_heir`; `first` (e.g. the death reflection) leads,
    if it is among the candidates and passes."""

    def by_keep(c: TestamentCandidate) -> tuple[float, str]:
        return (-c.keep_score, c.id)

    germline = [c for c in candidates if crosses_to_heir(c.kind, c.sensitivity) and not c.refuted]
    by_id = {c.id: c for c in germline}
    lead = [by_id[i] for i in dict.fromkeys(first) if i in by_id]
    led = {c.id for c in lead}
    body = [c for c in germline if c.id not in led]
    reflections = sorted((c for c in body if c.kind is Kind.DEATH_REFLECTION), key=by_keep)
    always = sorted((c for c in body if c.kind in ALWAYS), key=by_keep)
    links = sorted((c for c in body if c.kind is Kind.CAUSAL_LINK), key=by_keep)
    rules = sorted((c for c in body if c.kind is Kind.HEURISTIC
                    and c.confirms + c.positive > c.contradicts + c.negative), key=by_keep)
    ranked = lead + reflections + always + links + rules
    chosen = {c.id for c in ranked}
    rest = sorted((c for c in body if c.id not in chosen and c.confidence >= min_confidence), key=by_keep)
    return [c.id for c in ranked + rest][:min(limit, MAX_ENTRIES)]


def inherited_confidence(original: float, generation: int, *, via_archive: bool = False) -> float:
    """What the `generation`-th heir (1 = direct successor) believes an entry held at `original`."""
    if generation < 1:
        raise ValueError(f"generation must be at least 1, got {generation}")
    base = ARCHIVE_BASE if via_archive else DIRECT_BASE
    return min(original, base * GENERATION_DECAY ** (generation - 1))


def encode(doc: TestamentDocument, sign: Callable[[bytes], bytes]) -> bytes:
    """The signed plaintext (to be written through a vault stream)."""
    if len(doc.items) > MAX_ENTRIES:
        raise ValueError(f"{len(doc.items)} entries exceed the testament's {MAX_ENTRIES}")
    items = [[it.generation, [[op.writer, op.signed, op.signature] for op in it.ops]] for it in doc.items]
    document = msgpack.packb([doc.clade_id, doc.created_ms, doc.reflection_id, items], use_bin_type=True)
    return msgpack.packb([TAG, VERSION, doc.golem, document, sign(DOMAIN + document)], use_bin_type=True)


def decode(data: bytes, verify: Verifier) -> TestamentDocument:
    """Check and read a testament's plaintext. Raises `TestamentError` only."""
    if len(data) > MAX_TESTAMENT_BYTES:
        raise TestamentError(f"{len(data)} bytes: larger than any testament ({MAX_TESTAMENT_BYTES})")
    try:
        outer = unpack_strict(data, max_len=MAX_TESTAMENT_BYTES, max_array=5)
        if not isinstance(outer, list) or len(outer) != 5 or outer[0] != TAG:
            raise TestamentError("not a clade testament")
        _, version, golem, document, signature = outer
        if version != VERSION or type(version) is not int:
            raise TestamentError(f"testament version {version!r}; this clade reads version {VERSION}")
        if not isinstance(golem, str) or not isinstance(document, bytes) or not isinstance(signature, bytes):
            raise TestamentError("malformed testament header")
        if not verify(golem, DOMAIN + document, signature):
            raise TestamentError(f"the testament's signature does not verify for golem {golem}")
        fields = unpack_strict(document, max_len=MAX_TESTAMENT_BYTES, max_array=MAX_ENTRIES * MAX_OPS_PER_ITEM)
        if not isinstance(fields, list) or len(fields) != 4:
            raise TestamentError("malformed testament document")
        clade_id, created_ms, reflection_id, raw_items = fields
        if (not isinstance(clade_id, str) or type(created_ms) is not int
                or not (reflection_id is None or isinstance(reflection_id, str)) or not isinstance(raw_items, list)):
            raise TestamentError("malformed testament document")
        if len(raw_items) > MAX_ENTRIES:
            raise TestamentError(f"{len(raw_items)} entries exceed a testament's {MAX_ENTRIES}")
        items = tuple(_item(raw, verify) for raw in raw_items)
    except RemoteProtocolError as exc:
        raise TestamentError(f"testament refused: {exc}") from None
    if reflection_id is not None and reflection_id not in {it.entry_id for it in items}:
        raise TestamentError("the testament names a death reflection it does not contain")
    return TestamentDocument(golem, clade_id, created_ms, reflection_id, items)


def _item(raw: object, verify: Verifier) -> TestamentItem:
    if not isinstance(raw, list) or len(raw) != 2 or type(raw[0]) is not int or not isinstance(raw[1], list):
        raise TestamentError("malformed testament item")
    generation, raw_ops = raw
    if not 1 <= generation <= 1000 or not 1 <= len(raw_ops) <= MAX_OPS_PER_ITEM:
        raise TestamentError("a testament item needs a generation of 1..1000 and 1..8 ops")
    ops = []
    for r in raw_ops:
        if not isinstance(r, list) or len(r) != 3:
            raise TestamentError("malformed testament op")
        ops.append(open_op(r[0], r[1], r[2], verify))
    if len({op.entry_id for op in ops}) != 1:
        raise TestamentError("a testament item mixes the ops of two entries")
    return TestamentItem(generation, tuple(ops))
