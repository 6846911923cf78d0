"""The native thread pools of a `clade` process, pinned before numpy loads.

OpenBLAS (numpy's BLAS) starts one worker per core and, after each call, keeps its workers
spinning for a while in case another call follows. The daemon's one BLAS call on a hot path
is the vector top-k of a search (a 50,000 × 384 matrix-vector product, ~6 ms on 2 threads,
~9 ms on one); on a 2-vCPU machine the spinning worker then holds the second core for tens of
milliseconds after it, against the query embedding (ONNX Runtime, one thread), FTS5 and the
ranking of the same search: the daemon burned ~105 ms of CPU per search for ~50 ms of wall
time. With one BLAS thread it burns ~57 ms, and the p99 of `POST /v1/memory/search` fell
from ~140 to ~75 ms under load (bench/RESULTS.md, "Daemon").

`pin` must run before numpy is first imported (OpenBLAS reads its environment when it loads);
a value the user set is kept.
"""

from __future__ import annotations

import os

__all__ = ["BLAS_THREADS", "pin"]

BLAS_THREADS = "1"


def pin() -> None:
    """Set OpenBLAS to `BLAS_THREADS` threads unless the environment already says; a no-op
    once numpy is loaded."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", BLAS_THREADS)
