"""The Grimoire's SQLite schema as an ordered list of forward migrations.

`PRAGMA user_version` is the number of migrations applied. Opening a store applies the
missing ones, each in its own IMMEDIATE transaction (so two processes opening an old file
at once migrate it exactly once). A file with a newer version than we know is refused.
"""

from __future__ import annotations

import sqlite3

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "statements"]

_V1_ENTRIES = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value ANY
) STRICT;

-- One row per known entry. Body columns are immutable (the id hashes them); the author
-- slot (confidence, status, superseded_by) is mutable by the author only; the rest is
-- local and never replicated.
CREATE TABLE entries (
    rid               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
    author            TEXT NOT NULL,
    kind              TEXT NOT NULL,
    category          TEXT,
    content           TEXT NOT NULL,
    tokens            TEXT NOT NULL DEFAULT '[]',   -- JSON arrays (sorted, deduplicated)
    chains            TEXT NOT NULL DEFAULT '[]',
    protocols         TEXT NOT NULL DEFAULT '[]',
    tags              TEXT NOT NULL DEFAULT '[]',
    strategy_id       TEXT,
    importance        REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
    quality           REAL NOT NULL CHECK (quality BETWEEN 0 AND 1),
    sensitivity       TEXT NOT NULL CHECK (sensitivity IN ('public', 'private', 'sensitive')),
    pad_pleasure      REAL,
    pad_arousal       REAL,
    pad_dominance     REAL,
    origin            TEXT NOT NULL,
    generation        INTEGER NOT NULL DEFAULT 0,
    bloodstain        INTEGER NOT NULL DEFAULT 0,
    created_hlc       INTEGER NOT NULL,
    confidence        REAL NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    status            TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retracted')),
    superseded_by     TEXT,
    provenance        TEXT NOT NULL,
    local_confidence  REAL NOT NULL CHECK (local_confidence BETWEEN 0 AND 1),
    access_count      INTEGER NOT NULL DEFAULT 0,
    last_accessed_ms  INTEGER,
    embedding         BLOB,
    embedding_model   TEXT,
    embedding_model_version TEXT,
    embedding_preprocess_hash TEXT,
    embedding_created_ms INTEGER,
    archived          INTEGER NOT NULL DEFAULT 0,
    stored_ms         INTEGER NOT NULL
) STRICT;

CREATE INDEX entries_by_created ON entries (created_hlc);
CREATE INDEX entries_by_kind ON entries (kind, created_hlc);
"""

_V2_FTS = """
-- Keyword search over content, tags and protocols (external content: no second copy).
CREATE VIRTUAL TABLE entries_fts USING fts5(
    content, tags, protocols,
    content = 'entries', content_rowid = 'rid',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts (rowid, content, tags, protocols)
    VALUES (new.rid, new.content, new.tags, new.protocols);
END;

CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, content, tags, protocols)
    VALUES ('delete', old.rid, old.content, old.tags, old.protocols);
END;

CREATE TRIGGER entries_fts_update AFTER UPDATE OF content, tags, protocols ON entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, content, tags, protocols)
    VALUES ('delete', old.rid, old.content, old.tags, old.protocols);
    INSERT INTO entries_fts (rowid, content, tags, protocols)
    VALUES (new.rid, new.content, new.tags, new.protocols);
END;

INSERT INTO entries_fts (entries_fts) VALUES ('rebuild');
"""

_V3_OPS = """
-- The replicated truth: the op holding each slot (entry, slot kind, writer). `signed` is
-- the op's canonical encoding (seq, hlc, entry id, slot, value) exactly as its writer
-- signed it; `signature` is the writer's Ed25519 signature over it.
CREATE TABLE ops (
    entry_id  TEXT NOT NULL CHECK (length(entry_id) = 32),
    slot      INTEGER NOT NULL CHECK (slot IN (0, 1, 2)),
    writer    TEXT NOT NULL,
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    hlc       INTEGER NOT NULL,
    signed    BLOB NOT NULL,
    signature BLOB NOT NULL CHECK (length(signature) = 64),
    PRIMARY KEY (entry_id, slot, writer)
) STRICT, WITHOUT ROWID;

-- "ops of writer r with seq > n" (delta extraction) and "the op with dot (r, n)".
CREATE UNIQUE INDEX ops_by_writer_seq ON ops (writer, seq);

-- The local causal context: per replica, the contiguous prefix and the seqs above it.
CREATE TABLE causal_context (
    replica TEXT PRIMARY KEY,
    vv      INTEGER NOT NULL CHECK (vv >= 0),
    cloud   BLOB NOT NULL          -- msgpack list of seqs above vv, ascending
) STRICT;

-- Tallies of the endorse slots (sum over endorsing replicas), kept in step by the store.
ALTER TABLE entries ADD COLUMN confirms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN contradicts INTEGER NOT NULL DEFAULT 0;

-- Entries written before ops existed get theirs the next time the store is opened with
-- the identity that wrote them (signing needs the key, which SQL does not have).
INSERT INTO meta (key, value)
SELECT 'needs_op_backfill', 1 WHERE EXISTS (SELECT 1 FROM entries);
"""

_V4_RETRIEVAL = """
-- Citation feedback: a local multiplier on retrieval rank, kept within 0.5..1.5.
ALTER TABLE entries ADD COLUMN cite_weight REAL NOT NULL DEFAULT 1.0
    CHECK (cite_weight BETWEEN 0.5 AND 1.5);
-- Vectors written since a time: how an in-memory vector index catches up.
CREATE INDEX entries_by_embedding_time ON entries (embedding_created_ms);
"""

_V5_VECTOR_MODEL = """
-- "Does every entry have a vector of the current model?" as an index-only count.
CREATE INDEX entries_by_embedding_model
    ON entries (embedding_model, embedding_model_version, embedding_preprocess_hash);
"""

_V6_PROMOTION = """
-- When the curator promoted an own entry to cross to siblings (NULL: not promoted; local only).
ALTER TABLE entries ADD COLUMN promoted_ms INTEGER;
CREATE INDEX entries_promoted ON entries (author, promoted_ms);
"""

_V7_AGENT_MEMORY = """
-- Working memory of the agent, one text per session (local only, never replicated).
CREATE TABLE working_memory (
    session    TEXT PRIMARY KEY CHECK (length(session) BETWEEN 1 AND 64),
    content    TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
) STRICT;

-- Entries written from working memory, flushes and lesson imports, keyed by scope
-- ('session/<name>' or 'lessons') and the hash of kind + normalised content: written in the
-- same transaction as the entry, so a retried close/flush/import creates nothing new.
CREATE TABLE agent_migrations (
    scope       TEXT NOT NULL,
    line_hash   TEXT NOT NULL CHECK (length(line_hash) = 32),
    entry_id    TEXT NOT NULL CHECK (length(entry_id) = 32),
    migrated_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, line_hash)
) STRICT, WITHOUT ROWID;
"""

_V8_UNEMBEDDED = """
-- Entries still waiting for a vector: a search embeds the newest of them first
-- (read-your-writes), so finding them must not scan the table.
CREATE INDEX entries_unembedded ON entries (rid) WHERE embedding IS NULL;
"""

_V9_CURATOR = """
-- The forgetting curve's anchor (daemon/grimoire/curator/decay.py): local confidence right
-- after the last evidence (NULL: local_confidence as stored), when that was (NULL: stored_ms),
-- and how much evidence there is (the write, uses, confirmations, re-validations).
ALTER TABLE entries ADD COLUMN decay_base REAL;
ALTER TABLE entries ADD COLUMN decay_anchor_ms INTEGER;
ALTER TABLE entries ADD COLUMN evidence INTEGER NOT NULL DEFAULT 1;
ALTER TABLE entries ADD COLUMN confirms_seen INTEGER NOT NULL DEFAULT 0;
-- Why and when the curator (or `clade forget`) archived an entry; a sibling's entry merged
-- into another is archived with what replaced it (only its author may write its slots).
ALTER TABLE entries ADD COLUMN archived_reason TEXT;
ALTER TABLE entries ADD COLUMN archived_ms INTEGER;
ALTER TABLE entries ADD COLUMN local_superseded_by TEXT;
-- Generations after the golem that learned it (0: not inherited).
ALTER TABLE entries ADD COLUMN inherited_generation INTEGER NOT NULL DEFAULT 0;
"""

_V10_STYX_OUTBOX = """
-- What waits to be pushed to Styx (daemon/styx/outbox.py): written in the transaction of the
-- change that caused it, removed only once Styx acknowledged it; never truncated. `item` is
-- the exact JSON every attempt sends; a parked item waits for `clade styx retry`.
CREATE TABLE styx_outbox (
    n               INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    layer           TEXT NOT NULL,
    item            TEXT NOT NULL,
    created_ms      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_ms         INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    parked_ms       INTEGER
) STRICT;
CREATE INDEX styx_outbox_due ON styx_outbox (parked_ms, next_ms, n);
"""

_V11_STYX_SPEND = """
-- What Styx calls cost, per calendar month (UTC, 'YYYY-MM'): the monthly budget survives a
-- restart. One row per month, updated in the transaction that records each call's outcome.
CREATE TABLE styx_spend (
    month   TEXT PRIMARY KEY,
    usd     REAL NOT NULL DEFAULT 0,
    calls   INTEGER NOT NULL DEFAULT 0,
    items   INTEGER NOT NULL DEFAULT 0,
    queries INTEGER NOT NULL DEFAULT 0
) STRICT;
"""

_V12_INGEST = """
-- New entries rows are indexed for keyword search by the transaction that inserts them, in
-- one INSERT ... SELECT before commit (daemon/grimoire/replication.py, SqliteBackend.flush):
-- the per-row trigger cost a third of joining a sibling's entry.
DROP TRIGGER entries_fts_insert;
-- The vector indexes hold embedded entries only: a new entry has no vector, and indexing its
-- NULLs was one more index write per entry joined (every lookup names a vector time or model).
DROP INDEX entries_by_embedding_time;
CREATE INDEX entries_by_embedding_time ON entries (embedding_created_ms) WHERE embedding_created_ms IS NOT NULL;
DROP INDEX entries_by_embedding_model;
CREATE INDEX entries_by_embedding_model
    ON entries (embedding_model, embedding_model_version, embedding_preprocess_hash)
    WHERE embedding_model IS NOT NULL;
-- How many entries hold each indexed word: keyword search asks before it ranks, and leaves
-- out words too common to rank by (daemon/grimoire/keywords.py, affordable).
CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, 'row');
"""

_V13_OUTCOMES = """
-- Outcomes (daemon/grimoire/outcomes.py): what happened when this golem acted on an entry, one
-- row each, kept locally (never replicated; a sibling's copy has its own). The tallies on the
-- entry are kept in step in the same transaction; `outcome_prior` is the base local confidence
-- when the first outcome arrived (the Beta prior's mean, fixed from then on).
CREATE TABLE outcomes (
    n           INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id    TEXT NOT NULL CHECK (length(entry_id) = 32),
    effect      TEXT NOT NULL CHECK (effect IN ('positive', 'negative', 'neutral')),
    metric      TEXT NOT NULL CHECK (length(metric) BETWEEN 1 AND 48),
    value       REAL,
    episode_id  TEXT,
    note        TEXT,
    recorded_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX outcomes_by_entry ON outcomes (entry_id, n);
ALTER TABLE entries ADD COLUMN outcomes_positive INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN outcomes_negative INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN outcomes_neutral INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN outcome_prior REAL;
-- Why the sync gate holds an entry back from siblings (NULL: not held): 'near_duplicate' (a
-- warning repeating one gossiped in the last 24 h), 'inherited' (a predecessor's entry not yet
-- validated here), 'reissued' (an inherited entry this golem re-authored). daemon/grimoire/promotion.py
ALTER TABLE entries ADD COLUMN crossing_hold TEXT;
-- Why the curator promoted an own entry: 'admitted', 'validated', 'legacy', 'inherited'.
ALTER TABLE entries ADD COLUMN promoted_reason TEXT;
CREATE INDEX entries_held ON entries (crossing_hold) WHERE crossing_hold IS NOT NULL;
"""

_V14_TRUST = """
-- Per-author trust (daemon/grimoire/trust.py, trust_store.py), local and never replicated.
-- One row per (entry, endorsing replica), kept in step with the CRDT's endorse slots, so a
-- confirmation is weighed by who gave it; `local`: this golem's own endorsement.
CREATE TABLE endorsements (
    entry_id    TEXT NOT NULL CHECK (length(entry_id) = 32),
    writer      TEXT NOT NULL,
    confirms    INTEGER NOT NULL,
    contradicts INTEGER NOT NULL,
    local       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (entry_id, writer)
) STRICT;
-- The operator's distrust, the sticky budget flag, the last suspect alert, per author.
CREATE TABLE author_trust (
    author      TEXT PRIMARY KEY,
    distrusted  INTEGER NOT NULL DEFAULT 0,
    changed_ms  INTEGER NOT NULL,
    burst_ms    INTEGER,
    suspect_ms  INTEGER,
    trusted_ms  INTEGER   -- the operator's last `trust`: arrivals before it no longer count to the budget
) STRICT;
CREATE INDEX entries_by_author ON entries (author, stored_ms);
-- What author_views sums per sibling, read from the index alone and only over siblings'
-- entries: every recall asks, and a 50,000-entry store of own entries costs nothing.
CREATE INDEX entries_clade_trust ON entries (author, stored_ms, created_hlc, outcomes_positive, outcomes_negative)
    WHERE provenance = 'clade';
"""

_V15_EVIDENCE = """
-- Evidence that crosses (daemon/grimoire/belief.py, evidence_store.py): one row per (entry,
-- writer), kept in step with the CRDT's evidence slots by replication.py; `local`: this
-- golem's own tally (its outcomes are also in entries.outcomes_*). Counts only, never an
-- outcome's metric, value, note, episode or time: those stay in `outcomes` (soma).
CREATE TABLE evidence (
    entry_id TEXT NOT NULL CHECK (length(entry_id) = 32),
    writer   TEXT NOT NULL,
    positive INTEGER NOT NULL CHECK (positive >= 0),
    negative INTEGER NOT NULL CHECK (negative >= 0),
    local    INTEGER NOT NULL DEFAULT 0,
    stored_ms INTEGER NOT NULL DEFAULT 0,  -- local arrival of the latest tally (the evidence budget)
    PRIMARY KEY (entry_id, writer)
) STRICT;
CREATE INDEX evidence_by_writer ON evidence (writer, stored_ms) WHERE local = 0;
-- The ops table's slot check admits the evidence slot (3): SQLite cannot alter a CHECK, so the
-- table is rebuilt under the same name (the copy is one statement; nothing else references it).
CREATE TABLE ops_v15 (
    entry_id  TEXT NOT NULL CHECK (length(entry_id) = 32),
    slot      INTEGER NOT NULL CHECK (slot IN (0, 1, 2, 3)),
    writer    TEXT NOT NULL,
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    hlc       INTEGER NOT NULL,
    signed    BLOB NOT NULL,
    signature BLOB NOT NULL CHECK (length(signature) = 64),
    PRIMARY KEY (entry_id, slot, writer)
) STRICT, WITHOUT ROWID;
INSERT INTO ops_v15 SELECT entry_id, slot, writer, seq, hlc, signed, signature FROM ops;
DROP TABLE ops;
ALTER TABLE ops_v15 RENAME TO ops;
CREATE UNIQUE INDEX ops_by_writer_seq ON ops (writer, seq);
-- When this golem first found the entry refuted by the pooled evidence (NULL: it is not);
-- recall and digests read the pooled belief itself, this column dates the event.
ALTER TABLE entries ADD COLUMN refuted_ms INTEGER;
"""

_V16_LIVE_SEQ = """
-- Recall's vector index skips archived and retracted entries before its cut (vectors.py, a
-- live mask: nothing is deleted). An entry whose `archived` or `status` changes takes the next
-- `live_seq`, so the index re-reads only the entries that changed since it last looked.
ALTER TABLE entries ADD COLUMN live_seq INTEGER;
CREATE INDEX entries_by_live_seq ON entries (live_seq) WHERE live_seq IS NOT NULL;
CREATE TRIGGER entries_live_changed AFTER UPDATE OF archived, status ON entries
WHEN OLD.archived IS NOT NEW.archived OR OLD.status IS NOT NEW.status
BEGIN
    UPDATE entries SET live_seq = (SELECT coalesce(max(live_seq), 0) + 1 FROM entries WHERE live_seq IS NOT NULL)
    WHERE rid = NEW.rid;
END;
"""

_V17_EVENT_TIME = """
-- Event time: when what the entry says happened (Unix ms, UTC), from the body (its optional
-- 20th wire field, so the id covers it); NULL: unknown, the entry's time is its written time
-- (created_hlc). Search's `since`/`until` and recency read coalesce(occurred_ms, written).
ALTER TABLE entries ADD COLUMN occurred_ms INTEGER;
"""

_V18_VECTOR_CLEARED = """
-- The vector index drops a vector that was cleared (`clade embeddings rebuild`, `clade memory
-- reembed`) or replaced by another model's: such a change stamps the entry's `live_seq` as an
-- archive does (v16), so the index learns of it without re-reading every row (vector_index.py).
CREATE TRIGGER entries_vector_cleared AFTER UPDATE OF embedding, embedding_model, embedding_model_version,
    embedding_preprocess_hash ON entries
WHEN OLD.embedding IS NOT NULL AND (NEW.embedding IS NULL OR NEW.embedding_model IS NOT OLD.embedding_model
    OR NEW.embedding_model_version IS NOT OLD.embedding_model_version
    OR NEW.embedding_preprocess_hash IS NOT OLD.embedding_preprocess_hash)
BEGIN
    UPDATE entries SET live_seq = (SELECT coalesce(max(live_seq), 0) + 1 FROM entries WHERE live_seq IS NOT NULL)
    WHERE rid = NEW.rid;
END;
"""

_V19_SHIPPED_VECTORS = """
-- Vectors shipped with gossip (daemon/embedding/shipped.py): where an entry's vector came from.
-- NULL: embedded here; 'author': the author's, used as shipped; 'to_check': the author's, drawn
-- for a check by this golem's own model (at idle priority); 'checked': the author's, and it
-- matched. A vector written here (put_vectors) resets it to NULL.
ALTER TABLE entries ADD COLUMN embedding_source TEXT;
CREATE INDEX entries_vector_to_check ON entries (rid) WHERE embedding_source = 'to_check';
-- When an author's shipped vector last failed its check here: sticky, like `burst_ms`, until
-- the operator trusts the author again (trust_store.set_distrust).
ALTER TABLE author_trust ADD COLUMN forged_vector_ms INTEGER;
"""

_V20_SEALS = """
-- Seals (crdt/seals.py): a writer's signature over the leaves of one block of 256 of its seqs,
-- so catch-up checks one signature per block instead of one per op (sync v3). Our own blocks
-- are sealed in the write that completes them; siblings' are kept as they arrive, to serve on.
CREATE TABLE seals (
    writer    TEXT NOT NULL,
    block     INTEGER NOT NULL CHECK (block >= 0),
    leaves    BLOB NOT NULL CHECK (length(leaves) = 4096),
    signature BLOB NOT NULL CHECK (length(signature) = 64),
    PRIMARY KEY (writer, block)
) STRICT, WITHOUT ROWID;
"""

_V21_VECTOR_CHECK_RUNS = """
-- Per author, how many checks of its shipped vectors matched here in a row since its last
-- mismatch (daemon/embedding/shipped.py CheckPlan: fewer are checked once it has enough).
-- Local, never replicated; a mismatch sets it back to 0.
CREATE TABLE vector_check_runs (
    author TEXT PRIMARY KEY,
    clean  INTEGER NOT NULL CHECK (clean >= 0)
) STRICT, WITHOUT ROWID;
"""

MIGRATIONS: tuple[str, ...] = (_V1_ENTRIES, _V2_FTS, _V3_OPS, _V4_RETRIEVAL, _V5_VECTOR_MODEL, _V6_PROMOTION,
                               _V7_AGENT_MEMORY, _V8_UNEMBEDDED, _V9_CURATOR, _V10_STYX_OUTBOX, _V11_STYX_SPEND,
                               _V12_INGEST, _V13_OUTCOMES, _V14_TRUST, _V15_EVIDENCE, _V16_LIVE_SEQ,
                               _V17_EVENT_TIME, _V18_VECTOR_CLEARED, _V19_SHIPPED_VECTORS, _V20_SEALS,
                               _V21_VECTOR_CHECK_RUNS)
SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    """Split a script into complete SQL statements (trigger bodies stay whole)."""
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                out.append(buffer.strip())
            buffer = ""
    if buffer.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buffer.splitlines()
    ):
        raise ValueError(f"incomplete SQL statement in migration: {buffer.strip()[:60]!r}")
    return out


def user_version(conn: sqlite3.Connection) -> int:
    """The number of migrations applied to the open database."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, *, target: int = SCHEMA_VERSION) -> tuple[int, int]:
    """Apply migrations up to `target`; returns (version before, version after).

    `conn` must be in autocommit mode (isolation_level=None). Raises `NewerSchema` if the
    file was written by a newer clade.
    """
    before = user_version(conn)
    if before > SCHEMA_VERSION:
        raise NewerSchema(before)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = user_version(conn)  # re-read under the write lock
            if version >= target:
                conn.execute("COMMIT")
                return before, version
            for stmt in statements(MIGRATIONS[version]):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


class NewerSchema(Exception):
    """The database was created by a newer clade (its user_version is beyond ours)."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"schema version {version} is newer than this clade supports ({SCHEMA_VERSION}); "
            "upgrade clade"
        )
        self.version = version
