"""Causal contexts behave exactly like a set of dots, stored compactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crdt import CausalContext, Dot

dots = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 30)), max_size=60)


def build(pairs: list[tuple[str, int]]) -> CausalContext:
    ctx = CausalContext()
    for r, s in pairs:
        ctx.add(Dot(r, s))
    return ctx


def as_set(ctx: CausalContext) -> set[tuple[str, int]]:
    return {(r, s) for r in ctx.replicas() for s in ctx.dots(r)}


@given(dots)
def test_add_and_contains_match_a_set(pairs: list[tuple[str, int]]) -> None:
    ctx = CausalContext()
    model: set[tuple[str, int]] = set()
    for r, s in pairs:
        assert ctx.add(Dot(r, s)) == ((r, s) not in model)
        model.add((r, s))
    assert as_set(ctx) == model
    assert ctx.size() == len(model)
    for r in "abc":
        assert all((Dot(r, s) in ctx) == ((r, s) in model) for s in range(1, 32))


@given(dots)
def test_cloud_is_always_compacted(pairs: list[tuple[str, int]]) -> None:
    ctx = build(pairs)
    for r in ctx.replicas():
        assert ctx.vv(r) + 1 not in ctx.cloud(r)
        assert all(s > ctx.vv(r) + 1 for s in ctx.cloud(r))


@given(dots, dots)
def test_merge_is_set_union(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> None:
    x, y = build(a), build(b)
    x.merge(y)
    assert as_set(x) == as_set(build(a)) | as_set(y)


@given(dots, dots, st.integers(0, 31))
def test_merge_replica_with_limit(a: list[tuple[str, int]], b: list[tuple[str, int]], limit: int) -> None:
    x, y = build(a), build(b)
    x.merge_replica(y, "a", limit=limit)
    expected = as_set(build(a)) | {(r, s) for r, s in as_set(y) if r == "a" and s <= limit}
    assert as_set(x) == expected


@given(dots, dots)
def test_missing_count(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> None:
    x, y = build(a), build(b)
    assert x.missing_count(y) == len(as_set(y) - as_set(x))


@given(dots)
def test_rows_round_trip_and_equality(pairs: list[tuple[str, int]]) -> None:
    ctx = build(pairs)
    again = CausalContext.from_rows(ctx.to_rows())
    assert again == ctx and as_set(again) == as_set(ctx)
    assert ctx.restricted(["a"]).replicas() == (["a"] if any(r == "a" for r, _ in pairs) else [])
