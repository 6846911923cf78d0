"""A list of values in SQL as one parameter: `x IN (SELECT value FROM json_each(?))`.

Each `IN (?, ?, …)` of another length is another SQL text, so another prepared statement in
every connection's statement cache (Python's sqlite3 keeps 128 a connection): ~18 KiB for a
short list, ~75 KiB for a few hundred ids. A daemon's five connections met new lengths for
hours, and SQLite's memory grew with them (the soak: 6 → 14 MiB in 35 minutes, its page caches
a tenth of it; bench/RESULTS.md). With the list as one JSON parameter each query is one text
and one statement, whatever the list's length. The values must be JSON's: strings or numbers
(never blobs); `json_each` gives them back as TEXT or INTEGER/REAL, as they were bound.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

__all__ = ["IN_LIST", "as_list"]

IN_LIST = "(SELECT value FROM json_each(?))"


def as_list(values: Iterable[str | int | float]) -> str:
    """The parameter for `IN_LIST`: the values as a JSON array."""
    return json.dumps(list(values), separators=(",", ":"))
