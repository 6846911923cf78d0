"""CLI commands for forgetting and inheritance (registered by `daemon.cli.main`).

    clade curator run [--json]              one cycle now (through the daemon when one runs)
    clade curator simulate --days N [--json]  what decay and pruning would do in N days; writes nothing
    clade unarchive ID                      undo an archive (forget, prune, local merge)
    clade testament --out FILE [--reflection FILE] [--push] [--json]
    clade inherit FILE | --from-styx PREDECESSOR [--json]

`testament` and `inherit` work on the store directly (the offline case: a dying golem's
daemon is stopped; an heir inherits before it first runs): with a daemon running they refuse
and say so (`clade die` is the death of a running golem). The testament carries the germline
only (curator/testament.py `select`): no episode summaries, outcomes, preferences, private
or sensitive entries. `testament --push` also uploads it to Styx's vault layer as an archive
(with this golem's membership certificate: daemon/styx/archive.py); `inherit --from-styx`
fetches a predecessor's latest archive from there, verifies it, and inherits it at the
archive's weight (0.3 instead of 0.4: daemon/styx/boot.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crdt import Kind
from crypto.membership import Membership
from crypto.vault import VaultKeys
from daemon.cli.backends import backend_for
from daemon.cli.ids import ID_HELP, entry_id
from daemon.cli.render import renders
from daemon.client import refuse_beside_daemon
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError
from daemon.grimoire import NewEntry, wall_clock_ms
from daemon.grimoire.curator.bequest import InheritReport, export_testament, inherit, read_testament
from daemon.grimoire.curator.cycle import simulate
from daemon.grimoire.curator.testament import TestamentError
from daemon.grimoire.write_door import Prepared, write_entries
from daemon.service.curation import settings_for
from daemon.styx import ledger
from daemon.styx.boot import BootError, download_within, inherit_archive, open_archive, write_archive
from daemon.styx.metering import charge_transfer, push_metered
from daemon.styx.policy import budget_for
from daemon.styx.vault import VaultPushError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]
MAX_REFLECTION_BYTES = 4096


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if not 0 <= value <= 36_500:
        raise argparse.ArgumentTypeError("days must be between 0 and 36500")
    return value


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser], *,
             common: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    p = command("curator", cmd_curator_run, "the curator: run a cycle now, or simulate what it will forget")
    sub = p.add_subparsers(dest="curator_command", required=True, metavar="SUBCOMMAND", parser_class=parser_class)
    sub.add_parser("run", parents=[common], help="run one cycle now").set_defaults(handler=cmd_curator_run)
    sim = sub.add_parser("simulate", parents=[common],
                         help="project decay and pruning N days ahead with no further use (writes nothing)")
    sim.set_defaults(handler=cmd_curator_simulate)
    sim.add_argument("--days", type=_days, required=True)

    p = command("unarchive", cmd_unarchive, "undo an archive (forget, the curator's prune or local merge)")
    p.add_argument("id", metavar="ID", help=ID_HELP)

    p = command("testament", cmd_testament, "write this golem's testament for a successor (vault-encrypted)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE")
    p.add_argument("--reflection", type=Path, default=None, metavar="FILE",
                   help="the death reflection (≤ 4 KiB of UTF-8), stored bloodstained; '-' reads stdin")
    p.add_argument("--push", action="store_true",
                   help="also upload it to Styx's vault layer ([styx] url) as the archive an heir boots from")

    p = command("inherit", cmd_inherit, "import a predecessor's testament (provenance inherited, discounted)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("file", type=Path, metavar="FILE", nargs="?", default=None)
    source.add_argument("--from-styx", metavar="PREDECESSOR", default=None,
                        help="fetch PREDECESSOR's latest testament archive from Styx's vault (held at 0.3, not 0.4)")


def _cycle_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in doc.items()
             if k.startswith(("entries_", "episodes_", "heuristics_")) and v]
    print(f"curator cycle in {doc.get('duration_ms', 0)} ms: " + (", ".join(parts) or "nothing to do"))
    if doc.get("llm_error"):
        print(f"  LLM pass skipped: {doc['llm_error']}")
    if doc.get("entries_archived_capacity"):
        kinds = ", ".join(f"{n} {k}" for k, n in doc.get("archived_capacity_by_kind", {}).items())
        print(f"  the Grimoire was over its budget ([curator] capacity): archived {doc['entries_archived_capacity']} "
              f"({kinds}); `clade unarchive ID` brings one back")


@renders(_cycle_text)
def cmd_curator_run(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return backend_for(data).curator_run()


def _simulate_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    s = doc["summary"]
    print(f"in {doc['days']:g} days with no further use: {s['fade']} of {s['entries']} entries fade below "
          f"the retrieval threshold, {s['pruned']} would be archived ({s['over_capacity']} over the budget of "
          f"{s['capacity']} live entries), {s['kept']} kept")
    for e in doc["entries"]:
        if e["fades"] or e["pruned"]:
            mark = "archived" if e["pruned"] else "fades"
            print(f"  {e['id']}  {e['kind']:<16} {e['confidence_now']:.2f} -> {e['confidence_after']:.2f}  {mark}")


@renders(_simulate_text)
def cmd_curator_simulate(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    config = data.load_config()
    with data.open_store() as store:
        return simulate(store, now_ms=wall_clock_ms(), days=args.days, settings=settings_for(config.curator))


def _unarchived_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"{doc['id']} is live again" if doc["changed"] else f"{doc['id']} was not archived")


@renders(_unarchived_text)
def cmd_unarchive(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    backend = backend_for(data)
    return backend.unarchive(entry_id(backend, args.id))


def _no_daemon(data: DataDir, what: str) -> None:
    refuse_beside_daemon(data, what)


def read_reflection(path: Path) -> str:
    """A death reflection from a file ('-': stdin): non-empty UTF-8 of at most 4 KiB (an entry's
    content). Raises `UsageError` saying what was wrong."""
    try:
        raw = sys.stdin.buffer.read(MAX_REFLECTION_BYTES + 1) if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_REFLECTION_BYTES:
        raise UsageError(f"the reflection is over {MAX_REFLECTION_BYTES} bytes; shorten it")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    if not text or "\x00" in text:
        raise UsageError(f"{path}: the reflection must be non-empty text without NUL")
    return text


def _bequest_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    print(f"testament written to {doc['path']}: {doc['entries']} entries ({doc['warnings']} warnings), "
          f"{doc['bytes']:,} bytes" + (f", reflection {doc['reflection_id']}" if doc["reflection_id"] else ""))


@renders(_bequest_text)
def cmd_testament(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    _no_daemon(data, "writing the testament")
    joined = data.load_membership()
    if joined is None:
        raise UsageError("this golem has not joined a clade: a testament is encrypted to the clade key and the owner")
    membership, clade_key = joined
    reflection = read_reflection(args.reflection) if args.reflection is not None else None
    identity = data.load_identity()
    now = wall_clock_ms()
    with data.open_store(identity=identity) as store:
        reflection_id = None
        if reflection is not None:
            new = NewEntry(kind=Kind.DEATH_REFLECTION, content=reflection, confidence=0.9, importance=1.0,
                           bloodstain=True)
            reflection_id = write_entries(store, identity, Prepared.unembedded([new]), now_ms=now).ids[0]
        report = export_testament(store, identity, clade_id=membership.clade_id, clade_keys=[clade_key],
                                  x25519_recipients=[membership.owner_x25519_public_key()], out=args.out,
                                  now_ms=now, reflection_id=reflection_id, trust=data.load_config().trust.policy())
        doc: dict[str, Any] = {"path": report.path, "entries": report.entries, "warnings": report.warnings,
                               "reflection_id": report.reflection_id, "bytes": report.bytes}
        if args.push:
            packed = write_archive(Path(report.path), membership.certificate.to_bytes(), created_ms=now)
            try:
                doc["styx"] = push_metered(store, data.load_config().styx, packed, peer=identity.peer_id, now_ms=now)
            except VaultPushError as exc:
                raise DaemonError(f"{exc} (the testament is kept at {report.path})") from None
    return doc


def _inherit_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    gens = ", ".join(f"generation {g}: {n}" for g, n in sorted(doc["generations"].items()))
    print(f"inherited {doc['entries']} entries from {doc['golem']} ({gens or 'none'})"
          + (f"; {doc['siblings']} other siblings' entries it held arrived as sibling entries (quarantined here until "
             "corroborated or aged)" if doc.get("siblings") else ""))


@renders(_inherit_text)
def cmd_inherit(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    _no_daemon(data, "inheriting")
    joined = data.load_keys()
    if joined is None:
        raise UsageError("join the clade first (`clade join BUNDLE`): a testament opens with the clade key")
    membership, ring = joined
    identity = data.load_identity()
    # a testament written before a key rotation opens with the older key this golem kept
    keys = VaultKeys(clade_key=ring.current.key, clade_keys=tuple(ring.all_keys()[1:]))
    if args.from_styx is not None:
        return _inherit_from_styx(args.from_styx, data, membership, keys)
    try:
        doc = read_testament(args.file, keys)
        revocations = data.load_revocations(membership)
        if revocations is not None and revocations.is_revoked(doc.golem):
            raise UsageError(f"the testament of {doc.golem}, whom the owner revoked (revocation list "
                             f"v{revocations.version}): a revoked golem's knowledge is not inherited "
                             "(nothing was imported)")
        with data.open_store(identity=identity) as store:
            report = inherit(store, doc, clade_id=membership.clade_id, local_replica=identity.peer_id,
                             now_ms=wall_clock_ms())
    except TestamentError as exc:
        raise UsageError(f"{exc} (nothing was imported)") from None
    return _inherit_doc(report)


def _inherit_doc(report: InheritReport) -> dict[str, Any]:
    return {"golem": report.golem, "entries": report.entries, "applied_ops": report.applied_ops,
            "generations": {str(g): n for g, n in report.generations.items()}, "siblings": report.siblings}


def _inherit_from_styx(predecessor: str, data: DataDir, membership: Membership, keys: VaultKeys) -> dict[str, Any]:
    """Boot from the Styx archive (daemon/styx/boot.py): fetch, verify, inherit at 0.3."""
    identity = data.load_identity()
    styx = data.load_config().styx
    if not styx.url:
        raise UsageError("--from-styx needs [styx] url (or CLADE_STYX__URL)")
    now = wall_clock_ms()
    with data.open_store(identity=identity) as store:
        try:
            budget, month = budget_for(styx), ledger.month_of(now)  # bounded to what the month's rest pays for …
            budget.resume(month, store.styx_spent(month))
            name, raw = download_within(styx, predecessor, budget, month=month)
            charge_transfer(store, styx, len(raw), now_ms=now)  # … and charged by its real size
            doc = open_archive(raw, predecessor=predecessor, membership=membership, keys=keys,
                               revocations=data.load_revocations(membership))
            report = inherit_archive(store, doc, clade_id=membership.clade_id, local_replica=identity.peer_id,
                                     now_ms=now)
        except VaultPushError as exc:
            raise DaemonError(f"{exc} (nothing was imported)") from None
        except BootError as exc:
            raise UsageError(f"{exc} (nothing was imported)") from None
    return {**_inherit_doc(report), "from_styx": name, "bytes": len(raw), "via_archive": True}
