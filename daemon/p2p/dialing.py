"""Finding and keeping siblings: bootstrap, mDNS, peer exchange, known siblings across
restarts (`$DATA/peers.json`), connection events, and redialing with capped exponential
backoff and jitter.

`Dialing` owns the dial side of the peer book: `dial`, `learned`, `failures`, `next_dial`,
`hold_until` and `blacklisted` of each record, the set of dials in flight, the dialer's
wake-up and the writes of `peers.json` (one at a time). Every timer is on
`trio.current_time()` (tests run it on `MockClock`). It reaches the network only through
the `Links` port and greets nobody itself: the node routes a new connection to admission
when `on_connected` says so. Nothing else dials: py-libp2p's
auto-connector is off (`host.disable_auto_connector`) and Pubsub opens no stream (which
would redial) to a peer that has not proved membership (`gate`).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from daemon.grimoire import atomic_write

from .part import NodePart
from .peers import PeerBook, PeerRecord, redial_delay
from .ports import DaemonPort, Links, internal_error

__all__ = ["CANDIDATE_DIALS", "MAX_CANDIDATES", "Dialing", "drop", "let_in", "shut_out"]

log = logging.getLogger("clade.p2p")

MAX_CANDIDATES = 64  # addresses learned from siblings or mDNS and not admitted yet
CANDIDATE_DIALS = 6  # failed dials before a learned, never-admitted address is given up
IDLE_WAKE_S = 1.0  # the dialer looks at the book at least this often


def shut_out(links: Links, record: PeerRecord) -> None:
    """Keep GossipSub from exchanging messages with a held or revoked peer: a revoked
    member still has the clade key, so the envelope alone does not stop it reading."""
    record.blacklisted = True
    links.shut_out(record.peer_id)


def let_in(links: Links, record: PeerRecord) -> None:
    """Lift `shut_out` (never for a revoked peer)."""
    if record.blacklisted and record.refused != "revoked":
        record.blacklisted = False
        links.let_in(record.peer_id)


DROP_ATTEMPTS = 3


async def drop(links: Links, book: PeerBook, peer_id: str) -> None:
    """Close the connections to `peer_id` (trying again, up to `DROP_ATTEMPTS` times, while one
    is still up: a close that timed out leaves it open) and note whether any is still up."""
    for attempt in range(DROP_ATTEMPTS):
        await links.drop(peer_id)
        if not links.connected(peer_id):
            break
        await trio.sleep(0.5 * (attempt + 1))
    record = book.find(peer_id)
    if record is not None:
        record.connected = links.connected(peer_id)


class Dialing(NodePart):
    """Keeps a connection to every sibling worth dialing (see the module docstring).

    `parse_addr(addr) -> (peer_id, transport addr)` splits `/…/p2p/PEERID` and raises
    `ValueError` if it cannot; `dial_errors` are the exceptions a failed dial may raise.
    """

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook, *, me: str, known_path: Path,
                 rng: random.Random, parse_addr: Callable[[str], tuple[str, str]],
                 dial_errors: tuple[type[Exception], ...]) -> None:
        super().__init__(daemon, links, book)
        self.me = me
        self.known_path = known_path
        self.rng = rng
        self.parse_addr = parse_addr
        self.dial_errors = dial_errors
        self._dialing: set[str] = set()  # peer ids with a dial in flight
        self._wake = trio.Event()  # set when the book changed in a way the dialer must see
        self._nursery: trio.Nursery | None = None
        self._save_lock = trio.Lock()  # one `save_known` writes at a time
        self._save_asked = 0  # calls of `save_known` so far
        self._save_done = 0  # calls whose change is on disk

    # -- what the operator and the other parts ask -------------------------------------------

    def add_bootstrap(self, addr: str) -> str:
        """Remember a sibling to dial (`/ip4/…/tcp/…/p2p/PEERID`), lifting any hold; returns
        its peer id. Raises `ValueError` for a malformed address or our own."""
        try:
            peer_id, transport = self.parse_addr(addr)
        except ValueError as exc:
            raise ValueError(f"bootstrap address {addr!r} must end in /p2p/PEERID ({exc})") from None
        if peer_id == self.me:
            raise ValueError(f"bootstrap address {addr!r} is this golem itself")
        record = self.book.add_addr(peer_id, transport)
        record.dial = True
        record.hold_until = 0.0
        record.next_dial = 0.0
        record.failures = 0
        let_in(self.links, record)
        self._wake.set()
        return peer_id

    async def disconnect(self, peer_id: str, *, hold_s: float) -> None:
        """Drop a peer and refuse it (both ways) for `hold_s` seconds (operator's partition)."""
        record = self.book.get(peer_id)
        record.hold_until = trio.current_time() + hold_s
        shut_out(self.links, record)
        await drop(self.links, self.book, peer_id)

    def load_known(self) -> None:
        """Siblings admitted in earlier runs: dialed at once after a restart."""
        try:
            known = json.loads(self.known_path.read_text())
            for peer_id, addrs in dict(known).items():
                record = self.book.get(str(peer_id))
                record.dial = True
                # After any address configured now (a bootstrap): a sibling that moved to a new
                # port is dialed where the operator says first, its old address last.
                record.addrs = [*record.addrs, *(str(a) for a in list(addrs)[:8] if str(a) not in record.addrs)][:8]
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, RecursionError) as exc:  # unreadable, not JSON, wrong shape, too deep
            log.warning("ignoring %s (%s); siblings will be found again via bootstrap/mDNS", self.known_path, exc)

    async def save_known(self) -> None:
        """Persist the siblings to redial after a restart (`Siblings` port). Never raises: a
        file that cannot be written is counted (`known_save_failed`) and logged; the sibling
        that prompted the save stays admitted (the disk is not its fault).

        Saves run one at a time, each writing the book as it is when it starts; a call returns
        at once if a save that started after it was made has already written. Several siblings
        admitted together (a newcomer dialing them all, or learning them from one hello) cost
        one or two writes, and never two writers racing on the file (each failed a hello)."""
        self._save_asked += 1
        mine = self._save_asked
        async with self._save_lock:
            if self._save_done >= mine:
                return
            upto = self._save_asked
            known = {r.peer_id: r.addrs for r in self.book.all() if r.dial and r.refused is None and r.addrs}
            data = json.dumps(known, indent=1, sort_keys=True).encode()
            try:
                await trio.to_thread.run_sync(atomic_write, self.known_path, data)
            except OSError as exc:
                self.counters["known_save_failed"] += 1
                log.warning("could not save the known siblings to %s (%s); a restart will find them again "
                            "via bootstrap/mDNS", self.known_path, exc)
                return
            self._save_done = upto

    def discovered(self, peer_id: str, addrs: list[str]) -> None:
        """A peer announced by mDNS."""
        if peer_id == self.me or not addrs:
            return
        known = self.book.find(peer_id)
        if known is None and self.book.candidates() >= MAX_CANDIDATES:
            self.counters["mdns_capped"] += 1
            return
        record = self.book.get(peer_id)
        for addr in addrs[:8]:
            self.book.add_addr(peer_id, addr)
        if known is None:
            record.learned = True
        if not record.refused:
            record.dial = True
            self._wake.set()
        self.counters["mdns_discovered"] += 1

    def learn_sibling(self, addr: str) -> None:
        """A sibling named by a member (peer exchange): dial it unless known or refused
        (`Siblings` port)."""
        try:
            peer_id, transport = self.parse_addr(addr)
        except ValueError:  # a bad address from a peer is ignored, and counted
            self.counters["peer_exchange_bad_addr"] += 1
            return
        record = self.book.find(peer_id)
        if peer_id == self.me or (record is not None and (record.refused or record.connected or record.dial)):
            return
        if self.book.candidates() >= MAX_CANDIDATES:
            self.counters["peer_exchange_capped"] += 1
            return
        record = self.book.add_addr(peer_id, transport)
        record.learned = True
        record.dial = True
        self._wake.set()

    # -- connection events (routed here by the node) -------------------------------------------

    def on_connected(self, peer_id: str) -> bool | None:
        """A connection to `peer_id` opened: True if it is the peer's first (a hello is due),
        False if another was already up, None if the peer is held off (dropped at once,
        counted, not logged: a held peer may retry many times a second)."""
        record = self.book.get(peer_id)
        if trio.current_time() < record.hold_until:
            self.counters["connections_refused_held"] += 1
            record.connected = True  # until `drop` has closed it: the peer table shows what is open
            if self._nursery is not None:
                self._nursery.start_soon(drop, self.links, self.book, peer_id)
            return None
        was = record.connected
        record.connected = True
        record.last_seen_ms = self.daemon.now_ms()
        return not was

    def on_disconnected(self, peer_id: str) -> None:
        """A connection to `peer_id` closed: if none is left, redial with backoff."""
        if self.links.connected(peer_id):
            return
        record = self.book.get(peer_id)
        if record.connected and record.member:
            self.daemon.publish("peer_down", {"peer_id": peer_id})
        record.connected = False
        record.member = False if record.refused else record.member
        # Redial with backoff; a hello that succeeds resets it. A peer that accepts and drops
        # us at once (it holds us off) is thus not hammered.
        record.failures += 1
        record.next_dial = trio.current_time() + redial_delay(record.failures - 1, self.rng)
        self._wake.set()

    # -- the dialer ------------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Dial every record that is due, forever; dials run side by side in this task's nursery."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                now = trio.current_time()
                wait = IDLE_WAKE_S
                for record in self.book.all():
                    if record.blacklisted and record.hold_until <= now:
                        let_in(self.links, record)
                    if not record.dial or record.connected or record.peer_id in self._dialing or not record.addrs:
                        continue
                    ready = max(record.next_dial, record.hold_until)
                    if ready <= now:
                        self._dialing.add(record.peer_id)
                        nursery.start_soon(self._dial, record)
                    else:
                        wait = min(wait, ready - now)
                self._wake = trio.Event()
                with trio.move_on_after(max(wait, 0.05)):
                    await self._wake.wait()

    async def _dial(self, record: PeerRecord) -> None:
        try:
            await self.links.dial(record.peer_id, list(record.addrs))
            self.counters["dials_ok"] += 1  # failures reset once the hello succeeds
        except self.dial_errors as exc:  # the network said no: back off, retry
            self._dial_failed(record, exc)
        except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, not counted as a failed dial
            internal_error(self.counters, "dialing %s", record.peer_id)
            self._dial_failed(record, exc, count=False)
        finally:
            self._dialing.discard(record.peer_id)
            self._wake.set()

    def _dial_failed(self, record: PeerRecord, exc: Exception, *, count: bool = True) -> None:
        record.failures += 1  # backed off either way: a bug must not become a dial loop
        record.next_dial = trio.current_time() + redial_delay(record.failures, self.rng)
        if count:
            self.counters["dials_failed"] += 1
        if record.learned and not record.member and record.failures >= CANDIDATE_DIALS:
            record.dial = False  # a stale or made-up address from peer exchange: stop trying
        log.debug("dial %s failed (%d in a row): %r", record.peer_id, record.failures, exc)
