"""Context summaries (`crdt.summary`, pure): whatever the two contexts, the responder rebuilds
the asker's context exactly for every writer it has, and the asker rebuilds the responder's
whole context from the rows that differ, in both forms (rows whole, and buckets)."""

from __future__ import annotations

import doctest

from hypothesis import given, settings
from hypothesis import strategies as st

import crdt.summary
from crdt import CausalContext
from crdt.summary import Tagged, asker_view, bucket_count, bucket_of, diff_rows, differing, responder_context

WRITERS = [f"12D3KooW{i:040d}" for i in range(300)]


@st.composite
def contexts(draw: st.DrawFn, pool: list[str]) -> CausalContext:
    rows = []
    for writer in draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool))):
        vv = draw(st.integers(0, 6))
        cloud = sorted(draw(st.sets(st.integers(vv + 2, vv + 9), max_size=3)))
        if vv or cloud:
            rows.append((writer, vv, cloud))
    return CausalContext.from_rows(rows)


def grown(ctx: CausalContext, extra: CausalContext) -> CausalContext:
    out = ctx.copy()
    out.merge(extra)
    return out


def check(asker: CausalContext, responder: CausalContext, later: CausalContext, nonce: bytes,
          buckets: int | None) -> None:
    sent, own = Tagged.of(asker, nonce), Tagged.of(responder, nonce)
    if buckets is None:
        view = asker_view(own, rows=sent.rows_in(None), asked=None)
    else:
        asked = differing(own, sent.fingerprints(buckets))
        view = asker_view(own, rows=sent.rows_in(asked, buckets), asked=asked, buckets=buckets)
        for tag in own.rows:  # a bucket not asked for holds the same rows on both sides
            if bucket_of(tag, buckets) not in asked:
                assert sent.rows.get(tag) == own.rows[tag]
    assert view.context == asker.restricted(responder.replicas())
    ours = grown(responder, later)  # the responder's context at its end (ops arrived meanwhile)
    assert responder_context(sent, diff_rows(ours, view)) == ours


@settings(max_examples=100, deadline=None)
@given(data=st.data(), nonce=st.binary(min_size=8, max_size=8), buckets=st.sampled_from([None, 1, 2, 8, 64]))
def test_both_sides_rebuild_the_other_context_exactly(data: st.DataObject, nonce: bytes, buckets: int | None) -> None:
    pool = WRITERS[: data.draw(st.integers(1, 300))]
    shared = data.draw(contexts(pool))
    asker = grown(shared, data.draw(contexts(pool)))
    responder = grown(shared, data.draw(contexts(pool)))
    check(asker, responder, data.draw(contexts(pool)), nonce, buckets)


def test_equal_contexts_differ_in_no_bucket_and_send_no_row() -> None:
    ctx = CausalContext.from_rows((w, i % 5 + 1, [i % 5 + 3]) for i, w in enumerate(WRITERS))
    sent = Tagged.of(ctx, b"\x05" * 8)
    assert differing(sent, sent.fingerprints(bucket_count(300))) == []
    view = asker_view(sent, rows=(), asked=(), buckets=bucket_count(300))
    assert diff_rows(ctx, view) == []


def test_another_nonce_names_the_writers_differently() -> None:
    ctx = CausalContext({WRITERS[0]: 3})
    assert Tagged.of(ctx, b"\x01" * 8).rows.keys() != Tagged.of(ctx, b"\x02" * 8).rows.keys()


def test_bucket_count_is_a_power_of_two_of_about_eight_writers_each() -> None:
    assert [bucket_count(n) for n in (0, 1, 8, 9, 65, 200, 1_000_000)] == [1, 1, 1, 2, 16, 32, 4096]


def test_the_module_docstring_example_runs() -> None:
    result = doctest.testmod(crdt.summary)
    assert result.attempted >= 8 and result.failed == 0, result
