"""Vault backups: a consistent snapshot of the data dir → tar → zstd → `crypto.vault`.

Backup never stops writers: SQLite's online backup API copies a consistent image of
grimoire.db; the LanceDB table is captured at one version (its manifests are listed
first; data files are immutable once a manifest names them, so files written after that
are unreferenced extras); PLAYBOOK.md and config.toml are small files replaced atomically.

The work runs as a pipeline of threads (`daemon.service.pipeline`): tar and the file reads
on the calling thread, zstd on a second, secretstream and the file writes on a third —
zstd and libsodium release the GIL, so they overlap on separate cores. Memory use is
bounded by a few blocks in flight between the stages plus zstd's window, whatever the
store's size.

Restore decrypts, decompresses and unpacks into a staging directory next to the target
(decrypt and decompress each on a thread of their own, each extracted file fsynced by a
fourth while the next one is written), checks everything (every chunk authenticated up
to the final one, manifest, SQLite integrity), and only then moves it into place.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, BinaryIO, TypedDict, cast

import zstandard

from crypto import CryptoError, KeyRing
from crypto.keyfile import read_secret_file
from crypto.keyring import MAX_KEYRING_BYTES
from crypto.vault import DecryptingReader, EncryptingWriter, VaultError, VaultHeader, VaultKeys
from daemon.datadir import DataDir
from daemon.errors import DaemonError, UsageError
from daemon.grimoire.store import copy_database, wall_clock_ms
from daemon.presence import recorded_pid
from daemon.service.pipeline import BLOCK_BYTES, ReadStage, Stages, WriteStage

__all__ = ["BackupFile", "BackupReport", "RestoreReport", "backup_files", "create_backup", "restore_backup",
           "verify_backup"]

MANIFEST = "clade-backup.json"
SUFFIX = ".clade-vault"
_SECRET_FILES = ("identity.key", "clade.key", "clade.keys")
_PLAIN_FILES = ("PLAYBOOK.md", "config.toml", "membership.cert", "revocations.bin")
SYNC_BYTES = 16 * 2**20


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    bytes: int
    files: int
    entries_db_bytes: int
    episodes_version: int | None
    recipients: list[str]
    seconds: float
    pruned: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RestoreReport:
    golem: str
    created_ms: int
    files: int
    bytes: int
    target: Path | None
    kept: list[str] = field(default_factory=list)


def _lance_snapshot(episodes: Path) -> tuple[list[Path], int | None]:
    """Files that make up the episode table at its current version, and that version."""
    table = episodes / "episodes.lance"
    versions = table / "_versions"
    if not versions.is_dir():
        return [], None
    manifests = sorted(versions.glob("*.manifest"))  # listed first: this fixes the version
    if not manifests:
        return [], None
    # V2 manifest names count down from u64::MAX; V1 names count up. Either way, decode.
    numbers = [int(m.stem) for m in manifests]
    latest = max((2**64 - 1 - n) if n > 2**63 else n for n in numbers)
    files = [p for p in table.rglob("*") if p.is_file() and p.parent != versions]
    return files + manifests, latest


class _CountingSink:
    """The backup file as the sealing stage sees it: counts the bytes and, every
    `SYNC_BYTES`, asks `sync` (a stage of its own) to fdatasync what is written so far —
    the disk writes then overlap compression, and the final fsync finds little left."""

    def __init__(self, fh: BinaryIO, sync: WriteStage | None = None) -> None:
        self.fh = fh
        self.bytes = 0
        self._sync = sync
        self._unsynced = 0

    def write(self, data: bytes) -> int:
        self.fh.write(data)
        self.bytes += len(data)
        self._unsynced += len(data)
        if self._sync is not None and self._unsynced >= SYNC_BYTES:
            self.fh.flush()
            self._sync.write(b"s")
            self._unsynced = 0
        return len(data)

    def flush(self) -> None:
        self.fh.flush()


def _copy_store(db_path: Path, target: Path) -> None:
    """A consistent copy of the store at `db_path` into `target`, over a read-only connection
    opened for it (consistent even while another process writes)."""
    source = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        copy_database(source, target)
    finally:
        source.close()


def create_backup(
    data: DataDir,
    *,
    out: Path | None = None,
    clade_keys: list[bytes],
    x25519_recipients: list[bytes],
    recipient_names: list[str],
    golem: str,
    include_identity: bool = False,
    keep: int | None = None,
    now_ms: int | None = None,
    copy_store: Callable[[Path], None] | None = None,
) -> BackupReport:
    """Write an encrypted backup of `data`; returns where and how big. `now_ms`: when it is
    made (its name, manifest and file times: the daemon passes its clock's; default the wall clock).
    `copy_store(path)` writes a consistent copy of the store at `path` (the daemon's copies
    through a read connection it holds: `Grimoire.copy_to`); by default a read-only connection
    of its own is opened for it and closed (the CLI's backup of a stopped golem).

    Raises `VaultError` without recipients, `DaemonError` if the store cannot be read (raised
    from SQLite's error, so `storage_refusal` still sees a full or read-only disk), `OSError`
    if the backup cannot be written; nothing partial is left either way.
    """
    started = time.monotonic()
    now_ms = wall_clock_ms() if now_ms is None else now_ms
    if out is None:
        data.backups_path.mkdir(mode=0o700, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms / 1000))
        out = data.backups_path / f"backup-{golem[-8:]}-{stamp}-{now_ms % 1000:03d}{SUFFIX}"
    out = out.resolve()
    tmp = out.with_name(f".{out.name}.partial")
    files = 0
    with tempfile.TemporaryDirectory(dir=data.root, prefix=".backup-") as staging:
        snapshot_db = Path(staging) / "grimoire.db"
        try:
            (copy_store or partial(_copy_store, data.db_path))(snapshot_db)
        except sqlite3.Error as exc:
            # `from exc`: a full or read-only disk stays recognisable (the API answers 507/503)
            raise DaemonError(f"cannot snapshot {data.db_path}: {exc}") from exc
        lance_files, lance_version = _lance_snapshot(data.episodes_path)
        manifest = {
            "format": 1, "golem": golem, "created_ms": now_ms, "episodes_version": lance_version,
            "includes_identity": include_identity,
        }
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as raw, Stages() as stages:
                sync = stages.add(WriteStage("sync", lambda _: os.fdatasync(fd), lambda: None, block_bytes=1,
                                             depth=64))
                sink = _CountingSink(raw, sync)
                vault = EncryptingWriter(cast(BinaryIO, sink), golem=golem, created_ms=now_ms,
                                         clade_keys=clade_keys, x25519_recipients=x25519_recipients)
                compress = _compress_stages(stages, vault)
                files = _write_tar(compress, data, snapshot_db, lance_files, manifest, now_ms, include_identity)
                compress.close()  # the frame ended, the final chunk sealed, everything handed to `raw`
                sync.close()
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    pruned = _prune(out.parent, keep) if keep else []
    return BackupReport(path=out, bytes=sink.bytes, files=files,
                        entries_db_bytes=data.db_path.stat().st_size if data.db_path.exists() else 0,
                        episodes_version=lance_version, recipients=recipient_names,
                        seconds=time.monotonic() - started, pruned=pruned)


def _compress_stages(stages: Stages, vault: EncryptingWriter) -> WriteStage:
    """zstd level 3 on one thread, feeding a second that seals and writes; returns the first
    (its `close` ends the frame, then waits for the final chunk to be sealed and written)."""
    seal = stages.add(WriteStage("seal", vault.write, vault.close))
    compressor = zstandard.ZstdCompressor(level=3).compressobj()

    def step(block: bytes) -> None:
        if out := compressor.compress(block):
            seal.write(out)

    def end() -> None:
        seal.write(compressor.flush())
        seal.close()

    return stages.add(WriteStage("compress", step, end))


def _write_tar(sink: WriteStage, data: DataDir, snapshot_db: Path, lance_files: list[Path],
               manifest: dict[str, object], now_ms: int, include_identity: bool) -> int:
    """The archive's members into `sink` (mode "w": tarfile writes straight to it, no
    stream buffer; `sink.tell()` is all it needs). Returns how many files it holds."""
    files = 0
    with tarfile.open(fileobj=cast(IO[bytes], sink), mode="w", format=tarfile.PAX_FORMAT) as tar:
        # each file read in blocks the size the stage hands on (not in typeshed's TarFile)
        tar.copybufsize = BLOCK_BYTES  # type: ignore[attr-defined]
        blob = json.dumps(manifest, indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(blob), now_ms // 1000, 0o644
        tar.addfile(info, fileobj=io.BytesIO(blob))
        tar.add(snapshot_db, arcname="grimoire.db")
        files += 2
        for path in lance_files:
            try:
                tar.add(path, arcname=str(path.relative_to(data.root)), recursive=False)
                files += 1
            except FileNotFoundError:
                continue  # an unreferenced file removed meanwhile
        names = list(_PLAIN_FILES) + (list(_SECRET_FILES) if include_identity else [])
        for name in names:
            if (data.root / name).exists():
                tar.add(data.root / name, arcname=name)
                files += 1
    return files


class BackupFile(TypedDict):
    name: str
    bytes: int
    at_ms: int


def backup_files(directory: Path) -> list[BackupFile]:
    """The backups `directory` holds, oldest first: {name, bytes, at_ms} (`at_ms`: the file's
    mtime). A file pruned while listing is left out; a missing directory holds none."""
    files: list[BackupFile] = []
    for path in directory.glob(f"backup-*{SUFFIX}") if directory.is_dir() else ():
        try:
            st = path.stat()
        except OSError:  # pruned meanwhile
            continue
        files.append({"name": path.name, "bytes": st.st_size, "at_ms": int(st.st_mtime * 1000)})
    files.sort(key=lambda f: (f["at_ms"], f["name"]))
    return files


def default_recipients(data: DataDir, *, share_with_clade: bool = False) -> tuple[list[bytes], list[bytes], list[str]]:
    """(clade keys, X25519 publics, names) a backup is sealed to, once joined: the owner and this
    golem itself (its identity's X25519 key: `clade restore --identity-key`), and the clade key
    only when the operator asks (`[backup] share_with_clade`). A backup holds the golem's soma —
    private and sensitive entries, outcome rows, episodes, config.toml — and every member holds
    the clade key, a compromised one included: sealed to it, any sibling could read it. The
    heir inherits through the testament (sealed to the clade key and the owner), not the backup.
    Nothing joined: ([], [], [])."""
    joined = data.load_membership()
    if joined is None:
        return [], [], []
    membership, clade_key = joined
    own = bytes(data.load_identity().x25519_private_key().public_key)
    publics, names = [membership.owner_x25519_public_key(), own], ["owner", "this golem"]
    if share_with_clade:
        return [clade_key], publics, [f"clade {membership.clade_name}", *names]
    return [], publics, names


def report_json(report: BackupReport) -> dict[str, object]:
    return {"path": str(report.path), "bytes": report.bytes, "files": report.files,
            "episodes_version": report.episodes_version, "recipients": report.recipients,
            "seconds": round(report.seconds, 3), "pruned": report.pruned}


def _prune(directory: Path, keep: int) -> list[str]:
    backups = sorted(directory.glob(f"backup-*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
    removed = []
    for old in backups[:-keep] if len(backups) > keep else []:
        old.unlink()
        removed.append(str(old))
    return removed


class _Plaintext:
    """The decrypted, decompressed stream of a backup, made on two threads ahead of tar."""

    def __init__(self, reader: DecryptingReader, stream: ReadStage, stages: Stages) -> None:
        self.reader = reader
        self.stream = stream
        self._stages = stages

    def finish(self) -> None:
        """Authenticate everything up to the final chunk (tar stops reading at its end
        marker): read the stream to its end, which takes the decrypting stage to the final
        chunk; then, with both threads gone, make sure of it."""
        self.stream.drain()
        self._stages.close()
        self.reader.drain()  # nothing left to read unless zstd stopped short of the end


@contextmanager
def _open_plaintext(path: Path, keys: VaultKeys) -> Iterator[tuple[VaultHeader, _Plaintext, tarfile.TarFile]]:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UsageError(f"cannot read backup {path}: {exc.strerror}") from None
    with fh:
        reader = DecryptingReader(fh, keys)  # the header and key unwrap: errors raised here, before any thread
        with Stages() as stages:
            opened = stages.add(ReadStage("open", lambda: reader.read(BLOCK_BYTES)))
            decompressor = zstandard.ZstdDecompressor().stream_reader(cast(IO[bytes], opened), read_size=BLOCK_BYTES,
                                                                      read_across_frames=True)
            inflated = stages.add(ReadStage("inflate", lambda: decompressor.read(BLOCK_BYTES)))
            try:
                with tarfile.open(fileobj=cast(IO[bytes], inflated), mode="r|") as tar:
                    # files extracted in blocks the size the stages pass on (not in typeshed's TarFile)
                    tar.copybufsize = BLOCK_BYTES  # type: ignore[attr-defined]
                    yield reader.header, _Plaintext(reader, inflated, stages), tar
            except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
                raise VaultError(f"backup content is not a valid archive ({exc})") from None


def _finish(plaintext: _Plaintext) -> None:
    """Authenticate everything up to the final chunk (tar stops reading at its end marker)."""
    plaintext.finish()


def verify_backup(path: Path, keys: VaultKeys) -> RestoreReport:
    """Decrypt and check every byte of a backup; writes nothing. Raises `VaultError`."""
    files = size = 0
    manifest: dict[str, object] | None = None
    with _open_plaintext(path, keys) as (header, plaintext, tar):
        for member in tar:
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                if member.name == MANIFEST:
                    body = extracted.read(64 * 1024)
                    manifest = json.loads(body)
                    size += len(body)
                else:  # stream through in chunks: constant memory whatever the file size
                    while block := extracted.read(1 << 20):
                        size += len(block)
                files += 1
        _finish(plaintext)
    _check_manifest(manifest, header)
    return RestoreReport(golem=header.golem, created_ms=header.created_ms, files=files, bytes=size, target=None)


def _check_manifest(manifest: dict[str, object] | None, header: VaultHeader) -> None:
    if manifest is None or manifest.get("golem") != header.golem:
        raise VaultError("backup has no valid manifest (not a clade backup, or damaged)")


def _daemon_holds(data: DataDir) -> int | None:
    return recorded_pid(data.run_path)


def restore_backup(path: Path, target: DataDir, keys: VaultKeys, *, force: bool = False) -> RestoreReport:
    """Verify a backup completely, then move its contents into `target` atomically.

    Refuses a non-empty target without `force`, and a target a running daemon holds.
    """
    pid = _daemon_holds(target)
    if pid is not None:
        raise UsageError(f"a clade daemon (pid {pid}) is running on {target.root}; stop it before restoring")
    if target.root.exists() and any(target.root.iterdir()) and not force:
        raise UsageError(f"{target.root} is not empty; pass --force to replace its contents")
    root = target.root.resolve()
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.restore-"))
    try:
        files = size = 0
        manifest: dict[str, object] | None = None
        synced: list[Path] = []
        with Stages() as background:
            # each extracted file is fsynced on a thread of its own while the next is written
            fsync = background.add(WriteStage("fsync", lambda name: _fsync_path(Path(os.fsdecode(name))),
                                              lambda: None, block_bytes=1, depth=256))
            with _open_plaintext(path, keys) as (header, plaintext, tar):
                for member in tar:
                    tar.extract(member, staging, filter="data")
                    if member.isfile():
                        files += 1
                        size += member.size
                        if member.name != MANIFEST and not os.path.isabs(member.name):  # else the walk does it
                            synced.append(staging / member.name)
                            fsync.write(os.fsencode(synced[-1]))
                _finish(plaintext)
            manifest_path = staging / MANIFEST
            if manifest_path.exists():
                manifest = json.loads(manifest_path.read_text())
                manifest_path.unlink()
            _check_manifest(manifest, header)
            for name in _SECRET_FILES:
                if (staging / name).exists():
                    os.chmod(staging / name, 0o600)
            check = sqlite3.connect(staging / "grimoire.db")
            try:
                verdict = check.execute("PRAGMA integrity_check").fetchone()[0]
            finally:
                check.close()
            if verdict != "ok":
                raise VaultError(f"restored grimoire.db fails its integrity check: {verdict}")
            fsync.close()  # before anything is renamed; raises the first fsync error
        kept = _keep_local_identity(staging, root)
        os.chmod(staging, 0o700)
        # everything durable before the old data dir is replaced: what the thread did not
        # fsync, or what changed since (modes, the database the check opened), and every directory
        touched = {staging / name for name in (*_SECRET_FILES, "grimoire.db")}
        _fsync_tree(staging, skip=set(synced) - touched)
        _swap_into_place(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RestoreReport(golem=header.golem, created_ms=header.created_ms, files=files, bytes=size, target=root,
                         kept=kept)


def extract_grimoire(path: Path, keys: VaultKeys, into: Path) -> tuple[VaultHeader, Path]:
    """Verify a backup completely and extract only its grimoire.db into the directory `into`
    (what `clade restore --as-successor` inherits from). Raises `VaultError` or `UsageError`."""
    manifest: dict[str, object] | None = None
    db: Path | None = None
    with _open_plaintext(path, keys) as (header, plaintext, tar):
        for member in tar:
            if member.isfile() and member.name == MANIFEST:
                extracted = tar.extractfile(member)
                assert extracted is not None
                manifest = json.loads(extracted.read(64 * 1024))
            elif member.isfile() and member.name == "grimoire.db":
                tar.extract(member, into, filter="data")
                db = into / "grimoire.db"
        _finish(plaintext)
    _check_manifest(manifest, header)
    if db is None:
        raise VaultError(f"{path} holds no grimoire.db: not a clade backup")
    return header, db


def _keep_local_identity(staging: Path, root: Path) -> list[str]:
    """Carry the target's own identity and membership over when the backup has none.

    A successor restores its predecessor's knowledge into a data dir it has already
    initialised and joined: it must stay itself.
    """
    kept = []
    for name in (*_SECRET_FILES, "membership.cert", "revocations.bin", "config.toml"):
        if (root / name).exists() and not (staging / name).exists():
            shutil.copy2(root / name, staging / name)
            kept.append(name)
    if "identity.key" in kept and (staging / "membership.cert").exists() and "membership.cert" not in kept:
        # the backup's membership certificate names the predecessor, not this golem
        os.replace(staging / "membership.cert", staging / "membership.cert.predecessor")
    if _merge_keyrings(staging, root) and "clade.keys" not in kept:
        kept.append("clade.keys")
    return kept


def _merge_keyrings(staging: Path, root: Path) -> bool:
    """Keep the clade keys the golem holds now when restoring a backup from before a key
    rotation: the restored keyring is the union of both (same clade), and `clade.key` its
    newest. True if the golem's keys were merged in."""
    restored, ours = staging / "clade.keys", root / "clade.keys"
    if not restored.exists():
        return False
    try:
        ring = KeyRing.from_bytes(read_secret_file(restored, MAX_KEYRING_BYTES, "clade keyring"))
        merged = False
        if ours.exists() and not ours.samefile(restored):
            ring = ring.merged(KeyRing.from_bytes(read_secret_file(ours, MAX_KEYRING_BYTES, "clade keyring")))
            merged = True
    except CryptoError:
        return False  # another clade's keys, or unreadable: the backup is restored as it is
    DataDir(staging).save_keyring(ring)
    return merged


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path, skip: set[Path] | None = None) -> None:
    """fsync every file under `root` but those in `skip` (already durable), then every
    directory (children before parents)."""
    for directory, _, names in os.walk(root, topdown=False):
        for name in names:
            if skip is None or Path(directory) / name not in skip:
                _fsync_path(Path(directory) / name)
        _fsync_path(Path(directory))


def _swap_into_place(staging: Path, root: Path) -> None:
    if not root.exists():
        os.rename(staging, root)
        _fsync_path(root.parent)
        return
    old = root.with_name(f".{root.name}.replaced-{wall_clock_ms() // 1000}")
    os.rename(root, old)
    try:
        os.rename(staging, root)
    except BaseException:
        os.rename(old, root)
        raise
    _fsync_path(root.parent)  # the renames are durable before the old copy goes
    shutil.rmtree(old, ignore_errors=True)
