"""The testament's pure parts: selection, the inheritance discount, the signed document."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crdt import AuthorValue, Kind, SlotKind, Timestamp, make_op
from crypto.identity import Identity, signature_ok
from daemon.grimoire.curator import testament as ts
from daemon.grimoire.curator.testament import MAX_ENTRIES, decode, encode, inherited_confidence, select
from daemon.grimoire.records import NewEntry

GOLEM = Identity(b"\x01" * 32)
STRANGER = Identity(b"\x02" * 32)


def _item(i: int, author: Identity = GOLEM, generation: int = 1) -> ts.TestamentItem:
    body = NewEntry(kind=Kind.WARNING, content=f"Never LP in pool {i} under $100K TVL").body(
        author.peer_id, Timestamp(1_700_000_000_000 + i))
    ops = (make_op(writer=author.peer_id, seq=2 * i + 1, hlc=body.created, entry_id=body.id, slot=SlotKind.BODY,
                   value=body, sign=author.sign),
           make_op(writer=author.peer_id, seq=2 * i + 2, hlc=Timestamp(body.created.ms + 1), entry_id=body.id,
                   slot=SlotKind.AUTHOR, value=AuthorValue(confidence=0.8), sign=author.sign))
    return ts.TestamentItem(generation, ops)


def _doc(n: int = 3) -> ts.TestamentDocument:
    items = tuple(_item(i) for i in range(n))
    return ts.TestamentDocument(GOLEM.peer_id, "clade-1", 1_700_000_100_000, items[0].entry_id, items)


def test_inheritance_discount_by_generation() -> None:
    assert inherited_confidence(0.9, 1) == pytest.approx(0.4)
    assert inherited_confidence(0.9, 2) == pytest.approx(0.34)
    assert inherited_confidence(0.2, 1) == 0.2  # never above what the predecessor held
    assert inherited_confidence(0.9, 1, via_archive=True) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        inherited_confidence(0.9, 0)


def test_round_trip_verifies_every_op() -> None:
    doc = _doc()
    back = decode(encode(doc, GOLEM.sign), signature_ok)
    assert back == doc


def test_a_foreign_signature_or_any_flipped_byte_is_refused() -> None:
    data = encode(_doc(2), GOLEM.sign)
    forged = encode(_doc(2), STRANGER.sign)  # the document names GOLEM, STRANGER signed it
    with pytest.raises(ts.TestamentError, match="signature"):
        decode(forged, signature_ok)
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            mutated = bytearray(data)
            mutated[i] ^= bit
            try:
                decode(bytes(mutated), signature_ok)
            except ts.TestamentError:
                continue
            pytest.fail(f"flipping bit {bit:#x} of byte {i} was accepted")
    for cut in range(len(data)):
        with pytest.raises(ts.TestamentError):
            decode(data[:cut], signature_ok)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_raise_only_testament_error(data: bytes) -> None:
    with pytest.raises(ts.TestamentError):
        decode(data, signature_ok)


def test_an_item_mixing_two_entries_is_refused() -> None:
    a, b = _item(1), _item(2)
    doc = ts.TestamentDocument(GOLEM.peer_id, "c", 1, None, (ts.TestamentItem(1, (a.ops[0], b.ops[1])),))
    with pytest.raises(ts.TestamentError, match="two entries"):
        decode(encode(doc, GOLEM.sign), signature_ok)


_kinds = st.sampled_from(list(Kind))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_kinds, st.floats(0, 1), st.floats(0, 1), st.integers(0, 3), st.integers(0, 3)),
                max_size=2600), st.integers(1, MAX_ENTRIES))
def test_selection_respects_the_cap_and_keeps_every_warning_first(
    raw: list[tuple[Kind, float, float, int, int]], limit: int
) -> None:
    cands = [ts.TestamentCandidate(f"{i:032x}", k, c, s, cf, ct) for i, (k, c, s, cf, ct) in enumerate(raw)]
    chosen = select(cands, limit=limit)
    assert len(chosen) <= limit and len(set(chosen)) == len(chosen)
    warnings = [c.id for c in cands if c.kind in (Kind.WARNING, Kind.ANTI_KNOWLEDGE)]
    assert chosen[:min(limit, len(warnings))] == sorted(
        warnings, key=lambda i: (-next(c.keep_score for c in cands if c.id == i), i))[:limit]
    assert select(list(reversed(cands)), limit=limit) == chosen
