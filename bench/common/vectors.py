"""The recall benches' stores: generated entries with perturbed real embeddings, and the RSS probe.

The real models embed ~8-65 entries/s on 2 shared cores, so a 50,000-entry store cannot be
embedded for a bench run: entries get vectors written by `write_vectors` that are real
embeddings of other DeFi texts plus Gaussian noise (`perturbed`), renormalised. Used by
bench_recall and bench_recall_options (which scales the noise to keep its norm per space).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crypto import Identity
from daemon.embedding.embedder import EmbeddingInfo, get_embedder
from daemon.grimoire import Grimoire
from daemon.grimoire.retrieval import RecallQuery, Retriever
from daemon.grimoire.store import wall_clock_ms
from daemon.grimoire.vectors import missing_vectors, write_vectors

from .machine import rss_kib
from .report import progress
from .seed import seed_entries
from .workload import Generator

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Matrix = NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "IDENTITY",
    "NOISE_SIGMA",
    "VECTOR_BATCH",
    "K",
    "Matrix",
    "add_entries",
    "perturbed",
    "rss_probe",
    "write_synthetic",
]

IDENTITY = Identity(bytes(range(32)))
K = 10  # recall's k everywhere in the recall benches
REMEMBER_BATCH = 500
VECTOR_BATCH = 256  # as Retriever.index_missing writes them: one write_vectors (one ms stamp) per batch
NOISE_SIGMA = 0.03  # per dimension of a 384-d space: ~0.59 noise norm, cosine to the parent ~0.86


def perturbed(pool: Matrix, n: int, rng: np.random.Generator) -> Matrix:
    """n unit vectors: random rows of `pool` plus Gaussian noise, renormalised."""
    parents = pool[rng.integers(0, len(pool), n)]
    noisy = parents + rng.standard_normal(parents.shape, dtype=np.float32) * np.float32(NOISE_SIGMA)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    return noisy.astype(np.float32, copy=False)


def add_entries(store: Grimoire, gen: Generator, n: int) -> dict[str, Any]:
    """`n` generated entries through the write door, REMEMBER_BATCH per transaction."""
    progress(f"  seed_entries: {n:,} entries in transactions of {REMEMBER_BATCH}")
    news = [gen.entry() for _ in range(n)]
    t0 = time.perf_counter()
    for i in range(0, n, REMEMBER_BATCH):
        seed_entries(store, news[i:i + REMEMBER_BATCH], IDENTITY)
    s = time.perf_counter() - t0
    return {"entries": n, "seconds": round(s, 2), "entries_per_s": round(n / s, 1)}


def write_synthetic(store: Grimoire, info: EmbeddingInfo, pool: Matrix, rng: np.random.Generator) -> dict[str, Any]:
    """Vectors for every entry that has none: perturbed real embeddings, VECTOR_BATCH per write."""
    done = 0
    t0 = time.perf_counter()
    while True:
        todo = missing_vectors(store, info, limit=VECTOR_BATCH)
        if not todo:
            break
        stamp = wall_clock_ms()
        write_vectors(store, info, [i for i, _ in todo], perturbed(pool, len(todo), rng))
        done += len(todo)
        while wall_clock_ms() == stamp:  # one ms stamp per batch, as real index_missing batches get
            time.sleep(0.0005)
    progress(f"  write_vectors: {done:,} synthetic vectors")
    return {"entries": done, "seconds": round(time.perf_counter() - t0, 2)}


def rss_probe(db: Path, model_dir: Path, model: str, embed_limit: int | None = None) -> dict[str, Any]:
    """Run in a fresh child process: VmRSS with nothing of fastembed loaded, with the model, after
    its first query, after a recall loaded the store's VectorIndex; the peak (VmHWM).

    `embed_limit` is passed to `Retriever.recall` when given (None: its default)."""
    out: dict[str, Any] = {"model": model, "fastembed_imported_at_start": "fastembed" in sys.modules,
                           "onnxruntime_imported_at_start": "onnxruntime" in sys.modules,
                           "rss_start_kib": rss_kib()}
    t0 = time.perf_counter()
    embedder = get_embedder(model_dir, model)
    out["load_s"] = round(time.perf_counter() - t0, 2)
    out["rss_model_loaded_kib"] = rss_kib()
    embedder.embed(["gas spike on arbitrum"])
    out["rss_after_first_query_kib"] = rss_kib()
    with Grimoire.open(db) as store:
        retriever = Retriever(store, lambda: embedder)
        query = RecallQuery(text="sandwich attack on the uniswap router", k=K)
        if embed_limit is None:
            retriever.recall(query)
        else:
            retriever.recall(query, embed_limit=embed_limit)
        out["vector_index_rows"] = len(retriever.vector_index())
        out["rss_vector_index_loaded_kib"] = rss_kib()
    out["vm_hwm_kib"] = rss_kib("VmHWM")
    return out
