"""A reference Styx server: the wire of daemon/styx/wire.py over SQLite, with switchable faults.

    python -m daemon.testing.styx_server --port 8765 --db styx.db --token T

For tests (start it in a thread with `StyxServer(...).start()`) and for trying Styx out.
Endpoints: `POST /v1/styx/entries` (dedup by each entry's `idempotency_key`; any 2xx means
the whole batch is stored), `GET /v1/styx/query?q=&layers=&k=` (a plain substring and word
overlap score over stored entries), `PUT /v1/styx/vault/{peer}/{backup}` (the body stored
as a file next to the database), `GET /v1/styx/vault/{peer}` (`{"objects": [{"name",
"bytes"}]}`) and `GET /v1/styx/vault/{peer}/{name}` (the stored bytes), `GET /v1/styx/stats`
(counts, for tests). Each item is stored once and served for every layer it lists (`layers`,
else its `layer`).

Faults (`server.faults`, or `POST /v1/styx/faults` with the same JSON): `status` (answer
every request with it, e.g. 500 or 403), `retry_after` (header to add), `delay_s` (sleep
before answering), `hang` (never answer), `reset` (close the connection without an answer),
`commit_then_reset` (store the batch, then drop the connection: the lost answer), and
`times` (how many requests the fault applies to; -1 = until cleared).
"""

from __future__ import annotations

import argparse
import json
import socket
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["StyxServer"]

MAX_BODY = 64 * 1024 * 1024


class StyxServer:
    """The server; `url` once started. Thread-safe: one lock around the database."""

    def __init__(self, db: Path, *, token: str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.db_path = db
        self.token = token
        self.faults: dict[str, Any] = {}
        self.requests = 0
        self.queries: list[str] = []  # the text of every query asked, in order (what left a golem)
        self._arrivals: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._conn = sqlite3.connect(db, check_same_thread=False)
        self._conn.executescript(
            "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, golem TEXT, id TEXT, kind TEXT, layer TEXT, "
            "content TEXT, confidence REAL, item TEXT, arrived INTEGER);"
            "CREATE TABLE IF NOT EXISTS batches (n INTEGER PRIMARY KEY, idempotency_key TEXT, items INTEGER);"
            "CREATE TABLE IF NOT EXISTS vault (peer TEXT, backup TEXT, bytes INTEGER, PRIMARY KEY (peer, backup));")
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> StyxServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="styx-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            self._conn.close()

    def set_faults(self, **faults: Any) -> None:
        with self._lock:
            self.faults = dict(faults)
            self._release.clear()

    def clear_faults(self) -> None:
        self.set_faults()
        self._release.set()

    def arrivals(self, path: str) -> list[float]:
        """`time.monotonic()` of every request to `path` (auth passed), in order: how retries were spaced."""
        with self._lock:
            return [t for t, p in self._arrivals if p == path]

    def take_fault(self, path: str = "") -> dict[str, Any]:
        """The fault for this request (and use up one of its `times`)."""
        with self._lock:
            self.requests += 1
            self._arrivals.append((time.monotonic(), path))
            faults = dict(self.faults)
            times = faults.get("times", -1)
            if not faults or times == 0:
                return {}
            if times > 0:
                self.faults["times"] = times - 1
            return faults

    # -- storage -----------------------------------------------------------------------------

    def store_batch(self, key: str | None, body: dict[str, Any]) -> int:
        golem = str(body["golem"])
        new = 0
        with self._lock, self._conn:
            for item in body["entries"]:
                cur = self._conn.execute(
                    "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (str(item["idempotency_key"]), golem, str(item["id"]), str(item["kind"]), str(item["layer"]),
                     str(item["content"]), float(item["confidence"]), json.dumps(item), time.time_ns()))
                new += cur.rowcount
            self._conn.execute("INSERT INTO batches (idempotency_key, items) VALUES (?, ?)",
                               (key, len(body["entries"])))
        return new

    def stats(self) -> dict[str, Any]:
        with self._lock:
            entries = self._conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            batches = self._conn.execute("SELECT count(*), coalesce(sum(items), 0) FROM batches").fetchone()
            vault = self._conn.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM vault").fetchone()
        return {"entries": entries, "batches": batches[0], "items_received": batches[1], "vault_uploads": vault[0],
                "vault_bytes": vault[1], "requests": self.requests}

    def items(self) -> list[dict[str, Any]]:
        """Every stored item as it was sent, in arrival order."""
        with self._lock:
            return [json.loads(r[0]) for r in self._conn.execute("SELECT item FROM entries ORDER BY arrived, rowid")]

    def senders(self) -> dict[str, str]:
        """The `golem` each stored item's request named, by idempotency key (what Styx learns of who sent it)."""
        with self._lock:
            return dict(self._conn.execute("SELECT key, golem FROM entries").fetchall())

    def keys(self) -> list[str]:
        """Every stored idempotency key, in arrival order."""
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT key FROM entries ORDER BY arrived, rowid")]

    def query(self, q: str, layers: list[str], k: int) -> list[dict[str, Any]]:
        words = {w for w in q.lower().split() if len(w) > 2}
        with self._lock:
            self.queries.append(q)
            rows = self._conn.execute("SELECT id, kind, content, confidence, layer, item FROM entries").fetchall()
        scored = []
        for id_, kind, content, confidence, first, item in rows:
            held = json.loads(item).get("layers") or [first]
            served = [x for x in held if not layers or x in layers]
            if not served:
                continue
            layer = served[0]
            text = content.lower()
            score = sum(w in text for w in words) / max(1, len(words))
            if score > 0:
                scored.append({"id": id_, "kind": kind, "content": content, "confidence": confidence,
                               "layer": layer, "score": round(score, 4)})
        scored.sort(key=lambda r: (-r["score"], r["id"]))
        return scored[:k]

    def vault_objects(self, peer: str) -> list[dict[str, Any]]:
        with self._lock:
            return [{"name": n, "bytes": b} for n, b in self._conn.execute(
                "SELECT backup, bytes FROM vault WHERE peer = ? ORDER BY backup", (peer,))]

    def vault_path(self, peer: str, name: str) -> Path:
        """Where an uploaded object is kept (tests tamper with it there)."""
        return self.db_path.parent / "vault" / peer / name

    def store_vault(self, peer: str, backup: str, data: bytes) -> None:
        folder = self.db_path.parent / "vault" / peer
        folder.mkdir(parents=True, exist_ok=True)
        (folder / backup).write_bytes(data)
        with self._lock, self._conn:
            self._conn.execute("INSERT OR REPLACE INTO vault VALUES (?, ?, ?)", (peer, backup, len(data)))


def _handler(server: StyxServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _reset(self) -> None:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.close()
            self.close_connection = True

        def _body(self) -> bytes | None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": "body too large"})
                return None
            return self.rfile.read(length)

        def _gate(self) -> dict[str, Any] | None:
            """Auth and faults; None when the request was answered (or dropped) here."""
            if server.token and self.headers.get("Authorization") != f"Bearer {server.token}":
                self._send(401, {"error": "bad or missing bearer token"})
                return None
            fault = server.take_fault(urlsplit(self.path).path)
            if fault.get("hang"):
                server._release.wait(600)
                self._reset()
                return None
            if fault.get("delay_s"):
                time.sleep(float(fault["delay_s"]))
            if fault.get("reset"):
                self._reset()
                return None
            if fault.get("status"):
                headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
                self._send(int(fault["status"]), {"error": "injected fault"}, headers)
                return None
            return fault

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._body()
            if body is None:
                return
            if path == "/v1/styx/faults":
                server.set_faults(**json.loads(body or b"{}"))
                self._send(200, {"faults": server.faults})
                return
            fault = self._gate()
            if fault is None:
                return
            if path != "/v1/styx/entries":
                self._send(404, {"error": "no such endpoint"})
                return
            try:
                doc = json.loads(body)
                new = server.store_batch(self.headers.get("Idempotency-Key"), doc)
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": f"malformed batch: {exc}"})
                return
            if fault.get("commit_then_reset"):
                self._reset()
                return
            self._send(200, {"stored": new, "received": len(doc["entries"])})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/v1/styx/stats":
                self._send(200, server.stats())
                return
            if self._gate() is None:
                return
            parts = url.path.split("/")
            if len(parts) in (5, 6) and parts[1:4] == ["v1", "styx", "vault"] and parts[4]:
                self._vault_get(*(unquote(p) for p in parts[4:]))
                return
            if url.path != "/v1/styx/query":
                self._send(404, {"error": "no such endpoint"})
                return
            params = parse_qs(url.query)
            layers = [x for x in (params.get("layers", [""])[0]).split(",") if x]
            try:
                k = max(1, min(100, int(params.get("k", ["10"])[0])))
            except ValueError:
                self._send(400, {"error": "k must be an integer"})
                return
            self._send(200, {"results": server.query(params.get("q", [""])[0], layers, k)})

        def _vault_get(self, peer: str, name: str | None = None) -> None:
            if "/" in peer or peer.startswith(".") or (name is not None and ("/" in name or name.startswith("."))):
                self._send(400, {"error": "bad peer or object name"})
                return
            if name is None:
                self._send(200, {"objects": server.vault_objects(peer)})
                return
            path = server.vault_path(peer, name)
            if not path.is_file():
                self._send(404, {"error": f"no object {name} for {peer}"})
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            parts = urlsplit(self.path).path.split("/")
            body = self._body()
            if body is None or self._gate() is None:
                return
            if len(parts) != 6 or parts[1:4] != ["v1", "styx", "vault"] or not parts[4] or not parts[5]:
                self._send(404, {"error": "PUT /v1/styx/vault/PEER/BACKUP"})
                return
            peer, backup = unquote(parts[4]), unquote(parts[5])
            if "/" in peer or "/" in backup or peer.startswith(".") or backup.startswith("."):
                self._send(400, {"error": "bad peer or backup id"})
                return
            server.store_vault(peer, backup, body)
            self._send(201, {"stored": len(body)})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="A reference Styx server (SQLite) for trying clade's Styx client.")
    parser.add_argument("--db", type=Path, default=Path("styx.db"))
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    server = StyxServer(args.db, token=args.token, host=args.host, port=args.port)
    print(f"styx reference server on {server.url} (db {args.db})", flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":
    main()
