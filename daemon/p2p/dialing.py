"""Finding and keeping siblings: bootstrap, mDNS, peer exchange, known siblings across
restarts (`$DATA/peers.json`), connection events, redialing with capped exponential
backoff and jitter, and the bounded neighbourhood (`neighbourhood.plan`): a golem keeps a
random `target` of the siblings it knows connected (at most `cap`), swapping one for
another every `rotate_s`; every other known sibling is a candidate, dialed when a slot
frees. Peers the operator pins (`clade peers connect`) are always dialed and never
dropped; configured bootstrap siblings are where a golem starts, not pins (a list naming
one seed at every golem would make that seed a hub).

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
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import trio

from daemon.grimoire import atomic_write

from .neighbourhood import DEFAULT_TARGET, cap_for, duplicates_to_close, plan
from .part import NodePart
from .peers import PeerBook, PeerRecord, redial_delay
from .ports import DaemonPort, Links, internal_error

__all__ = ["CANDIDATE_DIALS", "DEFAULT_ROTATE_S", "MAX_CANDIDATES", "Dialing", "drop", "let_in", "shut_out"]

log = logging.getLogger("clade.p2p")

MAX_CANDIDATES = 64  # addresses learned from siblings or mDNS and not admitted yet
CANDIDATE_DIALS = 6  # failed dials before a learned, never-admitted address is given up
IDLE_WAKE_S = 1.0  # the dialer looks at the book at least this often
FRESH_S = 10.0  # a connection this young is dropped last (its hello and first pulls, admission.SETTLE_PULLS_S)
DEFAULT_ROTATE_S = 60.0


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
    """Keeps a bounded neighbourhood of the siblings worth dialing (see the module docstring).

    `parse_addr(addr) -> (peer_id, transport addr)` splits `/…/p2p/PEERID` and raises
    `ValueError` if it cannot; `dial_errors` are the exceptions a failed dial may raise.
    `target` and `rotate_s` shape the neighbourhood (`[p2p] neighbours`, `rotate_s`);
    `busy()` names the siblings a pull is running from (dropped last; the node wires it to
    catch-up). `regreet(peer)` says hello again over the connection left after a duplicate
    was closed, and pulls (the node wires it to admission): the proof of membership each end
    holds may have been made on the closed one (`gate.MemberGate`), and a gossip message
    written into a stream on it as it closed is lost to that peer.
    """

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook, *, me: str, known_path: Path,
                 rng: random.Random, parse_addr: Callable[[str], tuple[str, str]],
                 dial_errors: tuple[type[Exception], ...], target: int = DEFAULT_TARGET,
                 rotate_s: float = DEFAULT_ROTATE_S,
                 busy: Callable[[], AbstractSet[str]] = frozenset,
                 regreet: Callable[[str], None] = lambda peer_id: None) -> None:
        super().__init__(daemon, links, book)
        self.me = me
        self.known_path = known_path
        self.rng = rng
        self.parse_addr = parse_addr
        self.dial_errors = dial_errors
        self.target = target
        self.cap = cap_for(target)
        self.rotate_s = rotate_s
        self.busy = busy
        self.regreet = regreet
        self.pinned: set[str] = set()  # the operator's `clade peers connect`: always dialed, never dropped
        self._connected_at: dict[str, float] = {}  # trio.current_time() a sibling's connection opened
        self._dropping: set[str] = set()  # neighbours the policy is closing
        self._dialing: set[str] = set()  # peer ids with a dial in flight
        self._duplicated_at: dict[str, float] = {}  # trio.current_time() a second connection was first seen
        self._closing_duplicates: set[str] = set()  # peers whose duplicate connection is being closed
        self._wake = trio.Event()  # set when the book changed in a way the dialer must see
        self._nursery: trio.Nursery | None = None
        self._save_lock = trio.Lock()  # one `save_known` writes at a time
        self._save_asked = 0  # calls of `save_known` so far
        self._save_done = 0  # calls whose change is on disk

    # -- what the operator and the other parts ask -------------------------------------------

    def add_bootstrap(self, addr: str, *, pin: bool = False) -> str:
        """Remember a sibling to dial (`/ip4/…/tcp/…/p2p/PEERID`), lifting any hold; returns
        its peer id. With `pin` (the operator's `clade peers connect`) it is dialed now
        whatever the neighbourhood's size, and never dropped by it. Raises `ValueError` for
        a malformed address or our own."""
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
        if pin:
            self.pinned.add(peer_id)
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
        if not was:
            self._connected_at[peer_id] = trio.current_time()
            self._wake.set()  # one more neighbour: the cap may call for a drop
        return not was

    def on_disconnected(self, peer_id: str) -> None:
        """A connection to `peer_id` closed: if none is left, redial with backoff."""
        if self.links.connected(peer_id):
            return
        record = self.book.get(peer_id)
        self._connected_at.pop(peer_id, None)
        if record.connected and record.member:
            self.daemon.publish("peer_down", {"peer_id": peer_id})
        record.connected = False
        record.member = False if record.refused else record.member
        # Redial with backoff; a hello that succeeds resets it. A peer that accepts and drops
        # us at once (it holds us off) is thus not hammered.
        record.failures += 1
        # Not before a rest the neighbourhood gave it (it was rotated out, or trimmed).
        record.next_dial = max(record.next_dial, trio.current_time() + redial_delay(record.failures - 1, self.rng))
        self._wake.set()

    # -- the dialer ------------------------------------------------------------------------------

    def neighbours(self) -> list[str]:
        """Siblings connected now (members, or known siblings whose hello is running), but
        not those being dropped; strangers are admission's business and not counted."""
        return [r.peer_id for r in self.book.all() if r.connected and (r.member or r.dial) and not r.refused
                and r.peer_id not in self._dropping]

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the neighbourhood, forever: dial what `neighbourhood.plan` picks among the
        siblings that are due, drop what it drops, and ask it to rotate every `rotate_s`
        (× U(0.8, 1.2)). Dials and drops run side by side in this task's nursery."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            next_rotation = trio.current_time() + self.rotate_s * self.rng.uniform(0.8, 1.2)
            while True:
                now = trio.current_time()
                wait = IDLE_WAKE_S
                candidates: dict[str, PeerRecord] = {}
                for record in self.book.all():
                    if record.blacklisted and record.hold_until <= now:
                        let_in(self.links, record)
                    if not record.dial or record.connected or record.peer_id in self._dialing or not record.addrs:
                        continue
                    ready = max(record.next_dial, record.hold_until)
                    if ready <= now:
                        candidates[record.peer_id] = record
                    else:
                        wait = min(wait, ready - now)
                rotate = now >= next_rotation
                if rotate:
                    next_rotation = now + self.rotate_s * self.rng.uniform(0.8, 1.2)
                wait = min(wait, next_rotation - now)
                fresh = {p for p, at in self._connected_at.items() if now - at < FRESH_S}
                decided = plan(neighbours=self.neighbours(), candidates=list(candidates), dialing=len(self._dialing),
                               target=self.target, cap=self.cap, pinned=self.pinned, busy=self.busy(), fresh=fresh,
                               rotate=rotate, rng=self.rng)
                for peer_id in decided.dial:
                    self._dialing.add(peer_id)
                    nursery.start_soon(self._dial, candidates[peer_id])
                for peer_id in decided.drop:
                    self._dropping.add(peer_id)
                    nursery.start_soon(self._let_go, peer_id, rotate and bool(decided.dial))
                wait = min(wait, self._settle_duplicates(now, nursery))
                self._wake = trio.Event()
                with trio.move_on_after(max(wait, 0.05)):
                    await self._wake.wait()

    def _settle_duplicates(self, now: float, nursery: trio.Nursery) -> float:
        """Close the connections `neighbourhood.duplicates_to_close` names, once a neighbour has
        had two for `FRESH_S` (its hellos and first pulls are over by then); returns how long
        until the next one is due (`IDLE_WAKE_S` if none is)."""
        wait = IDLE_WAKE_S
        doubled = set()
        for peer_id in self.neighbours():
            connections = self.links.connections(peer_id)
            if len(connections) < 2:
                continue
            doubled.add(peer_id)
            since = self._duplicated_at.setdefault(peer_id, now)
            if now - since < FRESH_S:
                wait = min(wait, since + FRESH_S - now)
                continue
            close = duplicates_to_close(self.me, peer_id, connections)
            if close and peer_id not in self._closing_duplicates:
                self._closing_duplicates.add(peer_id)
                nursery.start_soon(self._close_duplicates, peer_id, close)
        for peer_id in set(self._duplicated_at) - doubled:
            del self._duplicated_at[peer_id]
        return wait

    async def _close_duplicates(self, peer_id: str, keys: list[int]) -> None:
        try:
            for key in keys:
                await self.links.close_connection(peer_id, key)
                self.counters["duplicate_connections_closed"] += 1
            log.debug("closed %d duplicate connection(s) to %s", len(keys), peer_id)
            if self.links.connected(peer_id):
                self.regreet(peer_id)
        finally:
            self._closing_duplicates.discard(peer_id)
            self._wake.set()

    async def _let_go(self, peer_id: str, rotated: bool) -> None:
        """Close a neighbour the plan dropped; it rests `rotate_s` before this golem dials it
        again (it may dial us sooner: then it is a neighbour again, like any inbound one)."""
        self.counters["neighbours_rotated" if rotated else "neighbours_trimmed"] += 1
        record = self.book.get(peer_id)
        record.next_dial = max(record.next_dial, trio.current_time() + self.rotate_s)
        log.debug("neighbourhood: %s %s", "rotating out" if rotated else "trimming", peer_id)
        try:
            await drop(self.links, self.book, peer_id)
        finally:
            self._dropping.discard(peer_id)
            self._wake.set()

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
