"""Entry bodies: validation, canonical encoding and the id that binds them."""

from __future__ import annotations

import pytest

from crdt import EntryBody, InvalidValue, Kind, Pad, Timestamp

AUTHOR = "12D3KooWK99VoVxNE7XzyBwXEzW7xhK7Gpv85r9F3V3fyKSUKPH5"


def body(**kw: object) -> EntryBody:
    fields: dict[str, object] = {"author": AUTHOR, "kind": Kind.INSIGHT, "content": "c", "created": Timestamp(1, 0)}
    fields.update(kw)
    return EntryBody(**fields)  # type: ignore[arg-type]


def test_id_is_deterministic_and_normalised() -> None:
    a = body(tags=("b", "a", "a"), chains=(10, 1))
    b = body(tags=("a", "b"), chains=(1, 10))
    assert a.id == b.id and len(a.id) == 32
    assert a.tags == ("a", "b")


@pytest.mark.parametrize(
    "change",
    [
        {"author": "12D3KooWother"}, {"kind": Kind.WARNING}, {"content": "d"},
        {"created": Timestamp(1, 1)}, {"tags": ("x",)}, {"importance": 0.6}, {"quality": 0.1},
        {"pad": Pad(pleasure=0, arousal=0, dominance=0.5)}, {"bloodstain": True}, {"generation": 2},
        {"strategy_id": "s"}, {"sensitivity": "private"},
    ],
)
def test_every_field_changes_the_id(change: dict[str, object]) -> None:
    assert body(**change).id != body().id


def test_wire_round_trip() -> None:
    b = body(tags=("gas",), protocols=("aave",), tokens=("USDC",), chains=(1,), strategy_id="s1",
             category="slippage", pad=Pad(pleasure=0.5, arousal=-0.5, dominance=0.0), bloodstain=True)
    assert EntryBody.from_wire(b.to_wire()) == b
    assert EntryBody.from_wire(b.to_wire()).id == b.id


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"content": ""}, "content"), ({"content": "x" * 4097}, "content"), ({"content": "a\x00b"}, "content"),
        ({"content": "\udcff"}, "content"), ({"kind": "rumour"}, "kind"), ({"category": "vibes"}, "category"),
        ({"importance": 1.01}, "importance"), ({"importance": float("nan")}, "importance"),
        ({"quality": True}, "quality"), ({"author": ""}, "author"), ({"author": "has space"}, "author"),
        ({"generation": -1}, "generation"), ({"tags": ("",)}, "tags"), ({"chains": (0,)}, "chains"),
        ({"created": 5}, "created"),
    ],
)
def test_invalid_fields_are_named(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidValue) as info:
        body(**change)
    assert info.value.field == field


def test_from_wire_rejects_wrong_shapes() -> None:
    wire = body().to_wire()
    with pytest.raises(InvalidValue):
        EntryBody.from_wire(wire[:-1])
    wire[1] = 99
    with pytest.raises(InvalidValue, match="version 99"):
        EntryBody.from_wire(wire)


def test_negative_zero_is_normalised() -> None:
    """SQLite stores -0.0 as 0.0; a body must hash the same before and after a round trip."""
    b = body(importance=-0.0, quality=-0.0, pad=Pad(pleasure=-0.0, arousal=0.0, dominance=-0.0))
    assert b.id == body(importance=0.0, quality=0.0, pad=Pad(pleasure=0.0, arousal=0.0, dominance=0.0)).id
    assert str(b.importance) == "0.0" and str(b.pad.pleasure) == "0.0"  # type: ignore[union-attr]
