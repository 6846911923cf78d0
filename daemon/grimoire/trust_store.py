"""Per-author trust on disk: the evidence trust.py reads, the operator's distrust, the alert state.

Tables (schema `_V14_TRUST`): `endorsements` — one row per (entry, endorsing replica), kept in
step with the CRDT's endorse slots by replication.py (`record_endorsement`), so a confirmation
can be weighed by who gave it; `author_trust` — per author: the operator's `distrusted` flag,
`burst_ms` (when the author went over its write budget: sticky until the operator trusts it
again, since the budget window slides on), `suspect_ms` (when it was last reported suspect,
so each turn is alerted once), `forged_vector_ms` (when a vector it shipped failed its check
here: sticky too) and `trusted_ms` (the operator's last `trust`: the budget counts
arrivals after it only, so a forgiven burst is not flagged again). Everything else is derived
from the entries' local columns on each read; nothing here is replicated.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from crdt import Kind

from .id_lists import IN_LIST, as_list
from .trust import (
    AuthorEvidence,
    AuthorView,
    EntryFacts,
    Release,
    TrustPolicy,
    author_view,
    digest_visible,
    reporter_reliability,
    verdict,
)

__all__ = ["AlertState", "TrustView", "ViewCache", "alert_state", "author_views", "entry_states", "quarantine",
           "record_endorsement", "record_forged_vector", "record_suspects", "set_distrust"]


@dataclass(frozen=True, slots=True)
class TrustView:
    """Every known sibling author's view, and the vouchers' endorsements by entry."""

    authors: Mapping[str, AuthorView]
    vouched: Mapping[str, tuple[int, int]]  # entry id -> (vouched confirms, vouched contradicts)
    vouchers: frozenset[str] = frozenset()  # siblings whose word counts in full here (trust.py)


def record_endorsement(conn: sqlite3.Connection, entry_id: str, writer: str, *, confirms: int, contradicts: int,
                       local: bool) -> None:
    """Keep `endorsements` in step with one endorse slot (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO endorsements (entry_id, writer, confirms, contradicts, local) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (entry_id, writer) DO UPDATE SET confirms = excluded.confirms, "
        "contradicts = excluded.contradicts", (entry_id, writer, confirms, contradicts, int(local)))


def _flags(conn: sqlite3.Connection) -> dict[str, tuple[bool, int | None, int | None]]:
    return {r[0]: (bool(r[1]), r[2], r[3]) for r in conn.execute(
        "SELECT author, distrusted, burst_ms, suspect_ms FROM author_trust")}


def author_views(conn: sqlite3.Connection, *, now_ms: int, policy: TrustPolicy) -> TrustView:
    """Trust and suspicion of every sibling author this store holds entries of (trust.py)."""
    since = now_ms - policy.budget_window_ms
    local: dict[str, list[int]] = {}
    # One pass over the partial index entries_clade_trust (schema _V14_TRUST): siblings' entries only.
    for author, good, bad, arrivals, fresh in conn.execute(
            "SELECT e.author, sum(e.outcomes_positive), sum(e.outcomes_negative), "
            "sum(e.stored_ms >= max(?1, coalesce(t.trusted_ms, 0))), "
            "sum(e.stored_ms >= max(?1, coalesce(t.trusted_ms, 0)) AND e.stored_ms - (e.created_hlc >> 16) <= ?2) "
            "FROM entries e INDEXED BY entries_clade_trust LEFT JOIN author_trust t ON t.author = e.author "
            "WHERE e.provenance = 'clade' GROUP BY e.author", (since, policy.budget_window_ms)):
        local[author] = [int(good or 0), int(bad or 0), int(arrivals or 0), int(fresh or 0)]
    flags = _flags(conn)
    base = {a: author_view(a, AuthorEvidence(good=v[0], bad=v[1], distrusted=flags.get(a, (False, None, None))[0]),
                           policy) for a, v in local.items()}
    vouchers = {a for a, v in base.items() if v.trust >= policy.vouch_trust and not v.suspect
                and flags.get(a, (False, None, None))[1] is None}
    # Reporters: how each sibling's evidence agreed with this golem's own outcomes on the same
    # entries (trust.reporter_reliability). A reliable one's evidence counts as a voucher's; an
    # unreliable one (its reports contradict what happened here) is suspect.
    agreement: dict[str, list[int]] = {}
    for writer, positive, negative, own_positive, own_negative in conn.execute(
            "SELECT v.writer, v.positive, v.negative, e.outcomes_positive, e.outcomes_negative FROM evidence v "
            "JOIN entries e ON e.id = v.entry_id WHERE v.local = 0 AND v.writer != e.author "
            "AND e.outcomes_positive != e.outcomes_negative AND v.positive != v.negative"):
        tally = agreement.setdefault(writer, [0, 0])
        tally[0 if (positive > negative) == (own_positive > own_negative) else 1] += 1
    reliability = {w: reporter_reliability(agree, disagree, policy) for w, (agree, disagree) in agreement.items()}
    vouchers |= {w for w, r in reliability.items() if r is True and not flags.get(w, (False, None, None))[0]}
    vouched: dict[str, tuple[int, int]] = {}
    extra: dict[str, list[int]] = {}
    # A voucher's endorsement, or its evidence slot (its outcomes' tally: more positive than
    # negative confirms, more negative contradicts), counts once per (voucher, entry). This
    # golem's own evidence is its outcomes, already in `local`.
    for entry_id, author, writer, confirms, contradicts, is_local in conn.execute(
            "SELECT n.entry_id, e.author, n.writer, n.confirms, n.contradicts, n.local FROM endorsements n "
            "JOIN entries e ON e.id = n.entry_id WHERE e.provenance = 'clade' AND n.writer != e.author "
            "UNION ALL SELECT v.entry_id, e.author, v.writer, v.positive > v.negative, v.negative > v.positive, 0 "
            "FROM evidence v JOIN entries e ON e.id = v.entry_id WHERE e.provenance = 'clade' "
            "AND v.writer != e.author AND v.local = 0"):
        if not (is_local or writer in vouchers):
            continue
        c, x = vouched.get(entry_id, (0, 0))
        vouched[entry_id] = (c + (confirms > 0), x + (contradicts > 0))
        more = extra.setdefault(author, [0, 0])
        more[0] += confirms > 0
        more[1] += contradicts > 0
    # The evidence budget: tallies (one per entry) each sibling changed here in the window.
    evidence_arrivals = {w: int(n) for w, n in conn.execute(
        "SELECT v.writer, count(*) FROM evidence v INDEXED BY evidence_by_writer "
        "LEFT JOIN author_trust t ON t.author = v.writer "
        "WHERE v.local = 0 AND v.stored_ms >= max(?, coalesce(t.trusted_ms, 0)) GROUP BY v.writer", (since,))}
    views: dict[str, AuthorView] = {}
    # Authors whose shipped vector failed its check here (record_forged_vector): sticky, like a burst.
    forged = {str(r[0]) for r in conn.execute("SELECT author FROM author_trust WHERE forged_vector_ms IS NOT NULL")}
    for author in sorted(set(local) | set(flags) | set(evidence_arrivals) | set(reliability) | forged):
        good, bad, arrivals, fresh = local.get(author, [0, 0, 0, 0])
        distrusted, burst_ms, _ = flags.get(author, (False, None, None))
        more = extra.get(author, [0, 0])
        view = author_view(author, AuthorEvidence(good + more[0], bad + more[1], fresh, arrivals, distrusted,
                                                  evidence_arrivals.get(author, 0)), policy)
        if reliability.get(author) is False and "unreliable" not in view.reasons:
            view = replace(view, suspect=True, reasons=(*view.reasons, "unreliable"))
        if burst_ms is not None and "burst" not in view.reasons:
            view = replace(view, suspect=True, reasons=(*view.reasons, "burst"))
        if author in forged:
            view = replace(view, suspect=True, reasons=(*view.reasons, "forged_vector"))
        views[author] = view
    return TrustView(views, vouched, frozenset(vouchers))


def entry_states(conn: sqlite3.Connection, entry_ids: Sequence[str], view: TrustView, *, now_ms: int,
                 policy: TrustPolicy) -> dict[str, tuple[EntryFacts, Release, bool]]:
    """For each id: (facts, verdict, digest-visible) — trust.py's `verdict` and `digest_visible`."""
    out: dict[str, tuple[EntryFacts, Release, bool]] = {}
    ids = list(dict.fromkeys(entry_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for row in conn.execute(
                "SELECT id, author, kind, provenance, stored_ms, outcomes_positive, outcomes_negative "
                f"FROM entries WHERE id IN {IN_LIST}", (as_list(chunk),)):
            confirms, contradicts = view.vouched.get(row[0], (0, 0))
            facts = EntryFacts(row[0], row[1], Kind(row[2]), row[3] == "clade", row[4], row[5], row[6],
                               confirms, contradicts)
            author = view.authors.get(facts.author)
            release = verdict(facts, author, now_ms=now_ms, policy=policy)
            out[facts.id] = (facts, release, digest_visible(facts, release, author, policy))
    return out


def quarantine(conn: sqlite3.Connection, entry_ids: Sequence[str], *, now_ms: int,
               policy: TrustPolicy) -> dict[str, tuple[EntryFacts, Release, bool]]:
    """`entry_states` of `entry_ids` under the current author views (what recall and digests apply)."""
    return entry_states(conn, entry_ids, author_views(conn, now_ms=now_ms, policy=policy), now_ms=now_ms,
                        policy=policy)


class ViewCache:
    """`author_views` kept per store connection until it could have changed: anything committed
    since (`PRAGMA data_version` moves on another connection's commit, `total_changes` on the
    connection's own), another policy, or another wall-clock second (the budget window slides).
    Recall asks on every search; over a store of 25,000 siblings' entries the view costs 15-85 ms
    (bench/RESULTS.md), and between writes it is the same answer (cached: ~0.01 ms). Thread-safe; entries for
    connections (their owners) that are gone are dropped with them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: weakref.WeakKeyDictionary[object, tuple[tuple[Any, ...], TrustView]] = (
            weakref.WeakKeyDictionary())

    def views(self, owner: object, conn: sqlite3.Connection, *, now_ms: int, policy: TrustPolicy) -> TrustView:
        """`author_views(conn, …)`, or the same view if nothing it reads can have changed.
        `owner`: the object holding `conn` (a `Grimoire`): the cache is keyed by it."""
        key = (int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes, now_ms // 1000, policy)
        with self._lock:
            kept = self._kept.get(owner)
            if kept is not None and kept[0] == key:
                return kept[1]
            view = author_views(conn, now_ms=now_ms, policy=policy)
            self._kept[owner] = (key, view)
            return view


def set_distrust(conn: sqlite3.Connection, author: str, *, distrusted: bool, now_ms: int) -> dict[str, Any]:
    """The operator's call (inside the caller's transaction): distrust quarantines every entry of
    `author` at once; trust lifts it and clears the budget flag and the alert state. Returns
    {author, distrusted, entries} (entries: how many of its entries this store holds)."""
    if distrusted:
        conn.execute("INSERT INTO author_trust (author, distrusted, changed_ms) VALUES (?, 1, ?) "
                     "ON CONFLICT (author) DO UPDATE SET distrusted = 1, changed_ms = excluded.changed_ms",
                     (author, now_ms))
    else:
        conn.execute("INSERT INTO author_trust (author, distrusted, changed_ms, trusted_ms) VALUES (?1, 0, ?2, ?2) "
                     "ON CONFLICT (author) DO UPDATE SET distrusted = 0, burst_ms = NULL, suspect_ms = NULL, "
                     "forged_vector_ms = NULL, "
                     "trusted_ms = excluded.changed_ms, changed_ms = excluded.changed_ms", (author, now_ms))
    held = conn.execute("SELECT count(*) FROM entries WHERE author = ?", (author,)).fetchone()[0]
    return {"author": author, "distrusted": distrusted, "entries": int(held)}


def record_forged_vector(conn: sqlite3.Connection, author: str, *, now_ms: int) -> None:
    """A vector `author` shipped did not match its own text here (daemon/embedding/shipped.py):
    the author is suspect (reason `forged_vector`) until the operator trusts it again."""
    conn.execute("INSERT INTO author_trust (author, distrusted, changed_ms, forged_vector_ms) VALUES (?1, 0, ?2, ?2) "
                 "ON CONFLICT (author) DO UPDATE SET forged_vector_ms = excluded.forged_vector_ms", (author, now_ms))


@dataclass(frozen=True, slots=True)
class AlertState:
    """What the operator has to decide: `suspect` — authors whose alert stands (recorded by
    `record_suspects`) and that the operator has not distrusted; `distrusted` — those distrusted."""

    suspect: tuple[str, ...]
    distrusted: tuple[str, ...]


def alert_state(conn: sqlite3.Connection) -> AlertState:
    """The alert state as last recorded (cheap: one table of at most one row per author; trust
    itself is not recomputed here, the watch does that)."""
    suspect: list[str] = []
    distrusted: list[str] = []
    for author, is_distrusted in conn.execute(
            "SELECT author, distrusted FROM author_trust "
            "WHERE distrusted = 1 OR suspect_ms IS NOT NULL ORDER BY author"):
        (distrusted if is_distrusted else suspect).append(str(author))
    return AlertState(tuple(suspect), tuple(distrusted))


def record_suspects(conn: sqlite3.Connection, view: TrustView, *, now_ms: int) -> list[AuthorView]:
    """Persist the alert state (inside the caller's transaction): a burst is remembered
    (`burst_ms`); returns the authors that turned suspect since the last call (each alerted once
    per turn); an author no longer suspect is cleared, so a relapse alerts again."""
    flags = _flags(conn)
    turned: list[AuthorView] = []
    for author, v in view.authors.items():
        _, burst_ms, suspect_ms = flags.get(author, (False, None, None))
        if v.suspect and suspect_ms is None:
            turned.append(v)
        flooded = "burst" in v.reasons or "evidence_flood" in v.reasons  # sticky until the operator trusts it
        if v.suspect or suspect_ms is not None or (burst_ms is None and flooded):
            conn.execute(
                "INSERT INTO author_trust (author, distrusted, changed_ms, burst_ms, suspect_ms) "
                "VALUES (?1, 0, ?2, ?3, ?4) ON CONFLICT (author) DO UPDATE SET "
                "burst_ms = coalesce(author_trust.burst_ms, excluded.burst_ms), suspect_ms = ?4",
                (author, now_ms, now_ms if flooded else None,
                 (suspect_ms or now_ms) if v.suspect else None))
    return turned
