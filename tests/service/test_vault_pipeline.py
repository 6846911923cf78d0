"""The threaded vault pipeline: the same file format both ways (a golden file from the
serial code, old-path files restored, new files read by the serial reader), and a failure
in any stage — a full disk, a tampered chunk, a failing fsync, garbage after decryption —
reaching the caller as the same error as before, promptly, with no thread left running."""

from __future__ import annotations

import errno
import io
import json
import os
import random
import tarfile
import threading
from pathlib import Path

import pytest
import zstandard

from crypto.vault import CHUNK_BYTES, DecryptingReader, EncryptingWriter, VaultError, VaultKeys
from daemon.datadir import DataDir
from daemon.grimoire import read_playbook, write_playbook
from daemon.service import backup as backup_module
from daemon.service.backup import MANIFEST, create_backup, restore_backup, verify_backup
from daemon.service.pipeline import ReadStage, Stages, WriteStage, live_stage_threads
from tests.helpers.vault import CLADE_KEY, backup_of, chunk_offsets, contents

GOLDEN = Path(__file__).parent / "data" / "golden-v1.clade-vault"
GOLDEN_GOLEM = "12D3KooWLGpZhYjqoNH6pzoEBtjv2C8VvaXVHVoQzo6mFuQ9A1Ga"
KEYS = VaultKeys(clade_key=CLADE_KEY)


@pytest.fixture
def bulky(tmp_path: Path) -> DataDir:
    """A data dir with 3 MiB of incompressible data in the episode table: ~50 chunks."""
    data = DataDir(tmp_path / "bulky")
    data.init()
    bulk = data.episodes_path / "episodes.lance" / "data" / "bulk.bin"
    bulk.parent.mkdir(parents=True, exist_ok=True)
    bulk.write_bytes(random.Random(3).randbytes(3 * 2**20))
    write_playbook(data.playbook_path, "# PLAYBOOK\n\n- the pipeline keeps the format\n")
    return data


def no_stage_threads() -> bool:
    return live_stage_threads() == []


# -- the format, both ways -----------------------------------------------------------------


def test_golden_file_from_the_serial_code_verifies_and_restores(tmp_path: Path) -> None:
    """tests/service/data/golden-v1.clade-vault was written by create_backup before the pipeline
    (12 entries, 5 episodes, a PLAYBOOK; clade key bytes(range(32)))."""
    report = verify_backup(GOLDEN, KEYS)
    assert (report.golem, report.files) == (GOLDEN_GOLEM, 9)
    target = DataDir(tmp_path / "from-golden")
    restore_backup(GOLDEN, target, KEYS)
    assert read_playbook(target.playbook_path) == "# PLAYBOOK\n\n- never chase a depeg\n"
    with target.open_store() as store:
        assert len(store.list_entries(limit=100)) == 12
    assert len(list(target.open_episodes().scan(limit=None))) == 5
    assert no_stage_threads()


def serial_read(path: Path) -> dict[str, bytes]:
    """Every member of a backup, read the way the code before the pipeline read it."""
    members: dict[str, bytes] = {}
    with path.open("rb") as fh:
        reader = DecryptingReader(fh, KEYS)
        stream = zstandard.ZstdDecompressor().stream_reader(reader, read_across_frames=True)  # type: ignore[arg-type]
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                extracted = tar.extractfile(member)
                if extracted is not None:
                    members[member.name] = extracted.read()
        reader.drain()
        assert reader.finished
    return members


def test_pipelined_backup_reads_with_the_serial_reader(bulky: DataDir) -> None:
    path = backup_of(bulky)
    members = serial_read(path)
    assert members["episodes/episodes.lance/data/bulk.bin"] == random.Random(3).randbytes(3 * 2**20)
    assert members["PLAYBOOK.md"] == bulky.playbook_path.read_bytes()
    assert json.loads(members[MANIFEST])["golem"] == bulky.load_identity().peer_id
    assert len(chunk_offsets(path.read_bytes())) > 40


def serial_backup(data: DataDir, out: Path) -> None:
    """A backup written the way create_backup wrote it before the pipeline: tarfile "w|"
    into zstd's stream_writer into EncryptingWriter, all on the caller's thread."""
    golem = data.load_identity().peer_id
    with out.open("wb") as raw:
        vault = EncryptingWriter(raw, golem=golem, created_ms=1, clade_keys=[CLADE_KEY], x25519_recipients=[])
        compressor = zstandard.ZstdCompressor(level=3).stream_writer(vault, closefd=False)  # type: ignore[arg-type]
        with tarfile.open(fileobj=compressor, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            blob = json.dumps({"format": 1, "golem": golem, "created_ms": 1}).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(blob)
            tar.addfile(info, fileobj=io.BytesIO(blob))
            for path in sorted(p for p in data.root.rglob("*") if p.is_file()):
                if path.name not in ("identity.key", "clade.key"):
                    tar.add(path, arcname=str(path.relative_to(data.root)), recursive=False)
        compressor.flush(zstandard.FLUSH_FRAME)
        compressor.close()  # type: ignore[no-untyped-call]
        vault.close()


def test_serial_backup_verifies_and_restores_through_the_pipeline(bulky: DataDir, tmp_path: Path) -> None:
    path = tmp_path / "serial.clade-vault"
    serial_backup(bulky, path)
    assert verify_backup(path, KEYS).golem == bulky.load_identity().peer_id
    target = DataDir(tmp_path / "restored")
    restore_backup(path, target, KEYS)
    bulk = "episodes/episodes.lance/data/bulk.bin"
    assert (target.root / bulk).read_bytes() == (bulky.root / bulk).read_bytes()
    assert contents(target)[0] == contents(bulky)[0]
    assert no_stage_threads()


# -- a failing stage stops the others -------------------------------------------------------


def test_disk_full_while_sealing_stops_every_stage(bulky: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails on the sealing thread reaches the caller as that OSError; the tar
    producer stops within a few blocks, nothing is left behind, no thread runs."""
    real_write = backup_module._CountingSink.write
    handed: list[int] = []
    real_stage_write = WriteStage.write

    def full_disk(self: backup_module._CountingSink, data: bytes) -> int:
        if self.bytes > 512 * 1024:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    def counting(self: WriteStage, data: bytes | bytearray | memoryview) -> int:
        if threading.current_thread() is threading.main_thread():
            handed.append(len(data))
        return real_stage_write(self, data)

    (bulky.episodes_path / "episodes.lance" / "data" / "more.bin").write_bytes(os.urandom(16 * 2**20))
    monkeypatch.setattr(backup_module._CountingSink, "write", full_disk)
    monkeypatch.setattr(WriteStage, "write", counting)
    with pytest.raises(OSError) as raised:
        backup_of(bulky)
    assert raised.value.errno == errno.ENOSPC
    assert no_stage_threads()
    # of 19 MiB, the producer handed over what the channels hold after the failing write, no more
    assert sum(handed) < 6 * 2**20, f"the producer went on after the disk filled ({sum(handed)} bytes)"
    assert not list(bulky.backups_path.iterdir())  # neither the backup nor its .partial


def test_tampered_chunk_fails_restore_with_the_serial_error(bulky: DataDir, tmp_path: Path) -> None:
    path = backup_of(bulky)
    sealed = bytearray(path.read_bytes())
    sealed[chunk_offsets(bytes(sealed))[20] + 100] ^= 0x08
    path.write_bytes(bytes(sealed))
    with path.open("rb") as fh, pytest.raises(VaultError) as serial:
        DecryptingReader(fh, KEYS).drain()
    assert "chunk 20 failed authentication" in str(serial.value)
    target = DataDir(tmp_path / "existing")
    target.init()
    before = sorted(p.name for p in target.root.iterdir())
    for call in (lambda: verify_backup(path, KEYS), lambda: restore_backup(path, target, KEYS, force=True)):
        with pytest.raises(VaultError) as piped:
            call()
        assert str(piped.value) == str(serial.value)
        assert no_stage_threads()
    assert sorted(p.name for p in target.root.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if ".restore-" in p.name]


def test_failing_fsync_during_restore_leaves_nothing(bulky: DataDir, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = backup_of(bulky)
    real = backup_module._fsync_path

    def failing(p: Path) -> None:
        if p.name == "bulk.bin":
            raise OSError(errno.EIO, "Input/output error")
        real(p)

    monkeypatch.setattr(backup_module, "_fsync_path", failing)
    target = DataDir(tmp_path / "target")
    with pytest.raises(OSError) as raised:
        restore_backup(path, target, KEYS)
    assert raised.value.errno == errno.EIO
    assert not target.root.exists()
    assert not [p for p in tmp_path.iterdir() if ".restore-" in p.name]
    assert no_stage_threads()


def test_garbage_after_decryption_is_not_a_valid_archive(tmp_path: Path) -> None:
    path = tmp_path / "garbage.clade-vault"
    with path.open("wb") as fh, EncryptingWriter(fh, golem="g", created_ms=1, clade_keys=[CLADE_KEY],
                                                 x25519_recipients=[]) as vault:
        vault.write(random.Random(1).randbytes(5 * CHUNK_BYTES))
    with pytest.raises(VaultError, match="not a valid archive"):
        verify_backup(path, KEYS)
    assert no_stage_threads()


# -- the stages themselves ------------------------------------------------------------------


class Boom(Exception):
    pass


def test_write_stage_error_reaches_the_producer_within_a_few_blocks() -> None:
    seen: list[int] = []

    def step(block: bytes) -> None:
        seen.append(len(block))
        if len(seen) == 3:
            raise Boom("third block")

    with Stages() as stages:
        stage = stages.add(WriteStage("test-write", step, lambda: None, block_bytes=1024, depth=2))
        writes = 0
        with pytest.raises(Boom, match="third block"):
            while True:
                stage.write(b"x" * 1024)
                writes += 1
        assert writes <= 3 + 2 + 1  # the failing block, the channel's depth, one in hand
    assert len(seen) == 3
    assert no_stage_threads()


def test_downstream_error_crosses_two_stages_as_the_same_exception() -> None:
    error = OSError(errno.ENOSPC, "No space left on device")

    def sink(block: bytes) -> None:
        raise error

    with Stages() as stages:
        last = stages.add(WriteStage("test-last", sink, lambda: None, block_bytes=16))
        first = stages.add(WriteStage("test-first", last.write, last.close, block_bytes=16))
        with pytest.raises(OSError) as raised:
            for _ in range(1000):
                first.write(b"y" * 16)
            first.close()
        assert raised.value is error
    assert no_stage_threads()


def test_read_stage_delivers_blocks_before_the_error_then_the_error() -> None:
    blocks = iter([b"a" * 10, b"b" * 10, b"c" * 10])

    def produce() -> bytes:
        block = next(blocks, None)
        if block is None:
            raise Boom("after three")
        return block

    with Stages() as stages:
        stage = stages.add(ReadStage("test-read", produce, depth=1))
        assert stage.read(15) == b"a" * 10  # at most one block per read
        assert stage.read(5) == b"b" * 5
        assert stage.read(100) == b"b" * 5  # the rest of the block in hand
        assert stage.read(100) == b"c" * 10
        with pytest.raises(Boom, match="after three"):
            stage.read(100)
    assert no_stage_threads()


def test_abandoned_read_stage_is_stopped_and_joined() -> None:
    """A consumer that stops early (an exception in tar) leaves no producer blocked."""
    with Stages() as stages:
        stage = stages.add(ReadStage("test-endless", lambda: b"z" * 4096, depth=2))
        assert stage.read(4096) == b"z" * 4096
    assert no_stage_threads()


def test_backup_restore_round_trip_leaves_no_thread(bulky: DataDir, tmp_path: Path) -> None:
    report = create_backup(bulky, clade_keys=[CLADE_KEY], x25519_recipients=[], recipient_names=[],
                           golem=bulky.load_identity().peer_id)
    assert no_stage_threads()
    target = DataDir(tmp_path / "again")
    restore_backup(report.path, target, KEYS)
    assert no_stage_threads()
    assert contents(target) == contents(bulky)
    assert os.stat(target.root).st_mode & 0o777 == 0o700
