"""Lexical evidence, pure: a text's informative words as stems, and how much of a query's
information an entry's words cover.

`stems` lowercases the words (letters and digits, as FTS5's unicode61 splits them), drops
function words and the words that frame a question (`STOPWORDS`) and reduces each to its Snowball (Porter 2) stem, so
"painted" and "painting" meet at "paint". `idf` is BM25's inverse document frequency.
`coverage` is the share of the query's IDF mass whose stems the entry holds: 1.0 when the
entry has every informative word of the query, near 0 when it shares only a common one.
Unlike BM25 it is on an absolute 0..1 scale, comparable from one query to the next, which is
what lets `fusion` weigh it against cosine with one fixed weight.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from py_rust_stemmers import SnowballStemmer  # type: ignore[import-untyped]  # fastembed's own dependency

__all__ = ["FUNCTION_WORDS", "QUESTION_FRAMING", "STOPWORDS", "coverage", "idf", "reach", "stem", "stem_counts",
           "stem_sets", "stems", "words"]

# Function words: they match nearly everything, slow FTS5 down and add only noise.
FUNCTION_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not",
    "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will",
    "with", "would", "you", "your",
})
# Words that frame a question and say nothing of what it asks about: "How many …", "How much …",
# "When did …", "… how long ago". What a golem remembers is statements, which seldom hold them,
# so in a long chat history their IDF is the highest of the question's words: "did" weighed
# 4.2 where "cashback" weighed 4.15, and a turn sharing only the framing outranked the one
# holding the fact (LongMemEval dev any@1 0.546 with them, 0.630 without; LoCoMo any@5 0.638 →
# 0.652, the keyword-disjoint corpora unchanged: bench/bench_fusion_cv.py, bench/RESULTS.md).
QUESTION_FRAMING = frozenset({"did", "many", "much", "am", "ago", "ever", "whom", "whose"})
STOPWORDS = FUNCTION_WORDS | QUESTION_FRAMING
# The one tokenizer of every keyword path (query words, stems, coverage, pinned lookups): runs of
# letters and digits, as FTS5's unicode61 splits them — an underscore separates ("gas_price" is
# "gas" and "price"), so no query word can be one the index never holds.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STEMMER = SnowballStemmer("english")


def words(text: str) -> list[str]:
    """`text`'s words as the keyword index (FTS5 unicode61) splits them, case kept, in order."""
    return _WORD.findall(text)


# A hit saves ~0.4 µs against the stemmer itself (0.48 against 0.07 µs a word). Full, 65,536
# words held 13 MiB, and every entry's numbers and names are new words: the cache filled for
# hours in the soak and read as the daemon's memory growing. 4,096 words hold ~0.8 MiB.
@lru_cache(maxsize=4_096)
def stem(word: str) -> str:
    """The Snowball stem of one lowercase word."""
    return str(_STEMMER.stem_word(word))


def stems(text: str) -> list[str]:
    """The distinct stems of `text`'s informative words, in order of first appearance."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(stem(w) for w in words if w not in STOPWORDS))


def stem_counts(text: str) -> dict[str, int]:
    """How often each stem of `text`'s informative words occurs in it (stop words dropped)."""
    counts: dict[str, int] = {}
    for w in _WORD.findall(text):
        low = w.lower()
        if low not in STOPWORDS:
            s = stem(low)
            counts[s] = counts.get(s, 0) + 1
    return counts


def stem_sets(texts: Mapping[str, str]) -> dict[str, set[str]]:
    """key -> the set of `stems(text)`, for many texts at once (each distinct word stemmed once:
    what `coverage` needs of a query's candidates)."""
    words = {key: {w.lower() for w in _WORD.findall(text)} - STOPWORDS for key, text in texts.items()}
    vocabulary = list(set().union(*words.values())) if words else []
    stemmed = dict(zip(vocabulary, _STEMMER.stem_words(vocabulary), strict=True))
    return {key: {stemmed[w] for w in ws} for key, ws in words.items()}


def idf(df: int, n: int) -> float:
    """BM25's IDF of a stem held by `df` of `n` entries (always > 0)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def coverage(query: Mapping[str, float], entry: Iterable[str] | set[str]) -> float:
    """The share of the query's stem weights (IDF) that `entry`'s stems hold, 0..1 (0 for an empty query)."""
    total = sum(query.values())
    if total <= 0:
        return 0.0
    held = entry if isinstance(entry, set) else set(entry)
    return sum(w for s, w in query.items() if s in held) / total


def reach(query: Mapping[str, float], held: Iterable[Iterable[str]]) -> float:
    """The share of the query's stem weights (IDF) that at least one of `held` (the candidates'
    stem sets) holds, 0..1: the most coverage any candidate could have. Less than 1 when a
    query word is in no candidate (a word the store lacks, a misspelling, a word of the
    question's framing such as "did")."""
    if not query:
        return 0.0
    union: set[str] = set()
    for stems_ in held:
        union.update(stems_)
    return coverage(query, union)
