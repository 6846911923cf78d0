"""Evidence on disk and the pooled belief read from it (the I/O around belief.py).

`record_evidence` keeps the `evidence` table (schema `_V15_EVIDENCE`) in step with the CRDT's
evidence slots (replication.py calls it for every evidence op it puts). `beliefs` reads, for
some entries, the stated confidence, this golem's own outcome tallies and every sibling's
evidence slot, weighs each sibling by the trust view (trust_store.author_views: a voucher 1.0,
a member in good standing 0.25, a suspect or distrusted one 0) and pools them
(belief.pooled_belief). `refute_turns` and `date_refuted` date the entries that turned refuted
(and clear those that no longer are) so each turn is an event once (`Grimoire.refresh_refuted`
runs them); nothing here deletes anything.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from .belief import Belief, BeliefPolicy, SiblingEvidence, pooled_belief, writer_weight
from .id_lists import IN_LIST, as_list
from .trust_store import TrustView

__all__ = ["BELIEF", "beliefs", "clade_record", "date_refuted", "record_evidence", "refute_turns", "refuted_candidates"]

BELIEF = BeliefPolicy()


def record_evidence(conn: sqlite3.Connection, entry_id: str, writer: str, *, positive: int, negative: int,
                    local: bool, stored_ms: int) -> None:
    """Keep `evidence` in step with one evidence slot (inside the caller's transaction);
    `stored_ms`: its local arrival (the evidence budget counts tallies that changed recently)."""
    conn.execute(
        "INSERT INTO evidence (entry_id, writer, positive, negative, local, stored_ms) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (entry_id, writer) DO UPDATE SET positive = excluded.positive, negative = excluded.negative, "
        "stored_ms = excluded.stored_ms", (entry_id, writer, positive, negative, int(local), stored_ms))


def _weight(view: TrustView | None, writer: str, policy: BeliefPolicy) -> float:
    if view is None:  # trust judgments off: every member's outcomes count in full
        return policy.voucher_weight
    author = view.authors.get(writer)
    suspect = author is not None and author.suspect
    return writer_weight(voucher=writer in view.vouchers, suspect=suspect, policy=policy)


def beliefs(conn: sqlite3.Connection, entry_ids: Sequence[str], view: TrustView | None,
            policy: BeliefPolicy = BELIEF) -> dict[str, Belief]:
    """The pooled belief of each of `entry_ids` that exists (`view` None: trust is off)."""
    ids = list(dict.fromkeys(entry_ids))
    facts: dict[str, tuple[float, int, int]] = {}
    slots: dict[str, list[SiblingEvidence]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for entry_id, stated, pos, neg in conn.execute(
                f"SELECT id, confidence, outcomes_positive, outcomes_negative FROM entries WHERE id IN {IN_LIST}",
                (as_list(chunk),)):
            facts[entry_id] = (float(stated), int(pos), int(neg))
        for entry_id, writer, pos, neg in conn.execute(
                f"SELECT entry_id, writer, positive, negative FROM evidence WHERE local = 0 AND entry_id IN {IN_LIST}",
                (as_list(chunk),)):
            slots.setdefault(entry_id, []).append(
                SiblingEvidence(writer, int(pos), int(neg), _weight(view, writer, policy)))
    return {i: pooled_belief(stated, pos, neg, slots.get(i, ()), policy) for i, (stated, pos, neg) in facts.items()}


def refuted_candidates(conn: sqlite3.Connection) -> list[str]:
    """Entries that could be refuted: some negative evidence here or from a sibling, or dated refuted."""
    rows = conn.execute(
        "SELECT id FROM entries WHERE outcomes_negative > 0 OR refuted_ms IS NOT NULL "
        "UNION SELECT entry_id FROM evidence WHERE negative > 0 AND local = 0").fetchall()
    return [r[0] for r in rows]


def refute_turns(conn: sqlite3.Connection, states: Mapping[str, Belief]) -> tuple[list[str], list[str]]:
    """Of `states`, (refuted and not yet dated, dated and no longer refuted): a read."""
    dated = {r[0] for r in conn.execute("SELECT id FROM entries WHERE refuted_ms IS NOT NULL")} if states else set()
    return (sorted(i for i, b in states.items() if b.refuted and i not in dated),
            sorted(i for i, b in states.items() if not b.refuted and i in dated))


def date_refuted(conn: sqlite3.Connection, turned: Sequence[str], lifted: Sequence[str], *, now_ms: int) -> None:
    """Date `turned` refuted now and clear `lifted` (inside the caller's transaction)."""
    conn.executemany("UPDATE entries SET refuted_ms = ? WHERE id = ?", [(now_ms, i) for i in turned])
    conn.executemany("UPDATE entries SET refuted_ms = NULL WHERE id = ?", [(i,) for i in lifted])


def clade_record(conn: sqlite3.Connection, author: str, view: TrustView | None,
                 policy: BeliefPolicy = BELIEF) -> tuple[float, float]:
    """(weighted positive, weighted negative) evidence others gave `author`'s entries here: one
    per writer and entry, by the sign of its tally (how its crossed entries fared with the clade)."""
    positive = negative = 0.0
    for writer, pos, neg in conn.execute(
            "SELECT v.writer, v.positive, v.negative FROM evidence v JOIN entries e ON e.id = v.entry_id "
            "WHERE e.author = ? AND v.writer != e.author AND v.local = 0", (author,)):
        weight = _weight(view, writer, policy)
        if pos > neg:
            positive += weight
        elif neg > pos:
            negative += weight
    return positive, negative
