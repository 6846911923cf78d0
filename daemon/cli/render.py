"""Human-readable output of CLI documents (the `--json` form is the document itself)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["text"]


def _line(entry: dict[str, Any], width: int = 72) -> str:
    content = " ".join(entry["content"].split())
    if len(content) > width:
        content = content[: width - 1] + "…"
    flag = " [archived]" if entry.get("archived") else ""
    return f"{entry['id']}  {entry['kind']:<16} c={entry['confidence']:.2f}  {content}{flag}"


def _entry_block(entry: dict[str, Any]) -> str:
    meta = entry["metadata"]
    rows = [
        ("id", entry["id"]),
        ("kind", entry["kind"]),
        ("category", entry["category"] or "-"),
        ("author", entry["author"]),
        ("created", f"{entry['created_at']} (hlc {entry['created_hlc']})"),
        ("confidence", f"{entry['confidence']:.3f} (local {entry['local_confidence']:.3f})"),
        ("importance", f"{entry['importance']:.3f}"),
        ("quality", f"{entry['quality']:.3f}"),
        ("sensitivity", entry["sensitivity"]),
        ("status", entry["status"] + (" (archived)" if entry["archived"] else "")),
        ("endorsed", f"{entry['confirms']} confirm, {entry['contradicts']} contradict"),
        ("provenance", entry["provenance"]),
        ("tags", ", ".join(meta["tags"]) or "-"),
        ("protocols", ", ".join(meta["protocols"]) or "-"),
        ("tokens", ", ".join(meta["tokens"]) or "-"),
        ("chains", ", ".join(str(c) for c in meta["chains"]) or "-"),
        ("strategy", meta["strategy_id"] or "-"),
    ]
    if entry["pad"] is not None:
        rows.append(("pad", ", ".join(f"{x:.2f}" for x in entry["pad"])))
    head = "\n".join(f"{k:<12}{v}" for k, v in rows)
    return f"{head}\n\n{entry['content']}"


def _toml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _config(doc: dict[str, Any]) -> str:
    out = [f"# effective configuration ({doc['config_file']} + CLADE_* overrides)"]
    for section, keys in doc["config"].items():
        out.append(f"\n[{section}]")
        for key, value in keys.items():
            out.append(f"# {key} is unset" if value is None else f"{key} = {_toml_value(value)}")
    return "\n".join(out)


def text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Print `doc`, the result of `args.command`, for a person at a terminal."""
    command = args.command
    if command == "init":
        print(f"initialised {doc['data_dir']}")
        print(f"peer id {doc['peer_id']}")
        if doc["replaced_identity"]:
            print(f"previous identity kept as {doc['replaced_identity']}")
        if doc.get("lessons"):
            lessons = doc["lessons"]
            print(f"{lessons['file']}: {lessons['created']} lessons imported, {lessons['skipped']} imported before")
    elif command == "id":
        print(doc["peer_id"])
    elif command == "owner":
        if "owner_public_key" in doc:
            print(f"clade {doc['clade']} ({doc['clade_id']}) created in {doc['owner_dir']}")
            print("keep this directory off the golems; back it up offline")
        elif "bundle" in doc:
            print(f"admission bundle for {doc['peer_id']} written to {doc['bundle']}")
        else:
            print(f"revocation list v{doc['version']} written to {doc['revocations']} ({len(doc['revoked'])} revoked)")
    elif command == "join":
        print(f"joined clade {doc['clade']} ({doc['clade_id']}) as {doc['peer_id']}, generation {doc['generation']}")
    elif command == "backup":
        if "ok" in doc:
            print(f"{doc['file']}: ok ({doc['files']} files, {doc['bytes']} bytes, golem {doc['golem']})")
        else:
            print(f"{doc['path']} ({doc['bytes']} bytes, {doc['files']} files; for {', '.join(doc['recipients'])})")
    elif command == "restore":
        print(f"restored {doc['files']} files of golem {doc['golem']} into {doc['data_dir']}")
    elif command == "run":
        print(f"clade: stopped by {doc['stopped_by']}")
    elif command == "status":
        kinds = ", ".join(f"{k} {n}" for k, n in doc["by_kind"].items()) or "none"
        print(f"data dir   {doc['data_dir']}")
        print(f"peer id    {doc['peer_id']}")
        print(f"entries    {doc['entries']} ({kinds}); archived {doc['archived']}")
        print(f"episodes   {doc['episodes']}")
        print(f"schema     v{doc['schema_version']}")
    elif command == "config":
        print(_config(doc))
    elif command == "remember":
        print(doc["id"])
    elif command in ("retract", "endorse"):
        print(f"{doc['id']} {doc['status']} (confirms {doc['confirms']}, contradicts {doc['contradicts']})")
    elif command == "show":
        print(_entry_block(doc))
    elif command == "list":
        for entry in doc["entries"]:
            print(_line(entry))
    elif command == "forget":
        print(f"{doc['id']} archived" + ("" if doc["changed"] else " (already)"))
    elif command == "recall":
        for hit in doc["results"]:
            print(f"{hit['score']:7.3f}  {_line(hit)}")
    elif command == "digest":
        print(doc["document"], end="" if doc["document"].endswith("\n") else "\n")
    elif command == "feedback":
        cited = set(doc.get("cited", ()))
        for entry_id, weight in doc["weights"].items():
            print(f"{entry_id}  weight {weight:.2f}{'  cited' if entry_id in cited else ''}")
    elif command == "embeddings":
        if "embedded" in doc:
            print(f"re-embedded {doc['embedded']} entries with {doc['model']}")
        elif "cache" in doc:
            print(f"{doc['model']} ({doc['model_version']}, {doc['dim']}-d) ready in {doc['seconds']} s; "
                  f"prepared models in {doc['cache']}")
        else:
            print(f"{doc['model']} ({doc['model_version']}): {doc['current']} current, "
                  f"{doc['other_model']} of another model, {doc['missing']} missing")
    elif command == "episode":
        if "episodes" in doc:
            for ep in doc["episodes"]:
                summary = " ".join(ep["summary"].split())[:72]
                lead = f"{ep['similarity']:.3f}  " if "similarity" in ep else ""
                print(f"{lead}{ep['id']}  {ep['observed_ms']}  {ep['protocol'] or '-':<12} {summary}")
        else:
            print(doc["id"])
    elif command in ("wm", "flush", "lessons"):
        from daemon.cli.agent import render as render_agent

        render_agent(command, args, doc)
    elif command in ("peers", "sync", "revocations", "demo"):
        from daemon.cli.p2p import render as render_p2p

        render_p2p(command, args, doc)
    else:  # pragma: no cover - every command is listed above
        print(json.dumps(doc, ensure_ascii=False, indent=2))
