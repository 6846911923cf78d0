"""bench_vault's raw baselines: what the backup's parts cost alone — libsodium's secretstream
over the same bytes, zstd over the same files — and the same data through the tools an operator
would reach for instead (tar | zstd | age)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nacl.bindings as sodium
import zstandard

from bench.common import HostLoad, progress
from bench.common.machine import dir_size
from bench.common.rusage import wait_child
from crypto.vault import CHUNK_BYTES

__all__ = ["FILLER_PREFIX", "JSON_PREFIX", "bench_age", "bench_secretstream", "bench_zstd", "dir_files", "tool_version"]

MB = 1e6
MIB = 2**20
FILLER_PREFIX = "bench-incompressible-"  # the synthetic store's kinds of file, told apart by name
JSON_PREFIX = "bench-json-"


def dir_files(root: Path) -> list[Path]:
    """Every file below `root`, sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file())


def bench_secretstream(total: int) -> dict[str, Any]:
    """Push, then pull, `total` bytes as 64 KiB chunks with 32 bytes of associated data, in streams of
    64 MiB (1,024 chunks). Pushes are timed with their output dropped; the pulled stream is pushed again
    untimed and kept."""
    per_stream = 1024
    chunks = [os.urandom(CHUNK_BYTES) for _ in range(per_stream)]
    ad = os.urandom(32)  # the vault binds a 32-byte header digest to every chunk
    n_chunks = max(1, total // CHUNK_BYTES)
    push_s = pull_s = 0.0
    done = 0
    clock = time.perf_counter
    while done < n_chunks:
        n = min(per_stream, n_chunks - done)
        key = sodium.crypto_secretstream_xchacha20poly1305_keygen()
        state = sodium.crypto_secretstream_xchacha20poly1305_state()
        header = sodium.crypto_secretstream_xchacha20poly1305_init_push(state, key)
        push = sodium.crypto_secretstream_xchacha20poly1305_push
        msg = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
        final = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL
        t0 = clock()
        for i in range(n):  # like EncryptingWriter: each ciphertext is written out and dropped
            push(state, chunks[i], ad, final if i == n - 1 else msg)
        push_s += clock() - t0
        header = sodium.crypto_secretstream_xchacha20poly1305_init_push(state, key)  # a fresh stream to pull
        sealed = [push(state, chunks[i], ad, final if i == n - 1 else msg) for i in range(n)]
        rstate = sodium.crypto_secretstream_xchacha20poly1305_state()
        sodium.crypto_secretstream_xchacha20poly1305_init_pull(rstate, header, key)
        pull = sodium.crypto_secretstream_xchacha20poly1305_pull
        t0 = clock()
        for c in sealed:
            pull(rstate, c, ad)
        pull_s += clock() - t0
        done += n
    nbytes = n_chunks * CHUNK_BYTES
    return {"bytes": nbytes, "chunk_bytes": CHUNK_BYTES, "push_s": round(push_s, 3), "pull_s": round(pull_s, 3),
            "push_mb_s": round(nbytes / push_s / MB, 1), "pull_mb_s": round(nbytes / pull_s / MB, 1)}


class _CountingSink:
    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def _zstd_files(paths: Sequence[Path]) -> tuple[int, int, float]:
    """(input bytes, output bytes, seconds incl. reading) for zstd level 3 over the files, one frame."""
    sink = _CountingSink()
    t0 = time.perf_counter()
    writer = zstandard.ZstdCompressor(level=3).stream_writer(sink, closefd=False)  # type: ignore[arg-type]
    read = 0
    for path in paths:
        with path.open("rb") as fh:
            while block := fh.read(MIB):
                writer.write(block)
                read += len(block)
    writer.flush(zstandard.FLUSH_FRAME)
    return read, sink.bytes, time.perf_counter() - t0


def bench_zstd(root: Path) -> dict[str, Any]:
    """Raw zstd level 3 (one thread) over the store, per part and overall."""
    files = dir_files(root)
    table = root / "episodes" / "episodes.lance"
    parts = {
        "grimoire.db": [p for p in files if p.name == "grimoire.db"],
        "episode table (real rows)": [p for p in files if p.is_relative_to(table)
                                      and not p.name.startswith((FILLER_PREFIX, JSON_PREFIX))],
        "plain JSON-lines files": [p for p in files if p.name.startswith(JSON_PREFIX)],
        "os.urandom filler": [p for p in files if p.name.startswith(FILLER_PREFIX)],
        "other small files": [p for p in files if p.name != "grimoire.db" and not p.is_relative_to(table)],
    }
    out: dict[str, Any] = {"parts": {}}
    tin = tout = 0
    tsec = 0.0
    for name, paths in parts.items():
        if not paths:
            continue
        n_in, n_out, sec = _zstd_files(paths)
        tin, tout, tsec = tin + n_in, tout + n_out, tsec + sec
        out["parts"][name] = {"bytes": n_in, "zstd_bytes": n_out, "ratio": round(n_in / max(1, n_out), 3),
                              "mb_s": round(n_in / sec / MB, 1)}
    out.update(bytes=tin, zstd_bytes=tout, ratio=round(tin / max(1, tout), 3), seconds=round(tsec, 3),
               mb_s=round(tin / tsec / MB, 1), version=zstandard.__version__, backend=zstandard.backend)
    return out


def tool_version(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def bench_age(data_root: Path, workdir: Path, plaintext_bytes: int) -> dict[str, Any]:
    tools = {t: shutil.which(t) for t in ("age", "age-keygen", "zstd", "tar", "bash")}
    missing = [t for t, p in tools.items() if p is None]
    if missing:
        return {"skipped": f"not on PATH: {', '.join(missing)} (try: apt-get install -y age zstd)"}
    key = workdir / "age.key"
    subprocess.run([str(tools["age-keygen"]), "-o", str(key)], check=True, capture_output=True)
    recipient = subprocess.run([str(tools["age-keygen"]), "-y", str(key)], check=True, capture_output=True,
                               text=True).stdout.strip()
    out = workdir / "backup.tar.zst.age"
    target = workdir / "age-restore"
    target.mkdir()
    q = shlex.quote
    enc = (f"set -o pipefail; tar -C {q(str(data_root))} -cf - . | zstd -q -3 -T1 -c "
           f"| age -r {q(recipient)} > {q(str(out))}")
    dec = f"set -o pipefail; age -d -i {q(str(key))} {q(str(out))} | zstd -q -d -c | tar -xf - -C {q(str(target))}"
    res: dict[str, Any] = {
        "versions": {"age": tool_version(["age", "--version"]), "zstd": tool_version(["zstd", "--version"]),
                     "tar": tool_version(["tar", "--version"])},
        "backup_command": enc.replace(recipient, "<age1 recipient>"),
        "restore_command": dec,
    }
    for name, script in (("backup", enc), ("restore", dec)):
        progress(f"  {name}: {script if name == 'restore' else res['backup_command']}")
        host = HostLoad()
        usage = wait_child([str(tools["bash"]), "-c", script], workdir)
        load = host.report(name, quiet=True)
        wall = usage["wall"]
        if usage["code"] != 0:
            raise RuntimeError(f"age pipeline {name} exited with {usage['code']}")
        t0 = time.perf_counter()
        if name == "backup":  # create_backup fsyncs its output; do the same
            fd = os.open(out, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        fsync_s = time.perf_counter() - t0
        res[name] = {"pipeline_s": round(wall, 3), "fsync_s": round(fsync_s, 3), "seconds": round(wall + fsync_s, 3),
                     "mb_s": round(plaintext_bytes / (wall + fsync_s) / MB, 1),
                     "cpu_user_s": round(usage["utime"], 3), "cpu_sys_s": round(usage["stime"], 3),
                     "peak_rss_mib_any_process": round(usage["maxrss_kib"] * 1024 / MIB, 1), "host": load}
    res["file_bytes"] = out.stat().st_size
    res["restored_bytes"] = dir_size(target)
    return res
