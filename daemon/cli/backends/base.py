"""`Backend`: the operations a `clade` command performs the same way with or without a daemon.

A command parses and checks its arguments, asks `backend_for(data)` (daemon/cli/backends/__init__.py)
for a backend, calls one method, and renders the document it returns. Two implementations:
`DaemonBackend` (the control API over the daemon's unix socket, so writes go through its single
writer and its publisher gossips them) and `StoreBackend` (the data dir's store opened directly).
For the same operation on the same data both return the same document (the API's answer is the
direct path's document), and both raise the same `UsageError`/`NotFound`/`DaemonError`.

Not here: commands that need a running daemon (peers, sync, trust, `styx retry`, `die`), which
use `DaemonClient` and refuse without one, and commands that need it stopped (`testament`,
`inherit`, `restore --as-successor`), which check `daemon_is_live`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from daemon.agent.memory import Lesson
from daemon.contract.requests import FlushIn
from daemon.grimoire.recall import RecallQuery

__all__ = ["Backend", "Doc", "PadTuple"]

Doc = dict[str, Any]
PadTuple = tuple[float, float, float]  # pleasure, arousal, dominance, each -1..1


class Backend(Protocol):
    """What the CLI does either through the daemon or on the store; every method returns the
    JSON-ready document the command prints."""

    # -- entries ---------------------------------------------------------------------------------

    def remember(self, doc: Doc) -> Doc:
        """Write an entry from its API document (`POST /v1/memory`'s body): `{id, entry}`."""
        ...

    def retract(self, entry_id: str, *, superseded_by: str | None) -> Doc:
        """The author retracts its own entry (siblings learn of it): the entry's state."""
        ...

    def endorse(self, entry_id: str, *, confirm: bool) -> Doc:
        """Confirm (or, `confirm=False`, contradict) a sibling's entry: the entry's state."""
        ...

    def entry(self, entry_id: str) -> Doc:
        """One entry (`NotFound` if unknown)."""
        ...

    def entries(self, *, kinds: Sequence[str], limit: int, archived: bool) -> Doc:
        """`{entries}`, newest first, of these kinds (all when empty), archived ones too if asked."""
        ...

    def forget(self, entry_id: str) -> Doc:
        """Archive an entry locally: `{id, archived: true, changed}`."""
        ...

    def unarchive(self, entry_id: str) -> Doc:
        """Undo an archive: `{id, archived: false, changed}`."""
        ...

    def outcome(self, entry_id: str, *, effect: str, metric: str, value: float | None, episode: str | None,
                note: str | None) -> Doc:
        """Record what acting on an entry led to: the entry's local confidence and outcome tally."""
        ...

    def vitality(self) -> Doc:
        """The golem's vitality phase and Hayflick ratio."""
        ...

    def set_vitality(self, phase: str | None, hayflick: float | None, *, economic: float | None = None,
                     epistemic: float | None = None, age_factor: float | None = None) -> Doc:
        """Report the vitality (a phase, the clocks, or both; and the Hayflick ratio); the new vitality."""
        ...

    # -- memory ----------------------------------------------------------------------------------

    def recall(self, query: RecallQuery) -> Doc:
        """`{query, results}` (with Styx's answers merged in when Styx is asked): every option of
        the query applies, the same ids in the same order either way."""
        ...

    def digest(self, query: RecallQuery, *, budget_tokens: int, fmt: str) -> Doc:
        """The memory digest of `query.k` entries for an LLM call, within `budget_tokens`, in `fmt`."""
        ...

    def feedback(self, *, cited: Sequence[str], injected: Sequence[str], response: str | None) -> Doc:
        """Citation feedback: `{weights, cited, matched_by_response}`; without `cited`, injected
        entries close to a sentence of `response` count as cited."""
        ...

    # -- agent memory ----------------------------------------------------------------------------

    def working_memory(self, session: str) -> Doc:
        """A session's working memory: `{session, content, bytes, updated_ms}`."""
        ...

    def set_working_memory(self, session: str, content: str) -> Doc:
        """Replace a session's working memory (`content` already checked)."""
        ...

    def close_working_memory(self, session: str) -> Doc:
        """Migrate marked lines to entries, then clear: `{session, migrated, existing}`."""
        ...

    def flush(self, body: FlushIn) -> Doc:
        """Store a session's facts, all or none: `{session, ids, created}`."""
        ...

    def import_lessons(self, name: str, lessons: Sequence[Lesson]) -> Doc:
        """Import lessons parsed from the file `name`, all or none: `{ids, created, skipped}`."""
        ...

    # -- upkeep ----------------------------------------------------------------------------------

    def curator_run(self) -> Doc:
        """One curator cycle now: its report."""
        ...

    def verify_episode(self, episode_id: str) -> Doc:
        """Mark an episode quality-verified (idempotent): `{id, changed, episode}`."""
        ...

    def styx_status(self) -> Doc:
        """The Styx outbox's status (the pusher's counters are null without a daemon)."""
        ...

    def install_revocations(self, raw: bytes) -> Doc:
        """Adopt an owner-signed revocation list if newer: `{version, revoked, adopted}`."""
        ...

    def reload_keys(self) -> Doc | None:
        """Have the daemon reload the clade keys just installed; None when no daemon runs
        (it reads them when it starts)."""
        ...
