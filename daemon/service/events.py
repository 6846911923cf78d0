"""Payloads of the daemon's events (`GET /v1/events`) that more than one caller publishes.

`entry_written` is published by every path that writes an own entry (`POST /v1/memory`, the
tools, flush, lessons, working-memory close); `entry_written(entry)` builds its payload in
one place, so the paths cannot drift apart.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module stays import-light: the TUI uses `preview` too
    from daemon.grimoire.records import Entry

__all__ = ["PREVIEW_CHARS", "entry_written", "preview"]

PREVIEW_CHARS = 120
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]")


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line (runs of whitespace and control characters become one space), at most
    `limit` characters; a cut one ends in `…`."""
    line = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def entry_written(entry: Entry) -> dict[str, Any]:
    """{id, kind, category, confidence, source, author, preview}: what a feed shows of a new entry
    (`source` is its provenance; `category` None when it has none)."""
    body = entry.body
    return {"id": entry.id, "kind": body.kind.value, "category": None if body.category is None else body.category.value,
            "confidence": entry.confidence, "source": entry.provenance, "author": body.author,
            "preview": preview(body.content)}
