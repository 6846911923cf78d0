"""PLAYBOOK.md: what it holds, read, and replace atomically (temp file + fsync + rename + fsync dir).

The playbook is read by the golem's agent and queued to Styx's vault layer, so it holds only
what may cross: active, public warnings, heuristics and anti-knowledge, released from
quarantine (a sibling's unverified entry is not, on trial or not), not held by the sync gate
(a repeated warning, an inherited prior) and not refuted. Private and sensitive
entries, and a suspect sibling's rules, never reach it (`playbook_text` takes what the caller
selected; `service/curation.render_playbook` selects).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["DEFAULT_PLAYBOOK", "PLAYBOOK_LIMIT", "atomic_write", "playbook_text", "read_playbook", "snapshot_playbook",
           "write_playbook"]

SNAPSHOT_KEEP = 20
PLAYBOOK_LIMIT = 200  # rules at most, newest first

DEFAULT_PLAYBOOK = """\
# PLAYBOOK

The curator rewrites this file every cycle from the Grimoire's active warnings, heuristics
and anti-knowledge that may cross to siblings: public, released from quarantine, not refuted.
Private and sensitive entries are never written here. Edits made by hand are replaced on the
next cycle.
"""


def playbook_text(rules: Iterable[tuple[str, str]]) -> str:
    """PLAYBOOK.md for `rules` — (kind, content) pairs, already selected — one line each,
    whitespace folded so a rule cannot forge a heading or another rule."""
    lines = [DEFAULT_PLAYBOOK]  # the header an empty playbook has
    lines.extend(f"- [{kind}] {' '.join(content.split())}" for kind, content in rules)
    return "\n".join(lines) + "\n"


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix,
    and the new one survives a crash once this returns.

    Safe to call from several threads at once (the last to finish wins): each call writes
    its own temp file. With one per process, two threads (`trio.to_thread`) saving the same
    file truncated each other's temp file and the second `os.replace` raised FileNotFoundError."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_playbook(path: Path) -> str:
    """The playbook's text ("" if it does not exist yet)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def write_playbook(path: Path, text: str) -> None:
    """Atomically replace the playbook with `text` (UTF-8)."""
    atomic_write(path, text.encode("utf-8"))


def snapshot_playbook(path: Path, text: str, *, now_ms: int, keep: int = SNAPSHOT_KEEP) -> Path | None:
    """Write `text` as PLAYBOOK.md and, when it changed, keep the old one as
    `playbook/PLAYBOOK.<ms>.md` (the last `keep` versions; older ones go). Returns the snapshot or None."""
    old = read_playbook(path)
    if old == text:
        return None
    folder = path.parent / "playbook"
    snapshot: Path | None = None
    if old:
        folder.mkdir(exist_ok=True)
        snapshot = folder / f"PLAYBOOK.{now_ms:015d}.md"
        atomic_write(snapshot, old.encode("utf-8"))
    write_playbook(path, text)
    if folder.is_dir():
        versions = sorted(folder.glob("PLAYBOOK.*.md"))
        for stale in versions[: max(0, len(versions) - keep)]:
            stale.unlink(missing_ok=True)
    return snapshot
