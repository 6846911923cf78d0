"""The process's memory as the kernel counts it, and handing freed heap back to it.

`resident()` reads `VmRSS` and `VmHWM` from /proc/self/status (Linux; zeros elsewhere): what
`clade status` and the metrics report. `release_free_memory()` asks glibc to return freed
heap pages to the kernel (`malloc_trim(0)`): loading the embedding model through ONNX Runtime
allocates ~160 MiB of which ~50 MiB is transient (the graph before constant folding), and
glibc keeps freed pages mapped, so without a trim the process stays at its peak
(bench/RESULTS.md, "Footprint"). A no-op where the C library has no `malloc_trim` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Resident", "release_free_memory", "resident"]

MIB = 1024 * 1024


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


def _libc_trim() -> Callable[[int], object] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], object] = ctypes.CDLL(name or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _libc_trim()


def release_free_memory() -> bool:
    """Return freed heap to the kernel (glibc `malloc_trim(0)`); False where that is not possible."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
