"""The bounded neighbourhood's policy (daemon/p2p/neighbourhood.py), alone and over a
simulated clade: the cap holds at every step, the overlay stays connected, and rotation
makes every member a neighbour of every other in time."""

from __future__ import annotations

import random
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.p2p.neighbourhood import Connection, PartnerCycle, PromptedPulls, cap_for, duplicates_to_close, plan


def peers(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_the_cap_is_a_third_above_the_target_and_at_least_two() -> None:
    assert [cap_for(t) for t in (2, 4, 6, 12, 30)] == [4, 6, 8, 16, 40]


def test_below_the_target_it_dials_random_candidates_up_to_the_target_counting_dials_in_flight() -> None:
    decided = plan(neighbours=peers("n", 5), candidates=peers("c", 20), dialing=3, target=12, rng=random.Random(1))
    assert len(decided.dial) == 4 and set(decided.dial) <= set(peers("c", 20)) and decided.drop == ()


def test_at_the_target_it_dials_nobody_and_drops_nobody() -> None:
    decided = plan(neighbours=peers("n", 12), candidates=peers("c", 20), target=12, rng=random.Random(1))
    assert decided.dial == () and decided.drop == ()


def test_inbound_beyond_the_cap_drops_the_excess_idle_settled_ones_first_and_never_a_pin() -> None:
    neighbours = peers("n", 19)
    busy, fresh, pinned = set(neighbours[:3]), set(neighbours[3:6]), set(neighbours[6:16])
    decided = plan(neighbours=neighbours, candidates=[], target=12, pinned=pinned, busy=busy, fresh=fresh,
                   rng=random.Random(2))
    assert set(decided.drop) == set(neighbours[16:]) and decided.dial == ()  # 19 - 16 = 3, the idle unpinned
    decided = plan(neighbours=neighbours, candidates=[], target=12, pinned=pinned, busy=busy,
                   fresh=fresh | set(neighbours[16:]), rng=random.Random(2))
    assert set(decided.drop) <= set(neighbours[3:6]) | set(neighbours[16:])  # all fresh now: three of the six
    assert len(decided.drop) == 3 and not set(decided.drop) & (busy | pinned)


def test_a_pinned_candidate_is_dialed_even_when_the_neighbourhood_is_full_and_makes_room() -> None:
    decided = plan(neighbours=peers("n", 16), candidates=["pin", *peers("c", 5)], target=12, pinned={"pin"},
                   rng=random.Random(3))
    assert decided.dial == ("pin",) and len(decided.drop) == 1


def test_rotation_swaps_one_idle_settled_neighbour_for_a_candidate() -> None:
    neighbours = peers("n", 12)
    decided = plan(neighbours=neighbours, candidates=peers("c", 5), target=12, rotate=True,
                   busy=set(neighbours[:6]), fresh=set(neighbours[6:11]), rng=random.Random(4))
    assert decided.drop == ("n11",) and len(decided.dial) == 1 and decided.dial[0].startswith("c")
    nothing_idle = plan(neighbours=neighbours, candidates=peers("c", 5), target=12, rotate=True,
                        busy=set(neighbours), rng=random.Random(4))
    assert nothing_idle.dial == () and nothing_idle.drop == ()
    no_candidate = plan(neighbours=neighbours, candidates=[], target=12, rotate=True, rng=random.Random(4))
    assert no_candidate.dial == () and no_candidate.drop == ()


@settings(max_examples=300, deadline=None)
@given(neighbours=st.integers(0, 40), candidates=st.integers(0, 40), dialing=st.integers(0, 20),
       pins=st.integers(0, 20), target=st.integers(2, 20), rotate=st.booleans(), seed=st.integers(0, 2**32))
def test_a_plan_never_exceeds_the_cap_nor_drops_below_it(neighbours: int, candidates: int, dialing: int, pins: int,
                                                          target: int, rotate: bool, seed: int) -> None:
    now, known = peers("n", neighbours), peers("c", candidates)
    pinned = set(now[:pins // 2]) | set(known[:pins - pins // 2])
    cap = cap_for(target)
    decided = plan(neighbours=now, candidates=known, dialing=dialing, target=target, pinned=pinned, rotate=rotate,
                   rng=random.Random(seed))
    assert set(decided.dial) <= set(known) and set(decided.drop) <= set(now)
    assert not set(decided.drop) & pinned and len(set(decided.dial)) == len(decided.dial)
    before = neighbours + dialing
    after = before + len(decided.dial) - len(decided.drop)
    pins_after = len(pinned)  # pins are all kept or dialed
    assert after <= max(cap, before, pins_after + dialing)  # never grows past the cap but for pins
    if decided.drop and not (rotate and len(decided.dial) == 1 and len(decided.drop) == 1):
        assert after >= cap  # a trim stops at the cap, so never below the target
    if before + len(decided.dial) <= cap and not rotate:
        assert decided.drop == ()


class Overlay:
    """`n` golems running the policy on a shared, symmetric connection graph: a dial
    connects both ends at once, and the end dialed plans at once (the daemon's dialer
    wakes on every new connection), trimming beyond its cap (the newcomer last); so does a dialer whose dials
    ran while connections came in. The cap is checked once each pass is over (an inbound
    connection beyond it is up until the pass it woke has dropped another)."""

    def __init__(self, n: int, target: int, seed: int) -> None:
        self.n, self.target = n, target
        self.rng = random.Random(seed)
        self.edges: list[set[int]] = [set() for _ in range(n)]
        self.ever: list[set[int]] = [set() for _ in range(n)]
        self.max_degree = 0

    def act(self, g: int, *, rotate: bool = False, fresh: int | None = None) -> None:
        candidates = [str(o) for o in range(self.n) if o != g and o not in self.edges[g]]
        decided = plan(neighbours=[str(o) for o in self.edges[g]], candidates=candidates, target=self.target,
                       rotate=rotate, fresh=set() if fresh is None else {str(fresh)}, rng=self.rng)
        for o in map(int, decided.drop):
            self.edges[g].discard(o)
            self.edges[o].discard(g)
        for o in map(int, decided.dial):
            self.edges[g].add(o)
            self.edges[o].add(g)
            self.ever[g].add(o)
            self.ever[o].add(g)
            self.act(o, fresh=g)  # the dialed end: trims beyond its cap (the inbound connection is up meanwhile)
        if len(self.edges[g]) > cap_for(self.target):  # inbound arrived while its dials ran: its next pass trims
            self.act(g)

    def step(self, *, rotate: bool) -> None:
        """Each golem's dialer runs once, in random order; the cap is checked after each."""
        for g in self.rng.sample(range(self.n), self.n):
            self.act(g, rotate=rotate)
            self.max_degree = max(self.max_degree, *(len(e) for e in self.edges))

    def connected(self) -> bool:
        seen, todo = {0}, deque([0])
        while todo:
            for o in self.edges[todo.popleft()] - seen:
                seen.add(o)
                todo.append(o)
        return len(seen) == self.n


@settings(max_examples=10, deadline=None)
@given(n=st.integers(14, 50), seed=st.integers(0, 2**32))
def test_a_clade_keeps_at_most_the_cap_stays_connected_and_rotation_reaches_every_member(n: int, seed: int) -> None:
    overlay = Overlay(n, 12, seed)
    overlay.step(rotate=False)
    assert overlay.connected()
    for _ in range(20):
        overlay.step(rotate=True)
        assert overlay.max_degree <= 16 and overlay.connected()
        for _ in range(3):  # a golem rotated out (or trimmed) by several at once is short until it dials again;
            overlay.step(rotate=False)  # a full golem it dials trims another, which may be short in turn
        assert all(12 <= len(e) <= 16 for e in overlay.edges)
    if n <= 25:  # rotation is a coupon collector: within 120 rotations each, every golem has met every other
        for _ in range(100):
            if all(len(ever) == n - 1 for ever in overlay.ever):
                break
            overlay.step(rotate=True)
        assert all(len(ever) == n - 1 for ever in overlay.ever)


def test_a_small_target_still_reaches_every_member_over_time() -> None:
    overlay = Overlay(6, 2, 7)
    for _ in range(60):
        overlay.step(rotate=True)
        overlay.step(rotate=False)
        assert overlay.max_degree <= 4
    assert all(len(ever) == 5 for ever in overlay.ever)


def test_of_a_simultaneous_dial_only_the_smaller_id_acts_and_it_closes_the_connection_its_peer_dialed() -> None:
    # One connection each way, as each end sees them: key 1 dialed by "A…", key 2 by "B…".
    at_a = [Connection(1, outbound=True, busy=False), Connection(2, outbound=False, busy=False)]
    at_b = [Connection(1, outbound=False, busy=False), Connection(2, outbound=True, busy=False)]
    assert duplicates_to_close("12D3KooWA", "12D3KooWB", at_a) == [2]
    assert duplicates_to_close("12D3KooWB", "12D3KooWA", at_b) == []
    busy = [Connection(1, outbound=True, busy=False), Connection(2, outbound=False, busy=True)]
    assert duplicates_to_close("12D3KooWA", "12D3KooWB", busy) == []  # a hello or a pull on it: later
    assert duplicates_to_close("12D3KooWA", "12D3KooWB", at_a[:1]) == []  # one connection: nothing to settle
    both_theirs = [Connection(1, outbound=False, busy=False), Connection(2, outbound=False, busy=False)]
    assert duplicates_to_close("12D3KooWA", "12D3KooWB", both_theirs) == []  # libp2p's per-peer limit's case


@given(a=st.text(min_size=1, max_size=8), b=st.text(min_size=1, max_size=8),
       dialed_by_a=st.lists(st.booleans(), min_size=1, max_size=5),
       busy=st.lists(st.booleans(), min_size=5, max_size=5))
def test_both_ends_together_never_close_every_connection_and_leave_one_dialed_by_the_smaller(
        a: str, b: str, dialed_by_a: list[bool], busy: list[bool]) -> None:
    if a == b:
        return
    at_a = [Connection(k, outbound=d, busy=busy[k]) for k, d in enumerate(dialed_by_a)]
    at_b = [Connection(k, outbound=not d, busy=busy[k]) for k, d in enumerate(dialed_by_a)]
    closed = set(duplicates_to_close(a, b, at_a)) | set(duplicates_to_close(b, a, at_b))
    left = [k for k in range(len(dialed_by_a)) if k not in closed]
    assert left
    smaller_dialed = {k for k, d in enumerate(dialed_by_a) if d == (a < b)}
    if closed:
        assert set(left) >= smaller_dialed and closed.isdisjoint(smaller_dialed)


def test_partners_are_pulled_in_turn_each_once_per_cycle_in_a_fresh_order() -> None:
    cycle = PartnerCycle(random.Random(5))
    partners = peers("p", 6)
    first = [cycle.next(partners) for _ in range(6)]
    second = [cycle.next(partners) for _ in range(6)]
    assert sorted(map(str, first)) == partners == sorted(map(str, second)) and first != second
    assert cycle.next([]) is None


def test_a_partner_that_left_is_skipped_and_one_that_joined_waits_for_the_next_cycle() -> None:
    cycle = PartnerCycle(random.Random(6))
    first = cycle.next(["a", "b", "c"])
    rest = [p for p in ("a", "b", "c") if p != first]
    _gone, staying = rest
    assert cycle.next([str(first), staying, "d"]) == staying  # `gone` left: skipped; `d` joined: not yet
    assert cycle.next([str(first), staying, "d"]) in ("a", "b", "c", "d")  # a new cycle, `d` in it
    assert "d" in {cycle.next(["a", "b", "c", "d"]) for _ in range(3)}


def test_a_sibling_is_prompted_at_most_once_per_gap_each_sibling_apart() -> None:
    prompts = PromptedPulls(gap_s=5.0)
    assert prompts.due("a", 100.0) and prompts.due("b", 100.5)
    assert not prompts.due("a", 104.9) and not prompts.due("b", 105.0)
    assert prompts.due("a", 105.0) and not prompts.due("a", 106.0)


def test_prompts_remembered_stay_bounded_by_the_siblings_prompted_within_one_gap() -> None:
    prompts = PromptedPulls(gap_s=5.0, remember=8)
    for i in range(100):
        assert prompts.due(f"p{i}", float(i))  # one a second: only the last five are within the gap
    assert len(prompts._last) <= 8
    assert not prompts.due("p99", 100.0) and prompts.due("p90", 100.0)


def test_a_prompt_within_the_gap_is_owed_and_pulled_when_the_gap_ends() -> None:
    prompts = PromptedPulls(gap_s=5.0)
    assert prompts.due("a", 100.0)
    assert prompts.next_owed() is None
    assert not prompts.due("a", 102.0) and not prompts.due("a", 103.0)  # owed once, not twice
    assert prompts.next_owed() == 105.0
    assert prompts.take_owed(104.9) == []
    assert prompts.take_owed(105.0) == ["a"]  # the gap is over: pulled now, and counted as prompted
    assert prompts.next_owed() is None and not prompts.due("a", 106.0)
    assert prompts.take_owed(110.0) == ["a"]  # the prompt at 106 was owed in turn


def test_an_owed_pull_that_met_a_running_one_is_owed_again() -> None:
    prompts = PromptedPulls(gap_s=5.0)
    prompts.owe("b", 50.0)
    prompts.owe("b", 52.0)  # the earlier time stands
    assert prompts.take_owed(50.0) == ["b"]
    assert prompts.due("b", 56.0)  # a prompt after the gap runs at once: nothing owed
    assert prompts.next_owed() is None
