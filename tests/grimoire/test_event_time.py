"""Event time (`occurred_ms`, the API's `occurred_at`): in the body (an optional 20th wire field,
so bodies without it keep their bytes and ids), stored, replicated, migrated, parsed from ISO
8601, bounding recall (`since`/`until`) and driving recency."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from crdt import (
    EntryBody,
    InvalidValue,
    Kind,
    RemoteProtocolError,
    SlotKind,
    Timestamp,
    decode_delta,
    encode_delta,
    open_op,
)
from crdt.body import MAX_OCCURRED_MS
from crdt.ops import OP_VERSION
from crypto import Identity, signature_ok
from daemon.embedding.embedder import get_embedder
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.fields import EVENT_TIME_PATTERN, EntryFields, parse_event_time
from daemon.grimoire.retrieval import RecallQuery, Retriever
from daemon.grimoire.schema import SCHEMA_VERSION, migrate
from daemon.grimoire.scoring import temporal
from tests.helpers.seed import seed, seed_one

AUTHOR = "12D3KooWK99VoVxNE7XzyBwXEzW7xhK7Gpv85r9F3V3fyKSUKPH5"
ME = Identity(b"\x21" * 32)
SIB = Identity(b"\x22" * 32)
DAY = 86_400_000
NOW = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def body(**kw: object) -> EntryBody:
    return EntryBody(author=AUTHOR, kind=Kind.FACT, content="ETH/USDC 0.05% pool fees doubled",
                     created=Timestamp(NOW, 0), **kw)  # type: ignore[arg-type]


# -- the body ---------------------------------------------------------------------------------

def test_a_body_without_event_time_keeps_the_19_field_encoding_and_its_id() -> None:
    plain = body()
    assert len(plain.to_wire()) == 19 and plain.occurred_ms is None
    # The bytes every clade before event time wrote and hashed: the same id.
    assert plain.canonical() == msgpack.packb(plain.to_wire(), use_bin_type=True, use_single_float=False)
    assert EntryBody.from_wire(plain.to_wire()) == plain and EntryBody.from_wire(plain.to_wire()).id == plain.id


def test_event_time_is_a_20th_field_bound_by_the_id() -> None:
    dated = body(occurred_ms=NOW - 7 * DAY)
    assert dated.to_wire()[-1] == NOW - 7 * DAY and len(dated.to_wire()) == 20
    back = EntryBody.from_wire(dated.to_wire())
    assert back == dated and back.id == dated.id
    assert dated.id != body().id != body(occurred_ms=NOW - 8 * DAY).id
    assert EntryBody.from_trusted_wire(dated.to_wire(), dated.id).occurred_ms == NOW - 7 * DAY
    assert EntryBody.from_trusted_wire(body().to_wire(), body().id).occurred_ms is None


@pytest.mark.parametrize("bad", [-1, MAX_OCCURRED_MS + 1, 1.5, "2026-01-01", True])
def test_a_bad_event_time_is_named(bad: object) -> None:
    with pytest.raises(InvalidValue, match="occurred_ms"):
        body(occurred_ms=bad)
    with pytest.raises(InvalidValue, match="occurred_ms"):
        EntryBody.from_wire([*body().to_wire(), bad])


def test_an_explicit_null_event_time_is_refused_one_body_one_encoding() -> None:
    with pytest.raises(InvalidValue, match="occurred_ms"):
        EntryBody.from_wire([*body().to_wire(), None])
    with pytest.raises(InvalidValue, match="19 fields"):
        EntryBody.from_wire([*body().to_wire(), 1, 2])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=30),
                 st.binary(max_size=20), st.lists(st.integers(-(2**63), 2**63), max_size=3)))
def test_a_peers_20th_field_is_decoded_or_refused_as_invalid(value: object) -> None:
    """A peer's body op with any 20th field: only `RemoteProtocolError` escapes; a valid event
    time comes through exactly."""
    wire = [*body().to_wire(), value]
    dated = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_OCCURRED_MS
    entry_id = body(occurred_ms=value).id if dated else body().id
    signed = msgpack.packb([OP_VERSION, 1, Timestamp(NOW, 0).pack(), bytes.fromhex(entry_id), int(SlotKind.BODY),
                            wire], use_bin_type=True, use_single_float=False)
    try:
        op = open_op(AUTHOR, signed, b"\0" * 64, lambda w, m, s: True)
    except RemoteProtocolError as exc:
        assert not dated and exc.reason in {"invalid", "malformed"}
        return
    assert dated and isinstance(op.value, EntryBody) and op.value.occurred_ms == value


# -- ISO 8601 at the edge -----------------------------------------------------------------------

def test_iso_8601_offsets_are_honoured_and_none_means_utc() -> None:
    assert parse_event_time("2023-05-08") == 1_683_504_000_000
    assert parse_event_time("2023-05-08T00:00:00Z") == 1_683_504_000_000
    assert parse_event_time("2023-05-08T02:00:00+02:00") == 1_683_504_000_000
    assert parse_event_time("2023-05-08 13:56") == 1_683_504_000_000 + (13 * 60 + 56) * 60_000
    assert parse_event_time("2023-05-08T13:56:00.250Z") == 1_683_504_000_000 + (13 * 60 + 56) * 60_000 + 250
    fields = EntryFields.model_validate({"content": "x", "occurred_at": "2023-05-08T02:00:00+02:00"})
    assert fields.new_entry().occurred_ms == 1_683_504_000_000


@pytest.mark.parametrize(("bad", "says"), [
    ("last tuesday", "ISO 8601"), ("2023-02-31", "calendar"), ("2023-02-29", "calendar"), ("1969-12-31", "1971"),
    ("1970-06-01", "1971"), ("2023-05-08T25:00", "calendar"), ("", "ISO 8601"), ("2023-05-08T10:00:00Z\n", "ISO 8601"),
])
def test_garbage_is_refused_saying_what_is_wrong(bad: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        EntryFields.model_validate({"content": "x", "occurred_at": bad})
    with pytest.raises(ValidationError):
        EntryFields.model_validate({"content": "x", "occurred_at": 1_683_504_000_000})  # a string, not a number


@settings(max_examples=500, deadline=None)
@given(st.from_regex(EVENT_TIME_PATTERN, fullmatch=True))
def test_what_the_schema_admits_the_validator_accepts(text: str) -> None:
    """The OpenAPI pattern is the whole rule (schemathesis sends what it admits and expects a 2xx)."""
    assert 0 <= parse_event_time(text) <= MAX_OCCURRED_MS


def test_leap_days_and_month_lengths_are_the_calendars() -> None:
    assert parse_event_time("2024-02-29") and parse_event_time("2000-02-29") and parse_event_time("2023-04-30")
    for bad in ("2100-02-29", "2023-04-31", "2023-06-31"):
        with pytest.raises(ValueError, match="calendar"):
            parse_event_time(bad)


# -- the store: stored, replicated, migrated --------------------------------------------------

@pytest.fixture
def store(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "g.db", create=True, wall_ms=lambda: NOW) as s:
        yield s


def test_stored_read_back_and_shown(store: Grimoire) -> None:
    made = seed_one(store, NewEntry(kind=Kind.FACT, content="A swap on 8 May", occurred_ms=1_683_504_000_000),
                           identity=ME)
    got = store.get(made.id)
    assert got.body.occurred_ms == 1_683_504_000_000 and got.body == made.body
    assert got.to_json()["occurred_at"] == "2023-05-08T00:00:00.000Z"
    plain = seed_one(store, NewEntry(kind=Kind.FACT, content="Written now"), identity=ME)
    assert store.get(plain.id).to_json()["occurred_at"] is None


def test_event_time_replicates_with_the_entry_and_old_entries_still_merge(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "a.db", create=True) as a, Grimoire.open(tmp_path / "b.db", create=True) as b:
        dated = seed_one(a, NewEntry(kind=Kind.WARNING, content="Base sequencer halted for an hour",
                                     occurred_ms=NOW - 3 * DAY), identity=ME)
        plain = seed_one(a, NewEntry(kind=Kind.WARNING, content="Arbitrum gas spiked at the NFT mint"), identity=ME)
        for delta in list(a.iter_deltas(b.causal_context())):
            decoded, rejected = decode_delta(encode_delta(delta), signature_ok)
            assert not rejected
            assert not b.apply_delta(decoded, rejected=rejected, local_replica=SIB.peer_id).rejected
        assert a.state_digest() == b.state_digest()
        assert b.get(dated.id).body.occurred_ms == NOW - 3 * DAY and b.get(dated.id).provenance == "clade"
        assert b.get(plain.id).body.occurred_ms is None


def test_a_v16_store_migrates_and_its_entries_have_no_event_time(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    assert migrate(raw, target=16) == (0, 16)
    raw.close()
    assert SCHEMA_VERSION >= 17
    with Grimoire.open(path) as store:  # migrates to 17 (and on) on open
        assert store.schema_version == SCHEMA_VERSION
        made = seed_one(store, NewEntry(kind=Kind.FACT, content="after the upgrade"), identity=ME)
        assert store.get(made.id).body.occurred_ms is None
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT occurred_ms FROM entries").fetchall() == [(None,)]
    raw.close()


# -- recall: since / until, recency -----------------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embedder")


def test_since_until_bound_event_time_else_written_time(store: Grimoire, model_dir: Path) -> None:
    def write(content: str, occurred: int | None) -> str:
        return seed_one(store, NewEntry(kind=Kind.INSIGHT, content=content, occurred_ms=occurred), identity=ME).id

    last_month = write("Uniswap ETH/USDC fees were high during the CPI print", NOW - 30 * DAY)
    last_week = write("Uniswap ETH/USDC fees were high during the FOMC meeting", NOW - 7 * DAY)
    undated = write("Uniswap ETH/USDC fees were high during the ETF news", None)  # written at NOW
    retriever = Retriever(store, lambda: get_embedder(model_dir))

    def found(**kw: object) -> set[str]:
        query = RecallQuery(text="Uniswap ETH/USDC fee spikes", k=10, **kw)  # type: ignore[arg-type]
        return {h.entry.id for h in retriever.recall(query, now_ms=NOW)}

    assert found() == {last_month, last_week, undated}
    assert found(since_ms=NOW - 10 * DAY) == {last_week, undated}
    assert found(until_ms=NOW - 10 * DAY) == {last_month}
    assert found(since_ms=NOW - 7 * DAY, until_ms=NOW - 7 * DAY) == {last_week}  # inclusive
    assert found(since_ms=NOW - DAY, until_ms=NOW - DAY // 2) == set()


def test_recency_ranks_by_event_time(store: Grimoire, model_dir: Path) -> None:
    old_news = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Curve 3pool imbalance widened USDT discount",
                                        occurred_ms=NOW - 14 * DAY), identity=ME).id
    fresh = seed_one(store, NewEntry(kind=Kind.INSIGHT, content="Curve 3pool imbalance widened the USDT discount"),
                            identity=ME).id
    hits = Retriever(store, lambda: get_embedder(model_dir)).recall(
        RecallQuery(text="Curve 3pool USDT depeg", k=5), now_ms=NOW)
    temporal_of = {h.entry.id: h.factors.temporal for h in hits}
    # Both were written at NOW; the imported one happened two weeks ago, and is that old.
    assert temporal_of[fresh] == 1.0 and temporal_of[old_news] == pytest.approx(temporal(14))
    assert [h.entry.id for h in hits] == [fresh, old_news]


def test_a_bulk_import_of_dated_entries_is_uniformly_old(tmp_path: Path, model_dir: Path) -> None:
    """The author's confidence op comes a tick after the body and anchors the forgetting curve:
    that anchor is the write, not a sign of life, so it must not make some imported entries
    recent and leave others old (a clock that moves 1 ms a read makes the tick certain)."""
    clock = iter(range(NOW, NOW + 10_000_000))
    with Grimoire.open(tmp_path / "bulk.db", create=True, wall_ms=lambda: next(clock)) as store:
        seed(store, [NewEntry(kind=Kind.INSIGHT, content=f"Uniswap v3 pool {i} fees rose in the May sell-off",
                             occurred_ms=NOW - 30 * DAY) for i in range(20)], identity=ME)
        hits = Retriever(store, lambda: get_embedder(model_dir)).recall(
            RecallQuery(text="Uniswap fees in May", k=20), now_ms=NOW + 60_000)
        assert len(hits) == 20
        assert {round(h.factors.temporal, 9) for h in hits} == {round(temporal(30 + 60_000 / DAY), 9)}
