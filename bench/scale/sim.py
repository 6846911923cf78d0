"""bench_scale's simulated clade: `Sim`, a seeded discrete-event scheduler over golems (`Golem`)
that each hold a real identity, codec and store, connected as the daemon's neighbourhood
connects them, with py-libp2p's GossipSub and the network modelled (what is real and what is
modelled: bench/bench_scale.py's docstring); `world`, the digest both arms of a seed must share."""

from __future__ import annotations

import hashlib
import heapq
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.common.seed import seed_entry
from bench.common.stats import percentile
from crdt import CausalContext, Delta, Kind, RemoteProtocolError
from crdt.codec import decode_delta, encode_delta
from crypto import Identity
from crypto.identity import signature_ok
from crypto.membership import AdmissionBundle, Certificate, Membership, OwnerKey
from daemon.grimoire import Grimoire, NewEntry
from daemon.p2p import messages
from daemon.p2p.admission import SETTLE_PULLS_S
from daemon.p2p.dialing import IDLE_WAKE_S
from daemon.p2p.gossip import GossipCodec
from daemon.p2p.neighbourhood import PartnerCycle, cap_for, plan
from daemon.p2p.sync_state import DeltaArrived, PullState, RoundEnded, ServeState, SummaryReceived, WantReceived

D, D_LO, D_HI = 6, 4, 12  # daemon/p2p/host.py
HEARTBEAT_S = 1.0
GOSSIP_WINDOW = 3  # heartbeats whose message ids an IHAVE names (py-libp2p's default)
RPC_OVERHEAD = 64  # bytes per frame: Yamux header, Noise tag, protobuf RPC envelope, from/seqno/signature fields
MSG_ID_BYTES = 46  # py-libp2p's message id: the publisher's peer id (38) + seqno (8)
ROUND_DELTAS = 4  # daemon/p2p/sync.py
PROFILES = {  # one-way latency per transmission: base + lognormal jitter (ms)
    "loopback": (0.1, 0.05),  # the real daemons of bench_clade on one machine
    "wan": (20.0, 8.0),  # golems on VMs across a region
}


@dataclass
class Golem:
    """One golem: real identity, codec and store; its modelled GossipSub state; what it cost."""

    index: int
    identity: Identity
    membership: Membership
    codec: GossipCodec
    store: Grimoire
    mesh: set[int] = field(default_factory=set)
    seen: dict[str, float] = field(default_factory=dict)  # message id -> when it was applied here
    data: dict[str, bytes] = field(default_factory=dict)  # message id -> its bytes (the mcache)
    window: list[list[str]] = field(default_factory=lambda: [[] for _ in range(GOSSIP_WINDOW)])
    cpu_free: float = 0.0  # simulated time this golem's CPU is next free
    cpu_real_s: float = 0.0  # measured: codec + store
    cpu_model_s: float = 0.0  # modelled: GossipSub transport per copy
    bytes_payload: int = 0  # sent: message copies and sync frames
    bytes_control: int = 0  # sent: IHAVE / IWANT
    copies_in: int = 0
    duplicates: int = 0
    published_seq: int = 0
    hops: dict[str, int] = field(default_factory=dict)
    conns: set[int] = field(default_factory=set)  # the neighbourhood: connected golems
    rest: dict[int, float] = field(default_factory=dict)  # not dialed again before (rotated out, trimmed)
    partners: PartnerCycle | None = None

    @property
    def peer_id(self) -> str:
        return self.identity.peer_id


class Sim:
    """A seeded discrete-event scheduler over `n` golems (see the module docstring)."""

    def __init__(self, n: int, *, seed: int, profile: str, loss: float, hop_cpu_s: float, hop_wait_s: float,
                 root: Path, owner: OwnerKey, target: int = 12, rotate_s: float = 60.0,
                 sync_interval_s: float = 30.0, flood: bool = True, degree: int = D, sync_version: int = 2,
                 send_share: float = 0.5, relay_flood: bool = False) -> None:
        self.rng = random.Random(seed)
        self.sync_version = sync_version  # anti-entropy: 2 (the daemon's) or 1 (contexts whole)
        # the mesh degree: the daemon's D=6, D_lo=4, D_hi=12; another D (a what-if) keeps D_lo = D - 2
        self.d, self.d_lo, self.d_hi = degree, degree - 2, max(D_HI, 2 * degree)
        # what-ifs for the frontier (bench_scale --send-share, --relay-flood): the share of a copy's
        # transport CPU paid by its sender, and whether a golem that got a message straight from its
        # origin forwards it to every neighbour (not only its mesh): a second flooded hop
        self.send_share = send_share
        self.relay_flood = relay_flood
        self.flood = flood  # flood publishing of own messages (daemon/p2p/flood.py)
        self.target = target
        self.cap = cap_for(target)
        self.rotate_s = rotate_s
        self.sync_interval_s = sync_interval_s
        self.max_conns = 0  # the most connections any golem held once its dialer had run
        self.churn = False  # rotation, anti-entropy timers and pulls on connect (from the partition on)
        self.now = 0.0
        self.queue: list[tuple[float, int, Callable[[], None]]] = []
        self.tick = 0
        self.base_ms, self.jitter_ms = PROFILES[profile]
        self.loss = loss
        self.hop_cpu_s = hop_cpu_s
        self.hop_wait_s = hop_wait_s
        self.cut: set[frozenset[int]] = set()  # links down (a partition)
        self.written: dict[str, tuple[float, int]] = {}  # message id -> (sim time written, origin)
        self.golems = [self._golem(i, root, owner, seed) for i in range(n)]
        for g in self.golems:
            g.partners = PartnerCycle(self.rng)
        self.by_peer = {g.peer_id: g for g in self.golems}
        self.pulls = 0
        self.sync_bytes = 0
        self.epoch_ms = int(time.time() * 1000)  # the codec's wall clock: now, moved with sim time

    def history(self, per_golem: int) -> None:
        """Every golem has written `per_golem` warnings and every golem holds them all (joined
        in one delta per store; not in `written`, not gossip's)."""
        if per_golem <= 0:
            return
        ops = []
        for g in self.golems:
            for i in range(per_golem):
                seed_entry(g.store, NewEntry(kind=Kind.WARNING, content=f"{g.index}'s old warning {i}: the bridge "
                                                                        f"queue stalls at the epoch", confidence=0.8),
                           g.identity)
            g.published_seq = g.store.local_top(g.peer_id)
            ops.extend(g.store.ops_of(g.peer_id, 0))
        for g in self.golems:
            g.store.apply_delta(Delta(tuple(op for op in ops if op.writer != g.peer_id), CausalContext()),
                                local_replica=g.peer_id, max_skew_ms=86_400_000)

    def _golem(self, i: int, root: Path, owner: OwnerKey, seed: int) -> Golem:
        identity = Identity(random.Random(seed * 1000 + i).randbytes(32))
        now = int(time.time())
        cert = Certificate.issue(owner, identity.peer_id, generation=0, not_before=now - 300, not_after=now + 86_400)
        membership, clade_key = AdmissionBundle.open(AdmissionBundle.create(owner, cert), identity, now=now)
        codec = GossipCodec(identity=identity, membership=membership, revocations=lambda: None,
                            max_skew_ms=86_400_000, clade_key=clade_key)
        store = Grimoire.open(root / f"g{i}.db", create=True)
        return Golem(i, identity, membership, codec, store)

    @property
    def clock_ms(self) -> int:
        return self.epoch_ms + int(self.now * 1000)

    # -- the scheduler -------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[[], None]) -> None:
        self.tick += 1
        heapq.heappush(self.queue, (t, self.tick, fn))

    def run_until(self, t_end: float) -> None:
        while self.queue and self.queue[0][0] <= t_end:
            self.now, _, fn = heapq.heappop(self.queue)
            fn()
        self.now = max(self.now, t_end)

    def latency(self) -> float:
        return (self.base_ms + self.rng.lognormvariate(0, 0.5) * self.jitter_ms) / 1000

    def up(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut

    def cpu(self, g: Golem, ready: float, real_s: float, model_s: float) -> float:
        """Queue work on `g`'s CPU from `ready`; when it is done."""
        start = max(ready, g.cpu_free)
        g.cpu_free = start + real_s + model_s
        g.cpu_real_s += real_s
        g.cpu_model_s += model_s
        return g.cpu_free

    def send(self, src: Golem, dst: Golem, size: int, deliver: Callable[[], None], *, control: bool = False) -> None:
        """A frame from `src` to `dst`: its bytes counted, lost with probability `loss`, else
        delivered after the link's latency (and `src`'s CPU to send it)."""
        if control:
            src.bytes_control += size + RPC_OVERHEAD
        else:
            src.bytes_payload += size + RPC_OVERHEAD
        sent = self.cpu(src, self.now, 0.0, self.hop_cpu_s * self.send_share)
        if not self.up(src.index, dst.index) or self.rng.random() < self.loss:
            return
        self.at(sent + self.latency() + self.hop_wait_s, deliver)

    # -- the neighbourhood (daemon/p2p/neighbourhood.py, as dialing.py drives it) ----------------

    def connect(self, g: Golem, o: Golem) -> None:
        """`g` dialed `o`: both ends connected; `o`'s dialer wakes and trims beyond its cap
        (the newcomer last; were it short, it dials at its next pass); with `churn`, both pull
        from each other now, 2 s and 6 s later."""
        g.conns.add(o.index)
        o.conns.add(g.index)
        self.tend(o, fresh={g.index}, trim_only=True)
        if self.churn and o.index in g.conns:
            for at in (0.0, *SETTLE_PULLS_S):
                self.at(self.now + at, partial(self.pull_if_connected, g, o))
                self.at(self.now + at, partial(self.pull_if_connected, o, g))

    def disconnect(self, g: Golem, o: Golem) -> None:
        g.conns.discard(o.index)
        o.conns.discard(g.index)
        g.mesh.discard(o.index)
        o.mesh.discard(g.index)

    def tend(self, g: Golem, *, rotate: bool = False, fresh: frozenset[int] | set[int] = frozenset(),
             trim_only: bool = False) -> None:
        """One pass of `g`'s dialer: `neighbourhood.plan` over the golems it can reach that are
        not resting (none if `trim_only`), then its drops (the dropped one rests `rotate_s`)
        and its dials."""
        candidates = [] if trim_only else [
            str(o.index) for o in self.golems if o is not g and o.index not in g.conns
            and self.up(g.index, o.index) and g.rest.get(o.index, 0.0) <= self.now]
        decided = plan(neighbours=[str(p) for p in g.conns], candidates=candidates, target=self.target, cap=self.cap,
                       fresh={str(p) for p in fresh}, rotate=rotate, rng=self.rng)
        for p in map(int, decided.drop):
            self.disconnect(g, self.golems[p])
            g.rest[p] = self.now + self.rotate_s
        for p in map(int, decided.dial):
            self.connect(g, self.golems[p])
        if len(g.conns) > self.cap:  # inbound arrived while its dials ran: its next pass trims
            self.tend(g, trim_only=True)
        self.max_conns = max(self.max_conns, len(g.conns))

    def refill(self) -> None:
        """The dialers' idle pass (dialing.IDLE_WAKE_S): a golem short of its target dials
        whom it can reach now (after a heal: the other side; the daemon's redial backoff,
        up to 30 s, is left out)."""
        for g in self.golems:
            if len(g.conns) < self.target:
                self.tend(g)
        self.at(self.now + IDLE_WAKE_S, self.refill)

    def rotation(self, g: Golem) -> None:
        self.tend(g, rotate=True)
        self.at(self.now + self.rotate_s * self.rng.uniform(0.8, 1.2), partial(self.rotation, g))

    def anti_entropy(self, g: Golem) -> None:
        """`CatchUp.run`: pull from the next neighbour in turn."""
        assert g.partners is not None
        partner = g.partners.next([str(p) for p in g.conns])
        if partner is not None:
            self.pull(g, self.golems[int(partner)])
        self.at(self.now + self.sync_interval_s * self.rng.uniform(0.8, 1.2), partial(self.anti_entropy, g))

    def pull_if_connected(self, asker: Golem, responder: Golem) -> None:
        if responder.index in asker.conns:
            self.pull(asker, responder)

    def cut_links(self) -> None:
        """Links that went down: both ends lose the connection, and refill from the reachable."""
        for g in self.golems:
            for p in [p for p in g.conns if not self.up(g.index, p)]:
                self.disconnect(g, self.golems[p])
        for _ in range(4):
            for g in self.rng.sample(self.golems, len(self.golems)):
                self.tend(g)

    # -- the mesh ------------------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Mesh upkeep (graft below D_lo up to D, prune above D_hi down to D) and IHAVE gossip."""
        for g in self.rng.sample(self.golems, len(self.golems)):
            live = {p for p in g.mesh if p in g.conns and self.up(g.index, p)}
            for gone in g.mesh - live:  # a link cut: both ends drop it
                g.mesh.discard(gone)
                self.golems[gone].mesh.discard(g.index)
            if len(g.mesh) < self.d_lo:
                pool = [o for o in sorted(g.conns) if o not in g.mesh and self.up(g.index, o)
                        and len(self.golems[o].mesh) < self.d_hi]
                for o in self.rng.sample(pool, min(len(pool), self.d - len(g.mesh))):
                    g.mesh.add(o)
                    self.golems[o].mesh.add(g.index)
            elif len(g.mesh) > self.d_hi:
                for o in self.rng.sample(sorted(g.mesh), len(g.mesh) - self.d):
                    g.mesh.discard(o)
                    self.golems[o].mesh.discard(g.index)
        for g in self.golems:
            ids = [m for w in g.window for m in w]
            if ids:
                others = [self.golems[o] for o in sorted(g.conns) if o not in g.mesh]
                count = max(6, int(len(others) * 0.25))
                for other in self.rng.sample(others, min(count, len(others))):
                    self.send(g, other, len(ids) * MSG_ID_BYTES, partial(self.ihave, other, g, ids), control=True)
            g.window = [[], *g.window[:-1]]
        self.at(self.now + HEARTBEAT_S, self.heartbeat)

    def ihave(self, g: Golem, sender: Golem, ids: list[str]) -> None:
        want = [m for m in ids if m not in g.seen and m not in g.data]
        if want:
            self.send(g, sender, len(want) * MSG_ID_BYTES, partial(self.iwant, sender, g, want), control=True)

    def iwant(self, g: Golem, asker: Golem, ids: list[str]) -> None:
        for m in ids:
            if m in g.data:
                self.send(g, asker, len(g.data[m]), partial(self.receive, asker, g, m, g.data[m], 99))

    # -- gossip --------------------------------------------------------------------------------

    def write(self, g: Golem, text: str) -> None:
        """`g` writes a warning; its crossing ops are sealed and published to every neighbour
        (`flood`) or to its mesh; each copy queues on `g`'s CPU (`send`), in random order as
        py-libp2p's per-peer send tasks run."""
        t0 = time.process_time()
        seed_entry(g.store, NewEntry(kind=Kind.WARNING, content=text, confidence=0.8), g.identity)
        top = g.store.local_top(g.peer_id)
        ops = g.store.ops_of(g.peer_id, g.published_seq)
        gate = g.store.sync_gate(g.peer_id, {op.entry_id for op in ops})
        kept = [op for op in ops if (b := g.store.body(op.entry_id)) is not None and gate(b)]
        g.published_seq = top
        data = g.codec.seal(Delta(tuple(kept), CausalContext()), now_ms=self.clock_ms)
        real = time.process_time() - t0
        done = self.cpu(g, self.now, real, 0.0)
        mid = f"{g.index}:{top}"
        self.written[mid] = (self.now, g.index)
        g.seen[mid] = done
        g.hops[mid] = 0
        g.data[mid] = data
        g.window[0].append(mid)
        targets = sorted(p for p in g.conns if self.up(g.index, p)) if self.flood else sorted(g.mesh)
        for p in self.rng.sample(targets, len(targets)):
            self.at(done, partial(self.send, g, self.golems[p], len(data),
                                  partial(self.receive, self.golems[p], g, mid, data, 1)))

    def receive(self, g: Golem, forwarder: Golem, mid: str, data: bytes, hops: int) -> None:
        """A copy arrives: the seen check, else validate (`codec.open`), forward, apply."""
        g.copies_in += 1
        if mid in g.data or mid in g.seen:
            g.duplicates += 1
            self.cpu(g, self.now, 0.0, self.hop_cpu_s * (1 - self.send_share))
            return
        g.data[mid] = data  # seen from now on (py-libp2p: after validation; copies meanwhile are duplicates too)
        origin = self.golems[int(mid.split(":")[0])]
        t0 = time.process_time()
        try:
            opened = g.codec.open(data, publisher=origin.peer_id, now_ms=self.clock_ms)
        except RemoteProtocolError as exc:
            raise AssertionError(f"a valid message was refused: {exc}") from None
        validated = self.cpu(g, self.now, time.process_time() - t0, self.hop_cpu_s * (1 - self.send_share))
        g.window[0].append(mid)
        g.hops[mid] = hops if hops != 99 else g.hops.get(mid, 99)
        relay = g.mesh
        if forwarder is origin and self.relay_flood:
            relay = {p for p in g.conns if self.up(g.index, p)}
        for p in relay - {forwarder.index, origin.index}:
            self.at(validated, partial(self.send, g, self.golems[p], len(data),
                                       partial(self.receive, self.golems[p], g, mid, data, hops + 1)))
        t1 = time.process_time()
        g.store.apply_delta(opened.delta, local_replica=g.peer_id, max_skew_ms=86_400_000)
        g.seen[mid] = self.cpu(g, validated, time.process_time() - t1, 0.0)

    # -- anti-entropy ----------------------------------------------------------------------------

    def pull(self, asker: Golem, responder: Golem) -> None:
        """One anti-entropy pull, the real protocol states, extraction through the gate and join;
        frames cross the simulated link (one latency per message, both ways) and cost CPU."""
        self.pulls += 1
        version = self.sync_version
        pull, serve = PullState(version=version), ServeState(version=version)
        pull.start(asker.store.causal_context())
        t = self.now
        while not pull.done:
            t0 = time.process_time()
            while (message := pull.next_message()) is not None:
                frame = messages.encode(message, version)
                asker.bytes_payload += len(frame) + RPC_OVERHEAD
                self.sync_bytes += len(frame) + RPC_OVERHEAD
                events = serve.receive(messages.decode(frame, version))
                if any(isinstance(e, SummaryReceived) for e in events):
                    events = serve.reconcile(responder.store.causal_context())
                for served in events:
                    if isinstance(served, WantReceived):
                        deltas = responder.store.iter_deltas(served.context, gate=responder.store.sync_gate(
                            responder.peer_id))
                        encoded: list[bytes] = []
                        more = False
                        for delta in deltas:
                            if len(encoded) == ROUND_DELTAS:
                                more = True
                                break
                            encoded.append(encode_delta(delta))
                        deltas.close()
                        serve.answer(encoded, more=more, context=responder.store.causal_context())
            t = self.cpu(asker, t, time.process_time() - t0, 0.0) + self.latency()
            t0 = time.process_time()
            while (message := serve.next_message()) is not None:
                frame = messages.encode(message, version)
                responder.bytes_payload += len(frame) + RPC_OVERHEAD
                self.sync_bytes += len(frame) + RPC_OVERHEAD
                for event in pull.receive(messages.decode(frame, version)):
                    if isinstance(event, DeltaArrived):
                        delta, rejected = decode_delta(event.delta, signature_ok)
                        asker.store.apply_delta(delta, rejected=rejected, local_replica=asker.peer_id,
                                                sender=responder.peer_id, max_skew_ms=86_400_000)
                    elif isinstance(event, RoundEnded):
                        pull.round_applied(asker.store.causal_context())
            t = self.cpu(asker, t, time.process_time() - t0, 0.0) + self.latency()
        for mid, (_, origin) in self.written.items():  # what the pull brought counts as arrived then
            writer, seq = self.golems[origin].peer_id, int(mid.split(":")[1])
            if mid not in asker.seen and asker.store.local_top(writer) >= seq:
                asker.seen[mid] = t
                asker.data[mid] = b""

    # -- figures -------------------------------------------------------------------------------

    def converged(self) -> bool:
        return all(len(g.seen) == len(self.written) for g in self.golems)

    def figures(self, mids: Sequence[str]) -> dict[str, Any]:
        n = len(self.golems)
        full: list[float] = []
        each: list[float] = []
        hops: list[int] = []
        for mid in mids:
            t0, origin = self.written[mid]
            arrived = [g.seen[mid] - t0 for g in self.golems if g.index != origin and mid in g.seen]
            each += arrived
            hops += [g.hops[mid] for g in self.golems if g.index != origin and g.hops.get(mid, 99) != 99]
            if len(arrived) == n - 1:
                full.append(max(arrived))
        ops = len(mids)
        return {
            "golems": n, "ops": ops, "reached_all": len(full),
            "full_p50_ms": round(percentile(full, 50) * 1000, 1), "full_p99_ms": round(percentile(full, 99) * 1000, 1),
            "delivery_p50_ms": round(percentile(each, 50) * 1000, 1),
            "delivery_p99_ms": round(percentile(each, 99) * 1000, 1),
            "hops_mean": round(statistics.fmean(hops), 2) if hops else None,
            "hops_max": max(hops) if hops else None,
            "log_d_n": round(math.log(n) / math.log(self.d), 2),
            "bytes_per_op_per_golem": round(sum(g.bytes_payload + g.bytes_control for g in self.golems) / ops / n),
            "payload_bytes_per_op_per_golem": round(sum(g.bytes_payload for g in self.golems) / ops / n),
            "control_bytes_per_op_per_golem": round(sum(g.bytes_control for g in self.golems) / ops / n),
            "copies_in_per_op_per_golem": round(sum(g.copies_in for g in self.golems) / ops / n, 2),
            "cpu_real_ms_per_op_per_golem": round(sum(g.cpu_real_s for g in self.golems) / ops / n * 1000, 2),
            "cpu_model_ms_per_op_per_golem": round(sum(g.cpu_model_s for g in self.golems) / ops / n * 1000, 2),
            "mesh_degree_mean": round(statistics.fmean(len(g.mesh) for g in self.golems), 2),
            "connections_max": self.max_conns,
            "connections_mean": round(statistics.fmean(len(g.conns) for g in self.golems), 2),
        }

    def close(self) -> None:
        for g in self.golems:
            g.store.close()


def world(sim: Sim, writes: Sequence[tuple[float, int]]) -> str:
    """A digest of what both arms must share at the first write: the golems, who is connected
    to whom, the mesh, and who writes when."""
    state = ([g.peer_id for g in sim.golems], [sorted(g.conns) for g in sim.golems],
             [sorted(g.mesh) for g in sim.golems], list(writes))
    return hashlib.sha256(repr(state).encode()).hexdigest()[:16]
