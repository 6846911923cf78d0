"""Short ids: an entry or episode id given as a unique prefix, as git takes a commit.

Ids are 32 lowercase hex characters (entries: their content hash; episodes: 16 random bytes).
Anywhere one is taken (the control API's paths and bodies, the CLI's arguments), a prefix of at
least `MIN_PREFIX` hex characters that starts exactly one id names that id. The stores find the
candidates (`EntryReads.resolve_id`, `EpisodeLog.resolve_id`); the rules are here, pure:

- 32 hex characters: the id itself (whether it exists is the caller's next read);
- `MIN_PREFIX`..31 hex characters: the one id starting with them; `NotFound` (404) when none
  does, `UsageError` (400) naming up to `SHOWN` candidates when several do;
- fewer than `MIN_PREFIX` hex characters: `UsageError` (400) stating the minimum;
- anything else (not hex, longer than an id): `NotFound` (404): it names nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.errors import NotFound, UsageError

__all__ = ["ID_LENGTH", "ID_OR_PREFIX_PATTERN", "MIN_PREFIX", "SHOWN", "checked_prefix", "the_one"]

ID_LENGTH = 32
MIN_PREFIX = 4
SHOWN = 5
# What the OpenAPI document states for an id argument (the rules above: shorter is a 400, not hex a 404).
ID_OR_PREFIX_PATTERN = rf"^[0-9a-fA-F]{{{MIN_PREFIX},{ID_LENGTH}}}$"
_HEX = frozenset("0123456789abcdef")


def checked_prefix(text: str, noun: str) -> str:
    """`text` lowercased, once it can be an id or a prefix of one (`noun`: "entry", "episode",
    in the messages). Raises as the module states; a full id is returned as is."""
    given = text.lower()
    if not given or any(c not in _HEX for c in given) or len(given) > ID_LENGTH:
        raise NotFound(f"no {noun} with id {text!r} (an id is {ID_LENGTH} hex characters, "
                       f"or a unique prefix of at least {MIN_PREFIX})")
    if len(given) < MIN_PREFIX:
        raise UsageError(f"{noun} id prefix {given!r} is too short: give at least {MIN_PREFIX} hex characters "
                         f"(an id is {ID_LENGTH})")
    return given


def the_one(given: str, found: Sequence[str], noun: str) -> str:
    """The one id of `found` (the ids starting with `given`, sorted, at least `SHOWN + 1` asked
    for): `NotFound` when there is none, `UsageError` listing the first `SHOWN` when several."""
    if not found:
        raise NotFound(f"no {noun} with id {given!r} (nor one starting with it)")
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise UsageError(f"{noun} id prefix {given!r} is ambiguous: {listed}; give more characters")
    return str(found[0])
