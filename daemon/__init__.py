"""clade's daemon: everything that does I/O (store, p2p, control API, CLI, services)."""

import os

# numpy's BLAS pool (OpenBLAS: a thread per core) competed with the embedding threads and
# SQLite for the same cores: limited to one thread, recall at 50,000 entries fell from 49 to
# 38 ms p50 and FTS5 from ~25 to ~13 ms (bench/recall_options.py, 2 cores). Set before numpy
# is first imported; an operator's own value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
