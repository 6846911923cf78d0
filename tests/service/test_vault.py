"""Vault backups: round trip, tamper evidence (every bit), truncation, reordering, wrong key,
constant memory on a 1 GiB store, and the CLI flows."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nacl.public
import pytest

from crdt import Kind
from crypto.vault import CHUNK_BYTES, DecryptingReader, EncryptingWriter, VaultError, VaultKeys
from daemon.datadir import DataDir
from daemon.errors import UsageError
from daemon.grimoire import Episode, NewEntry, write_playbook
from daemon.service.backup import create_backup, restore_backup, verify_backup
from tests.helpers.cli import CliRunner, clade_subprocess
from tests.helpers.seed import seed
from tests.helpers.vault import _ABYTES, CLADE_KEY, backup_of, chunk_offsets, contents

GOLEM = "12D3KooWTestGolem"


def seal(plain: bytes, *, clade_keys: list[bytes] | None = None, x25519: list[bytes] | None = None) -> bytes:
    sink = io.BytesIO()
    with EncryptingWriter(sink, golem=GOLEM, created_ms=1, clade_keys=clade_keys if clade_keys is not None
                          else [CLADE_KEY], x25519_recipients=x25519 or []) as writer:
        writer.write(plain)
    return sink.getvalue()


def unseal(data: bytes, keys: VaultKeys | None = None) -> bytes:
    reader = DecryptingReader(io.BytesIO(data), keys or VaultKeys(clade_key=CLADE_KEY))
    out = reader.read()
    assert reader.finished
    return out


@pytest.mark.parametrize("size", [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES + 5])
def test_stream_round_trip(size: int) -> None:
    plain = random.Random(size).randbytes(size)
    assert unseal(seal(plain)) == plain


def test_every_bit_flip_of_a_small_vault_is_detected() -> None:
    sealed = seal(b"a small secret grimoire snapshot" * 4)
    for bit in range(len(sealed) * 8):
        flipped = bytearray(sealed)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(VaultError):
            unseal(bytes(flipped))


def test_truncation_anywhere_is_detected() -> None:
    sealed = seal(os.urandom(4 * CHUNK_BYTES + 100))
    starts = chunk_offsets(sealed)
    assert len(starts) == 5
    cuts = set(starts) | {s + 1 for s in starts} | {s + CHUNK_BYTES // 2 for s in starts} | {len(sealed) - 1}
    cuts |= set(range(0, starts[0], 7))  # inside the header
    for cut in sorted(cuts):
        if cut >= len(sealed):
            continue
        with pytest.raises(VaultError):
            unseal(sealed[:cut])
    with pytest.raises(VaultError):
        unseal(sealed + b"\x00")  # read as part of the short final chunk: fails authentication
    full = seal(os.urandom(2 * CHUNK_BYTES))  # the final chunk is a full one
    with pytest.raises(VaultError, match="after its final chunk"):
        unseal(full + b"\x00")


def test_chunk_reordering_is_detected() -> None:
    sealed = seal(os.urandom(3 * CHUNK_BYTES + 10))
    starts = chunk_offsets(sealed)
    size = CHUNK_BYTES + _ABYTES
    chunks = [sealed[s:s + size] for s in starts]
    head = sealed[:starts[0]]
    for order in ([1, 0, 2, 3], [0, 2, 1, 3], [0, 1, 3, 2], [0, 0, 1, 2, 3], [0, 1, 2, 2, 3]):
        with pytest.raises(VaultError, match=r"authentication|truncated|final"):
            unseal(head + b"".join(chunks[i] for i in order))


def test_header_is_authenticated() -> None:
    """Changing a recipient the reader does not use still breaks authentication."""
    other = nacl.public.PrivateKey.generate()
    sealed = bytearray(seal(b"payload", x25519=[bytes(other.public_key)]))
    pos = sealed.index(bytes(other.public_key)) + 3
    sealed[pos] ^= 0x40
    with pytest.raises(VaultError):
        unseal(bytes(sealed))


def test_any_recipient_can_open_and_wrong_key_is_named() -> None:
    owner = nacl.public.PrivateKey.generate()
    sealed = seal(b"knowledge", x25519=[bytes(owner.public_key)])
    assert unseal(sealed, VaultKeys(x25519=owner)) == b"knowledge"
    assert unseal(sealed, VaultKeys(clade_key=CLADE_KEY)) == b"knowledge"
    with pytest.raises(VaultError, match="is a recipient of this backup"):
        unseal(sealed, VaultKeys(clade_key=secrets.token_bytes(32), x25519=nacl.public.PrivateKey.generate()))
    with pytest.raises(VaultError, match="not a clade vault"):
        unseal(b"PK\x03\x04 zip file")
    with pytest.raises(VaultError, match="at least one recipient"):
        seal(b"x", clade_keys=[])


# -- whole backups -------------------------------------------------------------------------


@pytest.fixture
def golem(tmp_path: Path) -> DataDir:
    data = DataDir(tmp_path / "golem")
    data.init()
    ident = data.load_identity()
    with data.open_store(identity=ident) as store:
        seed(store, [NewEntry(kind=Kind.WARNING, content=f"Warning {i}: pool {i} drains at dawn",
                             tags=(f"t{i % 3}",)) for i in range(40)], identity=ident)
        store.forget(store.list_entries(limit=1)[0].id)
    data.open_episodes().append([Episode(summary=f"episode {i}", observed_ms=1_000 + i,
                                         payload_json=json.dumps({"i": i})) for i in range(25)])
    write_playbook(data.playbook_path, "# PLAYBOOK\n\n- never chase a depeg\n")
    return data


def test_backup_restore_round_trip(golem: DataDir, tmp_path: Path) -> None:
    path = backup_of(golem)
    assert path.parent == golem.backups_path and path.stat().st_mode & 0o077 == 0
    report = verify_backup(path, VaultKeys(clade_key=CLADE_KEY))
    assert report.files >= 5
    target = DataDir(tmp_path / "restored")
    restore_backup(path, target, VaultKeys(clade_key=CLADE_KEY))
    assert contents(target) == contents(golem)
    assert not target.identity_path.exists()  # not included unless asked


def test_include_identity_restores_the_same_golem(golem: DataDir, tmp_path: Path) -> None:
    path = backup_of(golem, include_identity=True)
    target = DataDir(tmp_path / "same")
    restore_backup(path, target, VaultKeys(clade_key=CLADE_KEY))
    assert target.load_identity().peer_id == golem.load_identity().peer_id
    assert target.identity_path.stat().st_mode & 0o777 == 0o600


def test_successor_keeps_its_own_identity(golem: DataDir, tmp_path: Path) -> None:
    path = backup_of(golem, include_identity=False)
    successor = DataDir(tmp_path / "successor")
    successor.init()
    me = successor.load_identity().peer_id
    with pytest.raises(UsageError, match="not empty"):
        restore_backup(path, successor, VaultKeys(clade_key=CLADE_KEY))
    restore_backup(path, successor, VaultKeys(clade_key=CLADE_KEY), force=True)
    assert successor.load_identity().peer_id == me
    assert contents(successor)[0] == contents(golem)[0]


def test_backup_while_writing_is_consistent(golem: DataDir) -> None:
    """A backup taken while another connection holds an open write transaction."""
    import sqlite3

    writer = sqlite3.connect(golem.db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE entries SET access_count = access_count + 1")
    try:
        path = backup_of(golem)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    verify_backup(path, VaultKeys(clade_key=CLADE_KEY))


def test_sampled_bit_flips_of_a_backup_are_all_detected(golem: DataDir, tmp_path: Path) -> None:
    path = backup_of(golem)
    original = path.read_bytes()
    rng = random.Random(7)
    positions = rng.sample(range(len(original) * 8), min(2000, len(original) * 8))
    flipped_path = tmp_path / "flipped.clade-vault"
    for bit in positions:
        data = bytearray(original)
        data[bit // 8] ^= 1 << (bit % 8)
        flipped_path.write_bytes(bytes(data))
        with pytest.raises(VaultError):
            verify_backup(flipped_path, VaultKeys(clade_key=CLADE_KEY))


def test_failed_restore_leaves_target_untouched(golem: DataDir, tmp_path: Path) -> None:
    target = DataDir(tmp_path / "existing")
    target.init()
    before = sorted(p.name for p in target.root.iterdir())
    key = target.identity_path.read_bytes()
    path = backup_of(golem)
    broken = tmp_path / "broken.clade-vault"
    data = path.read_bytes()
    broken.write_bytes(data[: len(data) - 10])
    with pytest.raises(VaultError):
        restore_backup(broken, target, VaultKeys(clade_key=CLADE_KEY), force=True)
    assert sorted(p.name for p in target.root.iterdir()) == before
    assert target.identity_path.read_bytes() == key
    assert not [p for p in tmp_path.iterdir() if ".restore-" in p.name]


def test_restore_refuses_a_running_daemon(golem: DataDir, tmp_path: Path) -> None:
    target = DataDir(tmp_path / "live")
    target.init()
    target.run_path.write_text(json.dumps({"pid": os.getpid()}))
    with pytest.raises(UsageError, match="running"):
        restore_backup(backup_of(golem), target, VaultKeys(clade_key=CLADE_KEY), force=True)


def test_keep_last_n(golem: DataDir) -> None:
    for _ in range(4):
        ident = golem.load_identity()
        create_backup(golem, clade_keys=[CLADE_KEY], x25519_recipients=[], recipient_names=[],
                      golem=ident.peer_id, keep=2)
    assert len(list(golem.backups_path.glob("*.clade-vault"))) == 2


# -- the CLI flow an operator follows --------------------------------------------------------


def test_cli_owner_admit_join_backup_restore(cli: CliRunner, data_dir: DataDir, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    owner_dir = tmp_path / "owner"
    made = cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha", "--json")
    assert made.code == 0, made.err
    clade_id = made.json()["clade_id"]
    peer = cli("id").out.strip()
    bundle = tmp_path / "g.bundle"
    assert cli("owner", "admit", peer, "--owner-dir", str(owner_dir), "--out", str(bundle)).code == 0
    joined = cli("join", str(bundle), "--json")
    assert joined.code == 0, joined.err
    assert joined.json()["clade_id"] == clade_id
    assert (data_dir.clade_key_path.stat().st_mode & 0o777) == 0o600
    cli("remember", "Uniswap TWAP lags 2 blocks on L2s", "--kind", "warning")
    backup = tmp_path / "b.clade-vault"
    done = cli("backup", "--out", str(backup), "--json")
    assert done.code == 0, done.err
    assert cli("backup", "verify", str(backup), "--json").json()["ok"] is True
    # the owner alone can restore (total clade wipe), into a fresh data dir
    fresh = tmp_path / "fresh"
    proc = clade_subprocess(["--data-dir", str(fresh), "restore", str(backup), "--owner-dir", str(owner_dir)])
    assert proc.returncode == 0, proc.stderr
    listed = clade_subprocess(["--data-dir", str(fresh), "list", "--json"])
    assert "Uniswap TWAP" in listed.stdout.decode()
    # a wrong key is a clear error, exit 2
    bad_key = tmp_path / "bad.key"
    bad_key.write_bytes(os.urandom(32))
    bad_key.chmod(0o600)
    wrong = cli("backup", "verify", str(backup), "--clade-key", str(bad_key))
    assert wrong.code == 2 and "is a recipient" in wrong.err
    # a backup holds the golem's soma: a sibling's keys — the clade key every member holds, its
    # own identity — cannot open it; this golem's own identity can (step 25, item 3)
    assert done.json()["recipients"] == ["owner", "this golem"]
    sibling_key = cli("backup", "verify", str(backup), "--clade-key", str(data_dir.clade_key_path))
    assert sibling_key.code == 2 and "is a recipient" in sibling_key.err
    sibling = tmp_path / "sibling"
    assert clade_subprocess(["--data-dir", str(sibling), "init"]).returncode == 0
    other = cli("backup", "verify", str(backup), "--identity-key", str(sibling / "identity.key"))
    assert other.code == 2 and "is a recipient" in other.err
    own = cli("backup", "verify", str(backup), "--identity-key", str(data_dir.identity_path), "--json")
    assert own.code == 0 and own.json()["ok"] is True
    # shared with the clade only when the operator asks, and then the clade key opens it
    monkeypatch.setenv("CLADE_BACKUP__SHARE_WITH_CLADE", "true")
    shared = tmp_path / "shared.clade-vault"
    assert cli("backup", "--out", str(shared), "--json").json()["recipients"][1:] == ["owner", "this golem"]
    opened = cli("backup", "verify", str(shared), "--clade-key", str(data_dir.clade_key_path), "--json")
    assert opened.code == 0 and opened.json()["ok"] is True


def test_cli_join_refusals(cli: CliRunner, data_dir: DataDir, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha")
    other = DataDir(tmp_path / "other")
    other.init()
    bundle = tmp_path / "other.bundle"
    cli("owner", "admit", other.load_identity().peer_id, "--owner-dir", str(owner_dir), "--out", str(bundle))
    res = cli("join", str(bundle))
    assert res.code == 2 and "wrong_peer" in res.err
    assert not data_dir.membership_path.exists()
    tampered = tmp_path / "tampered.bundle"
    raw = bytearray(bundle.read_bytes())
    raw[-3] ^= 1
    tampered.write_bytes(bytes(raw))
    res = cli("join", str(tampered))
    assert res.code == 2 and "bad_signature" in res.err
    assert cli("owner", "admit", "not-a-peer", "--owner-dir", str(owner_dir), "--out", str(bundle)).code == 2


def test_cli_backup_needs_a_recipient_before_joining(cli: CliRunner, data_dir: DataDir) -> None:
    res = cli("backup")
    assert res.code == 2 and "--recipient" in res.err
    ok = cli("backup", "--recipient", data_dir.load_identity().peer_id, "--json")
    assert ok.code == 0, ok.err
    # addressed to our own peer id: our identity opens it
    assert cli("backup", "verify", ok.json()["path"], "--json").json()["ok"] is True


def test_cli_revoke_is_monotonic(cli: CliRunner, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha")
    a, b = DataDir(tmp_path / "a"), DataDir(tmp_path / "b")
    a.init()
    b.init()
    out = tmp_path / "rev.bin"
    first = cli("owner", "revoke", a.load_identity().peer_id, "--owner-dir", str(owner_dir), "--out", str(out),
                "--json").json()
    second = cli("owner", "revoke", b.load_identity().peer_id, "--owner-dir", str(owner_dir), "--out", str(out),
                 "--json").json()
    assert (first["version"], second["version"]) == (1, 2)
    assert set(second["revoked"]) == {a.load_identity().peer_id, b.load_identity().peer_id}


# Peak RSS is read as VmHWM inside the child: ru_maxrss would include the RSS of the
# (large) pytest process the child was forked from, which Linux carries across exec.
_PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024"


def _peak_mb(script: str, *args: str) -> int:
    out = subprocess.run([sys.executable, "-c", f"{script}\nprint({_PEAK})", *args], capture_output=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    return int(out.stdout.split()[-1])


@pytest.mark.slow
def test_one_gib_store_backs_up_in_constant_memory(tmp_path: Path) -> None:
    """Peak RSS of `clade backup` on a 1 GiB store stays under 200 MB."""
    data = DataDir(tmp_path / "big")
    data.init()
    bulk = data.episodes_path / "episodes.lance" / "data" / "bulk.bin"
    bulk.parent.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(8 * 1024 * 1024)
    with bulk.open("wb") as fh:
        for _ in range(128):  # 1 GiB, incompressible
            fh.write(chunk)
    peer = data.load_identity().peer_id
    out = tmp_path / "big.clade-vault"
    peak = _peak_mb("import sys; from daemon.cli.main import main; assert main(sys.argv[1:]) == 0",
                    "--data-dir", str(data.root), "backup", "--recipient", peer, "--out", str(out))
    assert peak < 200, f"peak RSS {peak} MB"
    assert out.stat().st_size > 1024**3


def test_verify_streams_large_files(tmp_path: Path) -> None:
    """Regression: verify read each archived file whole (+3-4x the largest file in RSS)."""
    data = DataDir(tmp_path / "big")
    data.init()
    bulk = data.episodes_path / "episodes.lance" / "data" / "bulk.bin"
    bulk.parent.mkdir(parents=True, exist_ok=True)
    bulk.write_bytes(os.urandom(96 * 1024 * 1024))
    path = backup_of(data)
    peak = _peak_mb("import sys; from pathlib import Path; from crypto.vault import VaultKeys; "
                    "from daemon.service.backup import verify_backup; "
                    "verify_backup(Path(sys.argv[1]), VaultKeys(clade_key=bytes(range(32))))", str(path))
    assert peak < 150, f"verify peaked at {peak} MB for a 96 MiB file"


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `path` (root only: else the test is skipped, and says so)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("a full disk needs a tmpfs of its own: mount needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def full_volume(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted after the test."""
    with _tmpfs(tmp_path / "volume", "4m") as volume:
        yield volume


def _fill(volume: Path) -> Path:
    """A file taking every free byte of `volume`."""
    filler = volume / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_backup_on_a_full_disk_is_a_storage_refusal_not_a_bug(
        full_volume: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The soak's one server error: SQLite's snapshot failing for a full disk was wrapped in a
    plain `DaemonError`, so the API answered 500, not 507. Now the refusal is seen through the
    wrapper (the API's handler calls `storage_refusal`), the CLI says what to do without a
    traceback, nothing partial is left, and the next backup after space is freed succeeds."""
    from daemon.cli.main import main
    from daemon.errors import DaemonError
    from daemon.grimoire.storage_faults import storage_refusal

    data = DataDir(full_volume / "golem")
    data.init()
    ident = data.load_identity()
    with data.open_store(identity=ident) as store:
        seed(store, [NewEntry(kind=Kind.WARNING, content=f"Warning {i}: pool {i} drains at dawn " + "x" * 300)
                     for i in range(200)], identity=ident)
    filler = _fill(full_volume)
    recipient = nacl.public.PrivateKey.generate().public_key.encode()
    with pytest.raises(DaemonError, match="cannot snapshot") as caught:
        create_backup(data, clade_keys=[], x25519_recipients=[recipient], recipient_names=["owner"],
                      golem=ident.peer_id)
    refusal = storage_refusal(caught.value)
    assert refusal is not None and (refusal.status, refusal.error) == (507, "insufficient_storage")

    code = main(["--data-dir", str(data.root), "backup", "--recipient", ident.peer_id])
    err = capsys.readouterr().err
    assert code == 1 and "free space" in err and "Traceback" not in err, err
    assert not list(data.backups_path.glob("*")) if data.backups_path.exists() else True
    assert not [p for p in data.root.iterdir() if p.name.startswith(".backup-")]

    filler.unlink()
    report = create_backup(data, clade_keys=[], x25519_recipients=[recipient], recipient_names=["owner"],
                           golem=ident.peer_id)
    assert report.path.exists() and report.bytes > 0


@pytest.mark.slow
def test_the_api_answers_a_backup_on_a_full_disk_507_and_logs_no_traceback(tmp_path: Path) -> None:
    """The 90-minute soak's one traceback: `POST /v1/backup` during its disk-full fault was
    answered 507, but by the catch-all handler, which Starlette re-raises after answering, so
    the server logged it as an error in the app. A real daemon on a full tmpfs: 507 with what
    to do, no traceback in its log (read whole, after it stopped), and a backup once space is
    freed."""
    from daemon.testing.harness import LoopbackClade

    with _tmpfs(tmp_path / "volume", "48m") as volume:
        clade = LoopbackClade(volume, 1)
        (golem,) = clade.golems
        try:
            clade.start(golem, bootstrap=[])
            golem.call("POST", "/v1/memory", json={"content": "Pool 9 drains at dawn " + "x" * 300,
                                                  "memory_type": "warning"})
            filler = _fill(volume)
            refused = golem.request("POST", "/v1/backup", json={})
            assert refused.status_code == 507, refused.text
            assert refused.json()["error"] == "insufficient_storage" and "free space" in refused.text
            filler.unlink()
            assert golem.request("POST", "/v1/backup", json={}).status_code == 200
            assert golem.stop() == 0
            log = "\n".join(golem.stderr_lines)
            assert "/v1/backup refused" in log  # the refusal was logged, as a warning
            assert "Traceback" not in log and "Error in ASGI" not in log, log[-3000:]
        finally:
            clade.close()
