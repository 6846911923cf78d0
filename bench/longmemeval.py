"""LongMemEval-S questions as recall corpora: one fresh store per question.

LongMemEval (Di Wu et al., ICLR 2025; MIT): each question comes with its own haystack of ~50
chat sessions (~240 user turns). Read one `.json.gz` (or `.json`) file per question from a
directory (`DEFAULT_DIR`: the development split beside the checkout, never copied here; the
judge points `--path` at other questions in the same format).

What the store holds: every **user** turn of the haystack, one entry each, its text as the
content and its session's date as the event time (`occurred_at`); the assistant's turns are
the model's words, not the golem's memory. The evidence of a question is its user turns marked
`has_answer`; a question whose evidence is only in assistant turns has nothing to find and is
left out (counted). A turn's key is `<session id>#<turn index>`, so its session is known
(`session_of`). A turn over an entry's 4,096 bytes (113 of the 26,546 development turns; one
evidence turn) is stored as several entries split at whitespace, keys `<turn key>~<n>` after
the first, all of them evidence when the turn is (`turn_of` maps a piece back to its turn,
and the harness counts a turn once). Session recall@k is the share of the question's evidence sessions
(`answer_session_ids`) among the first k distinct sessions of the turn ranking.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.bench_locomo import Corpus, Doc, Question
from crdt.body import MAX_CONTENT_BYTES

__all__ = ["DEFAULT_DIR", "TYPES", "Loaded", "load", "pieces", "question_time", "session_metrics", "session_of",
           "turn_of"]

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval-dev"
# LongMemEval's question types, numbered for `Question.category`.
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "knowledge-update", "temporal-reasoning")


@dataclass(frozen=True)
class Loaded:
    corpora: list[Corpus]  # one per question with user-turn evidence
    answer_sessions: dict[str, frozenset[str]]  # corpus name -> its evidence sessions
    question_ms: dict[str, int | None]  # corpus name -> when the question was asked
    skipped: dict[str, int]  # why questions were left out -> how many


def session_of(key: str) -> str:
    return key.rsplit("#", 1)[0]


def turn_of(key: str) -> str:
    return key.split("~", 1)[0]


def pieces(text: str, limit: int = MAX_CONTENT_BYTES) -> list[str]:
    """`text` in pieces of at most `limit` bytes of UTF-8, split after whitespace where there
    is some (else mid-word, on a character boundary); one piece when it fits."""
    out: list[str] = []
    rest = text
    while len(rest.encode()) > limit:
        cut = len(rest.encode()[:limit].decode(errors="ignore"))
        space = rest.rfind(" ", 0, cut)
        cut = space + 1 if space > cut // 2 else cut
        out.append(rest[:cut])
        rest = rest[cut:]
    return [*out, rest] if rest.strip() else out


def question_time(text: object) -> str | None:
    """LongMemEval's date ("2023/05/20 (Sat) 02:21") as ISO 8601 (UTC: the data gives no
    offset); None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M").isoformat()
    except ValueError:
        return None


def _read(path: Path) -> dict[str, object]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw)
    if isinstance(doc, list):  # the published file holds a list of one
        doc = doc[0]
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a LongMemEval question object")
    return doc


def load(directory: Path, limit: int | None = None) -> Loaded:
    """The questions of `directory` (sorted by file name), at most `limit`."""
    from daemon.grimoire.fields import event_ms

    files = sorted(p for p in directory.iterdir() if p.name.endswith((".json", ".json.gz")))[:limit]
    corpora: list[Corpus] = []
    answers: dict[str, frozenset[str]] = {}
    asked: dict[str, int | None] = {}
    skipped: dict[str, int] = {}
    for path in files:
        q = _read(path)
        sessions = q["haystack_sessions"]
        ids = q["haystack_session_ids"]
        dates = q["haystack_dates"]
        assert isinstance(sessions, list) and isinstance(ids, list) and isinstance(dates, list)
        docs: list[Doc] = []
        evidence: set[str] = set()
        for sid, date, turns in zip(ids, dates, sessions, strict=True):
            when = question_time(date)
            for i, turn in enumerate(turns):
                if turn.get("role") != "user" or not str(turn.get("content", "")).strip():
                    continue
                for n, piece in enumerate(pieces(str(turn["content"]))):
                    key = f"{sid}#{i}" + (f"~{n}" if n else "")
                    docs.append(Doc(key, piece, {} if when is None else {"occurred_at": when}))
                    if turn.get("has_answer"):
                        evidence.add(key)
        qtype = str(q["question_type"])
        if not evidence:
            skipped["evidence only in assistant turns"] = skipped.get("evidence only in assistant turns", 0) + 1
            continue
        if qtype not in TYPES:
            skipped[f"unknown type {qtype}"] = skipped.get(f"unknown type {qtype}", 0) + 1
            continue
        name = str(q["question_id"])
        corpora.append(Corpus(name, "longmemeval", docs,
                              [Question(str(q["question"]), frozenset(evidence), TYPES.index(qtype) + 1)]))
        answers[name] = frozenset(str(s) for s in q.get("answer_session_ids", ()))  # type: ignore[attr-defined]
        stamp = question_time(q.get("question_date"))
        asked[name] = event_ms(stamp) if stamp else None
    return Loaded(corpora, answers, asked, skipped)


def session_metrics(ranking: Sequence[str], sessions: frozenset[str], ks: Sequence[int] = (1, 5, 10)
                    ) -> dict[str, float]:
    """session any@k / recall@k: the first k distinct sessions of a turn ranking against the
    evidence sessions."""
    order = list(dict.fromkeys(session_of(k) for k in ranking))
    out: dict[str, float] = {}
    for k in ks:
        top = set(order[:k])
        out[f"session_any@{k}"] = float(bool(top & sessions))
        out[f"session_recall@{k}"] = len(top & sessions) / len(sessions) if sessions else 0.0
    return out
