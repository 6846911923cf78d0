"""The small interfaces the p2p parts talk through (`typing.Protocol`, structural).

    DaemonPort ──▶ every part    the store's writer thread, events, counters, the clock
    Links ───────▶ every part    the libp2p host as the parts see it (dial, drop, streams, blacklist)
    Siblings ────▶ Admission     peer exchange and the known-siblings file (Dialing implements it)
    Syncer ──────▶ Admission     pull after a hello (CatchUp implements it)
    P2PControl ◀── the daemon    what `daemon.service.state` may ask of the running node

This module imports neither libp2p nor the daemon's service room: the service depends on
`P2PControl` (the node satisfies it), the node on `DaemonPort` (`DaemonState` satisfies it),
and neither imports the other.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from crdt import ApplyReport
from crypto import RevocationList
from daemon.grimoire.storage_faults import sole_cause, storage_refusal

from .neighbourhood import Connection

if TYPE_CHECKING:
    from daemon.embedding.shipped import VectorShipping
    from daemon.grimoire import Grimoire

__all__ = ["DaemonPort", "Links", "P2PControl", "Siblings", "Stream", "Syncer", "announce_received", "internal_error"]

T = TypeVar("T")
log = logging.getLogger("clade.p2p")


class DaemonPort(Protocol):
    """What the p2p parts need from the daemon (`DaemonState` is one)."""

    counters: Counter[str]

    def now_ms(self) -> int:
        """The daemon's clock in Unix milliseconds (last-seen times, events, certificate checks;
        `daemon/service/clock.py`: the wall clock, moved by a MockClock in tests). Thread-safe."""
        ...

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send a server-sent event to the control API's subscribers."""
        ...

    async def on_writer(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(store)` on the single writer thread (one call at a time, in order)."""
        ...

    async def on_writer_short(self, fn: Callable[[Grimoire], T]) -> T:
        """`on_writer` for a short join that does not wait for the disk (a few gossip ops): run
        on the calling thread once the writer is free (service/store_access.py)."""
        ...

    async def on_reader(self, fn: Callable[[Grimoire], T]) -> T:
        """Run `fn(reader)` on a reader thread, over a read-only connection, never behind the
        writer (`fn` must not write)."""
        ...

    def ingesting(self) -> AbstractContextManager[None]:
        """Held while a catch-up round is joined: work that can wait (the backlog embedder)
        holds back a while, so the join has the cores."""
        ...

    def vector_shipping(self) -> VectorShipping | None:
        """The vector space gossip ships and accepts vectors in, and the share of accepted ones
        to check; None: shipping is off (`[embedding] ship_vectors`) or the space is not known
        without loading the model (a hub model, files of the operator's own)."""
        ...


class Stream(Protocol):
    """A libp2p stream as the parts use it."""

    async def read(self, n: int | None = None) -> bytes: ...
    async def write(self, data: bytes) -> None: ...
    async def close(self) -> None: ...


class Links(Protocol):
    """The libp2p host and GossipSub, reduced to what the parts do with them. Every method
    raises only transport errors (`links.TRANSPORT_ERRORS`), or none where it says so."""

    def listen_addrs(self) -> list[str]:
        """Our listen addresses (`/…/p2p/OURID`), empty before the host listens."""
        ...

    def connected(self, peer_id: str) -> bool:
        """True while a connection to `peer_id` is open. Never raises."""
        ...

    def connections(self, peer_id: str) -> list[Connection]:
        """The open connections to `peer_id` (usually one; two after a simultaneous dial). Never raises."""
        ...

    async def close_connection(self, peer_id: str, key: int) -> None:
        """Close one connection to `peer_id` (a key from `connections`; gone already: nothing),
        within a few seconds, then `drop_stale_gossip`. A transport error while closing is swallowed."""
        ...

    def drop_stale_gossip(self, peer_id: str) -> None:
        """One of `peer_id`'s connections closed while another is open: if GossipSub's stream
        to it ran on the closed one, open a new one on the open one. Never raises."""
        ...

    async def dial(self, peer_id: str, addrs: list[str]) -> None:
        """Connect to `peer_id` at one of `addrs`, within a deadline; raises a transport error
        (or `ValueError` for an address that does not parse) if it could not."""
        ...

    async def drop(self, peer_id: str) -> None:
        """Close every connection to `peer_id` (at most a few seconds). A transport error while
        closing is swallowed (the connection is gone either way)."""
        ...

    async def open_stream(self, peer_id: str, protocol: str) -> Stream:
        """A new stream to a connected peer, within a deadline."""
        ...

    async def open_stream_of(self, peer_id: str, protocols: Sequence[str]) -> tuple[Stream, str]:
        """A new stream speaking the first of `protocols` (most preferred first) the peer
        supports, and which one, within a deadline."""
        ...

    async def publish(self, topic: str, data: bytes) -> None:
        """Publish on a GossipSub topic (drops are not reported: docs/design/libp2p.md, pitfall 7)."""
        ...

    def subscribed(self, topic: str) -> frozenset[str]:
        """The peers known to be subscribed to `topic` (their GossipSub subscriptions). Never raises."""
        ...

    def shut_out(self, peer_id: str) -> None:
        """GossipSub exchanges nothing with `peer_id` (its blacklist). Never raises."""
        ...

    def let_in(self, peer_id: str) -> None:
        """Undo `shut_out`. Never raises."""
        ...

    def admit(self, peer_id: str) -> None:
        """`peer_id` proved membership on its current connection: GossipSub may exchange
        messages with it (`gate.MemberGate`). Never raises."""
        ...

    def forget(self, peer_id: str) -> None:
        """Undo `admit` (its connection closed, or it was refused). Never raises."""
        ...

    def admitted(self, peer_id: str) -> bool:
        """`admit` was called while a connection to `peer_id` that is still open was up. Never raises."""
        ...

    async def wait_admitted(self, peer_id: str, timeout_s: float) -> bool:
        """True once `peer_id` is `admitted`; False once it is disconnected or after `timeout_s`."""
        ...

    async def open_gossip(self, peer_id: str) -> None:
        """Start GossipSub with an admitted peer (open our pubsub stream to it). Never raises."""
        ...


class Siblings(Protocol):
    """Dialing's side of admission: learn siblings a member names, remember admitted ones."""

    def learn_sibling(self, addr: str) -> None:
        """A sibling named by a member (peer exchange): dial it unless known or refused."""
        ...

    async def save_known(self) -> None:
        """Persist the siblings to redial after a restart; never raises (a failed write is
        counted and logged: the admitted sibling is not to blame)."""
        ...


class Syncer(Protocol):
    """Catch-up's side of admission: pull from a sibling once it is admitted."""

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        """Pull what `peer_id` has that we lack; None if it could not run."""
        ...


class P2PControl(Protocol):
    """What the daemon's control surface asks of the running p2p node."""

    def status(self) -> dict[str, Any]:
        """Listen addresses, topic, connected members, revocation list version."""
        ...

    def peers(self) -> list[dict[str, Any]]:
        """Every peer the node knows (`PeerRecord.to_json`)."""
        ...

    def siblings(self) -> list[str]:
        """Peer ids of the connected, admitted members."""
        ...

    def add_bootstrap(self, addr: str) -> str:
        """Dial `/…/p2p/PEERID` and keep it; returns the peer id. `ValueError` if malformed."""
        ...

    async def disconnect(self, peer_id: str, *, hold_s: float) -> None:
        """Drop a peer and refuse it both ways for `hold_s` seconds."""
        ...

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        """Pull from a sibling now; a summary, or None if the sync could not run."""
        ...

    async def adopt_revocations(self, revocations: RevocationList) -> bool:
        """Install a newer owner-signed revocation list; False if not newer."""
        ...

    def local_write(self) -> None:
        """Own ops were committed: gossip those that cross at once."""
        ...

    async def publish_probe(self, probe_id: str) -> int:
        """Publish a transport probe; returns its send time (wall ms)."""
        ...


def announce_received(daemon: DaemonPort, source: str, report: ApplyReport, *, via: str) -> None:
    """Publish `entries_received` for ops from siblings that changed our state (`op_ms`: the HLC
    times of the first 100 applied ops, for the gossip delivery-time histogram, daemon/metrics)."""
    ids = sorted({op.entry_id for op in report.applied_ops})
    daemon.publish("entries_received", {
        "from": source, "via": via, "ops": report.applied, "entries": len(ids), "ids": ids[:100],
        "committed_ms": daemon.now_ms(), "op_ms": [op.hlc.ms for op in report.applied_ops[:100]]})


def internal_error(counters: Counter[str], what: str, *args: object) -> None:
    """A bug surfaced at a task or handler boundary (call inside `except`): log it with its
    traceback and count it as `internal_errors`, never as a peer's or the network's fault. A
    storage refusal (the data dir full or read-only) is not a bug: said without a traceback and
    counted as `sync_storage_refused` (the next sync brings what this one could not store)."""
    refusal = storage_refusal(sole_cause(sys.exc_info()[1] or Exception()))
    if refusal is not None:
        counters["sync_storage_refused"] += 1
        log.warning(what + ": " + refusal.detail, *args)
        return
    counters["internal_errors"] += 1
    log.exception("internal error: " + what, *args)
