"""Recent queries' vectors (daemon/service/query_vectors.py): kept per vector space, least
recently used first out, never writable by a caller."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.embedding.embedder import EmbeddingInfo
from daemon.service.query_vectors import QueryVectors

A = EmbeddingInfo(model="a", model_version="1", preprocess_hash="p", dim=3)
B = EmbeddingInfo(model="b", model_version="1", preprocess_hash="p", dim=3)


def test_a_vector_is_kept_per_space_and_text() -> None:
    kept = QueryVectors(size=4)
    vec = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    stored = kept.put(A, "gas", vec)
    vec[0] = 9.0  # the caller's array is copied
    got = kept.get(A, "gas")
    assert got is stored and got.tolist() == [1.0, 0.0, 0.0]
    assert kept.get(B, "gas") is None and kept.get(A, "gas ") is None
    with pytest.raises(ValueError):
        got[0] = 2.0  # read-only: a search cannot spoil the next one's vector


def test_the_least_recently_used_goes_first() -> None:
    kept = QueryVectors(size=2)
    for text in ("one", "two"):
        kept.put(A, text, np.zeros(3, dtype=np.float32))
    assert kept.get(A, "one") is not None  # "two" is now the least recently used
    kept.put(A, "three", np.zeros(3, dtype=np.float32))
    assert len(kept) == 2 and kept.get(A, "two") is None and kept.get(A, "one") is not None
