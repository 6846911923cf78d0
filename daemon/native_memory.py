"""The process's memory as the kernel counts it, and handing freed heap back to it.

`resident()` reads `VmRSS` and `VmHWM` from /proc/self/status (Linux; zeros elsewhere): what
`clade status` and the metrics report. `release_free_memory()` asks glibc to return freed
heap pages to the kernel (`malloc_trim(0)`): loading the embedding model through ONNX Runtime
allocates ~160 MiB of which ~50 MiB is transient (the graph before constant folding), and
glibc keeps freed pages mapped, so without a trim the process stays at its peak
(bench/RESULTS.md, "Footprint"). A no-op where the C library has no `malloc_trim` (musl, macOS).

`limit_arenas()` caps glibc's malloc arenas (`mallopt(M_ARENA_MAX)`), as `MALLOC_ARENA_MAX`
does for the embedding process. glibc gives threads arenas of their own, up to 8 per core, and
each keeps the holes its freed chunks leave: the daemon's worker threads come and go (trio's
thread cache, backup stages), each landing on one of 16 arenas on 2 cores, and the freed-but-
kept heap grew with the store (bench/RESULTS.md, "The daemon's RSS under load"). Two arenas
and a trim after each curator cycle and backup (`release_free_memory`) cut that growth by
about two-thirds while entries arrive, and to nothing once they stop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ARENAS", "MMAP_THRESHOLD", "Heap", "Resident", "heap", "limit_arenas", "pin_mmap_threshold",
           "release_free_memory", "resident"]

MIB = 1024 * 1024
ARENAS = 2  # glibc malloc arenas of the daemon process (`limit_arenas`)
MMAP_THRESHOLD = 128 * 1024  # blocks this large or larger get mappings of their own (`pin_mmap_threshold`)
_M_ARENA_MAX = -8  # mallopt's parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3


@dataclass(frozen=True, slots=True)
class Resident:
    """Resident set size now and at its peak since the process started, in bytes."""

    rss_bytes: int
    peak_bytes: int

    def to_json(self) -> dict[str, float]:
        return {"rss_mib": round(self.rss_bytes / MIB, 1), "peak_rss_mib": round(self.peak_bytes / MIB, 1)}


def resident(status: Path = Path("/proc/self/status")) -> Resident:
    """This process's `VmRSS` and `VmHWM` (0 and 0 where /proc is not there)."""
    try:
        text = status.read_text()
    except OSError:
        return Resident(0, 0)
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024  # "123456 kB"
    return Resident(fields.get("VmRSS", 0), fields.get("VmHWM", 0))


@dataclass(frozen=True, slots=True)
class Heap:
    """What glibc's malloc holds (`mallinfo2`) and what SQLite has allocated, in bytes: told
    apart, a leak (`in_use` grows) is not fragmentation (`free` grows) nor a cache filling
    (`sqlite` grows to its caps)."""

    in_use: int  # allocated and not freed, in the arenas (uordblks)
    free: int  # freed but kept by malloc inside its arenas (fordblks)
    mmapped: int  # large blocks in their own mappings (hblkhd)
    sqlite: int  # sqlite3_memory_used(): page caches, statements, schemas, lookaside
    sqlite_page_cache: int = 0  # the page caches' part of it (SQLITE_STATUS_PAGECACHE_OVERFLOW)
    python_blocks: int = 0  # memory blocks Python's allocator holds (sys.getallocatedblocks): objects, mostly

    def to_json(self) -> dict[str, float]:
        return {"heap_in_use_mib": round(self.in_use / MIB, 1), "heap_free_mib": round(self.free / MIB, 1),
                "heap_mmapped_mib": round(self.mmapped / MIB, 1), "sqlite_mib": round(self.sqlite / MIB, 1),
                "sqlite_page_cache_mib": round(self.sqlite_page_cache / MIB, 1), "python_blocks": self.python_blocks}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _load_libc() -> ctypes.CDLL | None:
    try:  # find_library runs ldconfig: once per process, at import
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_LIBC = _load_libc()
_TRIM: Callable[[int], int] | None = getattr(_LIBC, "malloc_trim", None)
_MALLOPT: Callable[[int, int], int] | None = getattr(_LIBC, "mallopt", None)


def _load_sqlite() -> ctypes.CDLL | None:
    """The SQLite library Python's sqlite3 module is linked to (the same handle: its counters)."""
    import _sqlite3

    try:
        return ctypes.CDLL(getattr(_sqlite3, "__file__", None) or "libsqlite3.so.0")
    except OSError:
        return None


_MALLINFO2: Callable[[], _MallInfo2] | None = getattr(_LIBC, "mallinfo2", None)
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _MallInfo2  # type: ignore[attr-defined]
_SQLITE = _load_sqlite()
_SQLITE_USED: Callable[[], int] | None = getattr(_SQLITE, "sqlite3_memory_used", None)
if _SQLITE_USED is not None:
    _SQLITE_USED.restype = ctypes.c_int64  # type: ignore[attr-defined]
_SQLITE_STATUS: Callable[..., int] | None = getattr(_SQLITE, "sqlite3_status64", None)
_SQLITE_STATUS_PAGECACHE_OVERFLOW = 2  # page cache bytes from malloc (sqlite3.h)


def _sqlite_page_cache() -> int:
    if _SQLITE_STATUS is None:
        return 0
    current, peak = ctypes.c_int64(0), ctypes.c_int64(0)
    if _SQLITE_STATUS(_SQLITE_STATUS_PAGECACHE_OVERFLOW, ctypes.byref(current), ctypes.byref(peak), 0) != 0:
        return 0
    return int(current.value)


def heap() -> Heap:
    """malloc's and SQLite's figures now (zeros where the C library or SQLite lacks them)."""
    info = _MALLINFO2() if _MALLINFO2 is not None else None
    sqlite = int(_SQLITE_USED()) if _SQLITE_USED is not None else 0
    cache, blocks = _sqlite_page_cache(), sys.getallocatedblocks()
    if info is None:
        return Heap(0, 0, 0, sqlite, cache, blocks)
    return Heap(int(info.uordblks), int(info.fordblks), int(info.hblkhd), sqlite, cache, blocks)


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `count` for the rest of the process (call it early, before
    threads allocate); kept as it is when the environment sets `MALLOC_ARENA_MAX`. False where
    it is not possible (musl, macOS) or not done."""
    if _MALLOPT is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(_MALLOPT(_M_ARENA_MAX, count))


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Give every block of `size` bytes or more a mapping of its own, returned to the kernel when
    freed, for the rest of the process; kept as it is when the environment sets
    `MALLOC_MMAP_THRESHOLD_`. False where it is not possible (musl, macOS).

    glibc starts at 128 KiB but raises the threshold to the size of each mapped block freed
    (up to 32 MiB): after one transient large buffer (a backup's zstd window, a grown index, a
    SQLite sort), blocks up to that size come from the heap instead, where small long-lived
    blocks allocated beside them pin their pages. Pinned, the large transient buffers never
    enter the heap."""
    if _MALLOPT is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, size))


def release_free_memory() -> bool:
    """Return freed heap to the kernel (glibc `malloc_trim(0)`); False where that is not possible."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
