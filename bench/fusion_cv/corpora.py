"""The corpora cross-validation runs over, each with its folds.

- LoCoMo conversations 1-5 (the development half, read from shared/, never copied here): one
  corpus per conversation, and the folds are the conversations;
- the keyword-disjoint corpora: tests/helpers/semantic_corpus.py, semantic_corpus_heldout.py
  and semantic_corpus_operator.py (a fold each: leave-one-corpus-out);
- synthetic multi-session chat histories (bench/fusion_cv/chat.py): a corpus per history, the
  folds are the histories;
- LongMemEval-S development questions (bench/longmemeval.py; shared/, never copied here): a
  corpus per question (its own haystack), the folds are the questions.

Cross-validation leaves a whole benchmark out (cv.py): `benchmark` names which one a corpus is.
"""

from __future__ import annotations

from pathlib import Path

from bench.bench_locomo import Corpus, Doc, Question, disjoint, locomo
from bench.longmemeval import load

from .chat import histories

__all__ = ["FAMILIES", "all_corpora"]

FAMILIES = ("locomo", "disjoint", "chat", "longmemeval")


def benchmark(kind: str) -> str:
    """The benchmark a corpus of `kind` belongs to (the keyword-disjoint corpora are one)."""
    return kind


def operator() -> Corpus:
    from tests.helpers import semantic_corpus_operator as mod

    docs = [Doc(e.key, e.content, {
        "memory_type": e.kind.value, "category": e.category.value, "importance": e.importance,
        "confidence": e.confidence, "metadata": {"protocols": list(e.protocols), "chains": list(e.chains),
                                                 "tags": list(e.tags)}}) for e in mod.ENTRIES]
    return Corpus("operator", "disjoint", docs, [Question(q.text, q.relevant, 0) for q in mod.QUERIES])


def chat(n: int) -> list[Corpus]:
    return [Corpus(h.name, "chat", [Doc(k, t, {"memory_type": "fact"}) for k, t in h.turns],
                   [Question(q, frozenset({key}), 0) for q, key in h.questions]) for h in histories(n)]


def all_corpora(locomo_path: Path, *, chat_histories: int = 12, longmemeval_dir: Path | None = None,
                longmemeval_limit: int | None = None) -> list[Corpus]:
    """LoCoMo's conversations, the three keyword-disjoint corpora, the chat histories and (when
    `longmemeval_dir` is given) LongMemEval's questions."""
    lme = load(longmemeval_dir, longmemeval_limit).corpora if longmemeval_dir is not None else []
    return [*locomo(locomo_path, None), *disjoint(), operator(), *chat(chat_histories), *lme]
