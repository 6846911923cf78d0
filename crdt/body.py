"""The immutable body of a Grimoire entry, its canonical encoding and its id.

The id is `blake2b-128(canonical body)`: it binds the whole body, author included, so a
body whose hash does not match its id is rejected, and two bodies can never share an id.
(The first design hashed only author, kind, content and created HLC; that would let one id carry
two differing bodies, e.g. other tags or importance, so we hash every immutable field.)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeVar

import msgpack

from .errors import InvalidValue
from .hlc import Timestamp

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_LABELS",
    "MAX_LABEL_CHARS",
    "MAX_OCCURRED_MS",
    "Category",
    "EntryBody",
    "EntryTraits",
    "Kind",
    "Origin",
    "Pad",
    "Sensitivity",
    "check_content",
    "check_occurred_ms",
    "check_peer_id",
    "check_text_size",
    "check_unit",
    "parse_enum",
]

MAX_CONTENT_BYTES = 4096
MAX_LABEL_CHARS = 48
MAX_LABELS = 16
MAX_STRATEGY_ID_CHARS = 128
MAX_PEER_ID_CHARS = 128
_ID_PERSON = b"clade.entry.v1"
_BODY_TAG = "clade.entry"
BODY_VERSION = 1
# Event time (`occurred_ms`): Unix milliseconds, 1970-01-01 up to the end of year 9999 (what
# ISO 8601 without an expanded year can write). Absent (None): unknown.
MAX_OCCURRED_MS = 253_402_300_799_999
_BODY_FIELDS = 19  # a body without event time: the format every clade reads


E = TypeVar("E", bound=StrEnum)


class Kind(StrEnum):
    """What an entry is; decides whether and when it may cross to siblings."""

    INSIGHT = "insight"
    HEURISTIC = "heuristic"
    WARNING = "warning"
    REGIME_SHIFT = "regime_shift"
    ANTI_KNOWLEDGE = "anti_knowledge"
    CAUSAL_LINK = "causal_link"
    FACT = "fact"
    PREFERENCE = "preference"
    CONSTRAINT = "constraint"
    STRATEGY_OUTCOME = "strategy_outcome"
    EPISODE_SUMMARY = "episode_summary"
    DEATH_REFLECTION = "death_reflection"


class Category(StrEnum):
    """The twelve knowledge categories of a DeFi golem."""

    SLIPPAGE = "slippage"
    GAS_TIMING = "gas_timing"
    ROUTE_SELECTION = "route_selection"
    LIQUIDITY_CONDITIONS = "liquidity_conditions"
    REGIME_TRANSITIONS = "regime_transitions"
    RISK_EVENTS = "risk_events"
    REBALANCE_TIMING = "rebalance_timing"
    RANGE_SELECTION = "range_selection"
    FEE_OPTIMIZATION = "fee_optimization"
    JIT_DEFENSE = "jit_defense"
    TOOL_GUIDANCE = "tool_guidance"
    STRATEGIC_PATTERNS = "strategic_patterns"


class Sensitivity(StrEnum):
    """public may cross (subject to the gates); private and sensitive never leave the golem."""

    PUBLIC = "public"
    PRIVATE = "private"
    SENSITIVE = "sensitive"


class Origin(StrEnum):
    """Where the author got the knowledge (travels with the body)."""

    SELF = "self"
    CLADE = "clade"
    VAULT = "vault"
    STYX = "styx"
    LETHE = "lethe"
    MARKETPLACE = "marketplace"
    INHERITED = "inherited"


_MEMBERS: dict[type[StrEnum], dict[str, StrEnum]] = {}


def parse_enum(cls: type[E], name: str, value: object) -> E:
    """`cls(value)`, or `InvalidValue` naming the field and listing the allowed values.
    A value (or member) is found by one dict lookup: `cls(value)` costs ~10x that, and every
    body a sibling sends parses four of them (bench_clade's catch-up ceiling)."""
    members = _MEMBERS.get(cls)
    if members is None:
        members = _MEMBERS[cls] = {m.value: m for m in cls}
    if type(value) is str or isinstance(value, cls):
        found = members.get(value)
        if found is not None:
            return found  # type: ignore[return-value]
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise InvalidValue(name, f"{value!r} is not one of: {allowed}") from None


def check_unit(name: str, value: object, low: float = 0.0, high: float = 1.0) -> float:
    """Return `value` as a float if it is a finite number in [low, high], else raise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValue(name, f"must be a number in {low:g}..{high:g}, got {value!r}")
    # `+ 0.0` turns -0.0 into 0.0: SQLite stores -0.0 as 0.0, and the id hashes the
    # exact float, so a body must never carry a negative zero.
    number = float(value) + 0.0
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidValue(name, f"must be a number in {low:g}..{high:g}, got {value!r}")
    return number


def check_peer_id(name: str, value: object) -> str:
    """A peer id: 1..128 ASCII letters and digits (base58 or base32 multihash text)."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_PEER_ID_CHARS
        or not value.isascii()
        or not value.isalnum()
    ):
        raise InvalidValue(name, f"must be a peer id (1..{MAX_PEER_ID_CHARS} ASCII letters/digits), got {value!r}")
    return value


def _check_text(name: str, value: object, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidValue(name, f"must be text, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidValue(name, "must not be empty")
    if len(text) > max_chars:
        raise InvalidValue(name, f"must be at most {max_chars} characters, got {len(text)}")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidValue(name, f"must not contain control characters: {text!r}")
    _check_utf8(name, text)
    return text


def _check_utf8(name: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: how Python hands over invalid UTF-8 bytes from argv or files.
        raise InvalidValue(name, "is not valid UTF-8") from None


def _labels(name: str, values: Iterable[object]) -> tuple[str, ...]:
    if type(values) is tuple and not values:
        return ()  # most bodies carry no tokens, protocols or tags
    labels = sorted({_check_text(name, v, MAX_LABEL_CHARS) for v in values})
    if len(labels) > MAX_LABELS:
        raise InvalidValue(name, f"at most {MAX_LABELS} distinct values, got {len(labels)}")
    return tuple(labels)


def _chains(values: Iterable[object]) -> tuple[int, ...]:
    if type(values) is tuple and not values:
        return ()
    chains: set[int] = set()
    for v in values:
        if type(v) is not int or not 0 < v < (1 << 63):
            raise InvalidValue("chains", f"a chain id must be a positive integer, got {v!r}")
        chains.add(v)
    if len(chains) > MAX_LABELS:
        raise InvalidValue("chains", f"at most {MAX_LABELS} distinct values, got {len(chains)}")
    return tuple(sorted(chains))


def check_content(value: object) -> str:
    """Entry content: non-blank UTF-8 text of at most 4 KiB (encoded); returned unchanged."""
    if not isinstance(value, str):
        raise InvalidValue("content", f"must be text, got {type(value).__name__}")
    _check_utf8("content", value)
    if not value.strip():
        raise InvalidValue("content", "must not be empty")
    check_text_size("content", value, MAX_CONTENT_BYTES)
    return value


def check_text_size(name: str, value: str, max_bytes: int) -> None:
    """Raise `InvalidValue` unless `value` is at most `max_bytes` of UTF-8 without NUL characters."""
    size = len(value.encode("utf-8"))
    if size > max_bytes:
        raise InvalidValue(name, f"must be at most {max_bytes} bytes of UTF-8, got {size}")
    if "\x00" in value:
        raise InvalidValue(name, "must not contain NUL characters")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pad:
    """Pleasure, arousal, dominance at write time, each in -1..1."""

    pleasure: float
    arousal: float
    dominance: float

    def __post_init__(self) -> None:
        for name in ("pleasure", "arousal", "dominance"):
            object.__setattr__(self, name, check_unit(f"pad.{name}", getattr(self, name), -1.0, 1.0))

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.pleasure, self.arousal, self.dominance)


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryTraits:
    """What the writer of an entry chooses: every body field but its author and creation time,
    declared once. `EntryBody` adds those two (and checks every field); a local write
    (`daemon.grimoire.records.NewEntry`) adds its confidence. Nothing is checked here."""

    kind: Kind
    content: str
    category: Category | None = None
    tokens: tuple[str, ...] = ()
    chains: tuple[int, ...] = ()
    protocols: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    strategy_id: str | None = None
    importance: float = 0.5
    quality: float = 0.5
    sensitivity: Sensitivity = Sensitivity.PUBLIC
    pad: Pad | None = None
    origin: Origin = Origin.SELF
    generation: int = 0
    bloodstain: bool = False
    occurred_ms: int | None = None  # when what it says happened (event time); None: unknown

    def traits(self) -> dict[str, Any]:
        """These traits by field name (`EntryTraits`' own fields only), as `EntryBody` takes them."""
        return {name: getattr(self, name) for name in _TRAIT_NAMES}


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryBody(EntryTraits):
    """Everything about an entry that never changes after creation: its traits, author and
    creation time.

    Construction validates every field and normalises label lists (deduplicated,
    sorted) so that equal bodies have equal canonical bytes and ids.
    """

    author: str
    created: Timestamp
    _id: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        s = object.__setattr__
        check_peer_id("author", self.author)  # these two checks return their value unchanged
        check_content(self.content)
        s(self, "kind", parse_enum(Kind, "kind", self.kind))
        if not isinstance(self.created, Timestamp):
            raise InvalidValue("created", f"must be a Timestamp, got {self.created!r}")
        if self.category is not None:
            s(self, "category", parse_enum(Category, "category", self.category))
        s(self, "tokens", _labels("tokens", self.tokens))
        s(self, "chains", _chains(self.chains))
        s(self, "protocols", _labels("protocols", self.protocols))
        s(self, "tags", _labels("tags", self.tags))
        if self.strategy_id is not None:
            s(self, "strategy_id", _check_text("strategy_id", self.strategy_id, MAX_STRATEGY_ID_CHARS))
        s(self, "importance", check_unit("importance", self.importance))
        s(self, "quality", check_unit("quality", self.quality))
        s(self, "sensitivity", parse_enum(Sensitivity, "sensitivity", self.sensitivity))
        if self.pad is not None and not isinstance(self.pad, Pad):
            raise InvalidValue("pad", f"must be a Pad, got {self.pad!r}")
        s(self, "origin", parse_enum(Origin, "origin", self.origin))
        if type(self.generation) is not int or not 0 <= self.generation <= 1_000_000:
            raise InvalidValue("generation", f"must be an int in 0..1000000, got {self.generation!r}")
        if type(self.bloodstain) is not bool:
            raise InvalidValue("bloodstain", f"must be a bool, got {self.bloodstain!r}")
        if self.occurred_ms is not None:
            s(self, "occurred_ms", check_occurred_ms(self.occurred_ms))
        s(self, "_id", hashlib.blake2b(self.canonical(), digest_size=16, person=_ID_PERSON).hexdigest())

    @property
    def id(self) -> str:
        """32 hex chars: blake2b-128 of the canonical encoding."""
        return self._id

    def to_wire(self) -> list[object]:
        """The body as a msgpack-ready list; field order is part of the format.

        Event time is an optional 20th field: a body without one is the 19 fields every clade
        reads (its bytes and id unchanged since before event time existed); one with it
        appends `occurred_ms`, which a daemon from before event time refuses as an invalid op
        (counted, the rest of the batch kept)."""
        wire: list[object] = [
            _BODY_TAG,
            BODY_VERSION,
            self.author,
            self.kind._value_,  # `_value_`, not `.value` (an enum property, ~10x slower): hashed on every receive
            self.content,
            self.created.pack(),
            None if self.category is None else self.category._value_,
            list(self.tokens),
            list(self.chains),
            list(self.protocols),
            list(self.tags),
            self.strategy_id,
            self.importance,
            self.quality,
            self.sensitivity._value_,
            None if self.pad is None else list(self.pad.as_tuple()),
            self.origin._value_,
            self.generation,
            self.bloodstain,
        ]
        if self.occurred_ms is not None:
            wire.append(self.occurred_ms)
        return wire

    def canonical(self) -> bytes:
        """Deterministic bytes of the body (msgpack, float64, fixed field order)."""
        return msgpack.packb(self.to_wire(), use_bin_type=True, use_single_float=False)

    @classmethod
    def from_trusted_wire(cls, wire: Any, entry_id: str) -> EntryBody:
        """Rebuild a body this replica checked when it arrived (its own store's, read back to be
        sent on): no validation and no re-hash — `entry_id` is the id it was stored under.
        Never use it on bytes from a peer: that is `from_wire`."""
        (_, _, author, kind, content, created, category, tokens, chains, protocols, tags,
         strategy_id, importance, quality, sensitivity, pad, origin, generation, bloodstain) = wire[:_BODY_FIELDS]
        occurred_ms = wire[_BODY_FIELDS] if len(wire) > _BODY_FIELDS else None
        body = object.__new__(cls)
        s = object.__setattr__
        if pad is not None:
            trusted_pad = object.__new__(Pad)
            for name, value in zip(("pleasure", "arousal", "dominance"), pad, strict=True):
                s(trusted_pad, name, value)
            pad = trusted_pad
        for name, value in (
                ("author", author), ("kind", _KINDS[kind]), ("content", content),
                ("created", Timestamp.unpack_trusted(created)),
                ("category", None if category is None else _CATEGORIES[category]),
                ("tokens", tuple(tokens)), ("chains", tuple(chains)),
                ("protocols", tuple(protocols)), ("tags", tuple(tags)),
                ("strategy_id", strategy_id), ("importance", importance), ("quality", quality),
                ("sensitivity", _SENSITIVITIES[sensitivity]), ("pad", pad),
                ("origin", _ORIGINS[origin]), ("generation", generation), ("bloodstain", bloodstain),
                ("occurred_ms", occurred_ms), ("_id", entry_id)):
            s(body, name, value)
        return body

    @classmethod
    def from_wire(cls, wire: object) -> EntryBody:
        """Rebuild a body from `to_wire` output; raises `InvalidValue` on any mismatch."""
        if not isinstance(wire, list | tuple) or len(wire) not in (_BODY_FIELDS, _BODY_FIELDS + 1):
            raise InvalidValue("body", "must be a list of 19 fields (20 with event time)")
        if wire[0] != _BODY_TAG or wire[1] != BODY_VERSION:
            raise InvalidValue("body", f"unknown body format {wire[0]!r} version {wire[1]!r}")
        (_, _, author, kind, content, created, category, tokens, chains, protocols, tags,
         strategy_id, importance, quality, sensitivity, pad, origin, generation, bloodstain) = wire[:_BODY_FIELDS]
        occurred_ms = None
        if len(wire) > _BODY_FIELDS:
            # Present means known: an absent event time is 19 fields, so one body has one encoding.
            occurred_ms = wire[_BODY_FIELDS]
            if occurred_ms is None:
                raise InvalidValue("occurred_ms", "must be an integer when present (absent: leave the field out)")
        for name, seq in (("tokens", tokens), ("chains", chains), ("protocols", protocols), ("tags", tags)):
            if not isinstance(seq, list | tuple):
                raise InvalidValue(name, "must be a list")
        if pad is not None:
            if not isinstance(pad, list | tuple) or len(pad) != 3:
                raise InvalidValue("pad", "must be a list of 3 numbers")
            pad = Pad(pleasure=pad[0], arousal=pad[1], dominance=pad[2])
        if type(created) is not int:
            raise InvalidValue("created", "must be a packed HLC integer")
        return cls(
            author=author, kind=kind, content=content, created=Timestamp.unpack(created),
            category=category, tokens=tuple(tokens), chains=tuple(chains),
            protocols=tuple(protocols), tags=tuple(tags), strategy_id=strategy_id,
            importance=importance, quality=quality, sensitivity=sensitivity, pad=pad,
            origin=origin, generation=generation, bloodstain=bloodstain, occurred_ms=occurred_ms,
        )


def check_occurred_ms(value: object) -> int:
    """Event time: Unix milliseconds in 0..`MAX_OCCURRED_MS` (1970 to the end of 9999), else raise."""
    if type(value) is not int or not 0 <= value <= MAX_OCCURRED_MS:
        raise InvalidValue("occurred_ms", f"must be Unix milliseconds in 0..{MAX_OCCURRED_MS} "
                                          f"(1970-01-01 to 9999-12-31), got {value!r}")
    return value


_TRAIT_NAMES = tuple(f.name for f in fields(EntryTraits))
# Enum members by wire value, for `EntryBody.from_trusted_wire` (a dict lookup, not Enum.__call__).
_KINDS = {k.value: k for k in Kind}
_CATEGORIES = {c.value: c for c in Category}
_SENSITIVITIES = {v.value: v for v in Sensitivity}
_ORIGINS = {o.value: o for o in Origin}
