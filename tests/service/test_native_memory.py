"""glibc's malloc as the daemon sets it up and reports it (daemon/native_memory.py), checked in
fresh interpreters: mallopt's settings are per process and cannot be undone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from daemon.native_memory import heap, pin_mmap_threshold

# After a 4 MiB block is freed, is a 1 MiB block mapped on its own (hblkhd) or carved from the heap?
_PROBE = """
import ctypes, json, sys
from daemon import native_memory
if sys.argv[1] == "pin":
    assert native_memory.pin_mmap_threshold()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(4 << 20))  # glibc raises its threshold to 4 MiB here, unless it is pinned
before = native_memory.heap().mmapped
block = libc.malloc(1 << 20)
print(json.dumps({"mapped": native_memory.heap().mmapped - before}))
libc.free(block)
"""


def _mapped_after_a_large_free(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, capture_output=True, text=True, check=True,
                         timeout=60)
    return int(json.loads(out.stdout)["mapped"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_pinned_threshold_keeps_large_blocks_out_of_the_heap() -> None:
    assert _mapped_after_a_large_free("default") == 0  # glibc's own rule: the 1 MiB block went into the heap
    assert _mapped_after_a_large_free("pin") >= 1 << 20  # pinned: it has a mapping of its own, unmapped when freed


def test_pin_mmap_threshold_keeps_the_environments_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert pin_mmap_threshold() is False


def test_heap_reports_malloc_and_sqlite() -> None:
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", ((b"x" * 1000,) for _ in range(2000)))
    now = heap()
    conn.close()
    assert now.in_use > 0 and now.sqlite > now.sqlite_page_cache > 1 << 20  # 2 MB of rows in its page cache
    figures = now.to_json()
    assert set(figures) == {"heap_in_use_mib", "heap_free_mib", "heap_mmapped_mib", "sqlite_mib",
                            "sqlite_page_cache_mib", "python_blocks"}
    assert now.python_blocks > 10_000  # this interpreter's objects
