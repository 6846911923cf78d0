"""Which words of a query keyword search (FTS5, BM25) looks up, and which it leaves out.

`query_words` splits a query into plain words (never FTS5 syntax; `lexical.words`, the index's
own split) without function words;
`stem_postings` finds, for each word, the index's terms with the same stem (the index does
not stem: "painting" finds "painted" through this) and how many entries hold them, read from
the index's vocabulary (`entries_fts_vocab`, schema v12); `affordable` keeps the rarest
stems while the entries they match stay within `MAX_POSTINGS`; `stem_weights` gives each
informative stem its IDF. `query_terms` does both from one vocabulary lookup (a search needs
both: the terms to match and the weights its ranking gives each stem).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from daemon.errors import UsageError

from .id_lists import IN_LIST, as_list
from .lexical import STOPWORDS, idf, stem, words

__all__ = ["MAX_POSTINGS", "STOPWORDS", "QueryTerms", "StemPostings", "affordable", "query_terms", "query_words",
           "searchable_text", "searchable_texts", "stem_postings", "stem_weights"]

MAX_POSTINGS = 8_192  # entries keyword search may rank per query
_MAX_QUERY_WORDS = 32
_MAX_PREFIX_TERMS = 256  # vocabulary terms read per query word when looking for its stem's variants


def query_words(query: str) -> list[str]:
    """The query's distinct words, lowercased, in order, without function words (unless it has
    nothing else). Raises `UsageError` if it has no word at all."""
    found = [w.lower() for w in words(query)][:_MAX_QUERY_WORDS]
    if not found:
        raise UsageError(f"query {query!r} has no searchable words (letters or digits)")
    # Function words match nearly everything: they slow FTS5 down and add only noise.
    return list(dict.fromkeys([w for w in found if w not in STOPWORDS] or found))


@dataclass(frozen=True, slots=True)
class StemPostings:
    """One query stem: the index's terms that reduce to it and how many entries hold them
    (summed over the terms: an upper bound when an entry holds two of them)."""

    stem: str
    terms: tuple[str, ...]
    entries: int


def stem_postings(conn: sqlite3.Connection, words: list[str]) -> list[StemPostings]:
    """Per distinct stem of `words` (in order): the indexed terms with that stem. A word whose
    stem the index does not hold keeps itself as its only term, held by 0 entries."""
    found: dict[str, StemPostings] = {}
    for word in words:
        root = stem(word)
        if root in found:
            continue
        # Every word with this stem starts with what the word and its stem share ("happy" and
        # "happiness": "happ"); the vocabulary is sorted by term, so this is one range read.
        prefix = _shared_start(word, root) or word
        rows = conn.execute("SELECT term, doc FROM entries_fts_vocab WHERE term >= ? AND term < ? LIMIT ?",
                            (prefix, prefix + "\U0010ffff", _MAX_PREFIX_TERMS)).fetchall()
        same = [(str(t), int(d)) for t, d in rows if stem(str(t)) == root]
        if not any(t == word for t, _ in same):
            exact = conn.execute("SELECT doc FROM entries_fts_vocab WHERE term = ?", (word,)).fetchone()
            if exact is not None:
                same.append((word, int(exact[0])))
        terms = tuple(t for t, _ in same) or (word,)
        found[root] = StemPostings(root, terms, sum(d for _, d in same))
    return list(found.values())


def _shared_start(a: str, b: str) -> str:
    """The longest string both start with."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def affordable(conn: sqlite3.Connection, words: list[str]) -> list[str]:
    """The index terms to match for `words`: all terms of each word's stem, rarest stem first,
    while the entries they match add up to at most `MAX_POSTINGS`.

    BM25 ranks every row a word matches: a word in 20,000 of 50,000 entries cost 35 ms a
    query, and being in so many it hardly tells them apart (its IDF is near zero); the vector
    search still ranks by meaning. Stores below `MAX_POSTINGS` entries lose a word only when
    several common ones add up. A word the index does not hold as such (one its tokenizer
    splits, or with diacritics it folds) counts as rare: it matches little.
    """
    return _within_budget(stem_postings(conn, words))


def _within_budget(postings: list[StemPostings]) -> list[str]:
    kept: list[str] = []
    total = 0
    for p in sorted(postings, key=lambda p: (p.entries, p.stem)):
        if total + p.entries > MAX_POSTINGS:
            break
        kept.extend(p.terms)
        total += p.entries
    return kept


def stem_weights(conn: sqlite3.Connection, query: str) -> dict[str, float]:
    """The query's informative stems with their IDF over the store (empty when the query has
    no word): what `lexical.coverage` weighs an entry's words by."""
    try:
        words = query_words(query)
    except UsageError:
        return {}
    words = [w for w in words if w not in STOPWORDS]
    return _weights(conn, stem_postings(conn, words)) if words else {}


def _weights(conn: sqlite3.Connection, postings: list[StemPostings]) -> dict[str, float]:
    # The highest rowid bounds the entry count from above (entries are archived, not deleted)
    # and costs one b-tree seek where count(*) reads an index.
    total = int(conn.execute("SELECT coalesce(max(rid), 0) FROM entries").fetchone()[0])
    return {p.stem: idf(p.entries, max(total, p.entries)) for p in postings}


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """A query's words looked up once: `match`, the index terms keyword search matches
    (`affordable`), and `weights`, its informative stems' IDF (`stem_weights`)."""

    match: tuple[str, ...]
    weights: dict[str, float]


def query_terms(conn: sqlite3.Connection, query: str) -> QueryTerms:
    """`affordable(conn, query_words(query))` and `stem_weights(conn, query)` from one lookup of
    the query's stems in the vocabulary. Raises `UsageError` if the query has no word."""
    words = query_words(query)
    postings = stem_postings(conn, words)
    # query_words keeps function words only when the query has nothing else: no informative stem.
    informative = any(w not in STOPWORDS for w in words)
    return QueryTerms(tuple(_within_budget(postings)), _weights(conn, postings) if informative else {})


def searchable_text(content: str, tags: str, protocols: str) -> str:
    """What the keyword index sees of an entry, from its stored columns (tags and protocols as stored JSON)."""
    return f"{content} {tags} {protocols}"


def searchable_texts(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """id → everything the keyword index sees of the entry (content, tags, protocols)."""
    out: dict[str, str] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for entry_id, content, tags, protocols in conn.execute(
                f"SELECT id, content, tags, protocols FROM entries WHERE id IN {IN_LIST}", (as_list(chunk),)):
            out[str(entry_id)] = searchable_text(content, tags, protocols)
    return out
