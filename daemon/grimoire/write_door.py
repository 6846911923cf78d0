"""The one door every own entry write passes through: the same rules for one entry or a batch.

Every write of an own entry passes here, whoever the writer (`Writer`):

- **agent or operator** (`Writer.AGENT`): `POST /v1/memory` and `/v1/entries`, `/v1/memory/flush`,
  `/v1/lessons`, closing a working-memory session (agent_store.py), the agent and MCP tools
  (which call those routes), the offline CLI (`cli/backends/store.py`), a testament's reflection;
- **the curator** (`Writer.CURATOR`, the internal mode): an LLM REWRITE, a consolidated
  baseline, an inherited entry re-authored (`crossing.release_inherited`), a death reflection.

Code outside daemon/grimoire calls `write_entries` (or agent_store.py's `write_once`); the
grimoire's own modules may open `entry_batch` to write their own rows in the same transaction.
`Grimoire` has no other way to create an own entry (`_local_batch` is the door's alone;
tests/test_door_closed.py checks that nothing outside the package reaches past the door).
The rules, the same in both modes:

1. **Repeat hold.** A public warning or anti_knowledge (`needs_vector`) is written with its
   vector and held (`crossing_hold = 'near_duplicate'`) when it repeats one this golem gossiped
   within 24 h (repeat_hold.py, `add_checked`): the hold is committed with the entry, so no publisher
   ever sees it unheld. The vectors are computed *before* the writer's transaction
   (`prepare`), off the store's thread. A curator's rewrite of a warning is held like any other.
2. **No model, still written.** A repeatable entry prepared without a vector (the model is not
   ready or cannot load) is written unchecked; `Written.unchecked` says how many, for the
   caller to count (`warning_novelty_unchecked`) and say.
3. **All or none.** One transaction per batch; an entry that breaks an entry rule refuses the
   whole batch (`crdt.InvalidValue`, which callers turn into a message naming the item).

What a caller does after the commit (announce `entry_written` / `warning_held`, nudge the
p2p publisher and the Styx pusher) is the daemon's: `service/writes.py`, `Writes.write`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from crdt import Sensitivity
from daemon.embedding.embedder import EmbeddingInfo

from .promotion import REPEATABLE_KINDS, WARNING_REPEAT
from .records import Entry, NewEntry
from .repeat_hold import Near, add_checked
from .store import Grimoire, LocalIdentity

__all__ = ["Door", "Prepared", "Writer", "Written", "entry_batch", "needs_vector", "prepare", "write_entries",
           "written"]

Embed = Callable[[list[str]], NDArray[np.float32]]


class Writer(Enum):
    """Who writes through the door: the rules are the same, the writer is named (`Written.writer`)."""

    AGENT = "agent"  # the agent or the operator: the API, the MCP tools, the CLI
    CURATOR = "curator"  # the curator's own entries (the internal mode): rewrites, baselines, re-authored


def needs_vector(new: NewEntry) -> bool:
    """Whether a write goes through the repeat check: public warnings and anti_knowledge."""
    return new.kind in REPEATABLE_KINDS and new.sensitivity is Sensitivity.PUBLIC


@dataclass(frozen=True, slots=True)
class Prepared:
    """New entries, in order, with the vectors the repeat check needs (None where none is
    needed, or none could be computed), the model that computed them, and where the close
    entries are found (`near`: the in-memory vector index; None: the check scans the window)."""

    news: tuple[NewEntry, ...]
    vectors: tuple[NDArray[np.float32] | None, ...]
    info: EmbeddingInfo | None
    near: Near | None = None

    @classmethod
    def unembedded(cls, news: Sequence[NewEntry]) -> Prepared:
        """No vectors (no model): every repeatable entry goes unchecked."""
        return cls(tuple(news), (None,) * len(news), None)


def prepare(news: Sequence[NewEntry], embed: Embed | None, info: EmbeddingInfo | None) -> Prepared:
    """Embed the contents that need a vector (one call to `embed`); no `embed`, no vectors."""
    wanted = [i for i, n in enumerate(news) if needs_vector(n)]
    if not wanted:
        return Prepared(tuple(news), (None,) * len(news), info)
    if embed is None or info is None:
        return Prepared.unembedded(news)
    matrix = embed([news[i].content for i in wanted])
    vectors: list[NDArray[np.float32] | None] = [None] * len(news)
    for row, i in enumerate(wanted):
        vectors[i] = np.asarray(matrix[row], dtype=np.float32)
    return Prepared(tuple(news), tuple(vectors), info)


@dataclass(frozen=True, slots=True)
class Written:
    """What a write did: the entry id for every item (in order; for an item a caller found
    already written, its earlier id), the entries created now, and the created entries held
    as repeats with the cosine to the one each repeats."""

    ids: list[str]
    created: list[Entry] = field(default_factory=list)
    held: dict[str, float] = field(default_factory=dict)
    unchecked: int = 0
    embedded: int = 0  # created with their vector (the repeat check's): the embedder never takes them
    writer: Writer = Writer.AGENT

    @property
    def existing(self) -> list[str]:
        """Ids returned for items already written before (each once, in order)."""
        made = {e.id for e in self.created}
        return list(dict.fromkeys(i for i in self.ids if i not in made))


class Door:
    """The rules, inside one open write transaction: `add(i)` writes `prepared.news[i]`.

    `close[i]` are the entries near item i's vector found before the transaction (`Prepared.near`,
    None: scan); a warning written earlier in the same batch counts as well (it is not in the
    index yet), so two repeats in one flush hold the second."""

    def __init__(self, conn: sqlite3.Connection, add: Callable[[NewEntry], str], identity: LocalIdentity,
                 prepared: Prepared, *, now_ms: int,
                 close: Sequence[list[tuple[str, float]] | None] | None = None, writer: Writer = Writer.AGENT) -> None:
        self._conn = conn
        self.writer = writer
        self._add = add
        self._identity = identity
        self.prepared = prepared
        self._now_ms = now_ms
        self._close = close if close is not None else [None] * len(prepared.news)
        self._batch: list[tuple[str, NDArray[np.float32]]] = []  # this batch's checked warnings
        self.created: list[str] = []
        self.held: dict[str, float] = {}
        self.unchecked = 0
        self.embedded = 0

    def add(self, index: int) -> str:
        """Write item `index` under the rules; returns its id. Raises `crdt.InvalidValue`."""
        new = self.prepared.news[index]
        vector = self.prepared.vectors[index]
        info = self.prepared.info
        if vector is not None and info is not None and needs_vector(new):
            close = self._close[index]
            if close is not None and self._batch:
                same = [(i, float(v @ vector)) for i, v in self._batch]
                close = sorted([*close, *((i, c) for i, c in same if c >= WARNING_REPEAT.similarity)],
                               key=lambda x: -x[1])
            entry_id, similarity = add_checked(self._conn, self._add, new, self._identity, vector=vector, info=info,
                                               now_ms=self._now_ms, close=close)
            self._batch.append((entry_id, vector))
            self.embedded += 1
            if similarity is not None:
                self.held[entry_id] = similarity
        else:
            entry_id = self._add(new)
            self.unchecked += needs_vector(new)
        self.created.append(entry_id)
        return entry_id


@contextmanager
def entry_batch(store: Grimoire, identity: LocalIdentity, prepared: Prepared, *, now_ms: int,
                writer: Writer = Writer.AGENT) -> Iterator[tuple[sqlite3.Connection, Door]]:
    """One write transaction (all or none) whose new entries go through `Door.add`; the caller —
    a module of daemon/grimoire, never code outside it — may read and write its own tables on
    the connection (idempotency records, a re-authored entry's fields). The close entries of
    each checked item are looked up in `prepared.near` first, before the transaction."""
    near = prepared.near
    close = [near(store, v) if near is not None and v is not None else None for v in prepared.vectors]
    with store._local_batch(identity) as (conn, add):
        yield conn, Door(conn, add, identity, prepared, now_ms=now_ms, close=close, writer=writer)


def written(store: Grimoire, door: Door, ids: list[str]) -> Written:
    """The `Written` of a committed batch."""
    by_id = {e.id: e for e in store.get_many(door.created)}
    return Written(ids=ids, created=[by_id[i] for i in door.created], held=dict(door.held),
                   unchecked=door.unchecked, embedded=door.embedded, writer=door.writer)


def write_entries(store: Grimoire, identity: LocalIdentity, prepared: Prepared, *, now_ms: int,
                  writer: Writer = Writer.AGENT) -> Written:
    """Write every prepared entry, all or none (`Prepared.unembedded(news)` when no vector is at
    hand: repeatable entries are then written unchecked and counted)."""
    with entry_batch(store, identity, prepared, now_ms=now_ms, writer=writer) as (_, door):
        ids = [door.add(i) for i in range(len(prepared.news))]
    return written(store, door, ids)
