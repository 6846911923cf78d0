"""Reads never wait for the writer: search, digest, status and listings run on read-only
connections beside the writer thread (daemon/service/store_access.py `on_reader`)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from daemon.datadir import DataDir
from daemon.grimoire import Grimoire
from daemon.testing.process import DaemonProc


def test_searches_and_status_answer_while_the_writer_is_blocked(data_dir: DataDir) -> None:
    daemon = DaemonProc(data_dir, env={"CLADE_STORE__BUSY_TIMEOUT_MS": "60000"})
    try:
        daemon.request("POST", "/v1/memory", json={"content": "Never LP in pools under $100K TVL",
                                                   "memory_type": "warning"}).raise_for_status()
        daemon.request("POST", "/v1/memory/search", json={"query": "pool size"}).raise_for_status()  # warm
        blocker = sqlite3.connect(data_dir.root / "grimoire.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: the daemon's writer waits
        done = threading.Event()

        def write() -> None:
            daemon.request("POST", "/v1/memory", json={"content": "Gas above 80 gwei: delay swaps",
                                                       "memory_type": "warning"}).raise_for_status()
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        try:
            found = daemon.request("POST", "/v1/memory/search", json={"query": "minimum pool liquidity"})
            status = daemon.request("GET", "/v1/status")
            listed = daemon.request("GET", "/v1/entries")
            digest = daemon.request("POST", "/v1/digest", json={"query": "pool liquidity"})
            assert not done.is_set()  # the write is still waiting for the lock: the reads did not queue behind it
            assert found.status_code == 200 and "100K TVL" in found.json()["results"][0]["content"]
            assert status.status_code == 200 and status.json()["entries"] == 1
            assert listed.status_code == 200 and len(listed.json()["entries"]) == 1
            assert digest.status_code == 200 and digest.json()["entries"]
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert done.wait(60)  # the lock is gone: the write lands
        writer.join()
        again = daemon.request("POST", "/v1/memory/search", json={"query": "gas price swaps"}).json()
        assert any("80 gwei" in r["content"] for r in again["results"])  # read-your-writes through a reader
    finally:
        assert daemon.stop() == 0


def test_a_reader_cannot_write(tmp_path: Path) -> None:
    Grimoire.open(tmp_path / "g.db", create=True).close()
    reader = Grimoire.open_reader(tmp_path / "g.db")
    try:
        assert reader.counts().entries == 0
        try:
            reader.connection.execute("DELETE FROM entries")
        except sqlite3.OperationalError as exc:
            assert "readonly" in str(exc) or "query_only" in str(exc) or "read-only" in str(exc), exc
        else:
            raise AssertionError("a read connection wrote")
    finally:
        reader.close()
    _ = time
