"""An entry's writable fields, declared once.

`EntryFields` is the one model of what a writer gives for a knowledge entry, in the gateway
memory spec's shape (`content`, `memory_type`, `importance`, `metadata{tokens, chains,
protocols, strategy_id, tags}`, plus the Grimoire's `confidence`, `sensitivity`, `category`,
`quality`, `pad`). Everything else derives from it:

- the control API's request body (`daemon.contract.requests.MemoryIn` is this model, widened to take
  `memory_type: episode`), so its OpenAPI schema is these constraints;
- the options of `clade remember` (`cli_options()`: every field carries its `Cli` metadata);
- the store's input (`EntryFields.new_entry()` → `records.NewEntry` → `crdt.EntryBody`).

The constraints here equal the body's own checks (`crdt.body`): strict types (no `0` for a
bool, no `false` for a number), non-blank content without NUL, labels 1..48 characters without
control characters. The one rule a JSON schema cannot state is the 4 KiB *UTF-8* content limit
(the schema counts 4,096 characters); it is checked here too, so the API and the CLI refuse it
with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from crdt import InvalidValue, Kind
from crdt.body import (
    MAX_CONTENT_BYTES,
    MAX_LABEL_CHARS,
    MAX_LABELS,
    MAX_OCCURRED_MS,
    Category,
    Pad,
    Sensitivity,
    check_content,
)

from .records import NewEntry

__all__ = [
    "CONTENT_PATTERN",
    "LABEL_PATTERN",
    "Cli",
    "Content",
    "Count",
    "EntryFields",
    "EventTime",
    "Int",
    "Label",
    "MetadataFields",
    "Unit",
    "cli_options",
    "error_details",
    "event_ms",
    "format_errors",
    "parse_event_time",
]

MAX_STRATEGY_ID_CHARS = 128
# Python's whitespace (`str.isspace`, what `strip()` removes), spelled out: `\s` means something
# else in a JSON Schema (ECMA-262) regex, so the schema and the validators must not rely on it.
SPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK = f"[^{SPACE}]"  # unanchored, as JSON Schema reads patterns: contains a non-space
# Non-blank (a non-space character) and no NUL anywhere: what `crdt.body.check_content` refuses.
CONTENT_PATTERN = rf"^[^\x00]*[^{SPACE}\x00][^\x00]*$"
# A label (tag, token, protocol, strategy id): no control character, at least one non-space.
LABEL_PATTERN = rf"^[^\x00-\x1f\x7f]*[^{SPACE}\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
# Patterns run on pydantic's Rust engine: its `$` is the end of the text, as in the JSON Schema
# (ECMA-262); Python's `$` also matches before a trailing newline.
STRICT = ConfigDict(extra="forbid", regex_engine="rust-regex", frozen=True)


@dataclass(frozen=True, slots=True)
class Cli:
    """How a field appears as a `clade remember` option (kept in the field's Annotated metadata).

    `flag` is the option (`--tag`) or, with `positional`, the argument's metavar; `repeat` makes it
    repeatable (a list field); `parse` names a parser of `daemon.cli.main` for values that argparse
    cannot type by itself (e.g. `pad`)."""

    flag: str
    help: str
    repeat: bool = False
    positional: bool = False
    metavar: str | None = None
    parse: str | None = None


def _content(value: str) -> str:
    try:
        return check_content(value)
    except InvalidValue as exc:
        raise ValueError(exc.reason) from None


def _utf8(value: object) -> object:
    """Refuse lone surrogates (how Python hands over invalid UTF-8 from argv or files) in words."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("is not valid UTF-8") from None
    return value


def _label(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"must not contain control characters: {value!r}")
    return value


# The patterns are the validators' rules written for the schema (Python's `\S` is `not str.isspace`,
# the test `strip()` applies); the validators say what is wrong in words.
# The length is the validator's (in UTF-8 bytes, with the body's own message); the schema says 4096
# characters, the most it can state.
Content = Annotated[str, Field(strict=True, json_schema_extra={
                                   "minLength": 1, "maxLength": MAX_CONTENT_BYTES, "pattern": CONTENT_PATTERN},
                               description=f"non-blank UTF-8 text, at most {MAX_CONTENT_BYTES} bytes encoded (the "
                                           f"schema can count only characters), no NUL"),
                   BeforeValidator(_utf8), AfterValidator(_content)]
def _whole(value: object) -> object:
    """JSON's integers include `2.0` (JSON Schema counts a number with no fraction as an integer)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Int = Annotated[int, Field(strict=True), BeforeValidator(_whole)]
Unit = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False)]
Signed = Annotated[float, Field(ge=-1, le=1, strict=True, allow_inf_nan=False)]
Label = Annotated[str, Field(max_length=MAX_LABEL_CHARS, strict=True,
                             json_schema_extra={"minLength": 1, "pattern": LABEL_PATTERN}),
                 BeforeValidator(_utf8), AfterValidator(_label)]
# JSON-safe integers (2^53 - 1): above that, JSON numbers lose precision in most clients.
MAX_SAFE_INT = 2**53 - 1
ChainId = Annotated[int, Field(strict=True, ge=1, le=MAX_SAFE_INT), BeforeValidator(_whole)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_SAFE_INT), BeforeValidator(_whole)]
StrategyId = Annotated[str, Field(max_length=MAX_STRATEGY_ID_CHARS, strict=True,
                                  json_schema_extra={"minLength": 1, "pattern": LABEL_PATTERN}),
                       BeforeValidator(_utf8), AfterValidator(_label)]
# ISO 8601 as `datetime.fromisoformat` reads it: a date, or a date and time (seconds and a
# fraction optional) with an optional offset (Z or ±HH:MM). The pattern is the whole rule, so
# the OpenAPI schema admits exactly what the validator accepts: years 1971..9998 (any offset
# then stays inside the body's 1970..9999 range), each month's days, 29 February only in leap
# years (divisible by 4, centuries by 400).
_YEAR = r"(197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
_LEAP_YEAR = r"(19(7[26]|8[048]|9[26])|[2-9][0-9](0[48]|[2468][048]|[13579][26])|([2468][048]|[3579][26])00)"
_MONTH_DAY = r"((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
EVENT_TIME_PATTERN = (rf"^({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
                      r"([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
                      r"(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?)?$")
_EVENT_TIME = re.compile(EVENT_TIME_PATTERN)
# The shape alone (any digits), to say "not ISO 8601" apart from "not a date of the calendar".
_SHAPE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?"
                    r"(Z|[+-][0-9]{2}:?[0-9]{2})?)?$")


def parse_event_time(text: str) -> int:
    """An ISO 8601 date or date-time as Unix milliseconds (UTC).

    An offset (`Z`, `+02:00`) is honoured; a time without one is read as UTC, and a date
    alone as its midnight UTC. Raises `ValueError` saying what is wrong: not ISO 8601 (in
    years 1971..9998), or not a date of the calendar (a 30 February)."""
    if not isinstance(text, str) or not _SHAPE.fullmatch(text):
        raise ValueError(f"must be an ISO 8601 date or date-time such as 2026-05-08 or 2026-05-08T14:30:00Z, "
                         f"got {text!r}")
    if not _EVENT_TIME.fullmatch(text):
        raise ValueError(f"{text!r} is not a calendar date in years 1971..9998")
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a calendar date-time ({exc})") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = (when - _EPOCH) // timedelta(milliseconds=1)
    if not 0 <= ms <= MAX_OCCURRED_MS:
        raise ValueError(f"{text!r} is outside 1970-01-01..9999-12-31 (UTC)")
    return ms


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _event_time(value: str) -> str:
    parse_event_time(value)
    return value


EventTime = Annotated[str, Field(strict=True, json_schema_extra={"pattern": EVENT_TIME_PATTERN},
                                 description="ISO 8601 date or date-time (e.g. 2026-05-08T14:30:00Z); an offset "
                                             "is honoured, none means UTC, a date alone its midnight UTC; "
                                             "years 1971..9998"),
                      AfterValidator(_event_time)]


def event_ms(text: str | None) -> int | None:
    """An `EventTime` already validated, as Unix milliseconds (None stays None: unknown)."""
    return None if text is None else parse_event_time(text)


# Enums arrive as their string values (lax for the enum only: the JSON value, never a number).
KindField = Annotated[Kind, Field(strict=False)]
CategoryField = Annotated[Category, Field(strict=False)]
SensitivityField = Annotated[Sensitivity, Field(strict=False)]


class MetadataFields(BaseModel):
    """What an entry is about (the gateway spec's `metadata`)."""

    model_config = STRICT

    tokens: Annotated[list[Label], Field(max_length=MAX_LABELS),
                      Cli("--token", "token symbol, repeatable", repeat=True)] = []
    chains: Annotated[list[ChainId], Field(max_length=MAX_LABELS),
                      Cli("--chain", "chain id, repeatable", repeat=True, parse="positive_int")] = []
    protocols: Annotated[list[Label], Field(max_length=MAX_LABELS),
                         Cli("--protocol", "repeatable", repeat=True)] = []
    strategy_id: Annotated[StrategyId | None, Cli("--strategy-id", "the strategy this is about")] = None
    tags: Annotated[list[Label], Field(max_length=MAX_LABELS),
                    Cli("--tag", "repeatable", repeat=True)] = []


class EntryFields(BaseModel):
    """The writable fields of a knowledge entry (see the module docstring for what derives from it)."""

    model_config = STRICT

    content: Annotated[Content, Cli("TEXT", "the content (UTF-8, at most 4 KiB); '-' reads standard input",
                                    positional=True)]
    memory_type: Annotated[KindField, Cli("--kind", "what it is", metavar="KIND")] = Kind.INSIGHT
    importance: Annotated[Unit, Cli("--importance", "0..1", parse="unit")] = 0.5
    confidence: Annotated[Unit, Cli("--confidence", "0..1", parse="unit")] = 0.7
    metadata: MetadataFields = Field(default_factory=MetadataFields)
    sensitivity: Annotated[SensitivityField, Cli("--sensitivity", "public may cross to siblings; private and "
                                                                  "sensitive never leave this golem")
                           ] = Sensitivity.PUBLIC
    category: Annotated[CategoryField | None, Cli("--category", "knowledge category", metavar="CATEGORY")] = None
    quality: Annotated[Unit, Cli("--quality", "0..1", parse="unit")] = 0.5
    pad: Annotated[tuple[Signed, Signed, Signed] | None,
                   Field(description="[pleasure, arousal, dominance], each -1..1"),
                   Cli("--pad", "PAD vector, each -1..1 (write --pad=-0.2,0.5,0 when it starts with a minus)",
                       metavar="P,A,D", parse="pad")] = None
    occurred_at: Annotated[EventTime | None, Cli("--occurred-at", "event time: when what it says happened (ISO 8601; "
                                                                  "no offset means UTC)", metavar="WHEN")] = None

    def entry_fields(self) -> EntryFields:
        """These fields as the one entry model (a subclass such as the API's `MemoryIn` may refuse)."""
        return self

    def new_entry(self, *, extra_tags: Sequence[str] = ()) -> NewEntry:
        """The store's input for these fields (checked again, with author and clock, when written)."""
        meta = self.metadata
        kind = self.memory_type
        return NewEntry(
            kind=Kind(kind), content=self.content, confidence=self.confidence, importance=self.importance,
            quality=self.quality, category=self.category, tokens=tuple(meta.tokens), chains=tuple(meta.chains),
            protocols=tuple(meta.protocols), tags=(*meta.tags, *extra_tags), strategy_id=meta.strategy_id,
            sensitivity=self.sensitivity, occurred_ms=event_ms(self.occurred_at),
            pad=None if self.pad is None else Pad(pleasure=self.pad[0], arousal=self.pad[1], dominance=self.pad[2]))

    @classmethod
    def checked(cls, doc: dict[str, Any]) -> EntryFields:
        """Validate a JSON-like document; raises `UsageError` with `format_errors`' one line."""
        from daemon.errors import UsageError

        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise UsageError(format_errors(error_details(exc, prefix=("body",)))) from None


def cli_options(model: type[BaseModel] = EntryFields, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                                   Any, Cli]]:
    """(path in the document, the field's annotation, its `Cli`) for every leaf field that has one,
    nested models included, in declaration order."""
    for name, info in model.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            yield from cli_options(sub, (*path, name))
            continue
        for meta in info.metadata:
            if isinstance(meta, Cli):
                yield (*path, name), info, meta


def error_details(exc: ValidationError, *, prefix: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """pydantic's errors as the API's `[{loc, msg}]` (the shape of a 422's `detail`)."""
    return [{"loc": [*prefix, *e.get("loc", ())], "msg": str(e.get("msg", "")).removeprefix("Value error, ")}
            for e in exc.errors()]


def format_errors(details: list[dict[str, Any]]) -> str:
    """One line for a person: `field.path: message; …` (the first `loc` part, e.g. `body`, dropped)."""
    return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in details)
