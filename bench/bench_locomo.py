"""Retrieval quality on LoCoMo and on keyword-disjoint corpora, through a real daemon, with baselines.

    .venv/bin/python -m bench.bench_locomo [--path locomo10.json] [--weights 0,0.1,0.2,0.3,0.4,0.5]
                                            [--conversations N] [--no-daemon] [--shipped]

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0; read from `--path`, never copied here):
each conversation is one golem's Grimoire, each turn an entry "Speaker: text" (plus
" [image: caption]" when the turn shared one) whose event time (`occurred_at`) is its session's
date; its questions of categories 1-4 are the
queries, their evidence turns the answers (category 5 has none). The default path holds
conversations 1-5 (the development half). The keyword-disjoint corpora are
tests/helpers/semantic_corpus.py and tests/helpers/semantic_corpus_heldout.py: questions share no word stem
with their answers and many share words with a wrong neighbour.

Per corpus, in the same run and over the same texts:

- `clade`: the product path, `POST /v1/memory/search` on a `clade run` daemon with a fresh data
  directory holding the corpus's store (built by the bench with the entries' vectors of the
  configured model, as bench_recall_daemon does, so the daemon need not embed them again),
  with the search latency as the client sees it;
- `cosine`: raw cosine with the configured model (the daemon's own vectors' model);
- `bm25`: SQLite FTS5 with the porter tokenizer, the query's words minus stop words OR-ed;
- `rrf`: reciprocal rank fusion of the two (k = 60);
- `w=…`: `Retriever.recall` in process on a store of the same entries, with fusion's lexical
  weight set to each of `--weights` (0 is the ranking before fusion: cosine alone under the
  four factors); the Pareto table of the variants.

any@k: a question counts if any of its evidence entries is in the top k; recall@k: the share
of its evidence entries in the top k; both averaged over questions (LoCoMo pooled over its
conversations). Prints the tables, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import emit, machine_info, out, progress, summary, workdir
from bench.common.daemon import CLADE, Daemon
from bench.common.seed import seed_entries
from crypto.identity import Identity
from daemon.embedding.embedder import DEFAULT_MODEL, get_embedder
from daemon.embedding.shipped import dequantize, quantize
from daemon.grimoire.fields import event_ms
from daemon.grimoire.lexical import STOPWORDS
from daemon.grimoire.records import NewEntry
from daemon.grimoire.retrieval import RecallQuery, Retriever
from daemon.grimoire.store import Grimoire
from daemon.grimoire.vectors import write_vectors

# Beside the main checkout (the data never enters the repository); --path elsewhere.
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10-dev.json"
KS = (1, 5, 10)
RRF_K = 60
IDENTITY = Identity(b"\x07" * 32)
METRICS = ("any@1", "any@5", "any@10", "recall@5", "recall@10")


@dataclass(frozen=True)
class Doc:
    key: str
    content: str
    fields: dict[str, Any]  # the POST /v1/memory body beyond content


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int  # LoCoMo's 1-4; 0 for the keyword-disjoint corpora


@dataclass(frozen=True)
class Corpus:
    name: str
    kind: str  # "locomo" or "disjoint"
    docs: list[Doc]
    questions: list[Question]


def locomo(path: Path, limit: int | None) -> list[Corpus]:
    """One corpus per conversation: its turns and its answerable questions (categories 1-4)."""
    out_: list[Corpus] = []
    for conv in json.loads(path.read_text())[:limit]:
        c = conv["conversation"]
        docs: list[Doc] = []
        n = 1
        while f"session_{n}" in c:
            when = session_time(c.get(f"session_{n}_date_time"))
            for t in c[f"session_{n}"]:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [image: {t['blip_caption']}]"
                docs.append(Doc(t["dia_id"], text, {} if when is None else {"occurred_at": when}))
            n += 1
        keys = {d.key for d in docs}
        qs = [Question(str(q["question"]), frozenset(q["evidence"]) & keys, int(q["category"]))
              for q in conv["qa"] if q.get("category") in (1, 2, 3, 4) and set(q.get("evidence", ())) & keys]
        out_.append(Corpus(str(conv["sample_id"]), "locomo", docs, qs))
    return out_


def session_time(text: object) -> str | None:
    """A LoCoMo session's date ("1:56 pm on 8 May, 2023") as ISO 8601 (no offset: UTC, as the
    data gives none), the turns' event time (`occurred_at`); None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat()
    except ValueError:
        return None


def disjoint() -> list[Corpus]:
    from tests.helpers import semantic_corpus, semantic_corpus_heldout

    corpora = []
    for name, mod in (("semantic", semantic_corpus), ("heldout", semantic_corpus_heldout)):
        docs = [Doc(e.key, e.content, {
            "memory_type": e.kind.value, "category": e.category.value, "importance": e.importance,
            "confidence": e.confidence, "metadata": {"protocols": list(e.protocols), "chains": list(e.chains),
                                                     "tags": list(e.tags)}}) for e in mod.ENTRIES]
        qs = [Question(q.text, q.relevant, 0) for q in mod.QUERIES]
        corpora.append(Corpus(name, "disjoint", docs, qs))
    return corpora


# --- baselines ---------------------------------------------------------------------------------


def bm25_rankings(corpus: Corpus, k: int) -> list[list[str]]:
    """FTS5 porter, stop words dropped, words OR-ed; BM25 order."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.executemany("INSERT INTO f (rowid, c) VALUES (?, ?)",
                     [(i, " ".join([d.content, *d.fields.get("metadata", {}).get("tags", []),
                                    *d.fields.get("metadata", {}).get("protocols", [])]))
                      for i, d in enumerate(corpus.docs)])
    out_: list[list[str]] = []
    for q in corpus.questions:
        words = [w for w in re.findall(r"[^\W_]+", q.text.lower()) if w not in STOPWORDS]
        if not words:
            out_.append([])
            continue
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        rows = conn.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (match, k)).fetchall()
        out_.append([corpus.docs[r[0]].key for r in rows])
    conn.close()
    return out_


def rrf(rankings: Sequence[Sequence[str]], k: int) -> list[str]:
    score: dict[str, float] = {}
    for ranking in rankings:
        for i, key in enumerate(ranking):
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + i + 1)
    return sorted(score, key=lambda key: (-score[key], key))[:k]


def evaluate(questions: Sequence[Question], rankings: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per category ("all" too): the METRICS averaged over its questions, and "n"."""
    sums: dict[str, list[float]] = {}
    for q, top in zip(questions, rankings, strict=True):
        vals = [float(bool(q.evidence & set(top[:k]))) for k in KS]
        vals += [len(q.evidence & set(top[:k])) / len(q.evidence) for k in (5, 10)]
        for cat in ("all", str(q.category)):
            acc = sums.setdefault(cat, [0.0] * (len(METRICS) + 1))
            for i, v in enumerate(vals):
                acc[i] += v
            acc[-1] += 1
    return {cat: {**{m: acc[i] / acc[-1] for i, m in enumerate(METRICS)}, "n": acc[-1]} for cat, acc in sums.items()}


# --- the product path --------------------------------------------------------------------------


def through_daemon(corpus: Corpus, db: Path, key_of: dict[str, str], root: Path,
                   model: str, *, top_k: int = 10) -> tuple[list[list[str]], list[float]]:
    """Start `clade run` on a fresh data directory holding a copy of `db`, ask every question
    with `POST /v1/memory/search` (its best `top_k`); (rankings, client-side latencies in
    seconds). The data directory is removed afterwards (bench_longmemeval starts one per question)."""
    env = {"CLADE_EMBEDDING__MODEL": model, "CLADE_P2P__ENABLED": "false"}
    data = root / f"data-{corpus.name}"
    subprocess.run([CLADE, "--data-dir", str(data), "init"], check=True, capture_output=True,
                   env={**os.environ, **env})
    shutil.copyfile(db, data / "grimoire.db")
    daemon = Daemon(data, root / f"notify-{corpus.name}.sock", env)
    try:
        daemon.wait_ready()
        with daemon.open_client() as client:
            client.post("/v1/memory/search", json={"query": "warm up the model and the index"}).raise_for_status()
            rankings, lat = [], []
            for q in corpus.questions:
                t = time.perf_counter()
                r = client.post("/v1/memory/search", json={"query": q.text, "top_k": top_k})
                lat.append(time.perf_counter() - t)
                r.raise_for_status()
                rankings.append([key_of[h["id"]] for h in r.json()["results"]])
        return rankings, lat
    finally:
        daemon.stop(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


def build_store(corpus: Corpus, db: Path, model_dir: Path, model: str, vectors: np.ndarray) -> dict[str, str]:
    """A store of the corpus's entries with their vectors of `model` (computed once, by the
    bench); returns entry id -> corpus key."""
    store = Grimoire.open(db, create=True)
    try:
        entries = [NewEntry(kind=_kind(d), content=d.content, importance=d.fields.get("importance", 0.5),
                            confidence=d.fields.get("confidence", 0.7),
                            protocols=tuple(d.fields.get("metadata", {}).get("protocols", ())),
                            tags=tuple(d.fields.get("metadata", {}).get("tags", ())),
                            chains=tuple(d.fields.get("metadata", {}).get("chains", ())),
                            occurred_ms=event_ms(d.fields.get("occurred_at")))
                   for d in corpus.docs]
        written = seed_entries(store, entries, IDENTITY)
        write_vectors(store, get_embedder(model_dir, model).info, [w.id for w in written], vectors)
        return {w.id: d.key for w, d in zip(written, corpus.docs, strict=True)}
    finally:
        store.close()


def in_process(corpus: Corpus, db: Path, key_of: dict[str, str], model_dir: Path, model: str,
               weights: Sequence[float], *, k: int = 10) -> dict[str, list[list[str]]]:
    """`Retriever.recall` (its best `k`) on a copy of the store, once per lexical weight (w=0:
    cosine under the four factors); the copy is removed afterwards."""
    copy = db.with_suffix(".variants.db")
    shutil.copyfile(db, copy)
    store = Grimoire.open(copy)
    try:
        retriever = Retriever(store, lambda: get_embedder(model_dir, model))
        out_: dict[str, list[list[str]]] = {}
        for w in weights:
            retriever.lexical_weight = w
            out_[f"w={w:g}"] = [[key_of[h.entry.id] for h in retriever.recall(RecallQuery(text=q.text, k=k),
                                                                               embed_limit=0)]
                                for q in corpus.questions]
        return out_
    finally:
        store.close()
        copy.unlink(missing_ok=True)


def _kind(d: Doc) -> Any:
    from crdt import Kind

    return Kind(d.fields.get("memory_type", "insight"))


# --- running and reporting ---------------------------------------------------------------------


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    corpora = [*locomo(args.path, args.conversations), *disjoint()]
    embedder = get_embedder(root / "embedder", args.model)
    per: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    latencies: list[float] = []
    for corpus in corpora:
        progress(f"{corpus.name}: {len(corpus.docs)} entries, {len(corpus.questions)} questions")
        d = embedder.embed([doc.content for doc in corpus.docs])
        qv = embedder.embed([q.text for q in corpus.questions])
        cos = [[corpus.docs[i].key for i in np.argsort(-(d @ v), kind="stable")[:100]] for v in qv]
        bm = bm25_rankings(corpus, 100)
        rankings: dict[str, list[list[str]]] = {
            "cosine": cos, "bm25": bm, "rrf": [rrf((c, b), 10) for c, b in zip(cos, bm, strict=True)]}
        db = root / f"{corpus.name}.db"
        stored = np.stack([dequantize(*quantize(v)) for v in d]) if args.shipped else d
        key_of = build_store(corpus, db, root / "embedder", args.model, stored)
        if not args.no_daemon:
            rankings["clade"], lat = through_daemon(corpus, db, key_of, root, args.model)
            latencies += lat
        rankings.update(in_process(corpus, db, key_of, root / "embedder", args.model, args.weights))
        per[corpus.name] = {name: evaluate(corpus.questions, r) for name, r in rankings.items()}
        per[corpus.name]["_n"] = {"all": {"n": float(len(corpus.questions))}}
    res: dict[str, Any] = {"per_corpus": per, "pooled": {
        "locomo": _pool([per[c.name] for c in corpora if c.kind == "locomo"]),
        **{c.name: per[c.name] for c in corpora if c.kind == "disjoint"}}}
    if latencies:
        res["search_latency"] = summary(latencies)
    return res


def _pool(parts: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Question-weighted means over conversations, per method and category."""
    pooled: dict[str, dict[str, dict[str, float]]] = {}
    for part in parts:
        for method, cats in part.items():
            if method == "_n":
                continue
            for cat, m in cats.items():
                acc = pooled.setdefault(method, {}).setdefault(cat, {"n": 0.0, **dict.fromkeys(METRICS, 0.0)})
                for key in METRICS:
                    acc[key] += m[key] * m["n"]
                acc["n"] += m["n"]
    return {method: {cat: {**{k: acc[k] / acc["n"] for k in METRICS}, "n": acc["n"]} for cat, acc in cats.items()}
            for method, cats in pooled.items()}


def print_tables(res: dict[str, Any]) -> None:
    loc = res["pooled"]["locomo"]
    out("## LoCoMo, pooled (any@1 any@5 any@10 recall@5 recall@10; per category any@5/recall@10)")
    cats = sorted(c for c in next(iter(loc.values())) if c != "all")
    out(f"{'method':10s} " + " ".join(f"{m:>9s}" for m in METRICS) + "  "
        + " ".join(f"{'cat ' + c:>11s}" for c in cats))
    for method, by_cat in loc.items():
        a = by_cat["all"]
        out(f"{method:10s} " + " ".join(f"{a[m]:9.3f}" for m in METRICS) + "  "
            + " ".join(f"{by_cat[c]['any@5']:5.3f}/{by_cat[c]['recall@10']:5.3f}" for c in cats))
    for name in (k for k in res["pooled"] if k != "locomo"):
        out(f"## keyword-disjoint: {name} (any@1 any@5 = recall@5 of the tests, any@10)")
        for method, by_cat in res["pooled"][name].items():
            if method != "_n":
                a = by_cat["all"]
                out(f"{method:10s} {a['any@1']:9.3f} {a['any@5']:9.3f} {a['any@10']:9.3f}")
    out("## Pareto: LoCoMo any@5, recall@10 against keyword-disjoint any@5 relative to cosine")
    for method in loc:
        rel = [res["pooled"][n][method]["all"]["any@5"] / max(res["pooled"][n]["cosine"]["all"]["any@5"], 1e-9)
               for n in res["pooled"] if n != "locomo"]
        out(f"{method:10s} locomo {loc[method]['all']['any@5']:.3f} {loc[method]['all']['recall@10']:.3f}  "
            f"disjoint/cosine " + " ".join(f"{r:.2f}" for r in rel))
    if "search_latency" in res:
        lat = res["search_latency"]
        out(f"## search latency through the daemon: p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms "
            f"({lat['samples']} searches); load {os.getloadavg()}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--path", type=Path, default=DEFAULT_PATH.resolve())
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--weights", type=lambda s: [float(x) for x in s.split(",")], default=[0, 0.1, 0.2, 0.3, 0.4, 0.5])
    ap.add_argument("--no-daemon", action="store_true", help="baselines and in-process variants only")
    ap.add_argument("--shipped", action="store_true",
                    help="store every entry's vector as a sibling ships it (int8 round trip: "
                         "daemon/embedding/shipped.py), as if every entry had come by gossip")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    machine = machine_info(None, ("onnxruntime", "fastembed"))
    if not args.path.is_file():
        ap.error(f"no LoCoMo file at {args.path}: give its path with --path")
    with workdir(None, "clade-locomo-") as root:
        res = run(args, root)
    print_tables(res)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("locomo", {"machine": machine, "params": {"path": str(args.path), "model": args.model,
                                                   "conversations": args.conversations, "weights": args.weights,
                                                   "daemon": not args.no_daemon},
                    "total_seconds": round(time.perf_counter() - started, 1), **res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
