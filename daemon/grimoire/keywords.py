"""Which words of a query keyword search (FTS5, BM25) looks up, and which it leaves out.

`query_words` splits a query into plain words (never FTS5 syntax) without function words;
`affordable` keeps the rarest of them while the entries they match stay within
`MAX_POSTINGS`, read from the index's vocabulary (`entries_fts_vocab`, schema v12).
"""

from __future__ import annotations

import re
import sqlite3

from daemon.errors import UsageError

__all__ = ["MAX_POSTINGS", "affordable", "query_words"]

MAX_POSTINGS = 8_192  # entries keyword search may rank per query
_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_QUERY_WORDS = 32
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not",
    "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will",
    "with", "would", "you", "your",
})


def query_words(query: str) -> list[str]:
    """The query's distinct words, lowercased, in order, without function words (unless it has
    nothing else). Raises `UsageError` if it has no word at all."""
    words = [w.lower() for w in _WORD.findall(query)][:_MAX_QUERY_WORDS]
    if not words:
        raise UsageError(f"query {query!r} has no searchable words (letters or digits)")
    # Function words match nearly everything: they slow FTS5 down and add only noise.
    return list(dict.fromkeys([w for w in words if w not in _STOPWORDS] or words))


def affordable(conn: sqlite3.Connection, words: list[str]) -> list[str]:
    """`words`, rarest first, while the entries they match add up to at most `MAX_POSTINGS`.

    BM25 ranks every row a word matches: a word in 20,000 of 50,000 entries cost 35 ms a
    query, and being in so many it hardly tells them apart (its IDF is near zero); the vector
    search still ranks by meaning. Stores below `MAX_POSTINGS` entries lose a word only when
    several common ones add up. A word the index does not hold as such (one its tokenizer
    splits, or with diacritics it folds) counts as rare: it matches little.
    """
    counted = []
    for word in words:
        row = conn.execute("SELECT doc FROM entries_fts_vocab WHERE term = ?", (word,)).fetchone()
        counted.append((0 if row is None else int(row[0]), word))
    kept: list[str] = []
    total = 0
    for matches, word in sorted(counted):
        if total + matches > MAX_POSTINGS:
            break
        kept.append(word)
        total += matches
    return kept
