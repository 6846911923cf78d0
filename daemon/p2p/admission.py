"""Membership at connect (`/clade/hello/1.0.0`) and revocation lists.

Both sides send their certificate (and revocation list); Noise has already proved the
remote peer id, so an owner-signed, valid, unrevoked certificate for that id proves
membership. A failed check is refused and held off (revoked: forever); a hello lost with
its connection is not a failed check.

The order leaks nothing to a stranger:

1. the dialer proves itself first, with a bare hello (clade id, certificate, revocations;
   no addresses, no siblings);
2. the listener says nothing until that hello verifies: a peer that connects and sends no
   hello within `HELLO_WAIT_S` (2 s) is dropped and held off; one that fails the check gets
   only a refusal;
3. the listener's answer, to a verified member, carries its addresses and its connected
   siblings (peer exchange); the dialer, once it has verified the answer, sends a second
   hello with its own;
4. only then does GossipSub exchange anything with the peer (`gate`): `Links.admit` and
   `open_gossip` on success, `forget` and `shut_out` on a refusal.

`Admission` owns the membership side of the peer book (`member`, `refused`, and the hold
it puts on a refused peer, on `trio.current_time()`), the current revocation list, and
the nursery its hellos run in. It asks `Siblings` (dialing) to learn the addresses a
member names and to remember members, and `Syncer` (catch-up) to pull after a hello.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import trio

from crdt import RemoteProtocolError
from crypto import Certificate, Membership, MembershipError, Reason, RevocationList

from . import messages
from .dialing import drop, shut_out
from .frames import close_quietly, encode_frame, read_frame
from .links import TRANSPORT_ERRORS
from .part import NodePart
from .peers import PeerBook
from .ports import DaemonPort, Links, Siblings, Stream, Syncer, internal_error

__all__ = ["HELLO_PROTOCOL", "HELLO_WAIT_S", "HOLD_S", "NO_HELLO_HOLD_S", "REFUSAL_REASONS", "Admission",
           "counted_refusal"]

log = logging.getLogger("clade.p2p")

HELLO_PROTOCOL = "/clade/hello/1.0.0"
HELLO_TIMEOUT_S = 5.0  # the dialer's wait for the listener's answer (a sibling under load may be slow)
HELLO_WAIT_S = 2.0  # the listener's wait for a connected peer's first hello (a silent stranger)
HOLD_S = 300.0  # a peer that failed the membership check is not dialed (nor accepted) for this long
NO_HELLO_HOLD_S = 60.0  # a stranger that connected but never completed a hello
# After the pull on a new connection, pull again at these offsets (s): ops written while the
# link's GossipSub mesh formed (a heartbeat is 1 s) went to a mesh without the new sibling.
SETTLE_PULLS_S = (2.0, 6.0)
# A hello that broke the protocol (refused and held), or whose link died (backed off).
HELLO_ERRORS: tuple[type[Exception], ...] = (RemoteProtocolError, *TRANSPORT_ERRORS)



#: The reasons a clade daemon refuses a hello with (its membership checks, and catch-up's
#: "say hello first"); a refusal naming anything else is counted as "other".
REFUSAL_REASONS = frozenset({r.value for r in Reason} | {"not_a_member"})


def counted_refusal(reason: str) -> str:
    """The counter suffix for a peer's refusal: its reason if our protocol defines it, else
    "other" — the reason is the peer's words, and a counter per made-up word would let a
    hostile peer grow the status document and the metrics without bound."""
    return reason if reason in REFUSAL_REASONS else "other"

class Admission(NodePart):
    """The hello both ways, and who counts as a member (see the module docstring)."""

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook, *, membership: Membership,
                 revocations: RevocationList | None, persist_revocations: Callable[[RevocationList], object],
                 siblings: Siblings, syncer: Syncer) -> None:
        super().__init__(daemon, links, book)
        self.membership = membership
        self.revocations, self.persist_revocations = revocations, persist_revocations
        self.siblings = siblings
        self.syncer = syncer
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Host the hellos this part starts (`greet`), until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def greet(self, peer_id: str, *, then_sync: bool = True) -> None:
        """Say hello to a connected peer in the background (see `hello`)."""
        if self._nursery is not None:
            self._nursery.start_soon(self._hello_task, peer_id, then_sync)

    async def _hello_task(self, peer_id: str, then_sync: bool) -> None:
        await self.hello(peer_id, then_sync=then_sync)

    def expect_hello(self, peer_id: str) -> None:
        """A peer dialed us: it must prove membership within `HELLO_WAIT_S`, else it is dropped."""
        if self._nursery is not None:
            self._nursery.start_soon(self._await_hello, peer_id)

    async def _await_hello(self, peer_id: str) -> None:
        if await self.links.wait_admitted(peer_id, HELLO_WAIT_S):
            return
        record = self.book.find(peer_id)
        if self.links.connected(peer_id) and (record is None or not record.refused):
            self.counters["hello_not_sent"] += 1
            await self._no_hello(peer_id)

    async def adopt_revocations(self, revocations: RevocationList) -> bool:
        """Install a newer owner-signed revocation list: persist it, drop revoked peers at
        once, and pass it on to every connected sibling. False if it is not newer.
        Raises `MembershipError` if it is not the owner's."""
        revocations.verify(self.membership.owner_public_key, self.membership.clade_id)
        if not revocations.replaces(self.revocations):
            return False
        await trio.to_thread.run_sync(self.persist_revocations, revocations)
        self.revocations = revocations
        self.counters["revocations_adopted"] += 1
        log.warning("revocation list v%d adopted: %d peer(s) revoked", revocations.version, len(revocations.revoked))
        for record in self.book.all():
            if revocations.is_revoked(record.peer_id):
                await self._refuse(record.peer_id, "revoked")
        self.daemon.publish("revocations_adopted", {"version": revocations.version,
                                                    "revoked": sorted(revocations.revoked)})
        for record in self.book.members():
            self.greet(record.peer_id, then_sync=False)
        return True

    def _my_hello(self, to_peer: str) -> messages.Hello:
        """Our hello; addresses and siblings only for a peer verified on its current connection."""
        record = self.book.find(to_peer)
        verified = record is not None and record.member and record.connected and self._verified(to_peer)
        return messages.Hello(
            clade_id=self.membership.clade_id,
            certificate=self.membership.certificate.to_bytes(),
            revocations=b"" if self.revocations is None else self.revocations.to_bytes(),
            addrs=tuple(self.links.listen_addrs()[: messages.MAX_ADDRS]) if verified else (),
            siblings=tuple(f"{r.addrs[0].split('/p2p/')[0]}/p2p/{r.peer_id}"
                           for r in self.book.members()[: messages.MAX_SIBLINGS]
                           if r.addrs and r.peer_id != to_peer) if verified else (),
        )

    def _verified(self, peer_id: str) -> bool:
        """Proved membership on a connection that is still open (a new connection proves again)."""
        return self.links.admitted(peer_id)

    def forget(self, peer_id: str) -> None:
        """The peer was refused, or its last connection closed: it proves itself again."""
        self.links.forget(peer_id)

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
                               now=self.daemon.now_ms() // 1000, revocations=self.revocations)
        except MembershipError as exc:
            return exc.reason.value
        if certificate.peer_id != peer_id:
            return "wrong_peer"
        return None

    async def _admit(self, peer_id: str, hello: messages.Hello, rtt_ms: float | None) -> bool:
        """Record a verified member; returns True if it was not verified on this connection yet."""
        record = self.book.get(peer_id)
        first = not self._verified(peer_id)
        self.links.admit(peer_id)
        if first and self._nursery is not None:
            self._nursery.start_soon(self.links.open_gossip, peer_id)
        known_addrs = list(record.addrs)
        for addr in hello.addrs:
            if "/ip4/0.0.0.0/" not in addr and "/ip6/::/" not in addr:
                self.book.add_addr(peer_id, addr)
        record.refused = None
        record.dial = True
        record.learned = False
        record.failures = 0
        record.last_seen_ms = self.daemon.now_ms()
        if rtt_ms is not None:
            record.note_rtt(rtt_ms)
        for sibling in hello.siblings:
            self.siblings.learn_sibling(sibling)
        if not record.member:
            record.member = True
            await self.siblings.save_known()
            for other in self.book.members():  # tell the others about the newcomer (peer exchange)
                if other.peer_id != peer_id:
                    self.greet(other.peer_id, then_sync=False)
            self.counters["peers_admitted"] += 1
            self.daemon.publish("peer_up", {"peer_id": peer_id})
            log.info("sibling %s connected", peer_id)
        elif record.addrs != known_addrs:
            # A dialer's first hello carries no addresses (it proves membership first); its
            # second does. Saved now, or a restart would not know where this sibling listens.
            await self.siblings.save_known()
        return first

    async def _refuse(self, peer_id: str, reason: str, *, by_peer: bool = False) -> None:
        """Drop a peer whose membership check failed (or, `by_peer`, that refused ours) and
        hold it off for HOLD_S; a revoked one forever, and out of GossipSub too."""
        record = self.book.get(peer_id)
        was_member = record.member
        record.member = False
        self.forget(peer_id)
        forever = reason == "revoked" and not by_peer
        record.hold_until = float("inf") if forever else trio.current_time() + HOLD_S
        shut_out(self.links, record)  # no pubsub stream (each would redial it) during the hold
        if by_peer:  # it may be us who is wrong (e.g. revoked): keep it as a sibling to retry
            record.refused = f"refused us: {reason}"
            self.counters[f"hello_refused_by_peer_{counted_refusal(reason)}"] += 1
            log.warning("peer %s refused us (%s): disconnected", peer_id, reason)
        else:
            record.refused = reason
            record.dial = False
            self.counters[f"hello_refused_{reason}"] += 1
            # A member or would-be member (a revoked or expired certificate) is the operator's
            # business; a stranger (another clade, garbage) is only counted.
            stranger = not was_member and reason not in ("revoked", "expired", "not_yet_valid")
            (log.info if stranger else log.warning)(
                "peer %s failed the membership check (%s): disconnected", peer_id, reason)
            self.daemon.publish("peer_refused", {"peer_id": peer_id, "reason": reason})
        await drop(self.links, self.book, peer_id)

    async def hello(self, peer_id: str, *, then_sync: bool = True) -> None:
        """Say hello to a connected peer; on success (and `then_sync`) pull what we lack from it.
        Never raises: a refusal, a broken hello or a lost connection is handled and counted."""
        stream: Stream | None = None
        try:
            with trio.fail_after(HELLO_TIMEOUT_S):
                stream = await self.links.open_stream(peer_id, HELLO_PROTOCOL)
                started = trio.current_time()
                frame = encode_frame(messages.encode(self._my_hello(peer_id)))
                await stream.write(frame)
                payload = await read_frame(stream)
                rtt_ms = (trio.current_time() - started) * 1000
            self.book.note_traffic(peer_id, sent=len(frame), received=len(payload), now_ms=self.daemon.now_ms())
            reply = messages.decode(payload)
            if isinstance(reply, messages.Refused):
                await self._refuse(peer_id, reply.reason, by_peer=True)
                return
            if not isinstance(reply, messages.Hello):
                raise RemoteProtocolError("malformed", "expected a hello")
            reason = await self._check_hello(reply, peer_id)
            if reason is not None:
                await self._refuse(peer_id, reason)
                return
            if await self._admit(peer_id, reply, rtt_ms):
                self.greet(peer_id, then_sync=False)  # now that it is verified: our addresses and siblings
        except HELLO_ERRORS as exc:  # the peer speaks no clade, or the link died
            await self._hello_failed(peer_id, exc)
            return
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback; the peer is dropped, not blamed
            internal_error(self.counters, "hello with %s", peer_id)
            await drop(self.links, self.book, peer_id)
            return
        finally:
            if stream is not None:
                await close_quietly(stream)
        if then_sync:
            await self.pull_after_connect(peer_id)

    async def pull_after_connect(self, peer_id: str) -> None:
        """Pull from a sibling on a new connection, and again once GossipSub has had time to
        graft it (`SETTLE_PULLS_S`): what either side wrote meanwhile was published to a mesh
        without it, and would otherwise wait for the anti-entropy timer."""
        await self.syncer.sync_with(peer_id)
        started = trio.current_time()
        for at in SETTLE_PULLS_S:
            await trio.sleep_until(started + at)
            if not (self.links.connected(peer_id) and self.book.get(peer_id).member):
                return
            await self.syncer.sync_with(peer_id)

    async def _hello_failed(self, peer_id: str, exc: Exception) -> None:
        """A hello that broke the protocol is a failed membership check (refused, held). One
        whose connection went away (the peer restarted, or holds us off; a truncated frame)
        is not: back off and redial; a peer still connected but silent is dropped."""
        if isinstance(exc, RemoteProtocolError) and exc.reason != "truncated":
            await self._refuse(peer_id, exc.reason)
            return
        self.counters["hello_failed"] += 1
        log.debug("hello with %s failed: %r", peer_id, exc)
        if self.links.connected(peer_id):
            await self._no_hello(peer_id)

    async def _no_hello(self, peer_id: str) -> None:
        """A connected peer that did not complete a hello: drop it. A known sibling (likely
        restarting or overloaded) is redialed with backoff; a stranger is held off a minute."""
        record = self.book.get(peer_id)
        self.counters["hello_incomplete"] += 1
        if not (record.dial or record.member):
            record.hold_until = trio.current_time() + NO_HELLO_HOLD_S
            shut_out(self.links, record)
        await drop(self.links, self.book, peer_id)

    async def serve_hello(self, stream: Stream, peer_id: str) -> None:
        """Answer a peer's hello on `stream` (the node's stream handler). Never raises."""
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
                    # A peer that closed or reset its end has read it, or never will.
                    with trio.move_on_after(1), contextlib.suppress(*TRANSPORT_ERRORS):
                        await stream.read(1)
                    await self._refuse(peer_id, reason)
                    return
                first = await self._admit(peer_id, hello, None)
                frame = encode_frame(messages.encode(self._my_hello(peer_id)))
                await stream.write(frame)
                if first and self._nursery is not None:
                    # The dialer pulls from us after its hello; we pull from it too, so what it
                    # wrote while apart (a restart, a partition) arrives now, not at the next
                    # anti-entropy tick.
                    self._nursery.start_soon(self.pull_after_connect, peer_id)
            self.book.note_traffic(peer_id, sent=len(frame), received=len(payload), now_ms=self.daemon.now_ms())
        except HELLO_ERRORS as exc:
            await self._hello_failed(peer_id, exc)
        except Exception:  # noqa: BLE001 - a bug: never let it reach the host (docs/design/libp2p.md, pitfall 8)
            internal_error(self.counters, "answering the hello of %s", peer_id)
        finally:
            await close_quietly(stream)
