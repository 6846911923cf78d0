"""The Grimoire: a golem's local knowledge store (SQLite entries, LanceDB episodes, PLAYBOOK.md)."""

from .episodes import Episode, EpisodeLog
from .playbook import DEFAULT_PLAYBOOK, atomic_write, read_playbook, write_playbook
from .records import Entry, NewEntry
from .store import Grimoire, RecallHit, StoreCounts, wall_clock_ms

__all__ = [
    "DEFAULT_PLAYBOOK",
    "Entry",
    "Episode",
    "EpisodeLog",
    "Grimoire",
    "NewEntry",
    "RecallHit",
    "StoreCounts",
    "atomic_write",
    "read_playbook",
    "wall_clock_ms",
    "write_playbook",
]
