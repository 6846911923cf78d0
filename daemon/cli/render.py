"""Human-readable output of CLI documents (the `--json` form is the document itself).

Each command's handler names its renderer with `@renders(fn)`: the output is chosen by the
command that made the document, never guessed from its keys. `text(args, doc)` prints `doc`
with the renderer of `args.handler`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from daemon.grimoire.records import iso_ms

__all__ = ["Renderer", "renders", "text"]

Renderer = Callable[[argparse.Namespace, dict[str, Any]], None]
H = TypeVar("H", bound=Callable[..., Any])
_RENDERERS: dict[Callable[..., Any], Renderer] = {}


def renders(renderer: Renderer) -> Callable[[H], H]:
    """Decorate a command handler: its documents are printed by `renderer`."""

    def mark(handler: H) -> H:
        _RENDERERS[handler] = renderer
        return handler

    return mark


def text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Print `doc`, the result of `args.handler`, for a person at a terminal."""
    _RENDERERS[args.handler](args, doc)


# -- renderers shared by several commands ----------------------------------------------


def line(entry: dict[str, Any], width: int = 72) -> str:
    """One entry on one line."""
    content = " ".join(entry["content"].split())
    if len(content) > width:
        content = content[: width - 1] + "…"
    flag = " [archived]" if entry.get("archived") else ""
    # The id's first 8 hex characters, as git shows a commit: every command taking an id takes them.
    return f"{entry['id'][:8]}  {entry['kind']:<16} c={entry['confidence']:.2f}  {content}{flag}"


def entry_block(args: argparse.Namespace, entry: dict[str, Any]) -> None:
    """`clade show`: every field of one entry, then its content."""
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
    belief = entry.get("belief")
    if belief is not None:
        own, clade = belief["own"], belief["clade"]
        rows.append(("belief", f"{belief['belief']:.3f}" + (" REFUTED (withheld from digests)" if belief["refuted"]
                                                            else "")))
        rows.append(("evidence", f"own +{own['positive']:g}/-{own['negative']:g}, clade +{clade['positive']:g}/"
                                 f"-{clade['negative']:g} from {clade['siblings']} sibling(s)"))
    head = "\n".join(f"{k:<12}{v}" for k, v in rows)
    print(f"{head}\n\n{entry['content']}")


def entry_state(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """`clade retract`, `clade endorse`: the entry's status and tally."""
    print(f"{doc['id']} {doc['status']} (confirms {doc['confirms']}, contradicts {doc['contradicts']})")


def entries(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    for entry in doc["entries"]:
        print(line(entry))


def hits(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if doc.get("degraded") == "keyword_only":
        print("(by keywords only: the daemon's embedding model is loading or cannot load; see clade status)",
              file=sys.stderr)
    if doc.get("merged") is None:
        for hit in doc["results"]:
            print(f"{hit['score']:7.3f}  {line(hit)}")
        return
    local = {hit["id"]: hit for hit in doc["results"]}  # Styx on: one ranking, Styx's rows marked
    for row in doc["merged"]:
        if row["provenance"] == "local":
            print(f"{row['score']:7.3f}  {line(local[row['id']])}")
        else:
            print(f"{row['score']:7.3f}  [{row['provenance']}] {row['kind']} {' '.join(row['content'].split())}")
    if doc.get("styx_error"):
        print(f"(styx: {doc['styx_error']})", file=sys.stderr)


def id_only(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(doc["id"])


def peer_id(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(doc["peer_id"])


def init(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"initialised {doc['data_dir']}")
    print(f"peer id {doc['peer_id']}")
    if doc["replaced_identity"]:
        print(f"previous identity kept as {doc['replaced_identity']}")
    if doc.get("lessons"):  # `clade init --lessons FILE`
        lessons = doc["lessons"]
        print(f"{lessons['file']}: {lessons['created']} lessons imported, {lessons['skipped']} imported before")


def status(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    kinds = ", ".join(f"{k} {n}" for k, n in doc["by_kind"].items()) or "none"
    print(f"data dir   {doc['data_dir']}")
    print(f"peer id    {doc['peer_id']}")
    capacity = doc.get("archived_for_capacity", 0)
    print(f"entries    {doc['entries']} ({kinds}); archived {doc['archived']}"
          + (f" ({capacity} for capacity: the Grimoire was over its budget)" if capacity else ""))
    backlog = doc["embedding_backlog"]
    waiting = f"{backlog} entries without a vector yet (found by keywords only until embedded)"
    print(f"embedding  {waiting if backlog else 'every entry has a vector'}")
    print(f"episodes   {doc['episodes']}")
    print(f"schema     v{doc['schema_version']}")
    memory = doc.get("daemon_memory")
    if memory:
        model = "model loaded" if memory["model_loaded"] else "model not loaded"
        if memory.get("model_rss_mib") is not None:
            model += f" (its process: {memory['model_rss_mib']:g} MiB resident)"
        if memory.get("model_error"):
            model += f" (cannot load: {memory['model_error']}; searches answer from keywords)"
        print(f"daemon     {memory['rss_mib']:g} MiB resident (peak {memory['peak_rss_mib']:g} MiB), {model}")
    v = doc.get("vitality")
    if v:
        ratio = "" if v["hayflick_ratio"] is None else f", Hayflick {v['hayflick_ratio']:g}"
        how = f" (composite {v['composite']:.2f})" if v.get("composite") is not None else ""
        print(f"vitality   {v['phase']}{how}{ratio}" + (" (pushing legacy)" if v["legacy"] else ""))


def stopped(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"clade: stopped by {doc['stopped_by']}")


def config(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    out = [f"# effective configuration ({doc['config_file']} + CLADE_* overrides)"]
    for section, keys in doc["config"].items():
        out.append(f"\n[{section}]")
        for key, value in keys.items():
            out.append(f"# {key} is unset" if value is None else f"{key} = {json.dumps(value, ensure_ascii=False)}")
    print("\n".join(out))


def forgotten(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['id']} archived" + ("" if doc["changed"] else " (already)"))


def episodes(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """`clade episode list` and `episode search` (with a similarity column)."""
    for ep in doc["episodes"]:
        summary = " ".join(ep["summary"].split())[:72]
        lead = f"{ep['similarity']:.3f}  " if "similarity" in ep else ""
        print(f"{lead}{ep['id']}  {ep['observed_ms']}  {ep['protocol'] or '-':<12} {summary}")


def digest(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    document = doc["document"]
    if not isinstance(document, str):  # --format json / search-results: the documents as JSON
        document = json.dumps(document, ensure_ascii=False, indent=2)
    print(document, end="" if document.endswith("\n") else "\n")
    if doc.get("styx_error"):
        print(f"(styx: {doc['styx_error']})", file=sys.stderr)


def feedback(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    cited = set(doc.get("cited", ()))
    for entry_id, weight in doc["weights"].items():
        print(f"{entry_id}  weight {weight:.2f}{'  cited' if entry_id in cited else ''}")


def embeddings_check(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['model']} ({doc['model_version']}): {doc['current']} current, "
          f"{doc['other_model']} of another model, {doc['missing']} missing")
    drift = doc.get("drift")
    if drift is None:
        print("drift: no baseline yet (the daemon takes one at its first model load)")
    else:
        print(f"drift: {drift['verdict']} — the references moved {drift['mean_distance']:.4f} on average "
              f"(max {drift['max_distance']:.4f}), {drift['neighbour_stability']:.0%} keep their neighbours"
              + ("; vector writes pause: restore the model files, or accept it (stop the daemon, then "
                 "`clade embeddings rebuild`)" if drift["verdict"] == "critical" else ""))


def embeddings_rebuilt(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"re-embedded {doc['embedded']} entries with {doc['model']}; the drift baseline is taken again")


def embeddings_prepared(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['model']} ({doc['model_version']}, {doc['dim']}-d) ready in {doc['seconds']} s; "
          f"prepared models in {doc['cache']}")


def owner_created(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"clade {doc['clade']} ({doc['clade_id']}) created in {doc['owner_dir']}")
    print("keep this directory off the golems; back it up offline")


def bundle_written(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"admission bundle for {doc['peer_id']} written to {doc['bundle']}")


def revocations_written(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"revocation list v{doc['version']} written to {doc['revocations']} ({len(doc['revoked'])} revoked)")
    print("the revoked golem still holds the clade key: run `clade owner rotate` next")


def joined(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if doc.get("rotation"):
        state = "installed" if doc["added"] else "already held"
        print(f"clade key epoch {doc['epoch']} {state} (clade {doc['clade']}; current epoch {doc['key_epoch']}, "
              f"held: {', '.join(map(str, doc['epochs']))})")
    else:
        print(f"joined clade {doc['clade']} ({doc['clade_id']}) as {doc['peer_id']}, generation {doc['generation']}")
    reloaded = doc.get("reloaded")
    if reloaded is not None:
        print(f"the running daemon reloaded its keys: sealing with epoch {reloaded['epoch']}")
    elif doc.get("rotation"):
        print("no daemon runs on this data dir: the key is used from its next start")


def rotation_written(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"clade {doc['clade']}: key epoch {doc['previous_epoch']} -> {doc['epoch']}, "
          f"{len(doc['bundles'])} rotation bundle(s) in {doc['seconds']:.2f} s:")
    for path in doc["bundles"]:
        print(f"  {path}")
    for peer, why in sorted(doc["left_out"].items()):
        print(f"  no bundle for {peer} ({why})")
    print("on each golem: clade join BUNDLE (a running daemon picks the key up at once)")


def keys_held(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if doc["dropped"]:
        print(f"dropped the keys of epoch(s) {', '.join(map(str, doc['dropped']))}")
    for key in doc["keys"]:
        until = key["gossip_until_ms"]
        note = "current" if key["current"] else (
            f"gossip accepted until {iso_ms(until)}" if until is not None else "")
        print(f"epoch {key['epoch']:<4} installed {iso_ms(key['installed_ms'])}  {note}")


def backup_written(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['path']} ({doc['bytes']} bytes, {doc['files']} files; for {', '.join(doc['recipients'])})")


def backup_verified(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['file']}: ok ({doc['files']} files, {doc['bytes']} bytes, golem {doc['golem']})")


def restored(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if doc.get("as_successor"):
        print(f"inherited {doc['entries']} entries of golem {doc['golem']} into {doc['data_dir']} (as its successor)")
        return
    print(f"restored {doc['files']} files of golem {doc['golem']} into {doc['data_dir']}")
