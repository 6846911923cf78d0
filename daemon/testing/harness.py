"""A clade on loopback: an owner and N golems, each a real `clade run` process.

`clade demo` uses it to show sync end to end; the multi-daemon tests and the clade benchmarks
use the same harness (each golem a `DaemonProcess`, daemon/testing/process.py). Everything
lives in one directory; `close()` stops every daemon.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from crypto import AdmissionBundle, Certificate, OwnerKey
from daemon.client import Endpoint, Unreachable
from daemon.datadir import DataDir
from daemon.grimoire.store import wall_clock_ms

from .notify import NotifySocket
from .process import CLADE, DaemonProcess

__all__ = ["CLADE", "EventLog", "Golem", "LoopbackClade", "run_demo"]


@dataclass
class EventLog:
    """Server-sent events of one daemon, recorded by a background thread as they arrive."""

    socket: str
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stop: bool = False

    def start(self) -> EventLog:
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        if not ready.wait(10):
            raise RuntimeError(f"no event stream from {self.socket}")
        return self

    def _run(self, ready: threading.Event) -> None:
        with contextlib.suppress(httpx.HTTPError, Unreachable), Endpoint(socket=Path(self.socket)).http_client(
                timeout_s=None) as client, client.stream("GET", "/v1/events") as res:
            name = None
            for line in res.iter_lines():
                if self._stop:
                    return
                if line.startswith(": connected"):
                    ready.set()
                elif line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name is not None:
                    with self._cond:
                        self.events.append((wall_clock_ms(), name, json.loads(line[6:])))
                        self._cond.notify_all()

    def wait_for(self, predicate: Any, *, timeout: float) -> tuple[float, str, dict[str, Any]]:
        """The first recorded event for which `predicate(name, data)` holds."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for event in self.events[seen:]:
                    if predicate(event[1], event[2]):
                        return event
                seen = len(self.events)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching event in {timeout} s")
                self._cond.wait(remaining)

    def close(self) -> None:
        self._stop = True


class Golem(DaemonProcess):
    """One golem's `clade run` process (see DaemonProcess), known by `name` and its peer id."""

    def __init__(self, name: str, data: DataDir) -> None:
        super().__init__(data, name=name)
        self.peer_id = data.load_identity().peer_id
        self.p2p_addrs: list[str] = []

    def start(self, args: Sequence[str] = (), env: dict[str, str] | None = None, *,
              notify: NotifySocket | None = None, timeout: float = 60) -> Golem:
        """Run it and wait until it is ready and listens for peers (its multiaddrs in `p2p_addrs`)."""
        self.p2p_addrs = []
        super().start(args, env, notify=notify, timeout=timeout)
        deadline = time.monotonic() + timeout
        while not self.p2p_addrs:
            self.p2p_addrs = (self.call("GET", "/v1/status").get("p2p") or {}).get("listen", [])
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: p2p did not start: {self.stderr_tail(10)}")
            if not self.p2p_addrs:
                time.sleep(0.05)
        return self

    def peers(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/v1/peers")["peers"])

    def members_connected(self) -> set[str]:
        return {p["peer_id"] for p in self.peers() if p["member"] and p["connected"]}


class LoopbackClade:
    """An owner and `n` golems under `root` (created now; daemons started by `start`)."""

    def __init__(self, root: Path, n: int, *, clade_name: str = "demo") -> None:
        self.root = root
        self.owner = OwnerKey.create(root / "owner", clade_name)
        self.golems = [self.add_golem(f"g{i}") for i in range(n)]

    def add_golem(self, name: str, *, admit: bool = True, owner: OwnerKey | None = None) -> Golem:
        """Create a data dir (and, with `admit`, make it a member of `owner`'s clade)."""
        data = DataDir(self.root / name)
        data.init()
        if admit:
            self.admit(data, owner or self.owner)
        return Golem(name, data)

    @staticmethod
    def admit(data: DataDir, owner: OwnerKey) -> None:
        identity = data.load_identity()
        now = wall_clock_ms() // 1000
        cert = Certificate.issue(owner, identity.peer_id, generation=0, not_before=now - 300, not_after=now + 86_400)
        membership, clade_key = AdmissionBundle.open(AdmissionBundle.create(owner, cert), identity, now=now)
        data.install_membership(membership, clade_key)

    def start(self, golem: Golem, *, bootstrap: list[Golem] | None = None, args: list[str] | None = None,
              env: dict[str, str] | None = None, timeout: float = 60) -> Golem:
        """Run `golem` on 127.0.0.1 (a free port), dialing `bootstrap` (default: golem 0 if it runs)."""
        targets = bootstrap if bootstrap is not None else [g for g in self.golems[:1] if g is not golem]
        argv = ["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"]
        for other in targets:
            if other.running:
                argv += ["--bootstrap", other.p2p_addrs[0]]
        env = {"CLADE_P2P__SYNC_INTERVAL_S": "30", **(env or {})}
        golem.start(argv + (args or []), env=env, timeout=timeout)
        return golem

    def start_all(self, *, timeout: float = 60) -> None:
        for golem in self.golems:
            self.start(golem)
        self.wait_connected(self.golems, timeout=timeout)

    @staticmethod
    def wait_connected(golems: list[Golem], *, timeout: float = 60) -> None:
        """Until every golem counts every other one as a connected member."""
        deadline = time.monotonic() + timeout
        for golem in golems:
            want = {g.peer_id for g in golems if g is not golem}
            while not want <= golem.members_connected():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{golem.name} sees {golem.members_connected()}, wants {want}")
                time.sleep(0.05)

    def close(self) -> None:
        for golem in self.golems:
            golem.stop()


def _write(golem: Golem, content: str, kind: str, **extra: Any) -> tuple[str, float]:
    made = golem.call("POST", "/v1/memory", json={"content": content, "memory_type": kind, **extra})
    return made["id"], wall_clock_ms()


def run_demo(siblings: int) -> dict[str, Any]:
    """Start `siblings` golems, write on several, report arrivals; leaves nothing running."""
    root = Path(tempfile.mkdtemp(prefix="clade-demo-"))
    lines: list[str] = []
    arrivals: list[dict[str, Any]] = []
    watchers: list[EventLog] = []
    digests: dict[str, str] = {}
    clade = LoopbackClade(root, siblings)
    started = time.monotonic()
    try:
        clade.start_all()
        lines.append(f"{siblings} golems of clade 'demo' running on 127.0.0.1 under {root} "
                     f"(connected in {time.monotonic() - started:.1f} s)")
        for g in clade.golems:
            lines.append(f"  {g.name}  {g.peer_id}  {g.p2p_addrs[0].split('/p2p/')[0]}")
        watchers = [EventLog(g.socket).start() for g in clade.golems]
        writes: list[tuple[int, str, str, dict[str, Any]]] = [
            (0, "ETH mainnet gas spikes above 80 gwei around 14:00 UTC: delay swaps", "warning", {}),
            (1 % siblings, "Curve 3pool depeg risk: USDC share above 60% preceded every depeg", "anti_knowledge", {}),
            (2 % siblings, "Uniswap v3 ETH/USDC 0.05% fees beat 0.3% in low-volatility weeks", "insight",
             {"confidence": 0.8, "quality": 0.7}),
            (0, "Private: wallet 0xabc rotation schedule", "warning", {"sensitivity": "private"}),
        ]
        for index, content, kind, extra in writes:
            writer = clade.golems[index]
            entry_id, acked = _write(writer, content, kind, **extra)
            if kind == "insight":  # crosses when the curator promotes it (run now, not in 8 min)
                writer.call("POST", "/v1/curator/run")
            crosses = extra.get("sensitivity") != "private"
            for sibling, watcher in zip(clade.golems, watchers, strict=True):
                if sibling is writer:
                    continue
                try:
                    at, _, _ = watcher.wait_for(
                        lambda name, data, i=entry_id: name == "entries_received" and i in data["ids"],
                        timeout=5 if crosses else 1.5)
                    ms: float | None = round(at - acked, 1)
                except TimeoutError:
                    ms = None
                arrivals.append({"entry": entry_id, "kind": kind, "from": writer.name, "to": sibling.name,
                                 "crosses": crosses, "ms": ms})
        lines.append("")
        lines.append("write                                              from  to   arrived after")
        for a, (_, content, _, _) in zip(arrivals, [w for w in writes for _ in range(siblings - 1)], strict=False):
            result = f"{a['ms']:.1f} ms" if a["ms"] is not None else (
                "never (correct: private)" if not a["crosses"] else "NOT ARRIVED")
            lines.append(f"{content[:50]:<50} {a['from']:<5} {a['to']:<4} {result}")
        for g in clade.golems:  # one anti-entropy round everywhere: contexts cover the private dots too
            g.call("POST", "/v1/sync", json={})
        digests = {g.name: g.call("GET", "/v1/state-digest")["shared"] for g in clade.golems}
        lines.append("")
        lines.append("shared-state digests after one anti-entropy round (identical = converged): " + ", ".join(
            f"{k}={str(v)[:12]}" for k, v in digests.items()))
    finally:
        for watcher in watchers:
            watcher.close()
        clade.close()
        shutil.rmtree(root, ignore_errors=True)
    lines.append(f"stopped {siblings} daemons and removed {root}")
    ok = all((a["ms"] is not None) == a["crosses"] for a in arrivals) and len(set(digests.values())) == 1
    return {"report": "\n".join(lines), "arrivals": arrivals, "ok": ok}
