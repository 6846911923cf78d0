"""The pure side of shipped vectors (daemon/embedding/shipped.py): int8 round trips keep the
direction, the wire section is parsed strictly, and the check's draw is fixed and fair."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crdt import RemoteProtocolError
from daemon.embedding.check_plan import CheckPlan
from daemon.embedding.shipped import (
    MATCH_COSINE,
    CheckBatcher,
    decode_section,
    dequantize,
    encode_section,
    matches,
    quantize,
    sampled,
)


def unit(rng: np.random.Generator, dim: int = 384) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_int8_round_trip_keeps_the_direction() -> None:
    rng = np.random.default_rng(7)
    worst = min(float(dequantize(*quantize(v)) @ v) for v in (unit(rng) for _ in range(500)))
    assert worst > 0.9999


def test_quantize_refuses_a_zero_or_non_finite_vector() -> None:
    with pytest.raises(ValueError, match="finite and not zero"):
        quantize(np.zeros(384, dtype=np.float32))
    with pytest.raises(ValueError, match="finite and not zero"):
        quantize(np.full(384, np.nan, dtype=np.float32))


def test_section_round_trips_through_msgpack() -> None:
    rng = np.random.default_rng(1)
    vectors = {f"{i:064x}": unit(rng) for i in range(5)}
    wire = msgpack.unpackb(msgpack.packb(encode_section("space-a", vectors), use_bin_type=True), raw=False)
    got = decode_section(wire, dim=384)
    assert got.space == "space-a" and set(got.vectors) == set(vectors)
    assert all(matches(got.vectors[k], v) for k, v in vectors.items())


@pytest.mark.parametrize(("raw", "why"), [
    ("nope", "a vectors section is"),
    (["", []], "short non-empty string"),
    (["s", "x"], "at most"),
    (["s", [["id", 0.1]]], "is \\[entry id, scale, q\\]"),
    (["s", [[7, 0.1, b"\x01"]]], "short string"),
    (["s", [["id", 1, b"\x01"]]], "not a positive float"),
    (["s", [["id", -0.5, b"\x01"]]], "not a positive float"),
    (["s", [["id", math.inf, b"\x01"]]], "not a positive float"),
    (["s", [["id", 0.1, b""]]], "0 components"),
    (["s", [["id", 0.1, b"\x01" * 10]]], "10 components, not 384"),
    (["s", [["id", 0.1, b"\x00" * 384]]], "dequantises to zero"),
])
def test_a_malformed_section_is_refused_saying_what(raw: object, why: str) -> None:
    with pytest.raises(RemoteProtocolError, match=why) as caught:
        decode_section(raw, dim=384)
    assert caught.value.reason == "malformed_vectors"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.binary(max_size=8)
                    | st.text(max_size=8), lambda inner: st.lists(inner, max_size=4), max_leaves=20))
def test_decode_section_raises_only_its_own_error(raw: object) -> None:
    try:
        decode_section(raw)
    except RemoteProtocolError as exc:
        assert exc.reason == "malformed_vectors"


def test_the_checks_draw_is_fixed_per_receiver_and_near_its_rate() -> None:
    ids = [f"{i:064x}" for i in range(20_000)]
    drawn = [sampled(i, "golem-a", 0.125) for i in ids]
    assert drawn == [sampled(i, "golem-a", 0.125) for i in ids]  # the same after a restart
    assert 0.115 < sum(drawn) / len(ids) < 0.135
    other = [sampled(i, "golem-b", 0.125) for i in ids]
    assert drawn != other  # each receiver draws its own: an author cannot aim at the unchecked ones
    assert all(sampled(i, "g", 1.0) for i in ids[:50]) and not any(sampled(i, "g", 0.0) for i in ids[:50])


def test_a_vector_of_another_text_does_not_match() -> None:
    rng = np.random.default_rng(3)
    a, b = unit(rng), unit(rng)
    assert matches(a, a) and not matches(a, b)
    near = (a + 0.05 * b).astype(np.float32)
    near /= np.linalg.norm(near)
    assert float(near @ a) >= MATCH_COSINE and matches(near, a)


def test_checks_wait_for_a_batch_while_more_arrive() -> None:
    batcher = CheckBatcher(batch=16, wait_s=30.0)
    assert not batcher.due(0, 0.0)  # nothing pending
    assert not batcher.due(3, 1.0)  # arriving: wait for more
    assert not batcher.due(9, 3.0)
    assert batcher.due(16, 5.0)  # a full batch
    assert not batcher.due(2, 7.0)  # the next batch starts filling


def test_checks_run_once_arrivals_pause_or_the_first_waited_long_enough() -> None:
    paused = CheckBatcher(batch=16, wait_s=30.0)
    assert not paused.due(2, 0.0)
    assert paused.due(2, 2.0)  # as many as at the last look: nothing more is coming soon
    trickle = CheckBatcher(batch=16, wait_s=30.0)
    assert not any(trickle.due(n, float(2 * n)) for n in range(1, 15))  # one more at every look, for 28 s
    assert trickle.due(15, 32.0)  # the first (at 2 s) has waited 30 s


def test_a_check_batch_wait_ends_when_nothing_is_pending() -> None:
    batcher = CheckBatcher(batch=16, wait_s=30.0)
    assert not batcher.due(5, 0.0)
    assert not batcher.due(0, 10.0)  # checked elsewhere (or gone): the wait starts over
    assert not batcher.due(1, 31.0)
    assert batcher.due(1, 33.0)


def test_the_check_plan_screens_an_author_until_its_clean_run_clears_it() -> None:
    """CSP-1 per author: the screening share until `clearance` clean checks in a row, then the
    cleared share, never above the screening one; `flat` never clears."""
    plan = CheckPlan(screening=0.125, cleared=1 / 64, clearance=24)
    assert [plan.rate(n) for n in (0, 23, 24, 500)] == [0.125, 0.125, 1 / 64, 1 / 64]
    assert plan.clears_at() == 24
    upside_down = CheckPlan(screening=0.1, cleared=0.5, clearance=2)
    assert upside_down.rate(5) == 0.1 and upside_down.clears_at() is None
    flat = CheckPlan.flat(1.0)
    assert flat.rate(0) == flat.rate(10_000) == 1.0 and flat.clears_at() is None
    assert CheckPlan(screening=0.5, cleared=0.0, clearance=0).rate(1) == 0.0  # clearance below 1 means 1
