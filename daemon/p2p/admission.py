"""Membership at connect (`/clade/hello/1.0.0`) and revocation lists.

Both sides send their certificate (and revocation list); Noise has already proved the
remote peer id, so an owner-signed, valid, unrevoked certificate for that id proves
membership. A failed check is refused and held off (revoked: forever); a hello lost with
its connection is not a failed check.
"""

from __future__ import annotations

import contextlib
import time

import trio
from libp2p.abc import INetStream
from libp2p.peer.id import ID

from crdt import RemoteProtocolError
from crypto import Certificate, MembershipError, RevocationList

from . import messages
from .core import HELLO_PROTOCOL, NodeCore, log
from .frames import close_quietly, encode_frame, read_frame

__all__ = ["HOLD_S", "Admission"]

HELLO_TIMEOUT_S = 10.0
HOLD_S = 300.0  # a peer that failed the membership check is not dialed (nor accepted) for this long
NO_HELLO_HOLD_S = 60.0  # a stranger that connected but never completed a hello


class Admission(NodeCore):
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
                await self._refuse(record.peer_id, "revoked")
        self.state.publish("revocations_adopted", {"version": revocations.version,
                                                   "revoked": sorted(revocations.revoked)})
        if self._nursery is not None:
            for record in self.book.members():
                self._nursery.start_soon(self._hello, record.peer_id, False)
        return True

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

    async def _refuse(self, peer_id: str, reason: str, *, by_peer: bool = False) -> None:
        """Drop a peer whose membership check failed (or, `by_peer`, that refused ours) and
        hold it off for HOLD_S; a revoked one forever, and out of GossipSub too."""
        record = self.book.get(peer_id)
        record.member = False
        forever = reason == "revoked" and not by_peer
        record.hold_until = float("inf") if forever else time.monotonic() + HOLD_S
        if by_peer:  # it may be us who is wrong (e.g. revoked): keep it as a sibling to retry
            record.refused = f"refused us: {reason}"
            self.counters[f"hello_refused_by_peer_{reason}"] += 1
            log.warning("peer %s refused us (%s): disconnected", peer_id, reason)
        else:
            record.refused = reason
            record.dial = False
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
                await self._refuse(peer_id, reply.reason, by_peer=True)
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
