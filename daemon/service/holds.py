"""Which own writes go through the repeat check before they are written (pure).

A warning or anti_knowledge crosses at once — unless it repeats (cosine ≥ 0.95) one this golem
gossiped in the last 24 h (daemon/grimoire/crossing.py, remember_warning). The write path that
embeds first and then writes and (maybe) holds, in one go, is `Writes.remember`
(daemon/service/writes.py).
"""

from __future__ import annotations

from crdt import Sensitivity
from daemon.grimoire import NewEntry
from daemon.grimoire.promotion import REPEATABLE_KINDS

__all__ = ["checks_repeats"]


def checks_repeats(new: NewEntry) -> bool:
    """Whether a local write goes through the repeat check (public warnings and anti_knowledge)."""
    return new.kind in REPEATABLE_KINDS and new.sensitivity is Sensitivity.PUBLIC
