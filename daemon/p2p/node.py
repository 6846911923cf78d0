"""The p2p service of `clade run`: one libp2p host, membership-gated, gossiping and syncing.

    connect ─▶ hello (both sides prove membership with their certificate; Noise has already
               proved the peer id) ─▶ member: pull anti-entropy from it, gossip with it
             └▶ refused: disconnected, not dialed again for HOLD_S (revoked: never)

Tasks: the host and GossipSub, a drain per subscription, the applier (joins accepted
gossip in batches, one transaction each), the publisher (own ops that pass the gate, as
soon as they are written), the dialer (bootstrap peers and known siblings, capped
exponential backoff with jitter, `unblock_peer` first), and the anti-entropy ticker.
Every handler catches its own errors: an exception escaping one would take the host down.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import random
import time
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

import trio
from libp2p.abc import INetConn, INetStream, INetwork, INotifee
from libp2p.custom_types import TProtocol
from libp2p.discovery.events.peerDiscovery import peerDiscovery
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr
from libp2p.tools.anyio_service import background_trio_service

from crdt import ApplyReport, CausalContext, Delta, EntryBody, Op, RemoteProtocolError
from crdt.codec import decode_delta, encode_delta
from crdt.replica import MAX_BATCH_BYTES, MAX_BATCH_OPS
from crypto import Certificate, Membership, MembershipError, RevocationList
from crypto.identity import signature_ok

from ..grimoire import Grimoire, atomic_write
from . import messages
from .frames import close_quietly, encode_frame, read_frame
from .gossip import GossipCodec, Opened
from .host import build_host, build_pubsub, parse_multiaddr
from .peers import PeerBook, PeerRecord, redial_delay
from .sync import ROUND_DELTAS, SyncRefused, pull, serve

if TYPE_CHECKING:
    from ..state import DaemonState

__all__ = ["HELLO_PROTOCOL", "SYNC_PROTOCOL", "P2PNode", "topic_of"]

log = logging.getLogger("clade.p2p")

HELLO_PROTOCOL = TProtocol("/clade/hello/1.0.0")
SYNC_PROTOCOL = TProtocol("/clade/sync/1.0.0")
HELLO_TIMEOUT_S = 10.0
DIAL_TIMEOUT_S = 10.0
HOLD_S = 300.0  # a peer that failed the membership check is not dialed (nor accepted) for this long
NO_HELLO_HOLD_S = 60.0  # a stranger that connected but never completed a hello
MAX_CANDIDATES = 64  # addresses learned from siblings or mDNS and not admitted yet
CANDIDATE_DIALS = 6  # failed dials before a learned, never-admitted address is given up
APPLY_BATCH = 64  # gossip messages joined in one transaction at most


def topic_of(clade_id: str) -> str:
    return f"/clade/{clade_id}/v1"


class _Events(INotifee):
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


class P2PNode:
    def __init__(self, state: DaemonState, *, membership: Membership, clade_key: bytes,
                 revocations: RevocationList | None, listen: list[str], bootstrap: list[str], mdns: bool,
                 sync_interval_s: float, max_skew_ms: int) -> None:
        self.state = state
        self.me = state.identity.peer_id
        self.membership = membership
        self.revocations = revocations
        self.listen = [parse_multiaddr(a) for a in listen]
        self.bootstrap = bootstrap
        self.mdns = mdns
        self.sync_interval_s = sync_interval_s
        self.topic = topic_of(membership.clade_id)
        self.probe_topic = f"/clade/{membership.clade_id}/probe/v1"
        self.book = PeerBook()
        self.codec = GossipCodec(identity=state.identity, membership=membership, clade_key=clade_key,
                                 revocations=lambda: self.revocations, max_skew_ms=max_skew_ms)
        self.max_skew_ms = max_skew_ms
        self.counters: Counter[str] = state.counters
        self.rng = random.Random()
        self.host = build_host(state.identity, mdns=mdns)
        self.router, self.pubsub = build_pubsub(self.host)
        self._accepted: OrderedDict[bytes, Opened] = OrderedDict()
        self._validating: set[bytes] = set()
        self._wake_publisher = trio.Event()
        self._wake_dialer = trio.Event()
        self._syncing: set[str] = set()
        self._dialing: set[str] = set()
        self._published_seq = 0
        self._nursery: trio.Nursery | None = None
        self._apply_send, self._apply_receive = trio.open_memory_channel[tuple[str, Opened]](1024)
        self.listen_addrs: list[str] = []
        for addr in bootstrap:
            self.add_bootstrap(addr)

    # -- public API (used by DaemonState, the control API and the runtime) ----------------

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

    def local_write(self) -> None:
        """Own ops were written: the publisher gossips those that cross at once."""
        self._wake_publisher.set()

    def peers(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.book.all()]

    def status(self) -> dict[str, Any]:
        return {"listen": self.listen_addrs, "topic": self.topic, "members_connected": len(self.book.members()),
                "revocations_version": None if self.revocations is None else self.revocations.version}

    async def disconnect(self, peer_id: str, *, hold_s: float) -> None:
        """Drop a peer and refuse it (both ways) for `hold_s` seconds (operator's partition)."""
        record = self.book.get(peer_id)
        record.hold_until = time.monotonic() + hold_s
        self._shut_out(record)
        await self._drop(peer_id)

    async def adopt_revocations(self, revocations: RevocationList) -> bool:
        """Install a newer owner-signed revocation list: persist it, drop revoked peers at
        once, and pass it on to every connected sibling. False if it is not newer."""
        revocations.verify(self.membership.owner_public_key, self.membership.clade_id)
        if not revocations.replaces(self.revocations):
            return False
        await trio.to_thread.run_sync(self.state.data.install_revocations, revocations)
        self.revocations = revocations
        self.counters["revocations_adopted"] += 1
        log.warning("revocation list v%d adopted: %d peer(s) revoked", revocations.version, len(revocations.revoked))
        for record in self.book.all():
            if revocations.is_revoked(record.peer_id):
                record.member = False
                record.refused = "revoked"
                record.dial = False
                record.hold_until = float("inf")
                self._shut_out(record)
                await self._drop(record.peer_id)
        self.state.publish("revocations_adopted", {"version": revocations.version,
                                                   "revoked": sorted(revocations.revoked)})
        if self._nursery is not None:
            for record in self.book.members():
                self._nursery.start_soon(self._hello, record.peer_id, False)
        return True

    # -- running ---------------------------------------------------------------------------

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

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self._load_known()
        events_send, events_receive = trio.open_memory_channel[tuple[str, str]](4096)
        self.host.get_network().register_notifee(_Events(events_send))
        token = trio.lowlevel.current_trio_token()

        def discovered(info: PeerInfo) -> None:  # called from zeroconf's thread
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._discovered, info)

        if self.mdns:
            peerDiscovery.register_peer_discovered_handler(discovered)
        self._published_seq = await self.state.db(lambda s: s.local_top(self.me))
        try:
            async with self.host.run(self.listen):
                try:
                    async with background_trio_service(self.pubsub), background_trio_service(self.router):
                        await self.pubsub.wait_until_ready()
                        self.pubsub.set_topic_validator(self.topic, self._validate, True)
                        self.host.set_stream_handler(HELLO_PROTOCOL, self._hello_handler)
                        self.host.set_stream_handler(SYNC_PROTOCOL, self._sync_handler)
                        subscription = await self.pubsub.subscribe(self.topic)
                        self.pubsub.set_topic_validator(self.probe_topic, self._validate_probe, False)
                        probes = await self.pubsub.subscribe(self.probe_topic)
                        self.listen_addrs = [str(a) for a in self.host.get_addrs()]
                        async with trio.open_nursery() as nursery:
                            self._nursery = nursery
                            nursery.start_soon(self._drain, subscription)
                            nursery.start_soon(self._drain_probes, probes)
                            nursery.start_soon(self._applier)
                            nursery.start_soon(self._publisher)
                            nursery.start_soon(self._dialer)
                            nursery.start_soon(self._anti_entropy)
                            nursery.start_soon(self._connection_events, events_receive)
                            log.info("p2p listening on %s, topic %s", ", ".join(self.listen_addrs), self.topic)
                            task_status.started(self.listen_addrs)
                            try:
                                await trio.sleep_forever()
                            finally:
                                # Close the host before pubsub stops (NOTES-libp2p 9), shielded so
                                # live connections are closed even while we are being cancelled.
                                with trio.CancelScope(shield=True), trio.move_on_after(5):
                                    await self.host.close()
                finally:
                    self.pubsub.seen_messages.stop()
        finally:
            if self.mdns:
                peerDiscovery.unregister_peer_discovered_handler(discovered)

    def _shut_out(self, record: PeerRecord) -> None:
        """Keep GossipSub from exchanging messages with a held or revoked peer: a revoked
        member still has the clade key, so the envelope alone does not stop it reading."""
        record.blacklisted = True
        with contextlib.suppress(Exception):
            self.pubsub.add_to_blacklist(ID.from_base58(record.peer_id))

    def _let_in(self, record: PeerRecord) -> None:
        if record.blacklisted and record.refused != "revoked":
            record.blacklisted = False
            with contextlib.suppress(Exception):
                self.pubsub.remove_from_blacklist(ID.from_base58(record.peer_id))

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

    # -- connections -----------------------------------------------------------------------

    def _connected(self, peer_id: str) -> bool:
        try:
            return bool(self.host.get_network().get_connections(ID.from_base58(peer_id)))
        except Exception:  # noqa: BLE001 - a malformed id is simply not connected
            return False

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

    async def _drop(self, peer_id: str) -> None:
        try:
            with trio.move_on_after(5):
                await self.host.disconnect(ID.from_base58(peer_id))
        except Exception as exc:  # noqa: BLE001 - disconnecting a half-closed peer may fail; it is gone
            log.debug("disconnect %s: %s", peer_id, exc)
        record = self.book.find(peer_id)
        if record is not None:
            record.connected = self._connected(peer_id)

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

    # -- hello: membership at connect ------------------------------------------------------

    def _my_hello(self) -> messages.Hello:
        return messages.Hello(
            clade_id=self.membership.clade_id,
            certificate=self.membership.certificate.to_bytes(),
            revocations=b"" if self.revocations is None else self.revocations.to_bytes(),
            addrs=tuple(self.listen_addrs[: messages.MAX_ADDRS]),
            siblings=tuple(f"{r.addrs[0].split('/p2p/')[0]}/p2p/{r.peer_id}"
                           for r in self.book.members()[: messages.MAX_SIBLINGS] if r.addrs),
        )

    async def _check_hello(self, hello: messages.Hello, peer_id: str) -> str | None:
        """None if the hello proves `peer_id` (Noise-authenticated) is a member, else the reason."""
        if hello.revocations:
            try:
                offered = RevocationList.from_bytes(hello.revocations)
                await self.adopt_revocations(offered)
            except MembershipError as exc:
                self.counters[f"revocations_rejected_{exc.reason.value}"] += 1
        if hello.clade_id != self.membership.clade_id:
            return "other_clade"
        try:
            certificate = Certificate.from_bytes(hello.certificate)
            certificate.verify(self.membership.owner_public_key, self.membership.clade_id,
                               now=self.state.now_ms() // 1000, revocations=self.revocations)
        except MembershipError as exc:
            return exc.reason.value
        if certificate.peer_id != peer_id:
            return "wrong_peer"
        return None

    async def _admit(self, peer_id: str, hello: messages.Hello, rtt_ms: float | None) -> None:
        record = self.book.get(peer_id)
        for addr in hello.addrs:
            if "/ip4/0.0.0.0/" not in addr and "/ip6/::/" not in addr:
                self.book.add_addr(peer_id, addr)
        record.refused = None
        record.dial = True
        record.learned = False
        record.failures = 0
        record.last_seen_ms = self.state.now_ms()
        if rtt_ms is not None:
            record.note_rtt(rtt_ms)
        for sibling in hello.siblings:
            self._learn_sibling(sibling)
        if not record.member:
            record.member = True
            await self._save_known()
            if self._nursery is not None:  # tell the others about the newcomer (peer exchange)
                for other in self.book.members():
                    if other.peer_id != peer_id:
                        self._nursery.start_soon(self._hello, other.peer_id, False)
            self.counters["peers_admitted"] += 1
            self.state.publish("peer_up", {"peer_id": peer_id})
            log.info("sibling %s connected", peer_id)

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

    async def _refuse(self, peer_id: str, reason: str) -> None:
        record = self.book.get(peer_id)
        record.member = False
        record.refused = reason
        record.dial = False
        record.hold_until = float("inf") if reason == "revoked" else time.monotonic() + HOLD_S
        if reason == "revoked":
            self._shut_out(record)
        self.counters[f"hello_refused_{reason}"] += 1
        log.warning("peer %s failed the membership check (%s): disconnected", peer_id, reason)
        self.state.publish("peer_refused", {"peer_id": peer_id, "reason": reason})
        await self._drop(peer_id)

    async def _hello(self, peer_id: str, then_sync: bool = True) -> None:
        """Say hello to a connected peer; on success pull what we lack from it."""
        stream: INetStream | None = None
        try:
            with trio.fail_after(HELLO_TIMEOUT_S):
                stream = await self.host.new_stream(ID.from_base58(peer_id), [HELLO_PROTOCOL])
                started = trio.current_time()
                frame = encode_frame(messages.encode(self._my_hello()))
                await stream.write(frame)
                payload = await read_frame(stream)
                rtt_ms = (trio.current_time() - started) * 1000
            self._count_traffic(peer_id, sent=len(frame), received=len(payload))
            reply = messages.decode(payload)
            if isinstance(reply, messages.Refused):
                self.counters[f"hello_refused_by_peer_{reply.reason}"] += 1
                log.warning("peer %s refused us: %s (%s)", peer_id, reply.reason, reply.detail)
                await self._refuse_quietly(peer_id, f"refused us: {reply.reason}")
                return
            if not isinstance(reply, messages.Hello):
                raise RemoteProtocolError("malformed", "expected a hello")
            reason = await self._check_hello(reply, peer_id)
            if reason is not None:
                await self._refuse(peer_id, reason)
                return
            await self._admit(peer_id, reply, rtt_ms)
        except Exception as exc:  # noqa: BLE001 - the connection died, or the peer speaks no clade
            await self._hello_failed(peer_id, exc)
            return
        finally:
            if stream is not None:
                await close_quietly(stream)
        if then_sync:
            await self.sync_with(peer_id)

    async def _hello_failed(self, peer_id: str, exc: Exception) -> None:
        """A hello that broke the protocol is a failed membership check (refused, held). One
        whose connection went away (the peer restarted, or holds us off; a truncated frame)
        is not: back off and redial; a peer still connected but silent is dropped."""
        if isinstance(exc, RemoteProtocolError) and exc.reason != "truncated":
            await self._refuse(peer_id, exc.reason)
            return
        self.counters["hello_failed"] += 1
        log.debug("hello with %s failed: %r", peer_id, exc)
        if self._connected(peer_id):
            await self._no_hello(peer_id)

    async def _no_hello(self, peer_id: str) -> None:
        """A connected peer that did not complete a hello: drop it. A known sibling (likely
        restarting or overloaded) is redialed with backoff; a stranger is held off a minute."""
        record = self.book.get(peer_id)
        self.counters["hello_incomplete"] += 1
        if not (record.dial or record.member):
            record.hold_until = time.monotonic() + NO_HELLO_HOLD_S
        await self._drop(peer_id)

    async def _refuse_quietly(self, peer_id: str, why: str) -> None:
        record = self.book.get(peer_id)
        record.member = False
        record.refused = why
        record.hold_until = time.monotonic() + HOLD_S
        await self._drop(peer_id)

    async def _hello_handler(self, stream: INetStream) -> None:
        peer_id = stream.muxed_conn.peer_id.to_base58()
        try:
            with trio.fail_after(HELLO_TIMEOUT_S):
                payload = await read_frame(stream)
                hello = messages.decode(payload)
                if not isinstance(hello, messages.Hello):
                    raise RemoteProtocolError("malformed", "expected a hello")
                reason = await self._check_hello(hello, peer_id)
                if reason is not None:
                    refusal = encode_frame(messages.encode(messages.Refused(reason, "membership check failed")))
                    await stream.write(refusal)
                    # Until the peer has read why (it closes its end), then drop it.
                    with trio.move_on_after(1), contextlib.suppress(Exception):
                        await stream.read(1)
                    await self._refuse(peer_id, reason)
                    return
                await self._admit(peer_id, hello, None)
                frame = encode_frame(messages.encode(self._my_hello()))
                await stream.write(frame)
            self._count_traffic(peer_id, sent=len(frame), received=len(payload))
        except Exception as exc:  # noqa: BLE001 - never let a handler error reach the host
            await self._hello_failed(peer_id, exc)
        finally:
            await close_quietly(stream)

    def _count_traffic(self, peer_id: str, *, sent: int = 0, received: int = 0, msgs_out: int = 0,
                       msgs_in: int = 0) -> None:
        record = self.book.get(peer_id)
        record.bytes_out += sent
        record.bytes_in += received
        record.msgs_out += msgs_out or (1 if sent else 0)
        record.msgs_in += msgs_in or (1 if received else 0)
        if received:
            record.last_seen_ms = self.state.now_ms()

    # -- anti-entropy ----------------------------------------------------------------------

    async def _anti_entropy(self) -> None:
        while True:
            await trio.sleep(self.sync_interval_s * self.rng.uniform(0.8, 1.2))
            members = [r.peer_id for r in self.book.members() if r.peer_id not in self._syncing]
            if members:
                await self.sync_with(self.rng.choice(members))

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        """Pull everything `peer_id` has that we lack; None if it could not run."""
        record = self.book.get(peer_id)
        if peer_id in self._syncing or not record.member:
            return None
        self._syncing.add(peer_id)
        stream: INetStream | None = None
        started = time.monotonic()
        try:
            with trio.fail_after(DIAL_TIMEOUT_S):
                stream = await self.host.new_stream(ID.from_base58(peer_id), [SYNC_PROTOCOL])
            result = await pull(stream, local_context=self._local_context,
                                apply=functools.partial(self._apply_sync_delta, sender=peer_id))
        except SyncRefused as exc:
            self.counters["sync_refused_by_peer"] += 1
            log.warning("sync with %s refused: %s", peer_id, exc)
            return None
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync with %s aborted: %s", peer_id, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a dropped connection ends the sync; the next one resumes
            self.counters["sync_failed"] += 1
            log.info("sync with %s cut short: %s", peer_id, exc)
            return None
        finally:
            self._syncing.discard(peer_id)
            if stream is not None:
                await close_quietly(stream)
        self._count_traffic(peer_id, sent=result.bytes_out, received=result.bytes_in,
                            msgs_out=result.rounds, msgs_in=result.rounds + result.deltas)
        if result.rounds == 1 and not result.deltas and result.first_round_ms is not None:
            record.note_rtt(result.first_round_ms)
        if result.remote_context is not None:
            local = await self._local_context()
            record.behind = local.missing_count(result.remote_context)
            record.ahead = result.remote_context.missing_count(local)
        record.last_sync_ms = self.state.now_ms()
        report = result.report
        self.counters["sync_pulls"] += 1
        self.counters["sync_ops_applied"] += report.applied
        for reason, n in report.rejected.items():
            self.counters[f"sync_rejected_{reason}"] += n
        summary = {"peer_id": peer_id, "rounds": result.rounds, "deltas": result.deltas, "applied": report.applied,
                   "rejected": dict(report.rejected), "bytes_in": result.bytes_in,
                   "seconds": round(time.monotonic() - started, 3)}
        if report.applied:
            self._announce_received(peer_id, report, via="sync")
            log.info("synced from %s: %d ops in %d rounds", peer_id, report.applied, result.rounds)
        self.state.publish("sync_complete", summary)
        return summary

    async def _local_context(self) -> CausalContext:
        return await self.state.db(lambda s: s.causal_context())

    async def _apply_sync_delta(self, data: bytes, *, sender: str) -> ApplyReport:
        delta, dropped = await trio.to_thread.run_sync(decode_delta, data, signature_ok)
        report = await self.state.db(lambda s: s.apply_delta(delta, rejected=dropped, local_replica=self.me,
                                                             max_skew_ms=self.max_skew_ms, sender=sender))
        self.state.publish("sync_progress", {"peer_id": sender, "applied": report.applied, "bytes": len(data)})
        return report

    async def _sync_handler(self, stream: INetStream) -> None:
        peer_id = stream.muxed_conn.peer_id.to_base58()
        record = self.book.get(peer_id)
        try:
            if not record.member:
                self.counters["sync_refused_not_member"] += 1
                await stream.write(encode_frame(messages.encode(
                    messages.Refused("not_a_member", "say hello with a valid certificate first"))))
                return

            def on_round(remote: CausalContext, local: CausalContext, more: bool) -> None:
                record.behind = local.missing_count(remote)
                # What we hold that the asker lacks, until this round lands (all of it if not `more`).
                record.ahead = remote.missing_count(local) if more else 0

            figures = await serve(stream, extract=self._extract, on_round=on_round, counters=self.counters)
            self._count_traffic(peer_id, sent=figures["bytes_out"], received=figures["bytes_in"],
                                msgs_out=figures["rounds"], msgs_in=figures["rounds"])
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync request from %s refused: %s", peer_id, exc)
        except Exception as exc:  # noqa: BLE001 - never let a handler error reach the host
            self.counters["sync_serve_failed"] += 1
            log.debug("serving sync to %s failed: %s", peer_id, exc)
        finally:
            await close_quietly(stream)

    async def _extract(self, peer: CausalContext) -> tuple[list[bytes], bool, CausalContext]:
        def run(store: Grimoire) -> tuple[list[bytes], bool, CausalContext]:
            deltas = store.iter_deltas(peer, gate=store.sync_gate(self.me))
            out: list[bytes] = []
            more = False
            try:
                for delta in deltas:
                    if len(out) == ROUND_DELTAS:
                        more = True
                        break
                    out.append(encode_delta(delta))
            finally:
                deltas.close()  # ends the read snapshot
            return out, more, store.causal_context()

        return await self.state.db(run)

    # -- gossip ----------------------------------------------------------------------------

    async def _validate(self, forwarder: ID, msg: Any) -> bool:
        """GossipSub validator: only fully checked messages are delivered and forwarded."""
        publisher = ID(msg.from_id).to_base58() if msg.from_id else ""
        if publisher == self.me:
            return True
        forwarded_by = forwarder.to_base58()
        self._count_traffic(forwarded_by, received=len(msg.data))
        # py-libp2p marks a message seen only after validation: the same message arriving from
        # a second mesh peer meanwhile is a GossipSub duplicate, not a replay by anyone.
        key = bytes(msg.from_id) + bytes(msg.seqno)
        if key in self._validating or key in self._accepted:
            self.counters["gossip_duplicates"] += 1
            return False
        self._validating.add(key)
        try:
            opened = await trio.to_thread.run_sync(
                lambda: self.codec.open(bytes(msg.data), publisher=publisher, now_ms=self.state.now_ms()))
        except RemoteProtocolError as exc:
            self.counters[f"gossip_rejected_{exc.reason}"] += 1
            log.info("gossip from %s (via %s) rejected: %s", publisher, forwarded_by, exc)
            return False
        finally:
            self._validating.discard(key)
        self._accepted[key] = opened
        while len(self._accepted) > 4096:
            self._accepted.popitem(last=False)
        return True

    # Probes: raw GossipSub messages (no envelope, no store) between members, so a benchmark
    # can measure the transport's own delivery time next to the full path.

    async def publish_probe(self, probe_id: str) -> int:
        """Publish a probe; returns the send time (wall ms)."""
        sent_ms = self.state.now_ms()
        await self.pubsub.publish(self.probe_topic, json.dumps({"id": probe_id[:64], "sent_ms": sent_ms}).encode())
        return sent_ms

    def _validate_probe(self, forwarder: ID, msg: Any) -> bool:
        publisher = ID(msg.from_id).to_base58() if msg.from_id else ""
        record = self.book.find(publisher)
        return publisher == self.me or (len(msg.data) <= 256 and record is not None and record.member)

    async def _drain_probes(self, subscription: Any) -> None:
        while True:
            msg = await subscription.get()
            if ID(msg.from_id).to_base58() == self.me:
                continue
            try:
                probe = json.loads(bytes(msg.data))
                self.state.publish("probe_received", {"id": str(probe["id"]), "sent_ms": int(probe["sent_ms"]),
                                                      "received_ms": self.state.now_ms()})
            except (ValueError, KeyError, TypeError):
                self.counters["probes_malformed"] += 1

    async def _drain(self, subscription: Any) -> None:
        """Empty the subscription promptly (it holds 32 messages) into the applier's queue."""
        while True:
            msg = await subscription.get()
            opened = self._accepted.pop(bytes(msg.from_id) + bytes(msg.seqno), None)
            if opened is None:
                continue  # our own message, or one the validator did not keep
            try:
                self._apply_send.send_nowait((opened.sender, opened))
            except trio.WouldBlock:
                self.counters["gossip_dropped_backlog"] += 1  # anti-entropy will bring it

    async def _applier(self) -> None:
        """Join accepted gossip, several messages per transaction."""
        while True:
            batch = [await self._apply_receive.receive()]
            while len(batch) < APPLY_BATCH:
                try:
                    batch.append(self._apply_receive.receive_nowait())
                except trio.WouldBlock:
                    break
            ops: tuple[Op, ...] = tuple(op for _, opened in batch for op in opened.delta.ops)
            delta = Delta(ops, CausalContext())
            try:
                report = await self.state.db(functools.partial(
                    Grimoire.apply_delta, delta=delta, local_replica=self.me, max_skew_ms=self.max_skew_ms))
            except Exception as exc:  # noqa: BLE001 - a failed apply loses nothing: anti-entropy resends
                self.counters["gossip_apply_failed"] += 1
                log.error("joining gossip failed (anti-entropy will retry): %s", exc)
                continue
            self.counters["gossip_accepted"] += len(batch)
            self.counters["gossip_ops_applied"] += report.applied
            for reason, n in report.rejected.items():
                self.counters[f"gossip_rejected_{reason}"] += n
            if report.applied:
                senders = sorted({sender for sender, _ in batch})
                self._announce_received(",".join(senders), report, via="gossip")

    def _announce_received(self, source: str, report: ApplyReport, *, via: str) -> None:
        ids = sorted({op.entry_id for op in report.applied_ops})
        self.state.publish("entries_received", {
            "from": source, "via": via, "ops": report.applied, "entries": len(ids), "ids": ids[:100],
            "committed_ms": self.state.now_ms()})

    async def _publisher(self) -> None:
        """Gossip own ops as soon as they are written (those the gate lets cross)."""
        while True:
            with trio.move_on_after(1.0):
                await self._wake_publisher.wait()
            self._wake_publisher = trio.Event()
            try:
                await self._publish_new()
            except Exception as exc:  # noqa: BLE001 - anti-entropy delivers what gossip could not
                self.counters["gossip_publish_failed"] += 1
                log.warning("publishing own ops failed (anti-entropy will deliver them): %s", exc)

    async def _publish_new(self) -> None:
        since = self._published_seq

        def outgoing(store: Grimoire) -> tuple[int, list[Op]]:  # in the writer thread
            top = store.local_top(self.me)
            if top <= since:
                return top, []
            gate = store.sync_gate(self.me)
            ops = store.ops_of(self.me, since)
            bodies: dict[str, EntryBody | None] = {
                op.entry_id: op.value for op in ops if isinstance(op.value, EntryBody)}
            kept = []
            for op in ops:
                body = bodies.get(op.entry_id) or store.body(op.entry_id)
                if body is not None and gate(body):
                    kept.append(op)
            return top, kept

        top, ops = await self.state.db(outgoing)
        self._published_seq = max(self._published_seq, top)
        for chunk in _chunks(ops):
            data = self.codec.seal(Delta(tuple(chunk), CausalContext()), now_ms=self.state.now_ms())
            await self.pubsub.publish(self.topic, data)
            self.counters["gossip_published"] += 1
            self.counters["gossip_ops_published"] += len(chunk)
            for record in self.book.members():
                self._count_traffic(record.peer_id, sent=len(data))


def _chunks(ops: list[Op]) -> list[list[Op]]:
    """Split ops into batches well within the codec's caps (the envelope adds ~1 KiB)."""
    out: list[list[Op]] = []
    current: list[Op] = []
    size = 0
    budget = MAX_BATCH_BYTES - 64 * 1024
    for op in ops:
        cost = op.wire_size + 64
        if current and (len(current) >= MAX_BATCH_OPS or size + cost > budget):
            out.append(current)
            current, size = [], 0
        current.append(op)
        size += cost
    if current:
        out.append(current)
    return out


