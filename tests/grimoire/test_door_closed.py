"""The write door is closed: nothing outside daemon/grimoire reaches the store's connection or
writes an own entry past the door (docs/design/write-door.md).

The scan reads the source (ast), so a side door fails here before any behaviour test could
miss it: an attribute of another object named like the store's private writers or its
connection, or an import of the grimoire's internal door pieces.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Attributes that hand out the store's connection or write past the door.
PRIVATE = frozenset({
    "_conn", "_transaction", "_write", "_local_write", "_local_batch", "_snapshot", "_room_write", "_room_read",
    "connection", "transaction", "room_read", "room_write", "remember_many", "local_batch", "remember_warning",
})
# Grimoire-internal pieces of the door: outside, `write_entries` (and agent_store.write_once).
INTERNAL_IMPORTS = frozenset({"entry_batch", "add_checked", "remember_warning", "Door"})

# Files allowed a name above while a change moves them off it (empty: none is).
AWAITING: dict[str, frozenset[str]] = {}


def side_doors(path: Path) -> list[str]:
    """Where `path` reaches past the door: `line: what`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue  # the module's own object (a socket server's `self.connection`, a class's `_conn`)
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("daemon.grimoire"):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name in INTERNAL_IMPORTS]
    return [f"{line}: {what}" for line, what in sorted(found)]


def outside_sources() -> list[Path]:
    grimoire = REPO / "daemon" / "grimoire"
    return sorted(p for top in ("daemon", "tui") for p in (REPO / top).rglob("*.py")
                  if grimoire not in p.parents)


def test_nothing_outside_the_grimoire_reaches_its_connection_or_past_the_write_door() -> None:
    sources = outside_sources()
    assert len(sources) > 100  # the scan sees the house (daemon/ and tui/), not an empty directory
    offences = {}
    for path in sources:
        rel = path.relative_to(REPO).as_posix()
        allowed = AWAITING.get(rel, frozenset())
        found = [f for f in side_doors(path) if f.split(".", 1)[-1] not in allowed]
        if found:
            offences[rel] = found
    assert offences == {}, ("code outside daemon/grimoire reaches the store's connection or writes past the write "
                            "door; call a named Grimoire method (rooms.py, styx_store.py) or write_door.write_entries "
                            f"instead: {offences}")


def test_the_scan_finds_a_side_door(tmp_path: Path) -> None:
    """The scan is not blind: each kind of side door it looks for is found in a sample."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from daemon.grimoire.write_door import entry_batch\n"
        "def f(store):\n"
        "    with store.transaction() as conn:\n"
        "        conn.execute('UPDATE entries SET embedding = NULL')\n"
        "    store._local_batch(None)\n"
        "    return store.connection, self_like.room_read(len)\n", encoding="utf-8")
    assert side_doors(sample) == ["1: import entry_batch", "3: .transaction", "5: ._local_batch", "6: .connection",
                                  "6: .room_read"]


def test_awaiting_entries_are_still_needed() -> None:
    """An entry of `AWAITING` is removed once its file no longer needs it (the list only shrinks)."""
    for rel, names in AWAITING.items():
        used = {f.split(".", 1)[-1] for f in side_doors(REPO / rel)}
        assert names <= used, f"{rel} no longer uses {sorted(names - used)}: remove it from AWAITING (and the Grimoire)"
