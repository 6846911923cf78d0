"""CRDT persistence: the SQLite backend behaves exactly like the in-memory reference, and
two real stores converge over the wire codec."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from crdt import (
    CausalContext,
    Delta,
    Kind,
    RemoteProtocolError,
    Sensitivity,
    SlotKind,
    Timestamp,
    decode_delta,
    digest,
    encode_delta,
    make_op,
)
from crdt.ops import AuthorValue
from crdt.replica import Gate, bodies_first
from crypto import Identity, signature_ok
from daemon.datadir import DataDir
from daemon.grimoire import Grimoire, NewEntry, wall_clock_ms
from daemon.grimoire.schema import SCHEMA_VERSION, migrate
from tests.helpers.crdt_sim import IDENTITIES, SimReplica, gossip, random_op
from tests.helpers.seed import seed, seed_one


def wire(delta: Delta) -> tuple[Delta, Counter[str]]:
    return decode_delta(encode_delta(delta), signature_ok)


def sync(sender: Grimoire, receiver: Grimoire, receiver_id: str, **limits: int) -> int:
    """Anti-entropy sender → receiver through the codec; returns ops applied."""
    applied = 0
    for delta in list(sender.iter_deltas(receiver.causal_context(), **limits)):
        decoded, rejected = wire(delta)
        report = receiver.apply_delta(decoded, rejected=rejected, local_replica=receiver_id)
        assert not report.rejected, report.rejected
        applied += report.applied
    return applied


@pytest.fixture
def golems(tmp_path: Path) -> tuple[Grimoire, Grimoire, Identity, Identity]:
    a = Grimoire.open(tmp_path / "a.db", create=True)
    b = Grimoire.open(tmp_path / "b.db", create=True)
    yield a, b, IDENTITIES[0], IDENTITIES[1]  # type: ignore[misc]
    a.close()
    b.close()


@pytest.mark.parametrize("seed", range(8))
def test_sqlite_backend_matches_memory_reference(tmp_path: Path, seed: int) -> None:
    """Random ops from 3 writers, delivered reordered and duplicated, to both backends."""
    rng = random.Random(seed)
    writers = [SimReplica(IDENTITIES[i]) for i in range(3)]
    reference = SimReplica(IDENTITIES[5])
    store = Grimoire.open(tmp_path / "g.db", create=True)
    messages: list[bytes] = []
    counter = [0]
    for _ in range(60):
        author = rng.choice(writers)
        messages.append(gossip(random_op(rng, author, counter)))
        if rng.random() < 0.3:
            other = rng.choice(writers)
            if other is not author:
                for delta in __import__("crdt").extract_deltas(author.state, other.state.context.copy()):
                    other.receive(encode_delta(delta))
    rng.shuffle(messages)
    messages += rng.sample(messages, len(messages) // 3)  # duplicates
    for message in messages:
        ref = reference.receive(message)
        decoded, rejected = decode_delta(message, signature_ok)
        got = store.apply_delta(decoded, rejected=rejected)
        assert (got.applied, got.superseded, got.duplicate, got.rejected) == (
            ref.applied, ref.superseded, ref.duplicate, ref.rejected)
    assert store.state_digest() == reference.digest()
    # and anti-entropy from every writer completes both the same way
    for w in writers:
        for delta in __import__("crdt").extract_deltas(w.state, reference.state.context.copy()):
            reference.receive(encode_delta(delta))
        for delta in __import__("crdt").extract_deltas(w.state, store.causal_context()):
            decoded, rejected = wire(delta)
            store.apply_delta(decoded, rejected=rejected)
    assert store.state_digest() == reference.digest()
    store.close()


ENTRY_STATE = ("SELECT id, confidence, local_confidence, decay_anchor_ms, status, superseded_by, confirms, "
               "contradicts FROM entries ORDER BY id")


@pytest.mark.parametrize("seed", range(4))
def test_a_delta_of_many_ops_joins_as_its_ops_one_by_one(tmp_path: Path, seed: int) -> None:
    """The join defers op rows and author updates to one executemany each (step 22): a delta
    holding many ops, the same slot written twice, an op twice, endorsements and evidence
    after author updates, reaches the state (ops, context, entries rows) that joining its ops
    one delta at a time reaches, and reports the same as the in-memory reference."""
    rng = random.Random(100 + seed)
    writers = [SimReplica(IDENTITIES[i]) for i in range(3)]
    ops = []
    counter = [0]
    for _ in range(30):  # entries the store holds before the big deltas come
        ops += random_op(rng, rng.choice(writers), counter)
    later = []
    for _ in range(200):  # then mostly changes to them: slots written twice in one delta, out of order
        later += random_op(rng, rng.choice(writers), counter)
    later += rng.sample(later, len(later) // 4)  # duplicates inside one delta
    rng.shuffle(later)
    ops += later
    big = Grimoire.open(tmp_path / "big.db", create=True)
    small = Grimoire.open(tmp_path / "small.db", create=True)
    reference = SimReplica(IDENTITIES[5])
    for first in range(0, len(ops), 100):
        message = gossip(ops[first:first + 100])
        ref = reference.receive(message)
        decoded, rejected = decode_delta(message, signature_ok)
        got = big.apply_delta(decoded, rejected=rejected)
        assert (got.applied, got.superseded, got.duplicate, got.rejected) == (
            ref.applied, ref.superseded, ref.duplicate, ref.rejected)
        one_by_one = Counter[str]()
        for op in bodies_first(decoded.ops):  # the order the join takes them in
            one = small.apply_delta(Delta((op,), CausalContext()))
            one_by_one.update(applied=one.applied, superseded=one.superseded, duplicate=one.duplicate)
            one_by_one.update(one.rejected)
        assert +one_by_one == +Counter(applied=got.applied, superseded=got.superseded, duplicate=got.duplicate,
                                       **got.rejected)
    assert big.state_digest() == reference.digest() == small.state_digest()
    assert big.connection.execute(ENTRY_STATE).fetchall() == small.connection.execute(ENTRY_STATE).fetchall()
    assert big.connection.execute("SELECT count(*) FROM entries").fetchone()[0] > 20
    big.close()
    small.close()


def test_two_stores_converge_and_materialise(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    a, b, ida, idb = golems
    w = seed_one(a, NewEntry(kind=Kind.WARNING, content="Oracle lag on Base during sequencer restarts",
                             confidence=0.9, tags=("oracle",)), identity=ida)
    i = seed_one(b, NewEntry(kind=Kind.INSIGHT, content="Stable pools rebalance best near 08:00 UTC",
                             confidence=0.8), identity=idb)
    assert sync(a, b, idb.peer_id) == 2
    assert sync(b, a, ida.peer_id) == 2
    assert a.state_digest() == b.state_digest()
    got = b.get(w.id)
    assert got.body == w.body and got.provenance == "clade" and got.local_confidence == 0.4
    assert got.confidence == 0.9
    assert a.get(i.id).provenance == "clade" and a.get(i.id).confidence == 0.8
    assert [h.entry.id for h in b.keyword_search("oracle")] == [w.id]
    # a second round moves nothing
    assert sync(a, b, idb.peer_id) == 0 and list(a.iter_deltas(b.causal_context())) == []


def test_retraction_and_endorsement_cross(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    a, b, ida, idb = golems
    e = seed_one(a, NewEntry(kind=Kind.HEURISTIC, content="Wait two blocks after a depeg alert"), identity=ida)
    sync(a, b, idb.peer_id)
    b.endorse(e.id, identity=idb, confirm=True)
    b.endorse(e.id, identity=idb, confirm=True)
    b.endorse(e.id, identity=idb, confirm=False)
    sync(b, a, ida.peer_id)
    assert (a.get(e.id).confirms, a.get(e.id).contradicts) == (2, 1)
    a.retract(e.id, identity=ida)
    sync(a, b, idb.peer_id)
    assert b.get(e.id).status == "retracted"
    with pytest.raises(Exception, match="only its author"):
        b.retract(e.id, identity=idb)
    with pytest.raises(Exception, match="own entry"):
        a.endorse(e.id, identity=ida, confirm=True)
    assert a.state_digest() == b.state_digest()


def test_forget_is_local_and_late_ops_do_not_resurrect(
    golems: tuple[Grimoire, Grimoire, Identity, Identity],
) -> None:
    a, b, ida, idb = golems
    e = seed_one(a, NewEntry(kind=Kind.WARNING, content="Bridge delays on Friday evenings"), identity=ida)
    sync(a, b, idb.peer_id)
    digest_before = b.state_digest()
    assert b.forget(e.id) is True
    assert b.state_digest() == digest_before  # forgetting writes no op
    assert list(b.iter_deltas(a.causal_context())) == []
    a.set_confidence(e.id, 0.2, identity=ida)
    sync(a, b, idb.peer_id)
    late = b.get(e.id)
    assert late.archived is True and late.confidence == 0.2  # absorbed, still forgotten
    assert b.list_entries() == [] and b.keyword_search("bridge") == []
    assert a.get(e.id).archived is False
    assert a.state_digest() == b.state_digest()


def test_private_and_never_crossing_kinds_stay_home(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    a, b, ida, idb = golems
    seed_one(a, NewEntry(kind=Kind.INSIGHT, content="my size limits", sensitivity=Sensitivity.PRIVATE), identity=ida)
    seed_one(a, NewEntry(kind=Kind.FACT, content="api keys live in vault", sensitivity=Sensitivity.SENSITIVE),
                identity=ida)
    seed_one(a, NewEntry(kind=Kind.STRATEGY_OUTCOME, content="lp-7 made 3%"), identity=ida)
    seed_one(a, NewEntry(kind=Kind.PREFERENCE, content="prefer curve"), identity=ida)
    pub = seed_one(a, NewEntry(kind=Kind.WARNING, content="public warning"), identity=ida)
    sync(a, b, idb.peer_id)
    assert [e.id for e in b.list_entries()] == [pub.id]
    assert b.causal_context().vv(ida.peer_id) == 10  # withheld seqs are covered, nothing pending


def test_seq_never_reused_even_after_restore_from_old_copy(tmp_path: Path) -> None:
    ida, idb = IDENTITIES[0], IDENTITIES[1]
    a = Grimoire.open(tmp_path / "a.db", create=True)
    b = Grimoire.open(tmp_path / "b.db", create=True)
    seed_one(a, NewEntry(kind=Kind.WARNING, content="one"), identity=ida)
    a.close()
    old = (tmp_path / "a.db").read_bytes()
    a = Grimoire.open(tmp_path / "a.db")
    seed_one(a, NewEntry(kind=Kind.WARNING, content="two"), identity=ida)  # seqs 3, 4
    sync(a, b, idb.peer_id)
    a.close()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"a.db{suffix}").unlink(missing_ok=True)
    (tmp_path / "a.db").write_bytes(old)  # "restore" a copy taken after seq 2
    a = Grimoire.open(tmp_path / "a.db")
    sync(b, a, ida.peer_id)  # the sibling hands back our seqs 3 and 4
    e = seed_one(a, NewEntry(kind=Kind.WARNING, content="three"), identity=ida)
    seqs = [r[0] for r in sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT seq FROM ops WHERE entry_id = ? ORDER BY seq", (e.id,))]
    assert seqs == [5, 6]
    sync(a, b, idb.peer_id)
    assert a.state_digest() == b.state_digest()
    a.close()
    b.close()


def test_far_future_ops_are_refused(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    _, b, _, _ = golems
    body_ops = SimReplica(IDENTITIES[2])
    body_ops.wall = wall_clock_ms() + 3_600_000  # an hour ahead of us
    message = gossip(body_ops.create("from the future", Kind.WARNING))
    decoded, rejected = decode_delta(message, signature_ok)
    report = b.apply_delta(decoded, rejected=rejected)
    assert report.rejected == {"clock_skew": 2} and report.applied == 0
    assert b.list_entries(include_archived=True) == []
    assert b.causal_context().size() == 0


def test_forged_op_changes_nothing_in_store(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    a, b, ida, idb = golems
    e = seed_one(a, NewEntry(kind=Kind.WARNING, content="gas"), identity=ida)
    sync(a, b, idb.peer_id)
    before = b.state_digest()
    forged = make_op(writer=idb.peer_id, seq=1, hlc=Timestamp(1), entry_id=e.id, slot=SlotKind.AUTHOR,
                     value=AuthorValue(confidence=0.0), sign=idb.sign)
    report = b.apply_delta(wire(Delta((forged,), CausalContext()))[0])
    assert report.rejected == {"forbidden_slot": 1}
    assert b.state_digest() == before and b.get(e.id).confidence == 0.7
    with pytest.raises(RemoteProtocolError):
        decode_delta(b"\x93\x02\x90\x90", signature_ok)


def test_batched_extraction_respects_caps(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    a, b, ida, idb = golems
    seed(a, [NewEntry(kind=Kind.FACT, content=f"fact {i}") for i in range(50)], identity=ida)
    deltas = list(a.iter_deltas(b.causal_context(), max_ops=16))
    assert [len(d.ops) for d in deltas] == [16, 16, 16, 16, 16, 16, 4]
    assert sync(a, b, idb.peer_id, max_ops=16) == 100
    assert a.state_digest() == b.state_digest()


def test_pre_v3_entries_get_their_ops(tmp_path: Path) -> None:
    """A v2 store (entries without ops) is migrated; opening it with the identity signs them."""
    data = DataDir(tmp_path / "d")
    data.init()
    ident = data.load_identity()
    data.db_path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{data.db_path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(data.db_path, isolation_level=None)
    migrate(conn, target=2)
    body = NewEntry(kind=Kind.WARNING, content="written by clade v2").body(ident.peer_id, Timestamp(1_700_000_000_000))
    conn.execute(
        "INSERT INTO entries (id, author, kind, content, importance, quality, sensitivity, origin, created_hlc, "
        "confidence, provenance, local_confidence, stored_ms) VALUES (?, ?, 'warning', ?, 0.5, 0.5, 'public', "
        "'self', ?, 0.7, 'self', 0.7, 0)", (body.id, ident.peer_id, body.content, body.created.pack()))
    conn.close()
    with data.open_store(identity=ident) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.get(body.id).confidence == 0.7
        deltas = list(store.iter_deltas(CausalContext()))
        assert [op.entry_id for d in deltas for op in d.ops] == [body.id, body.id]
        assert store.backfill_ops(ident) == 0  # once only


@pytest.mark.parametrize("seed", [3, 17])
def test_a_stored_op_read_back_equals_the_op_admitted(seed: int) -> None:
    """`open_stored_op` (extraction: no re-validation, no re-hash) gives exactly what `open_op`
    (admission: signature, format, rules, hash) gives, for every kind of op and body field."""
    from crdt import EntryBody, open_op, open_stored_op

    rng = random.Random(seed)
    replicas = [SimReplica(identity) for identity in IDENTITIES[:3]]
    counter = [0]
    ops = []
    for _ in range(300):
        made = random_op(rng, rng.choice(replicas), counter)
        ops += made
        for replica in replicas:  # everyone learns it, so endorsements of others' entries happen
            replica.receive(gossip(made))
    assert {op.slot for op in ops} == set(SlotKind)  # every slot kind, evidence included
    for op in ops:
        admitted = open_op(op.writer, op.signed, op.signature, signature_ok)
        stored = open_stored_op(op.writer, op.signed, op.signature)
        assert stored == admitted and stored.dot == admitted.dot and stored.wire_size == admitted.wire_size
        if isinstance(admitted.value, EntryBody):
            assert isinstance(stored.value, EntryBody) and stored.value.id == admitted.value.id
            assert stored.value.canonical() == admitted.value.canonical()


def test_an_id_prefix_names_one_entry_or_is_refused_with_the_candidates(tmp_path: Path) -> None:
    import itertools

    from crdt import Kind
    from crypto import Identity
    from daemon.errors import NotFound, UsageError
    from daemon.grimoire import Grimoire, NewEntry

    me = Identity(b"\x07" * 32)
    with Grimoire.open(tmp_path / "g.db", create=True) as store:
        made = seed(store, [NewEntry(kind=Kind.FACT, content=f"fact number {n} about pool {n}")
                           for n in range(1500)], identity=me)
        ids = sorted(e.id for e in made)
        twins = next((a, b) for a, b in itertools.pairwise(ids) if a[:4] == b[:4])  # 1,500 ids: 4 hex collide
        with pytest.raises(UsageError, match="ambiguous") as ambiguous:
            store.resolve_id(twins[0][:4])
        assert twins[0] in str(ambiguous.value) and twins[1] in str(ambiguous.value)
        assert store.resolve_id(twins[0][:12]) == twins[0]
        assert store.resolve_id(twins[0].upper()) == twins[0]
        with pytest.raises(NotFound):
            store.resolve_id(next(p for p in (f"{n:04x}" for n in range(65536))
                                            if not any(i.startswith(p) for i in ids)))
        with pytest.raises(UsageError, match="at least 4") as short:  # too short: refused (400), not unknown
            store.resolve_id("abc")
        assert not isinstance(short.value, NotFound)
        with pytest.raises(NotFound):  # not hex: no id at all
            store.resolve_id("zzzz")


def test_state_digests_tell_gated_ops_from_context(golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    """`shared` hashes only the ops that may cross: a private write moves the writer's
    context and `all`, never `shared`; siblings agree on it after one pull."""
    a, b, ida, idb = golems
    seed_one(a, NewEntry(kind=Kind.WARNING, content="Sequencer stalls on Base: delay swaps"), identity=ida)
    sync(a, b, idb.peer_id)
    before = a.state_digests(a.sync_gate(ida.peer_id))
    assert before["shared"] == b.state_digests(b.sync_gate(idb.peer_id))["shared"]
    seed_one(a, NewEntry(kind=Kind.INSIGHT, content="Private: my fills slip 3 bps after 14:00"), identity=ida)
    after = a.state_digests(a.sync_gate(ida.peer_id))
    assert after["shared"] == before["shared"]  # the insight is withheld (not promoted)
    assert after["context"] != before["context"] and after["all"] != before["all"]
    assert after["shared"] == a.state_digest(a.sync_gate(ida.peer_id), context=False)
    assert after["context"] == a.context_digest()


def test_a_reader_keeps_its_digests_until_another_connection_commits(
        golems: tuple[Grimoire, Grimoire, Identity, Identity], monkeypatch: pytest.MonkeyPatch) -> None:
    """`sync_digests` on a reader reads every op again only after a commit: polled on a store
    that has not changed it answers the same digests without computing them; after a write
    (a private one too: it moves `all` and `context`) they are computed once and are the
    store's own."""
    a, _, ida, _ = golems
    seed_one(a, NewEntry(kind=Kind.WARNING, content="Sequencer stalls on Base: delay swaps"), identity=ida)
    reader = Grimoire.open_reader(a.path)
    try:
        first = reader.sync_digests(ida.peer_id)
        assert first == a.state_digests(a.sync_gate(ida.peer_id))
        computed: list[int] = []
        real = reader.state_digests

        def counted(gate: Gate) -> dict[str, str]:
            computed.append(1)
            return real(gate)

        monkeypatch.setattr(reader, "state_digests", counted)
        assert reader.sync_digests(ida.peer_id) == first and not computed
        seed_one(a, NewEntry(kind=Kind.INSIGHT, content="Private: my fills slip 3 bps after 14:00"), identity=ida)
        after = reader.sync_digests(ida.peer_id)
        assert len(computed) == 1 and after != first and after["shared"] == first["shared"]
        assert after == a.state_digests(a.sync_gate(ida.peer_id))
        assert reader.sync_digests(ida.peer_id) == after and len(computed) == 1
        assert reader.sync_digests(IDENTITIES[1].peer_id) == a.state_digests(a.sync_gate(IDENTITIES[1].peer_id))
        assert len(computed) == 2  # another replica's gate is not the kept one
    finally:
        reader.close()


@pytest.mark.parametrize("seed", range(6))
def test_sendable_count_is_what_extraction_sends(tmp_path: Path, seed: int) -> None:
    """`sendable_count` reads dots and bodies only (`dots_after`), never opening an op: it must
    count exactly the ops `iter_deltas` sends, for peers that hold nothing, a prefix, or a
    prefix and a cloud, with private and never-crossing entries among them."""
    rng = random.Random(seed)
    writers = [SimReplica(IDENTITIES[i]) for i in range(3)]
    store = Grimoire.open(tmp_path / "g.db", create=True)
    counter = [0]
    for _ in range(50):
        decoded, rejected = decode_delta(gossip(random_op(rng, rng.choice(writers), counter)), signature_ok)
        store.apply_delta(decoded, rejected=rejected)
    me = IDENTITIES[4]
    seed_one(store, NewEntry(kind=Kind.INSIGHT, content="my size limits", sensitivity=Sensitivity.PRIVATE), identity=me)
    seed_one(store, NewEntry(kind=Kind.STRATEGY_OUTCOME, content="lp-7 made 3%"), identity=me)
    seed_one(store, NewEntry(kind=Kind.WARNING, content="the bridge stalls at the epoch"), identity=me)
    local = store.causal_context()
    peers = [CausalContext()]
    for _ in range(4):
        rows = []
        for writer in local.replicas():
            top = local.top(writer)
            vv = rng.randint(0, top)
            cloud = sorted(rng.sample(range(vv + 2, top + 1), k=min(2, max(0, top - vv - 1)))) if top > vv + 1 else []
            rows.append((writer, vv, cloud))
        peers.append(CausalContext.from_rows(rows))
    gate = store.sync_gate(me.peer_id)
    for peer in peers:
        sent = sum(len(delta.ops) for delta in store.iter_deltas(peer, gate=gate))
        assert store.sendable_count(peer, gate=gate) == sent, peer
    store.close()


def test_state_digests_read_from_stored_bytes_equal_the_hash_of_the_decoded_ops(
        golems: tuple[Grimoire, Grimoire, Identity, Identity]) -> None:
    """The digests are read from the ops' stored bytes (`signed_rows`, one body decoded per
    entry for the gate); they must equal `crdt.digest` of the decoded ops, the gate applied to
    each op's entry body, on a store holding two writers' ops and private entries."""
    a, b, ida, idb = golems
    for i in range(6):
        seed_one(a, NewEntry(kind=Kind.WARNING, content=f"Gas above {90 + i} gwei on chain {i}: delay swaps"),
                 identity=ida)
        seed_one(b, NewEntry(kind=Kind.WARNING, content=f"Pool {i} drains after oracle updates"), identity=idb)
        seed_one(a, NewEntry(kind=Kind.INSIGHT, content=f"Private: fill {i} slipped 3 bps"), identity=ida)
    sync(b, a, ida.peer_id)
    gate = a.sync_gate(ida.peer_id)
    with a._snapshot() as backend:
        ops = backend.all_ops()
        assert len({op.writer for op in ops}) == 2
        gated = [op for op in ops if (body := backend.body(op.entry_id)) is not None and gate(body)]
        context = backend.context
    assert 0 < len(gated) < len(ops)  # the private insights stay out
    digests = a.state_digests(gate)
    assert digests["shared"] == digest(gated, None)
    assert digests["all"] == digest(ops, context)
    assert a.state_digest(gate, context=False) == digest(gated, None)
    assert a.state_digest() == digest(ops, context)
