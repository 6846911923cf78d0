"""CLI commands for clade membership and vault backups (registered by `daemon.cli.main`).

    clade owner init --owner-dir DIR --clade NAME
    clade owner admit PEER_ID --owner-dir DIR [--generation N] [--days D] --out BUNDLE
    clade owner revoke PEER_ID --owner-dir DIR --out REVOCATIONS
    clade owner rotate --owner-dir DIR --out BUNDLES_DIR [--member PEER_ID]…
    clade join BUNDLE [--force]            (an admission or a rotation bundle)
    clade keys [--drop-before EPOCH]
    clade backup [--out FILE] [--recipient PEER_ID|X25519_HEX]… [--include-identity]
    clade backup verify FILE [--owner-dir DIR | --clade-key FILE | --identity-key FILE]
    clade restore FILE [--owner-dir DIR | --clade-key FILE | --identity-key FILE] [--force]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nacl.signing

from crypto import (
    AdmissionBundle,
    Certificate,
    Identity,
    InvalidPeerId,
    MembershipError,
    OwnerKey,
    RevocationList,
    public_key_of,
)
from crypto.keyfile import read_secret, write_public, write_secret
from crypto.membership import CLADE_KEY_BYTES
from crypto.rotation import (
    MemberRecord,
    RotationBundle,
    commit_rotation,
    is_rotation_bundle,
    load_members,
    owner_epoch_keys,
    prepare_rotation,
    record_member,
    rotation_recipients,
)
from crypto.vault import VaultKeys
from daemon.cli import render
from daemon.cli.backends import backend_for
from daemon.cli.render import renders
from daemon.client import daemon_is_live
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.curator.bequest import inherit, successor_document
from daemon.grimoire.store import wall_clock_ms
from daemon.service.backup import (
    create_backup,
    default_recipients,
    extract_grimoire,
    report_json,
    restore_backup,
    verify_backup,
)
from daemon.styx.metering import push_metered
from daemon.styx.vault import VaultPushError

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]
# Certificates start a little in the past so a golem whose clock lags still accepts them.
CLOCK_ALLOWANCE_S = 300


def register(sub: Any, command: Callable[[str, Handler, str], argparse.ArgumentParser],
             common: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the membership and backup commands to the `clade` parser."""
    p = command("owner", cmd_owner_init, "owner tools (run them off the golems)")
    owner = p.add_subparsers(dest="owner_command", required=True, metavar="SUBCOMMAND", parser_class=parser_class)
    init = owner.add_parser("init", parents=[common], help="create an owner key and a clade")
    init.set_defaults(handler=cmd_owner_init)
    init.add_argument("--owner-dir", required=True, type=Path)
    init.add_argument("--clade", required=True, help="clade name (1..64 characters)")
    admit = owner.add_parser("admit", parents=[common], help="admit a golem: write its admission bundle")
    admit.set_defaults(handler=cmd_owner_admit)
    admit.add_argument("peer_id", metavar="PEER_ID")
    admit.add_argument("--owner-dir", required=True, type=Path)
    admit.add_argument("--generation", type=int, default=0)
    admit.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    admit.add_argument("--out", required=True, type=Path, metavar="BUNDLE")
    revoke = owner.add_parser("revoke", parents=[common], help="revoke a golem: write a new revocation list")
    revoke.set_defaults(handler=cmd_owner_revoke)
    revoke.add_argument("peer_id", metavar="PEER_ID")
    revoke.add_argument("--owner-dir", required=True, type=Path)
    revoke.add_argument("--out", required=True, type=Path, metavar="REVOCATIONS")
    rotate = owner.add_parser("rotate", parents=[common],
                              help="new clade key (epoch + 1): one bundle per member not revoked")
    rotate.set_defaults(handler=cmd_owner_rotate)
    rotate.add_argument("--owner-dir", required=True, type=Path)
    rotate.add_argument("--out", required=True, type=Path, metavar="BUNDLES_DIR")
    rotate.add_argument("--member", action="append", default=[], metavar="PEER_ID",
                        help="also a member (one admitted before the owner kept members.json); repeatable")

    p = command("join", cmd_join, "install an admission bundle (membership and clade key) or a rotation bundle "
                                  "(a new clade key; a running daemon reloads it)")
    p.add_argument("bundle", type=Path, metavar="BUNDLE")
    p.add_argument("--force", action="store_true", help="replace a membership of another clade")

    p = command("keys", cmd_keys, "the clade key epochs this golem holds")
    p.add_argument("--drop-before", type=int, default=None, metavar="EPOCH",
                   help="forget the keys of older epochs (backups sealed only to them will no longer open here)")

    p = command("backup", cmd_backup, "write an encrypted backup of the data dir")
    p.add_argument("--out", type=Path, default=None, help="file to write (default: $DATA/backups/…)")
    p.add_argument("--recipient", action="append", default=[], metavar="PEER_ID|X25519_HEX",
                   help="also encrypt to this key (repeatable)")
    p.add_argument("--include-identity", action="store_true", help="include identity.key and clade.key")
    p.add_argument("--push", action="store_true", help="also upload it to the configured Styx vault ([styx] url)")
    backup_sub = p.add_subparsers(dest="backup_command", required=False, metavar="SUBCOMMAND",
                                  parser_class=parser_class)
    verify = backup_sub.add_parser("verify", parents=[common], help="decrypt and check a backup; write nothing")
    verify.set_defaults(handler=cmd_backup_verify)
    verify.add_argument("file", type=Path, metavar="FILE")
    _key_options(verify)

    p = command("restore", cmd_restore, "restore a backup into the data dir (verifies everything first)")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--force", action="store_true", help="replace a non-empty data dir")
    p.add_argument("--as-successor", action="store_true",
                   help="keep this golem's identity: inherit the backup's germline only, as a testament "
                        "(provenance inherited, discounted; no outcomes, preferences, private or sensitive "
                        "entries; at most 2,048), for a new golem taking over from a dead one")
    _key_options(p)


def _key_options(p: argparse.ArgumentParser) -> None:
    keys = p.add_mutually_exclusive_group()
    keys.add_argument("--owner-dir", type=Path, help="decrypt with the owner's key")
    keys.add_argument("--clade-key", type=Path, help="decrypt with this clade key file")
    keys.add_argument("--identity-key", type=Path, help="decrypt with this golem identity file (a recipient)")


def _now() -> int:
    """Wall-clock seconds since the Unix epoch (certificates and revocation lists count seconds)."""
    return wall_clock_ms() // 1000


@renders(render.owner_created)
def cmd_owner_init(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    owner = OwnerKey.create(args.owner_dir, args.clade)
    return {"owner_dir": str(args.owner_dir), "clade": owner.clade_name, "clade_id": owner.clade_id,
            "owner_public_key": owner.public_key.hex()}


@renders(render.bundle_written)
def cmd_owner_admit(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    if args.days < 1 or args.generation < 0:
        raise UsageError("--days must be at least 1 and --generation at least 0")
    try:
        public_key_of(args.peer_id)
    except InvalidPeerId as exc:
        raise UsageError(f"PEER_ID: {exc} (run `clade id` on the golem)") from None
    owner = OwnerKey.load(args.owner_dir)
    now = _now()
    cert = Certificate.issue(owner, args.peer_id, generation=args.generation,
                             not_before=now - CLOCK_ALLOWANCE_S, not_after=now + args.days * 86_400)
    write_secret(args.out, AdmissionBundle.create(owner, cert))
    record_member(args.owner_dir, MemberRecord(peer_id=args.peer_id, generation=args.generation,
                                               not_after=cert.not_after))
    return {"bundle": str(args.out), "peer_id": args.peer_id, "clade": owner.clade_name, "clade_id": owner.clade_id,
            "generation": args.generation, "not_after": cert.not_after, "key_epoch": owner.key_epoch}


def _owner_revocations(owner_dir: Path, owner: OwnerKey) -> RevocationList | None:
    path = owner_dir / "revocations.bin"
    if not path.exists():
        return None
    current = RevocationList.from_bytes(path.read_bytes())
    current.verify(owner.public_key, owner.clade_id)
    return current


@renders(render.revocations_written)
def cmd_owner_revoke(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    owner = OwnerKey.load(args.owner_dir)
    current_path = args.owner_dir / "revocations.bin"
    current = _owner_revocations(args.owner_dir, owner)
    revoked = set(current.revoked if current else ()) | {args.peer_id}
    new = RevocationList.issue(owner, version=(current.version if current else 0) + 1, revoked=revoked,
                               issued_at=_now())
    write_public(current_path, new.to_bytes(), overwrite=True)
    write_public(args.out, new.to_bytes(), overwrite=True)
    return {"revocations": str(args.out), "version": new.version, "revoked": sorted(new.revoked)}


@renders(render.rotation_written)
def cmd_owner_rotate(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    started = time.monotonic()
    owner = OwnerKey.load(args.owner_dir)
    for peer in args.member:
        try:
            public_key_of(peer)
        except InvalidPeerId as exc:
            raise UsageError(f"--member {peer}: {exc}") from None
    now = _now()
    members = load_members(args.owner_dir) + [
        MemberRecord(peer_id=p, generation=0, not_after=now + 1) for p in args.member]
    chosen, left_out = rotation_recipients(members, _owner_revocations(args.owner_dir, owner), now=now)
    if not chosen:
        raise UsageError(f"no member to give a new key to ({len(members)} known, none current and unrevoked); "
                         "name members with --member PEER_ID")
    args.out.mkdir(mode=0o700, parents=True, exist_ok=True)
    rotated = prepare_rotation(owner, args.owner_dir)
    bundles = []
    for peer in chosen:
        path = args.out / f"{peer}.rotation"
        write_secret(path, RotationBundle.create(rotated, peer, issued_at=now), overwrite=True)
        bundles.append(str(path))
    commit_rotation(rotated, args.owner_dir)
    return {"clade": owner.clade_name, "clade_id": owner.clade_id, "epoch": rotated.key_epoch,
            "previous_epoch": owner.key_epoch, "bundles": bundles, "left_out": left_out,
            "seconds": round(time.monotonic() - started, 3)}


def _reload_daemon(data: DataDir) -> dict[str, Any] | None:
    """Ask a daemon running on this data dir to reload its clade keys (None: none runs)."""
    return backend_for(data).reload_keys()


@renders(render.joined)
def cmd_join(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    identity = data.load_identity()
    try:
        bundle = args.bundle.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read bundle {args.bundle}: {exc.strerror}") from None
    if is_rotation_bundle(bundle):
        return _join_rotation(args, data, identity, bundle)
    try:
        membership, epoch, clade_key = AdmissionBundle.open_epoch(bundle, identity, now=_now())
    except MembershipError as exc:
        raise UsageError(f"bundle {args.bundle} refused: {exc}") from None
    existing = data.load_membership() if data.membership_path.exists() else None
    if existing is not None and existing[0].clade_id != membership.clade_id and not args.force:
        raise UsageError(f"this golem already belongs to clade {existing[0].clade_name} ({existing[0].clade_id}); "
                         "pass --force to switch clades")
    ring = data.install_membership(membership, clade_key, epoch=epoch)
    cert = membership.certificate
    return {"clade": membership.clade_name, "clade_id": membership.clade_id, "peer_id": cert.peer_id,
            "generation": cert.generation, "not_after": cert.not_after, "key_epoch": ring.current.epoch,
            "reloaded": _reload_daemon(data) if existing is not None else None}


def _join_rotation(args: argparse.Namespace, data: DataDir, identity: Identity, bundle: bytes) -> dict[str, Any]:
    """Install a rotation bundle's key beside the ones held; a running daemon reloads them."""
    joined = data.load_membership()
    if joined is None:
        raise UsageError("a rotation bundle is for a member: join with an admission bundle first")
    membership = joined[0]
    try:
        epoch, clade_key = RotationBundle.open(bundle, identity, membership)
    except MembershipError as exc:
        raise UsageError(f"rotation bundle {args.bundle} refused: {exc}") from None
    ring, added = data.install_clade_key(epoch, clade_key)
    return {"clade": membership.clade_name, "clade_id": membership.clade_id, "peer_id": identity.peer_id,
            "rotation": True, "epoch": epoch, "added": added, "key_epoch": ring.current.epoch,
            "epochs": ring.epochs, "reloaded": _reload_daemon(data)}


@renders(render.keys_held)
def cmd_keys(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    dropped: list[int] = []
    if args.drop_before is not None:
        _, dropped = data.drop_keys_before(args.drop_before)
    joined = data.load_keys()
    if joined is None:
        raise UsageError("this golem has not joined a clade (clade join BUNDLE)")
    membership, ring = joined
    grace_ms = int(data.load_config().p2p.key_grace_s * 1000)
    keys = [{"epoch": k.epoch, "installed_ms": k.installed_ms, "current": k.epoch == ring.current.epoch,
             "gossip_until_ms": ring.grace_ends_ms(k.epoch, grace_ms)} for k in ring.entries()]
    return {"clade": membership.clade_name, "clade_id": membership.clade_id, "key_epoch": ring.current.epoch,
            "keys": keys, "dropped": dropped, "reloaded": _reload_daemon(data) if dropped else None}


def _x25519_recipient(text: str) -> bytes:
    if text.startswith("12D3KooW"):
        try:
            return bytes(nacl.signing.VerifyKey(public_key_of(text)).to_curve25519_public_key())
        except InvalidPeerId as exc:
            raise UsageError(f"--recipient: {exc}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise UsageError(f"--recipient {text!r}: expected a peer id or 64 hex characters (an X25519 public key)")
    return key


@renders(render.backup_written)
def cmd_backup(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    identity = data.load_identity()
    config = data.load_config()
    clade_keys, publics, names = default_recipients(data, share_with_clade=config.backup.share_with_clade)
    for text in args.recipient:
        publics.append(_x25519_recipient(text))
        names.append(text)
    if not clade_keys and not publics:
        raise UsageError("this golem has not joined a clade: pass --recipient PEER_ID (or an X25519 key) "
                         "so that someone can decrypt the backup")
    report = create_backup(data, out=args.out, clade_keys=clade_keys, x25519_recipients=publics,
                           recipient_names=names, golem=identity.peer_id, include_identity=args.include_identity,
                           keep=config.backup.keep if args.out is None else None)
    doc = report_json(report)
    if args.push:
        styx = config.styx
        if not styx.url:
            raise UsageError("--push needs [styx] url (or CLADE_STYX__URL)")
        try:  # charged and capped in the store's ledger, like a daemon's upload
            with data.open_store(identity=identity) as store:
                doc["styx"] = push_metered(store, styx, Path(str(doc["path"])), peer=identity.peer_id,
                                           now_ms=wall_clock_ms())
        except VaultPushError as exc:
            raise DaemonError(str(exc)) from None
    return doc


def _vault_keys(args: argparse.Namespace, data: DataDir) -> VaultKeys:
    if args.owner_dir is not None:
        owner = OwnerKey.load(args.owner_dir)
        return VaultKeys(clade_key=owner.clade_key, x25519=owner.x25519_private_key(),
                         clade_keys=tuple(owner_epoch_keys(args.owner_dir, owner)))
    if args.clade_key is not None:
        return VaultKeys(clade_key=read_secret(args.clade_key, CLADE_KEY_BYTES, "clade key"))
    if args.identity_key is not None:
        return VaultKeys(x25519=Identity.load(args.identity_key).x25519_private_key())
    joined = data.load_keys()
    held = joined[1].all_keys() if joined is not None else (
        [read_secret(data.clade_key_path, CLADE_KEY_BYTES, "clade key")] if data.clade_key_path.exists() else [])
    x25519 = data.load_identity().x25519_private_key() if data.identity_path.exists() else None
    if not held and x25519 is None:
        raise UsageError("no key to decrypt with: pass --owner-dir, --clade-key or --identity-key")
    # every epoch this golem still holds: a backup from before a rotation opens with its old key
    return VaultKeys(clade_key=held[0] if held else None, x25519=x25519, clade_keys=tuple(held[1:]))


@renders(render.backup_verified)
def cmd_backup_verify(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    report = verify_backup(args.file, _vault_keys(args, data))
    return {"file": str(args.file), "ok": True, "golem": report.golem, "created_ms": report.created_ms,
            "files": report.files, "bytes": report.bytes}


@renders(render.restored)
def cmd_restore(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    keys = _vault_keys(args, data)
    if args.as_successor:
        return _restore_as_successor(args, data, keys)
    report = restore_backup(args.file, data, keys, force=args.force)
    return {"file": str(args.file), "data_dir": str(report.target), "golem": report.golem,
            "created_ms": report.created_ms, "files": report.files, "bytes": report.bytes, "kept": report.kept}


def _restore_as_successor(args: argparse.Namespace, data: DataDir, keys: VaultKeys) -> dict[str, Any]:
    """Boot from a predecessor's backup, knowledge only: this golem keeps its identity and
    membership; the testament's selection (the germline, ≤ 2,048 entries: bequest.successor_document)
    is inherited at the first generation's discount."""
    if daemon_is_live(data):
        raise UsageError(f"a daemon is running on {data.root}; stop it before restoring")
    joined = data.load_membership()
    if joined is None:
        raise UsageError("join the clade first (`clade join BUNDLE`): a successor inherits as a member")
    membership, _ = joined
    identity = data.load_identity()
    with tempfile.TemporaryDirectory(prefix=".successor-", dir=data.root) as tmp:
        header, db = extract_grimoire(args.file, keys, Path(tmp))
        if header.golem == identity.peer_id:
            raise UsageError("this backup is this golem's own: restore it without --as-successor")
        with Grimoire.open(db) as old:
            doc = successor_document(old, golem=header.golem, clade_id=membership.clade_id, now_ms=wall_clock_ms())
        with data.open_store(identity=identity) as store:
            report = inherit(store, doc, clade_id=membership.clade_id, local_replica=identity.peer_id,
                             now_ms=wall_clock_ms())
    return {"file": str(args.file), "data_dir": str(data.root), "golem": header.golem,
            "created_ms": header.created_ms, "entries": report.entries, "applied_ops": report.applied_ops,
            "as_successor": True}
