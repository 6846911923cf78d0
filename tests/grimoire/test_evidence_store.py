"""Evidence that crosses, between real stores over the wire codec (daemon/grimoire/belief.py,
evidence_store.py): a voucher's failures refute an entry on every golem, a voucher's success
releases a quarantined one, a member's contradictions move little and refute nothing, and no
outcome row (metric, value, note) ever leaves the golem that recorded it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crdt import Kind, decode_delta, encode_delta
from crypto import Identity, signature_ok
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.trust import Release, TrustPolicy
from daemon.grimoire.trust_store import quarantine
from tests.helpers.seed import raw_write, seed_one

NOW = 1_800_000_000_000
POLICY = TrustPolicy()
A, B, C, X = (Identity(bytes([n]) * 32) for n in (0x31, 0x32, 0x33, 0x34))


class Golem:
    def __init__(self, root: Path, identity: Identity) -> None:
        self.identity = identity
        self.path = root / f"{identity.peer_id[-6:]}.db"
        self.store = Grimoire.open(self.path, create=True, wall_ms=lambda: NOW)

    @property
    def me(self) -> str:
        return self.identity.peer_id

    def write(self, content: str, *, kind: Kind = Kind.INSIGHT, confidence: float = 0.7) -> str:
        entry = seed_one(self.store, NewEntry(kind=kind, content=content, confidence=confidence),
                         identity=self.identity)
        self.store.promote([entry.id], self.identity, now_ms=NOW, reason="admitted")  # as the gate would
        return entry.id

    def outcome(self, entry_id: str, effect: str, *, metric: str = "pnl_usd", value: float = 0.0,
                note: str | None = None) -> None:
        self.store.record_outcome(entry_id, effect, metric=metric, value=value, note=note, now_ms=NOW,
                                  identity=self.identity)

    def belief(self, entry_id: str) -> tuple[float, bool]:
        b = self.store.beliefs([entry_id], POLICY, now_ms=NOW)[entry_id]
        return b.belief, b.refuted

    def release(self, entry_id: str) -> Release:
        return quarantine(self.store.connection, [entry_id], now_ms=NOW, policy=POLICY)[entry_id][1]


def sync(sender: Golem, receiver: Golem) -> None:
    """One anti-entropy round sender -> receiver through the wire codec and the sender's gate."""
    gate = sender.store.sync_gate(sender.me)
    for delta in list(sender.store.iter_deltas(receiver.store.causal_context(), gate=gate)):
        decoded, rejected = decode_delta(encode_delta(delta), signature_ok)
        receiver.store.apply_delta(decoded, rejected=rejected, local_replica=receiver.me, sender=sender.me)


def round_all(golems: list[Golem]) -> None:
    for a in golems:
        for b in golems:
            if a is not b:
                sync(a, b)


@pytest.fixture
def clade(tmp_path: Path) -> Iterator[dict[str, Golem]]:
    golems = {name: Golem(tmp_path, ident) for name, ident in (("A", A), ("B", B), ("C", C), ("X", X))}
    yield golems
    for g in golems.values():
        g.store.close()


def make_voucher(clade: dict[str, Golem], who: str, at: tuple[str, ...]) -> None:
    """`who` earns a voucher's weight at each of `at`: two good outcomes there on an entry of its."""
    earned = clade[who].write(f"{who}'s sound insight: Morpho vault utilisation above 92% precedes rate spikes")
    round_all(list(clade.values()))
    for name in at:
        clade[name].outcome(earned, "positive")
        clade[name].outcome(earned, "positive")


def test_a_vouchers_two_failures_refute_an_entry_on_every_golem(clade: dict[str, Golem]) -> None:
    a, b, c = clade["A"], clade["B"], clade["C"]
    make_voucher(clade, "B", ("A", "C"))
    bad = a.write("Uniswap v3 0.05% pool on Base never sees slippage above 1% at 100k")
    round_all([a, b, c])
    assert a.belief(bad) == (pytest.approx(0.7), False)
    b.outcome(bad, "negative", metric="slippage_bps_secret", value=-137.5, note="lost 4.2 ETH on trade 77")
    b.outcome(bad, "negative", metric="slippage_bps_secret", value=-212.0)
    round_all([a, b, c])
    for golem in (a, b, c):
        value, refuted = golem.belief(bad)
        assert refuted and value == pytest.approx(2.8 / 6), golem.me  # (4·0.7) / (4 + 2)
    # The author's own copy too; and its record with the clade drops.
    from daemon.grimoire.evidence_store import clade_record

    assert clade_record(a.store.connection, a.me, None) == (0.0, 1.0)
    # The soma stayed home: B's outcome rows (metric, value, note) are nowhere on A or C.
    for golem in (a, c):
        golem.store.checkpoint()
        raw = b"".join(p.read_bytes() for p in golem.path.parent.glob(golem.path.name + "*"))
        for soma in (b"slippage_bps_secret", b"lost 4.2 ETH", b"137.5"):
            assert soma not in raw
        assert golem.store.connection.execute("SELECT count(*) FROM outcomes WHERE metric LIKE '%secret%'"
                                               ).fetchone()[0] == 0


def test_a_vouchers_positive_evidence_releases_a_quarantined_entry(clade: dict[str, Golem]) -> None:
    a, b, c, x = clade["A"], clade["B"], clade["C"], clade["X"]
    make_voucher(clade, "B", ("C",))
    fresh = x.write("Pendle PT yields on Arbitrum lag mainnet by a day after governance votes")
    round_all([a, b, c, x])
    assert c.release(fresh) is Release.UNVERIFIED  # X has no record at C: quarantined
    b.outcome(fresh, "positive")
    round_all([a, b, c, x])
    assert c.release(fresh) is Release.CORROBORATED  # B's evidence, a voucher's at C, released it
    assert a.release(fresh) is Release.UNVERIFIED  # B is no voucher at A: nothing changes there


def test_a_members_contradictions_of_an_honest_entry_move_little_and_refute_nothing(
        clade: dict[str, Golem]) -> None:
    a, c, x = clade["A"], clade["C"], clade["X"]
    honest = a.write("Aave v3 on Optimism: liquidation threshold for wstETH is 79% since the last vote",
                     confidence=0.6)
    round_all([a, c, x])
    for _ in range(40):  # a flood of fake failures (its tally says 40)
        x.outcome(honest, "negative")
    round_all([a, c, x])
    for golem in (a, c):
        value, refuted = golem.belief(honest)
        assert not refuted and value == pytest.approx(2.4 / 5)  # capped at 4 × 0.25: one outcome's worth
    # Once X is suspect (the operator distrusts it), its evidence counts nothing.
    from daemon.grimoire.trust_store import set_distrust

    with raw_write(c.store) as conn:
        set_distrust(conn, x.me, distrusted=True, now_ms=NOW)
    assert c.belief(honest) == (pytest.approx(0.6), False)


def test_recall_withholds_a_refuted_entry_unless_asked(clade: dict[str, Golem], tmp_path: Path) -> None:
    from daemon.embedding.embedder import get_embedder
    from daemon.grimoire.retrieval import RecallQuery, Retriever

    a, b, c = clade["A"], clade["B"], clade["C"]
    make_voucher(clade, "B", ("C",))
    bad = a.write("Curve tricrypto on Arbitrum: the oracle delay never exceeds one block", confidence=0.6)
    round_all([a, b, c])
    b.outcome(bad, "negative")
    b.outcome(bad, "negative")
    round_all([a, b, c])
    embedder = get_embedder(tmp_path / "embedder")
    retriever = Retriever(c.store, lambda: embedder)
    query = "oracle delay of Curve tricrypto on Arbitrum"
    shown = [h.entry.id for h in retriever.recall(RecallQuery(text=query, k=5, include_unverified=False), now_ms=NOW)]
    assert bad not in shown
    hits = retriever.recall(RecallQuery(text=query, k=5, include_unverified=True), now_ms=NOW)
    (hit,) = [h for h in hits if h.entry.id == bad]
    assert hit.entry.belief is not None and hit.entry.belief.refuted
    assert c.store.get(bad).status == "active"  # readable, never deleted


def test_a_flood_of_evidence_makes_its_writer_suspect(clade: dict[str, Golem]) -> None:
    """Evidence is budgeted like entries: tallies on more than `budget_entries` entries changed
    in one window make their writer suspect (and its evidence then counts nothing)."""
    from daemon.grimoire.trust_store import author_views

    a, c, x = clade["A"], clade["C"], clade["X"]
    policy = TrustPolicy(budget_entries=20)
    ids = [a.write(f"Warning {n}: pool {n} on Base lost depth after the {n}th epoch", kind=Kind.WARNING)
           for n in range(21)]
    round_all([a, c, x])
    for entry_id in ids[:20]:
        x.outcome(entry_id, "negative")
    round_all([a, c, x])
    assert not author_views(c.store.connection, now_ms=NOW, policy=policy).authors[x.me].suspect  # at the budget
    x.outcome(ids[20], "negative")
    round_all([a, c, x])
    view = author_views(c.store.connection, now_ms=NOW, policy=policy).authors[x.me]
    assert view.suspect and "evidence_flood" in view.reasons and view.evidence.evidence_arrivals == 21


def test_a_sibling_whose_evidence_contradicts_what_happened_here_is_unreliable(clade: dict[str, Golem]) -> None:
    """Reporters are judged by agreement: X reports failures where C's own outcomes went well
    (three entries): X turns suspect at C ("unreliable") and its evidence then weighs nothing;
    B, whose reports agree with C's, weighs as a voucher though none of its entries was judged."""
    from daemon.grimoire.trust_store import author_views

    a, b, c, x = clade["A"], clade["B"], clade["C"], clade["X"]
    ids = [a.write(f"Heuristic {n}: on Base, route {n}00k swaps through the aggregator", kind=Kind.WARNING)
           for n in range(4)]
    round_all([a, b, c, x])
    for entry_id in ids[:3]:
        c.outcome(entry_id, "positive")
        b.outcome(entry_id, "positive")
        x.outcome(entry_id, "negative")
    round_all([a, b, c, x])
    view = author_views(c.store.connection, now_ms=NOW, policy=POLICY)
    assert view.authors[x.me].suspect and "unreliable" in view.authors[x.me].reasons
    assert b.me in view.vouchers and x.me not in view.vouchers
    x.outcome(ids[3], "negative")
    x.outcome(ids[3], "negative")
    round_all([a, b, c, x])
    assert c.belief(ids[3]) == (pytest.approx(0.7), False)  # an unreliable reporter moves nothing
    b.outcome(ids[3], "negative")
    b.outcome(ids[3], "negative")
    round_all([a, b, c, x])
    assert c.belief(ids[3]) == (pytest.approx(2.8 / 6), True)  # a reliable one's two failures refute
