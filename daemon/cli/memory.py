"""CLI commands for semantic memory (registered by `daemon.cli.main`).

    clade recall QUERY [--k N] [--kind K]… [--min-importance X] [--min-confidence X]
                       [--include-sensitive] [--keyword-only] [--pad P,A,D]
    clade digest QUERY [--budget-tokens N] [--k N] [--format xml|search-results|json] [--include-sensitive]
                       [--pad P,A,D]
    clade feedback [--cited ID…] [--injected ID…] [--response TEXT|-]
    clade embeddings check | rebuild | prepare
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from crdt import Category, Kind
from daemon.cli import render
from daemon.cli.backends import PadTuple, backend_for
from daemon.cli.ids import entry_ids
from daemon.cli.render import renders
from daemon.client import refuse_beside_daemon
from daemon.datadir import DataDir
from daemon.embedding.catalogue import model_cache_dir
from daemon.embedding.drift import REFERENCE_DOCS, measure
from daemon.embedding.embedder import Embedder, get_embedder
from daemon.errors import UsageError
from daemon.grimoire.recall import RecallQuery
from daemon.grimoire.retrieval import Retriever
from daemon.grimoire.vectors import vector_report

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]
PAD_HELP = ("the golem's current affect (pleasure,arousal,dominance), each -1..1: entries written in a similar "
            "mood rank higher (write --pad=-0.2,0.5,0 when it starts with a minus)")


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser], *, kinds: list[str],
             unit: Callable[[str], float], positive: Callable[[str], int], pad: Callable[[str], Any],
             parser_class: type[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = command("recall", cmd_recall, "find entries by meaning (and keywords)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--k", type=positive, default=10, help="how many results (default 10)")
    p.add_argument("--kind", action="append", choices=kinds, default=[], metavar="KIND", help="repeatable")
    p.add_argument("--category", action="append", choices=[c.value for c in Category], default=[],
                   metavar="CATEGORY", help="only this knowledge category; repeatable")
    p.add_argument("--min-importance", type=unit, default=None)
    p.add_argument("--min-confidence", type=unit, default=None)
    p.add_argument("--include-sensitive", action="store_true")
    p.add_argument("--keyword-only", action="store_true", help="FTS5 only; no embedding model needed")
    p.add_argument("--pad", type=pad, default=None, metavar="P,A,D", help=PAD_HELP)

    p = command("digest", cmd_digest, "the memory digest for an LLM call, within a token budget")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--budget-tokens", type=positive, default=3000)
    p.add_argument("--k", type=positive, default=10)
    p.add_argument("--format", choices=["xml", "search-results", "json"], default="xml")
    p.add_argument("--include-sensitive", action="store_true")
    p.add_argument("--pad", type=pad, default=None, metavar="P,A,D", help=PAD_HELP)

    p = command("feedback", cmd_feedback, "citation feedback: cited entries gain weight, uncited lose some")
    p.add_argument("--cited", nargs="+", action="extend", default=[], metavar="ID")
    p.add_argument("--injected", nargs="+", action="extend", default=[], metavar="ID")
    p.add_argument("--response", default=None, metavar="TEXT",
                   help="the model's response (- reads stdin): without --cited, injected entries within "
                        "cosine 0.8 of one of its sentences count as cited")

    p = command("embeddings", cmd_embeddings_check, "embedding vectors: check or rebuild")
    sub = p.add_subparsers(dest="embeddings_command", required=True, metavar="SUBCOMMAND", parser_class=parser_class)
    sub.add_parser("check", parents=[common], help="count vectors of the current model, of others, missing"
                   ).set_defaults(handler=cmd_embeddings_check)
    sub.add_parser("rebuild", parents=[common], help="re-embed every entry with the current model"
                   ).set_defaults(handler=cmd_embeddings_rebuild)
    sub.add_parser("prepare", parents=[common], help="convert and load the configured model now (installers run it)"
                   ).set_defaults(handler=cmd_embeddings_prepare)


def _embedder(data: DataDir) -> Callable[[], Embedder]:
    model = data.load_config().embedding.space
    return lambda: get_embedder(data.root / "embedder", model)


def _pad(args: argparse.Namespace) -> PadTuple | None:
    return None if args.pad is None else args.pad.as_tuple()


@renders(render.hits)
def cmd_recall(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    # One recall path: through the daemon when one runs (every option is the API's too), else on the store.
    return backend_for(data).recall(RecallQuery(
        text=args.query, k=args.k, kinds=tuple(Kind(k) for k in args.kind),
        categories=tuple(Category(c) for c in args.category), min_importance=args.min_importance,
        min_confidence=args.min_confidence, include_sensitive=args.include_sensitive,
        keyword_only=args.keyword_only, pad=_pad(args)))


@renders(render.digest)
def cmd_digest(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).digest(RecallQuery(text=args.query, k=args.k, include_sensitive=args.include_sensitive,
                                                pad=_pad(args)), budget_tokens=args.budget_tokens, fmt=args.format)


@renders(render.feedback)
def cmd_feedback(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    if not args.cited and not args.injected:
        raise UsageError("give --cited ID… and/or --injected ID…")
    response = args.response
    if response == "-":
        response = sys.stdin.read()
    if response is not None and not response.strip():
        raise UsageError("--response must not be blank")
    backend = backend_for(data)
    return backend.feedback(cited=entry_ids(backend, args.cited), injected=entry_ids(backend, args.injected),
                            response=response)


@renders(render.embeddings_check)
def cmd_embeddings_check(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    embedder = _embedder(data)()
    with data.open_store() as store:
        report = vector_report(store, embedder.info)
        baseline = store.drift_baseline(embedder.info)
    drift = None if baseline is None else measure(baseline, embedder.embed(list(REFERENCE_DOCS))).to_json()
    return {"model": embedder.info.model, "model_version": embedder.info.model_version,
            "preprocess_hash": embedder.info.preprocess_hash, **report, "drift": drift,
            "ok": report["other_model"] == 0 and (drift is None or drift["verdict"] != "critical")}


@renders(render.embeddings_prepared)
def cmd_embeddings_prepare(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    started = time.monotonic()
    embedder = _embedder(data)()
    return {"model": embedder.info.model, "model_version": embedder.info.model_version, "dim": embedder.info.dim,
            "cache": str(model_cache_dir(data.root / "embedder")), "seconds": round(time.monotonic() - started, 2)}


@renders(render.embeddings_rebuilt)
def cmd_embeddings_rebuild(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    # The daemon's vector index and drift state would not see vectors cleared behind its back.
    refuse_beside_daemon(data, "rebuilding the vectors (the daemon re-embeds what lacks a vector itself)")
    factory = _embedder(data)
    with data.open_store() as store:
        store.clear_vectors()  # all or none: never vectors of two models
        done = Retriever(store, factory).index_missing()
    return {"model": factory().info.model, "embedded": done}
