"""Which store failures are the storage's (pure): a full, read-only or failing filesystem."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from daemon.grimoire.storage_faults import storage_refusal


def test_sqlite_full_and_readonly_errors_are_refusals(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    ro = sqlite3.connect(f"file:{tmp_path / 'x.db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        ro.execute("INSERT INTO t VALUES (1)")
    refusal = storage_refusal(caught.value)  # a real SQLITE_READONLY from SQLite itself
    assert refusal is not None and (refusal.status, refusal.error) == (503, "read_only")
    full = storage_refusal(sqlite3.OperationalError("database or disk is full"))
    assert full is not None and (full.status, full.error) == (507, "insufficient_storage")
    assert "free space" in full.detail and "resume by themselves" in full.detail


@pytest.mark.parametrize(("code", "status", "error"), [
    (errno.ENOSPC, 507, "insufficient_storage"), (errno.EDQUOT, 507, "insufficient_storage"),
    (errno.EROFS, 503, "read_only"), (errno.EIO, 503, "storage_unavailable")])
def test_os_errors_are_refusals(code: int, status: int, error: str) -> None:
    refusal = storage_refusal(OSError(code, "x"))
    assert refusal is not None and (refusal.status, refusal.error) == (status, error)


def test_everything_else_stays_an_unexpected_error() -> None:
    assert storage_refusal(sqlite3.OperationalError("no such table: t")) is None
    assert storage_refusal(OSError(errno.ENOENT, "gone")) is None
    assert storage_refusal(ValueError("database or disk is full")) is None


def test_a_sync_the_storage_refused_is_counted_not_reported_as_a_bug() -> None:
    from collections import Counter

    from daemon.p2p.ports import internal_error

    counters: Counter[str] = Counter()
    try:
        raise ExceptionGroup("sync", [sqlite3.OperationalError("database or disk is full")])
    except ExceptionGroup:
        internal_error(counters, "sync with %s", "peer")
    try:
        raise KeyError("a bug")
    except KeyError:
        internal_error(counters, "sync with %s", "peer")
    assert counters == Counter(sync_storage_refused=1, internal_errors=1)


def test_an_error_raised_from_a_storage_failure_stands_for_it() -> None:
    from daemon.errors import DaemonError

    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.Error as exc:
            raise DaemonError(f"cannot snapshot: {exc}") from exc
    except DaemonError as wrapped:
        refusal = storage_refusal(wrapped)
    assert refusal is not None and refusal.status == 507
    assert storage_refusal(DaemonError("cannot snapshot: bad header")) is None
    looped = DaemonError("a")
    looped.__cause__ = looped  # a cycle ends, it does not spin
    assert storage_refusal(looped) is None
