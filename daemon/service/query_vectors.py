"""Recent queries' vectors, kept for when the same text is asked again.

A golem asks the same thing more than once (a digest per turn on the same task, a retry, a
tool that searches what the user just said): the query's embedding is ~5-10 ms of model time
on a 2-vCPU machine, the largest single cost of a search after FTS5. The vector of a text
depends only on the text and the vector space, so it is kept under both: a change of model
never answers from the old space. Bounded (`SIZE` vectors, ~0.6 MiB for MiniLM's 384-d);
least recently used first out. Used on the trio thread only: no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from daemon.embedding.embedder import EmbeddingInfo

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["SIZE", "QueryVectors"]

SIZE = 384


class QueryVectors:
    """An LRU of (vector space, query text) -> the query's unit vector (read-only arrays)."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[EmbeddingInfo, str], NDArray[np.float32]] = OrderedDict()

    def get(self, info: EmbeddingInfo, text: str) -> NDArray[np.float32] | None:
        """The vector kept for `text` in `info`'s space, or None."""
        vec = self._kept.get((info, text))
        if vec is not None:
            self._kept.move_to_end((info, text))
        return vec

    def put(self, info: EmbeddingInfo, text: str, vector: NDArray[np.float32]) -> NDArray[np.float32]:
        """Keep a read-only copy of `vector` for `text`; returns it."""
        kept = np.array(vector, dtype=np.float32, copy=True)
        kept.flags.writeable = False
        self._kept[(info, text)] = kept
        self._kept.move_to_end((info, text))
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return kept

    def __len__(self) -> int:
        return len(self._kept)
