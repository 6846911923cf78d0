"""The bounded neighbourhood: which siblings a golem keeps a connection to, and in which
order it pulls anti-entropy from them. Pure logic (no I/O, no clock): `Dialing` asks
`plan` what to dial and drop, `CatchUp` asks `PartnerCycle` whom to pull from next, and
bench/bench_scale.py runs the same code over a simulated clade.

A golem connects to a random `target` of the siblings it knows (default 12), never more
than `cap` (`cap_for(target)`: 16 for 12), whatever the clade's size: a random graph of
degree ≥ 12 is connected with overwhelming probability, and GossipSub's mesh (D = 6,
D_hi = 12) lives inside it. The view changes in two ways, as in Cyclon/HyParView's partial
views:

- *fill and trim*: below `target`, dial random ready candidates (siblings not connected);
  above `cap` (inbound connections arrive unasked), drop the excess, never below `cap`,
  so never below `target`;
- *rotation*: now and then (the caller's timer), swap one random neighbour for a random
  candidate, so over time every member is a neighbour of every other and a partition
  that healed is bridged again.

Two golems that dial each other at the same moment (both ends of a healed partition, whose
holds end together) get two connections, one dialed by each; py-libp2p's per-peer limit
spares both (each is inside its grace period when the other arrives) and keeps them for
good. `duplicates_to_close` settles that: the golem with the smaller peer id keeps the
connection it dialed and closes the ones its peer dialed; the other golem does nothing, so
the two never close different ones and leave none.

What the policy never drops: a pinned peer (the operator's `clade peers connect`). What it
drops last: a peer it is syncing with (`busy`), then one just connected (`fresh`: its
hello and first pulls are still running). Strangers (not siblings) are not its business:
admission drops them.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

__all__ = ["DEFAULT_TARGET", "PROMPT_GAP_S", "Connection", "PartnerCycle", "Plan", "PromptedPulls", "cap_for",
           "duplicates_to_close", "plan"]

DEFAULT_TARGET = 12
PROMPT_GAP_S = 5.0  # a sibling is pulled out of turn at most once in this many seconds


def cap_for(target: int) -> int:
    """The hard cap on connections for a `target`: a third above it, at least 2 above
    (12 → 16; 2 → 4). The slack lets inbound connections in without a drop each time."""
    return target + max(2, target // 3)


@dataclass(frozen=True)
class Connection:
    """One open connection to a peer, as `duplicates_to_close` sees it."""

    key: int  # which one (`Links.connections`), to close it by
    outbound: bool  # this golem dialed it
    busy: bool  # a stream other than gossip's is open on it (a hello, a pull)


def duplicates_to_close(me: str, peer: str, connections: Sequence[Connection]) -> list[int]:
    """The connections to `peer` this golem should close (their keys): when it has the smaller
    peer id (`me < peer`, the same comparison at both ends) and dialed one of them, every idle
    one the peer dialed. Nothing otherwise: at the other end, with one connection, or when
    this golem dialed none (two dials from one side: py-libp2p's per-peer limit trims those).
    A busy connection waits for a later look (closing it would break a hello or a pull)."""
    if me >= peer or len(connections) < 2 or not any(c.outbound for c in connections):
        return []
    return [c.key for c in connections if not c.outbound and not c.busy]


@dataclass(frozen=True)
class Plan:
    """What to do now: dial these candidates, drop these neighbours (disjoint sets)."""

    dial: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()


def _drop_order(neighbours: Iterable[str], *, pinned: AbstractSet[str], busy: AbstractSet[str],
                fresh: AbstractSet[str], rng: random.Random) -> list[str]:
    """Neighbours the policy may drop, in the order it would: idle and settled ones first
    (random among equals), then fresh ones, then ones mid-sync; pinned ones never."""
    pool = sorted(p for p in neighbours if p not in pinned)
    rng.shuffle(pool)
    return sorted(pool, key=lambda p: (p in busy, p in fresh))


def plan(*, neighbours: Collection[str], candidates: Sequence[str], dialing: int = 0, target: int,
         cap: int | None = None, pinned: AbstractSet[str] = frozenset(), busy: AbstractSet[str] = frozenset(),
         fresh: AbstractSet[str] = frozenset(), rotate: bool = False, rng: random.Random) -> Plan:
    """Decide which connections to open and close.

    `neighbours`: siblings connected now. `candidates`: siblings known, not connected, not
    being dialed and ready to dial (their backoff or hold is over). `dialing`: dials in
    flight (they count as connections: no overdialing while they run). `pinned` candidates
    are always dialed; every other dial is a random candidate, only while
    `len(neighbours) + dialing < target`. Above `cap`, the excess is dropped (`_drop_order`).
    With `rotate` and no other change due, one droppable neighbour is swapped for one random
    candidate (nothing happens if there is no candidate or no idle, settled, unpinned
    neighbour). Unless pins alone exceed it, the count after the plan is at most `cap`;
    a drop never takes it below `cap` (so never below `target`), and a swap keeps it.
    """
    cap = cap_for(target) if cap is None else max(cap, target)
    count = len(neighbours) + dialing
    pins = [c for c in candidates if c in pinned]
    others = [c for c in candidates if c not in pinned]
    dial = list(pins)
    room = max(0, target - count - len(pins))
    if room and others:
        dial += rng.sample(others, min(room, len(others)))
    excess = count + len(dial) - cap
    order = _drop_order(neighbours, pinned=pinned, busy=busy, fresh=fresh, rng=rng)
    drop = order[:excess] if excess > 0 else []
    if rotate and not dial and not drop and others:
        idle = [p for p in order if p not in busy and p not in fresh]
        if idle:
            return Plan(dial=(rng.choice(others),), drop=(idle[0],))
    return Plan(dial=tuple(dial), drop=tuple(drop))


class PartnerCycle:
    """Anti-entropy partners in turn: each cycle pulls every neighbour once, in an order
    shuffled afresh per cycle (`next`), so no neighbour waits more than two cycles and none
    is pulled twice in a row by chance, as a random choice each time would."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._queue: list[str] = []

    def next(self, partners: Collection[str]) -> str | None:
        """The next partner among `partners` (the neighbours eligible now), None if there is
        none. A partner that left is skipped; one that joined waits for the next cycle."""
        eligible = set(partners)
        while self._queue:
            peer = self._queue.pop()
            if peer in eligible:
                return peer
        if not eligible:
            return None
        self._queue = sorted(eligible)
        self.rng.shuffle(self._queue)
        return self._queue.pop()


class PromptedPulls:
    """Pulls out of turn, at most one per sibling per `gap_s`: a sibling whose gossip we had
    to refuse for the time it carries (its clock or ours stepped: `stale`, a certificate not
    valid at our time) has ops we lack that its next gossip will not bring, and its turn in
    the `PartnerCycle` may be a whole cycle away. A prompt within the gap is not dropped but
    *owed*: the pull runs once the gap is over (`next_owed`, `take_owed`), since the refused
    message may hold an op the last pull, begun before it, did not bring — the soak's clock
    fault waited 53 s for the next turn for one such op. The caller passes the time (trio's
    clock)."""

    def __init__(self, gap_s: float = PROMPT_GAP_S, *, remember: int = 1024) -> None:
        self.gap_s = gap_s
        self.remember = remember
        self._last: dict[str, float] = {}
        self._owed: dict[str, float] = {}  # sibling -> when its owed pull is due

    def due(self, peer: str, now: float) -> bool:
        """True (and remembered) if `peer` was not prompted within `gap_s` before `now`;
        otherwise its pull is owed for when the gap ends."""
        last = self._last.get(peer)
        if last is not None and now - last < self.gap_s:
            if peer in self._owed or len(self._owed) < self.remember:
                self._owed.setdefault(peer, last + self.gap_s)
            return False
        if len(self._last) >= self.remember:  # bounded: forget the prompts whose gap is over
            self._last = {p: t for p, t in self._last.items() if now - t < self.gap_s}
        self._owed.pop(peer, None)
        self._last[peer] = now
        return True

    def owe(self, peer: str, at: float) -> None:
        """Pull from `peer` at `at` (a prompted pull that could not run: one from it was running)."""
        if peer in self._owed or len(self._owed) < self.remember:
            self._owed[peer] = min(at, self._owed.get(peer, at))

    def next_owed(self) -> float | None:
        """When the earliest owed pull is due (None: none is owed)."""
        return min(self._owed.values(), default=None)

    def take_owed(self, now: float) -> list[str]:
        """The siblings whose owed pull is due at `now` (each then counts as prompted now)."""
        ready = sorted(p for p, at in self._owed.items() if at <= now)
        for peer in ready:
            del self._owed[peer]
            self._last[peer] = now
        return ready
