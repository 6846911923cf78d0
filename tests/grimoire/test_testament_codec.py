"""The testament's pure parts: selection, the inheritance discount, the signed document."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crdt import AuthorValue, Kind, Sensitivity, SlotKind, Timestamp, make_op
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
_sens = st.sampled_from(list(Sensitivity))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_kinds, st.floats(0, 1), st.floats(0, 1), st.integers(0, 3), st.integers(0, 3), _sens),
                max_size=2600), st.integers(1, MAX_ENTRIES))
def test_selection_respects_the_cap_keeps_the_soma_home_and_puts_reflections_and_warnings_first(
    raw: list[tuple[Kind, float, float, int, int, Sensitivity]], limit: int
) -> None:
    cands = [ts.TestamentCandidate(f"{i:032x}", k, c, s, cf, ct, se) for i, (k, c, s, cf, ct, se) in enumerate(raw)]
    chosen = select(cands, limit=limit)
    assert len(chosen) <= limit and len(set(chosen)) == len(chosen)
    by_id = {c.id: c for c in cands}
    assert all(by_id[i].sensitivity is Sensitivity.PUBLIC and by_id[i].kind not in SOMA for i in chosen)
    germline = [c for c in cands if c.sensitivity is Sensitivity.PUBLIC]

    def ranked(kinds: set[Kind]) -> list[str]:
        return [c.id for c in sorted((c for c in germline if c.kind in kinds), key=lambda c: (-c.keep_score, c.id))]

    lead = ranked({Kind.DEATH_REFLECTION}) + ranked({Kind.WARNING, Kind.ANTI_KNOWLEDGE})
    assert chosen[:min(limit, len(lead))] == lead[:limit]
    assert select(list(reversed(cands)), limit=limit) == chosen


SOMA = {Kind.STRATEGY_OUTCOME, Kind.PREFERENCE, Kind.EPISODE_SUMMARY}


def _cand(i: int, kind: Kind, *, keep: float = 0.5, conf: float = 0.8,
          sensitivity: Sensitivity = Sensitivity.PUBLIC) -> ts.TestamentCandidate:
    return ts.TestamentCandidate(f"{i:032x}", kind, conf, keep, 0, 0, sensitivity)


def test_selection_exact_order_and_the_barrier() -> None:
    cands = [
        _cand(1, Kind.STRATEGY_OUTCOME, keep=0.99),  # P&L, position sizes: soma
        _cand(2, Kind.PREFERENCE, keep=0.98),  # the owner's settings for this golem
        _cand(3, Kind.EPISODE_SUMMARY, keep=0.97),  # one raw episode retold
        _cand(4, Kind.FACT, keep=0.96, sensitivity=Sensitivity.SENSITIVE),
        _cand(5, Kind.WARNING, keep=0.95, sensitivity=Sensitivity.PRIVATE),
        _cand(6, Kind.INSIGHT, keep=0.9),
        _cand(7, Kind.WARNING, keep=0.2),
        _cand(8, Kind.DEATH_REFLECTION, keep=0.1),  # an ancestor's
        _cand(9, Kind.DEATH_REFLECTION, keep=0.05),  # this golem's, named first
        _cand(10, Kind.CAUSAL_LINK, keep=0.3),
        _cand(11, Kind.INSIGHT, keep=0.95, conf=0.1),  # below min_confidence
    ]
    assert select(cands, first=[f"{9:032x}"]) == [f"{i:032x}" for i in (9, 8, 7, 10, 6)]
    assert select(cands, first=[f"{1:032x}"], limit=2) == [f"{i:032x}" for i in (8, 9)]  # soma never leads
    assert ts.crosses_to_heir(Kind.HEURISTIC, Sensitivity.PUBLIC)
    assert not ts.crosses_to_heir(Kind.HEURISTIC, Sensitivity.PRIVATE)
    assert not any(ts.crosses_to_heir(k, Sensitivity.PUBLIC) for k in SOMA)


def test_selection_never_exceeds_the_testament_cap() -> None:
    cands = [_cand(i, Kind.WARNING) for i in range(MAX_ENTRIES + 10)]
    assert len(select(cands, limit=MAX_ENTRIES * 2)) == MAX_ENTRIES


def test_validated_heuristics_are_judged_by_outcomes_and_refuted_entries_are_never_bequeathed() -> None:
    def rule(i: int, *, keep: float, confirms: int = 0, positive: float = 0.0, negative: float = 0.0,
             refuted: bool = False, conf: float = 0.2) -> ts.TestamentCandidate:
        return ts.TestamentCandidate(f"{i:032x}", Kind.HEURISTIC, conf, keep, confirms, 0, Sensitivity.PUBLIC,
                                     positive, negative, refuted)

    cands = [
        rule(1, keep=0.9, positive=3.0, negative=1.0),  # validated by outcomes alone (no endorsement)
        rule(2, keep=0.8, confirms=1, negative=2.5),  # an endorsement, but the outcomes went against it
        rule(3, keep=0.7, positive=0.0),  # no evidence: below min_confidence, not validated
        rule(4, keep=0.95, positive=5.0, refuted=True, conf=0.9),  # refuted: never, however it ranks
        _cand(5, Kind.WARNING, keep=0.1),
    ]
    assert select(cands) == [f"{i:032x}" for i in (5, 1)]
