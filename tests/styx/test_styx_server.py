"""The reference Styx server speaks the wire and its faults do what they say (daemon/testing/styx_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.styx.wire import batch_body, item_json
from daemon.testing.styx_server import StyxServer

ENTRY = {"id": "e" * 32, "kind": "warning", "content": "Never LP in pools under $100K TVL", "confidence": 0.8,
         "importance": 0.5, "category": None, "metadata": {}, "provenance": "self",
         "created_at": "2026-11-23T03:00:00.000Z"}


@pytest.fixture
def styx(tmp_path: Path) -> Iterator[StyxServer]:
    server = StyxServer(tmp_path / "styx.db", token="t" * 32).start()
    yield server
    server.stop()


def _client(server: StyxServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": "Bearer " + "t" * 32}, timeout=5)


def _batch(*seqs: int) -> bytes:
    return batch_body("golem", [item_json(writer="golem", seq=s, layers=["clade"], entry=ENTRY) for s in seqs])


def test_entries_are_stored_once_per_idempotency_key(styx: StyxServer) -> None:
    with _client(styx) as c:
        assert c.post("/v1/styx/entries", content=_batch(1, 2), headers={"Idempotency-Key": "b1"}).status_code == 200
        answer = c.post("/v1/styx/entries", content=_batch(2, 3), headers={"Idempotency-Key": "b2"})
        assert answer.json() == {"stored": 1, "received": 2}
        assert httpx.post(styx.url + "/v1/styx/entries", content=_batch(4)).status_code == 401
        results = c.get("/v1/styx/query", params={"q": "pools TVL", "layers": "clade", "k": 5}).json()["results"]
    assert styx.keys() == ["golem:1", "golem:2", "golem:3"]
    assert results[0]["layer"] == "clade" and results[0]["score"] == 1.0


def test_faults_status_retry_after_reset_and_the_lost_answer(styx: StyxServer) -> None:
    with _client(styx) as c:
        styx.set_faults(status=429, retry_after=7, times=1)
        r = c.post("/v1/styx/entries", content=_batch(1))
        assert r.status_code == 429 and r.headers["Retry-After"] == "7"
        styx.set_faults(reset=True, times=1)
        with pytest.raises(httpx.TransportError):
            c.post("/v1/styx/entries", content=_batch(1))
        styx.set_faults(commit_then_reset=True, times=1)
        with pytest.raises(httpx.TransportError):
            c.post("/v1/styx/entries", content=_batch(1))
        assert styx.keys() == ["golem:1"]  # committed although nobody heard the answer
        assert c.post("/v1/styx/entries", content=_batch(1)).json() == {"stored": 0, "received": 1}


def test_vault_upload_is_stored_under_peer_and_backup(styx: StyxServer, tmp_path: Path) -> None:
    with _client(styx) as c:
        assert c.put("/v1/styx/vault/golem/backup-1", content=b"\x00sealed").status_code == 201
        assert c.put("/v1/styx/vault/golem/..", content=b"x").status_code in (400, 404)
    assert (tmp_path / "vault" / "golem" / "backup-1").read_bytes() == b"\x00sealed"
    assert json.loads(json.dumps(styx.stats()))["vault_uploads"] == 1
