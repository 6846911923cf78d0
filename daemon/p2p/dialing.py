"""Finding and keeping siblings: bootstrap, mDNS, peer exchange, known siblings across
restarts (`$DATA/peers.json`), connection events, and redialing with capped exponential
backoff and jitter (after clearing py-libp2p's 60 s failed-dial cache)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import trio
from libp2p.abc import INetConn, INetStream, INetwork, INotifee
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr

from daemon.grimoire import atomic_write

from .core import DIAL_TIMEOUT_S, NodeCore, log
from .host import parse_multiaddr
from .peers import PeerRecord, redial_delay

__all__ = ["CANDIDATE_DIALS", "MAX_CANDIDATES", "Dialing", "Events"]

MAX_CANDIDATES = 64  # addresses learned from siblings or mDNS and not admitted yet
CANDIDATE_DIALS = 6  # failed dials before a learned, never-admitted address is given up


class Events(INotifee):
    """Connection events from libp2p, handed to the node's task (never handled inline)."""

    def __init__(self, send: trio.MemorySendChannel[tuple[str, str]]) -> None:
        self.send = send

    def _post(self, kind: str, conn: INetConn) -> None:
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.send.send_nowait((kind, conn.muxed_conn.peer_id.to_base58()))

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        self._post("connected", conn)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self._post("disconnected", conn)

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def listen(self, network: INetwork, multiaddr: Any) -> None:
        pass

    async def listen_close(self, network: INetwork, multiaddr: Any) -> None:
        pass


class Dialing(NodeCore):
    def add_bootstrap(self, addr: str) -> str:
        """Remember a sibling to dial (`/ip4/…/tcp/…/p2p/PEERID`); returns its peer id."""
        try:
            info = info_from_p2p_addr(parse_multiaddr(addr))
        except Exception as exc:  # noqa: BLE001 - libp2p raises several types for a bad address
            raise ValueError(f"bootstrap address {addr!r} must end in /p2p/PEERID ({exc})") from None
        peer_id = info.peer_id.to_base58()
        if peer_id == self.me:
            raise ValueError(f"bootstrap address {addr!r} is this golem itself")
        record = self.book.add_addr(peer_id, str(info.addrs[0]))
        record.dial = True
        record.hold_until = 0.0
        record.next_dial = 0.0
        record.failures = 0
        self._let_in(record)
        self._wake_dialer.set()
        return peer_id

    async def disconnect(self, peer_id: str, *, hold_s: float) -> None:
        """Drop a peer and refuse it (both ways) for `hold_s` seconds (operator's partition)."""
        record = self.book.get(peer_id)
        record.hold_until = time.monotonic() + hold_s
        self._shut_out(record)
        await self._drop(peer_id)

    def _load_known(self) -> None:
        """Siblings admitted in earlier runs: dialed at once after a restart."""
        path = self.state.data.root / "peers.json"
        try:
            known = json.loads(path.read_text())
            for peer_id, addrs in dict(known).items():
                for addr in list(addrs)[:8]:
                    self.book.add_addr(str(peer_id), str(addr)).dial = True
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as exc:
            log.warning("ignoring %s (%s); siblings will be found again via bootstrap/mDNS", path, exc)

    async def _save_known(self) -> None:
        known = {r.peer_id: r.addrs for r in self.book.all() if r.dial and r.refused is None and r.addrs}
        data = json.dumps(known, indent=1, sort_keys=True).encode()
        await trio.to_thread.run_sync(atomic_write, self.state.data.root / "peers.json", data)

    def _discovered(self, info: PeerInfo) -> None:
        peer_id = info.peer_id.to_base58()
        if peer_id == self.me or not info.addrs:
            return
        known = self.book.find(peer_id)
        if known is None and self.book.candidates() >= MAX_CANDIDATES:
            self.counters["mdns_capped"] += 1
            return
        record = self.book.get(peer_id)
        for addr in info.addrs[:8]:
            self.book.add_addr(peer_id, str(addr))
        if known is None:
            record.learned = True
        if not record.refused:
            record.dial = True
            self._wake_dialer.set()
        self.counters["mdns_discovered"] += 1

    def _learn_sibling(self, addr: str) -> None:
        """A sibling named by a member (peer exchange): dial it unless known or refused."""
        try:
            info = info_from_p2p_addr(parse_multiaddr(addr))
        except Exception:  # noqa: BLE001 - a bad address from a peer is ignored, and counted
            self.counters["peer_exchange_bad_addr"] += 1
            return
        peer_id = info.peer_id.to_base58()
        record = self.book.find(peer_id)
        if peer_id == self.me or (record is not None and (record.refused or record.connected or record.dial)):
            return
        if self.book.candidates() >= MAX_CANDIDATES:
            self.counters["peer_exchange_capped"] += 1
            return
        record = self.book.add_addr(peer_id, str(info.addrs[0]))
        record.learned = True
        record.dial = True
        self._wake_dialer.set()

    async def _connection_events(self, receive: trio.MemoryReceiveChannel[tuple[str, str]]) -> None:
        assert self._nursery is not None
        async for kind, peer_id in receive:
            record = self.book.get(peer_id)
            if kind == "connected":
                if time.monotonic() < record.hold_until:
                    self.counters["connections_refused_held"] += 1
                    self._nursery.start_soon(self._drop, peer_id)
                    continue
                was = record.connected
                record.connected = True
                record.last_seen_ms = self.state.now_ms()
                if not was:
                    self._nursery.start_soon(self._hello, peer_id)
            elif not self._connected(peer_id):
                if record.connected and record.member:
                    self.state.publish("peer_down", {"peer_id": peer_id})
                record.connected = False
                record.member = False if record.refused else record.member
                # Redial with backoff; a hello that succeeds resets it. A peer that accepts
                # and drops us at once (it holds us off) is thus not hammered.
                record.failures += 1
                record.next_dial = time.monotonic() + redial_delay(record.failures - 1, self.rng)
                self._wake_dialer.set()

    async def _dialer(self) -> None:
        assert self._nursery is not None
        while True:
            now = time.monotonic()
            wait = 1.0
            for record in self.book.all():
                if record.blacklisted and record.hold_until <= now:
                    self._let_in(record)
                if not record.dial or record.connected or record.peer_id in self._dialing or not record.addrs:
                    continue
                ready = max(record.next_dial, record.hold_until)
                if ready <= now:
                    self._dialing.add(record.peer_id)
                    self._nursery.start_soon(self._dial, record)
                else:
                    wait = min(wait, ready - now)
            self._wake_dialer = trio.Event()
            with trio.move_on_after(max(wait, 0.05)):
                await self._wake_dialer.wait()

    async def _dial(self, record: PeerRecord) -> None:
        pid = ID.from_base58(record.peer_id)
        try:
            network: Any = self.host.get_network()
            network.unblock_peer(pid)  # a failed dial is cached for 60 s otherwise
            addrs = [parse_multiaddr(a) for a in record.addrs]
            with trio.fail_after(DIAL_TIMEOUT_S):
                await self.host.connect(PeerInfo(pid, addrs))
            self.counters["dials_ok"] += 1  # failures reset once the hello succeeds
        except Exception as exc:  # noqa: BLE001 - every dial failure means: back off, retry
            record.failures += 1
            record.next_dial = time.monotonic() + redial_delay(record.failures, self.rng)
            self.counters["dials_failed"] += 1
            if record.learned and not record.member and record.failures >= CANDIDATE_DIALS:
                record.dial = False  # a stale or made-up address from peer exchange: stop trying
            log.debug("dial %s failed (%d in a row): %s", record.peer_id, record.failures, exc)
        finally:
            self._dialing.discard(record.peer_id)
            self._wake_dialer.set()
