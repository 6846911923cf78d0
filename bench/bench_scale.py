"""A clade of two hundred in one process: gossip and anti-entropy of 5 to 200 golems over a
simulated network, with each golem's real codec, store and gates, connected as the daemon's
bounded neighbourhood connects them.

    .venv/bin/python -m bench.bench_scale [--sizes 5,10,20,50,100,200] [--ops 60] [--seeds 3]
                                          [--profiles loopback,wan] [--loss 0.01] [--neighbours 12]
                                          [--rotate-s 60] [--sync-interval-s 30] [--partition-s 30]
                                          [--heal-s 900] [--arms flood,mesh,flood-sync1] [--history 1]
                                          [--out DIR]

What is real, per golem: its Ed25519 identity and owner-issued certificate, `GossipCodec`
(seal: encode the delta, sign, encrypt with the clade key; open: decrypt, the certificate,
the sender's and every op's signature, freshness, the replay guard), its Grimoire (a SQLite
file: `remember` writes the warning and its signed ops; `ops_of` + `sync_gate` choose what
crosses, as `Broadcast._publish_new` does; `apply_delta` joins what arrives, as
`Broadcast._applier` does), and anti-entropy (`PullState`/`ServeState`, `iter_deltas` through
the gate, `decode_delta`, `join`) on the real wire messages. The CPU time of those calls is
measured (`time.process_time`, so other processes on the machine do not inflate it) and
becomes simulated time: a golem is one CPU queue.

Who is connected to whom is the daemon's own policy (daemon/p2p/neighbourhood.py, imported):
each golem keeps a random `--neighbours` of the others connected (cap `cap_for`: 16 for 12),
the end dialed trims beyond its cap at once (the newcomer last), and from the partition on
each golem swaps one neighbour every `--rotate-s` (× U(0.8, 1.2)) and pulls anti-entropy from
its neighbours in turn every `--sync-interval-s` (`PartnerCycle`), as `Dialing` and `CatchUp`
do; a new connection pulls both ways at once and 2 s and 6 s later (admission.SETTLE_PULLS_S);
a golem short of its target dials again every second (`IDLE_WAKE_S`).
Before the partition golems only gossip (the figures per op are gossip's).

What is modelled: the network (a seeded event scheduler; one-way latency per transmission
from a profile; loss per transmission; a partition that cuts the clade in two and heals) and
py-libp2p's GossipSub as the daemon configures it (daemon/p2p/host.py), over the connections
of the neighbourhood (a mesh peer or an IHAVE target is a connected one): mesh degree D=6,
D_lo=4, D_hi=12, heartbeat 1 s; a golem publishes its own message to every neighbour it is
connected to (flood publishing, daemon/p2p/flood.py; arm `flood`) or to its mesh only
(py-libp2p's own GossipSub; arm `mesh`); a message is forwarded once validated to every mesh
peer but the one it came from and its origin (no IDONTWANT: v1.1 as py-libp2p does it); each
copy a publisher sends queues on its CPU (`--hop-cpu-ms` / 2 each), so flooding's extra
copies delay its later ones; at each heartbeat IHAVE of the message ids of the last 3 heartbeats goes to
max(6, 0.25 × non-mesh peers) random non-mesh peers, answered by IWANT for the ones missing;
duplicates are dropped after the seen check. Its CPU per message copy handled (protobuf,
Noise, Yamux, the seen cache) is `--hop-cpu-ms` per copy (half sending, half receiving), and
its delay that is not CPU (trio and thread hand-offs) `--hop-wait-ms` per frame; both are
calibrated against the real daemons (bench_clade at 5 daemons on loopback: a raw GossipSub
probe costs a sibling ~8.9 ms of CPU and arrives ~3 times, ~3 ms per copy; propagation p50 per
delivery 20.7 ms, bench/RESULTS.md), and the 5-golem loopback run must agree with them (it
is the anchor: its figures are printed beside the real ones). Byte counts are payload plus
`RPC_OVERHEAD` per frame; IHAVE/IWANT count `MSG_ID_BYTES` per id.

`--arms flood,mesh` runs both arms on one world per seed (the same identities,
neighbourhood, mesh and writers at the first write: asserted) and prints them side by side.
An arm suffixed `-sync1` pulls anti-entropy with sync v1 (contexts sent whole, the daemons
before `/clade/sync/2.0.0`) instead of the daemon's v2 (contexts reconciled by their
difference, `crdt.summary`). `--history N`: before the run every golem has written N warnings
that every golem holds (a clade that has been running: each causal context has a row per
golem, which is what a pull's context costs).
Reported per size, profile and arm (intervals over seeds): convergence of an op (write to applied
at every golem) p50/p99 and per delivery, its ratio to the 5-golem figure of the same run;
mean hops against log_D(n); bytes per op per golem (payload, control) and its ratio to
log n; CPU per op per golem (measured: codec + store; modelled: transport); connections per
golem (the most any golem held once its dialer had run, and the mean); and the partition's
heal: seconds from the heal to convergence, pulls run, and the sync bytes it took (both
directions, from the heal to convergence), whole and per golem (the heal curve: O(n) bytes
means bytes per golem flat in n). Then the limits that bind first as the clade grows, from
the same figures (module `limits`).
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import HostLoad, machine_info, print_table, progress
from bench.common.report import emit
from bench.common.seed import seed_entry
from bench.common.stats import mean_interval, percentile
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
# The real daemons this simulation must agree with at 5 golems on loopback (bench/RESULTS.md,
# "2026-11-23 — Clade throughput": bench_clade --sizes 5 --rates 10 --count 200): propagation per
# delivery p50 / p99, a raw probe's CPU per received message, a sibling's CPU per warning (that
# one includes embedding the entry, ~10-15 ms, which the simulation leaves out).
ANCHOR = {"delivery_p50_ms": 20.7, "delivery_p99_ms": 39.8, "probe_cpu_ms": 8.9, "sibling_cpu_per_warning_ms": 24.2}
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
                 sync_interval_s: float = 30.0, flood: bool = True, degree: int = D, sync_version: int = 2) -> None:
        self.rng = random.Random(seed)
        self.sync_version = sync_version  # anti-entropy: 2 (the daemon's) or 1 (contexts whole)
        # the mesh degree: the daemon's D=6, D_lo=4, D_hi=12; another D (a what-if) keeps D_lo = D - 2
        self.d, self.d_lo, self.d_hi = degree, degree - 2, max(D_HI, 2 * degree)
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
        sent = self.cpu(src, self.now, 0.0, self.hop_cpu_s / 2)
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
            self.cpu(g, self.now, 0.0, self.hop_cpu_s / 2)
            return
        g.data[mid] = data  # seen from now on (py-libp2p: after validation; copies meanwhile are duplicates too)
        origin = self.golems[int(mid.split(":")[0])]
        t0 = time.process_time()
        try:
            opened = g.codec.open(data, publisher=origin.peer_id, now_ms=self.clock_ms)
        except RemoteProtocolError as exc:
            raise AssertionError(f"a valid message was refused: {exc}") from None
        validated = self.cpu(g, self.now, time.process_time() - t0, self.hop_cpu_s / 2)
        g.window[0].append(mid)
        g.hops[mid] = hops if hops != 99 else g.hops.get(mid, 99)
        for p in g.mesh - {forwarder.index, origin.index}:
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


def one_run(n: int, *, seed: int, profile: str, args: argparse.Namespace, owner: OwnerKey,
            flood: bool = True, sync_version: int = 2) -> dict[str, Any]:
    """Form the neighbourhood and the mesh, write `--ops` warnings from random golems at
    `--rate`/s, let them spread; then (with `--partition`) cut the clade in two (each golem
    refills its neighbourhood on its side), start rotation and the anti-entropy timers, write
    `--ops`/2 warnings across both sides, keep it cut `--partition-s`, heal, and run until
    every golem has every op (or
    `--heal-s` has passed): the sync bytes and seconds that took."""
    with tempfile.TemporaryDirectory(prefix=f"clade-scale-{n}-") as tmp:
        sim = Sim(n, seed=seed, profile=profile, loss=args.loss, hop_cpu_s=args.hop_cpu_ms / 1000,
                  hop_wait_s=args.hop_wait_ms / 1000, root=Path(tmp), owner=owner, target=args.neighbours,
                  rotate_s=args.rotate_s, sync_interval_s=args.sync_interval_s, flood=flood,
                  degree=args.degree, sync_version=sync_version)
        try:
            sim.history(args.history)
            for _ in range(4):  # each golem's dialer, from the siblings it knows, until all are full
                for g in sim.rng.sample(sim.golems, n):
                    sim.tend(g)
            sim.at(0.0, sim.heartbeat)
            sim.run_until(5.0)  # the mesh forms
            start = sim.now
            writes = []
            for i in range(args.ops):
                g = sim.rng.choice(sim.golems)
                writes.append((start + i / args.rate, g.index))
                sim.at(start + i / args.rate, partial(sim.write, g, f"gas above {80 + i} gwei on chain {i}: "
                                                             f"delay swaps (seed {seed})"))
            digest = world(sim, writes)
            sim.run_until(start + args.ops / args.rate + 10.0)
            out = {"profile": profile, "seed": seed, "arm": ("flood" if flood else "mesh")
                   + ("" if sync_version == 2 else "-sync1"), "world": digest,
                   **sim.figures(list(sim.written))}
            if args.partition:
                half = set(range(n // 2))
                sim.cut = {frozenset((a, b)) for a in half for b in range(n) if b not in half}
                cut_at = sim.now
                sim.churn = True
                sim.cut_links()
                sim.at(cut_at + IDLE_WAKE_S, sim.refill)
                for g in sim.golems:  # each timer at a random phase, as in daemons started at different times
                    sim.at(cut_at + sim.rotate_s * sim.rng.random(), partial(sim.rotation, g))
                    sim.at(cut_at + sim.sync_interval_s * sim.rng.random(), partial(sim.anti_entropy, g))
                before = set(sim.written)
                for i in range(args.ops // 2):
                    g = sim.rng.choice(sim.golems)
                    sim.at(cut_at + i / args.rate, partial(sim.write, g, f"partitioned warning {i} ({seed})"))
                sim.run_until(cut_at + max(args.ops / 2 / args.rate + 3.0, args.partition_s))
                sim.cut = set()
                healed = sim.now
                pulls0, bytes0 = sim.pulls, sim.sync_bytes
                late = [m for m in sim.written if m not in before]
                while not sim.converged() and sim.now < healed + args.heal_s:
                    sim.run_until(sim.now + 5.0)
                last = max((g.seen[m] for g in sim.golems for m in late if m in g.seen), default=healed)
                heal_bytes = sim.sync_bytes - bytes0
                out["partition"] = {"ops": len(late), "converged": sim.converged(),
                                    "heal_to_converged_s": round(last - healed, 2), "pulls": sim.pulls - pulls0,
                                    "pulls_per_golem": round((sim.pulls - pulls0) / n, 1),
                                    "heal_bytes": heal_bytes, "heal_bytes_per_golem": round(heal_bytes / n),
                                    "connections_max": sim.max_conns}
                out["connections_max"] = sim.max_conns
            return out
        finally:
            sim.close()


def limits(rows: dict[int, dict[str, Any]], cert_check_ms: float, hop_cpu_ms: float) -> dict[str, Any]:
    """What binds first as the clade grows, from the measured per-size figures."""
    sizes = sorted(rows)
    big = rows[sizes[-1]]
    per_op_ms = big["cpu_real_ms_per_op_per_golem"] + big["cpu_model_ms_per_op_per_golem"]
    return {
        "cpu_per_op_per_golem_ms": round(per_op_ms, 2),
        "ops_per_s_one_core_can_take": round(1000 / per_op_ms, 1) if per_op_ms else None,
        "connections_per_golem_max": max(rows[n]["connections_max"] for n in sizes),
        "connections_per_golem": "at most the cap (neighbourhood.cap_for: 16 for 12) whatever n: the daemon's "
                                 "bounded neighbourhood",
        "hello_certificate_checks_per_restart_ms": round(min(sizes[-1] - 1, cap_for(12)) * cert_check_ms, 1),
        "reconnect_pulls_per_golem": "3 per new connection (at once, 2 s and 6 s later, both ends): 3 × the "
                                     "neighbourhood after a restart, 3 per rotation",
        "ihave_peers_per_heartbeat": "min(6, connected peers not in the mesh): bounded by the neighbourhood",
        "hop_cpu_ms": hop_cpu_ms,
    }


def cert_check_cost(owner: OwnerKey, reps: int = 200) -> float:
    """Measured: one hello's certificate check (`Certificate.from_bytes` + `verify`), ms."""
    identity = Identity(bytes(32))
    now = int(time.time())
    cert = Certificate.issue(owner, identity.peer_id, generation=0, not_before=now - 300, not_after=now + 86_400)
    raw = cert.to_bytes()
    t0 = time.process_time()
    for _ in range(reps):
        Certificate.from_bytes(raw).verify(owner.public_key, cert.clade_id, now=now)
    return (time.process_time() - t0) / reps * 1000


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and k not in ("seed", "golems")]
    out: dict[str, Any] = {k: mean_interval([r[k] for r in runs]) for k in keys}
    if "partition" in runs[0]:
        out["partition"] = {k: mean_interval([r["partition"][k] for r in runs])
                            for k in ("heal_to_converged_s", "pulls_per_golem", "heal_bytes", "heal_bytes_per_golem")}
        out["partition"]["converged"] = all(r["partition"]["converged"] for r in runs)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    load = HostLoad()
    res: dict[str, Any] = {"machine": machine_info(None, ("pynacl", "libp2p")),
                           "params": {k: v for k, v in vars(args).items() if k != "out"}, "failed": []}
    with tempfile.TemporaryDirectory(prefix="clade-scale-owner-") as tmp:
        owner = OwnerKey.create(Path(tmp) / "owner", "scale")
        res["cert_check_ms"] = round(cert_check_cost(owner), 3)
        res["anchor"] = ANCHOR
        res["runs"] = {}
        res["summary"] = {}
        groups = [f"{profile}/{arm}" for profile in args.profiles for arm in args.arms]
        for profile in args.profiles:
            for n in args.sizes:
                by_arm: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
                for s in range(args.seeds):
                    for arm in args.arms:
                        progress(f"[{profile}/{arm}] {n} golems, seed {s + 1}/{args.seeds}")
                        by_arm[arm].append(one_run(n, seed=args.seed + s, profile=profile, args=args, owner=owner,
                                                   flood=arm.startswith("flood"),
                                                   sync_version=1 if arm.endswith("-sync1") else 2))
                    if len({by_arm[arm][-1]["world"] for arm in args.arms}) != 1:
                        raise AssertionError(f"{profile}/{n} seed {args.seed + s}: the arms' worlds differ")
                for arm, runs in by_arm.items():
                    res["runs"][f"{profile}/{arm}/{n}"] = runs
                    res["summary"][f"{profile}/{arm}/{n}"] = summarise(runs)
        res["limits"] = {g: limits({n: {k: v["mean"] for k, v in res["summary"][f"{g}/{n}"].items()
                                        if isinstance(v, dict) and "mean" in v} for n in args.sizes},
                                   res["cert_check_ms"], args.hop_cpu_ms) for g in groups}
    base = min(args.sizes)
    for group in groups:
        ref = res["summary"][f"{group}/{base}"]
        for n in args.sizes:
            row = res["summary"][f"{group}/{n}"]
            row["full_p50_vs_base"] = round(row["full_p50_ms"]["mean"] / ref["full_p50_ms"]["mean"], 2)
            row["full_p99_vs_base"] = round(row["full_p99_ms"]["mean"] / ref["full_p99_ms"]["mean"], 2)
            row["bytes_vs_base"] = round(row["bytes_per_op_per_golem"]["mean"] / ref["bytes_per_op_per_golem"]["mean"],
                                         2)
            row["log_n_vs_base"] = round(math.log(n) / math.log(base), 2)
            if row["connections_max"]["mean"] > cap_for(args.neighbours):
                res["failed"].append(f"{group}/{n}: a golem held more connections than the cap")
            if row["reached_all"]["mean"] < args.ops:
                res["failed"].append(f"{group}/{n}: not every op reached every golem by gossip")
    res["host_load"] = load.report("whole run", quiet=True)
    return res


def report(res: dict[str, Any]) -> None:
    for key, row in res["summary"].items():
        def m(k: str, row: dict[str, Any] = row) -> str:
            return f"{row[k]['mean']:g}"

        part = row.get("partition", {})
        print_table([
            (f"{key}: op reaches all, p50 / p99 ms (× smallest size)",
             f"{m('full_p50_ms')} / {m('full_p99_ms')} ({row['full_p50_vs_base']}× / {row['full_p99_vs_base']}×)"),
            (f"{key}: per delivery p50 / p99 ms; hops mean (log_D n)",
             f"{m('delivery_p50_ms')} / {m('delivery_p99_ms')}; {m('hops_mean')} ({m('log_d_n')})"),
            (f"{key}: bytes per op per golem, payload + control (× smallest; log n ×)",
             f"{m('bytes_per_op_per_golem')} = {m('payload_bytes_per_op_per_golem')} + "
             f"{m('control_bytes_per_op_per_golem')} ({row['bytes_vs_base']}×; {row['log_n_vs_base']}×)"),
            (f"{key}: CPU per op per golem ms, measured + modelled; copies in",
             f"{m('cpu_real_ms_per_op_per_golem')} + {m('cpu_model_ms_per_op_per_golem')}; "
             f"{m('copies_in_per_op_per_golem')}"),
            (f"{key}: connections per golem, max (mean)", f"{m('connections_max')} ({m('connections_mean')})"),
            *([(f"{key}: partition heal s; pulls / golem; sync bytes to heal, whole / per golem",
                f"{part['heal_to_converged_s']['mean']:g}; {part['pulls_per_golem']['mean']:g}; "
                f"{part['heal_bytes']['mean']:g} / {part['heal_bytes_per_golem']['mean']:g} "
                f"(converged: {part['converged']})")]
              if "partition" in row else []),
        ])
    curve(res)
    print_table([("anchor: real daemons at 5 (bench_clade, bench/RESULTS.md)",
                  f"per delivery p50 {ANCHOR['delivery_p50_ms']} / p99 {ANCHOR['delivery_p99_ms']} ms; sibling "
                  f"CPU per warning {ANCHOR['sibling_cpu_per_warning_ms']} ms (incl. embedding), "
                  f"probe {ANCHOR['probe_cpu_ms']} ms"),
                 ("certificate check per hello, ms", f"{res['cert_check_ms']}"),
                 ("other processes' CPU (whole run)", str(res.get("host_load")))])


def curve(res: dict[str, Any]) -> None:
    """The scaling goals side by side per profile: convergence × the smallest size, bytes per op
    against ln n, connections, and the heal's bytes per golem (flat in n: O(n) bytes)."""
    rows = []
    for key, row in res["summary"].items():
        part = row.get("partition", {})
        rows.append((f"{key}: full p50 ×; bytes/op × (ln n ×); conns max; heal bytes/golem; heal s",
                     f"{row['full_p50_vs_base']}×; {row['bytes_vs_base']}× ({row['log_n_vs_base']}×); "
                     f"{row['connections_max']['mean']:g}; "
                     f"{round(part['heal_bytes_per_golem']['mean']) if part else '-'}; "
                     f"{round(part['heal_to_converged_s']['mean'], 1) if part else '-'}"))
    print_table(rows)
    arms(res)


def arms(res: dict[str, Any]) -> None:
    """Flood publishing against the mesh only, per profile and size, when both arms ran."""
    rows = []
    for key, flood in res["summary"].items():
        profile, arm, n = key.split("/")
        mesh = res["summary"].get(f"{profile}/mesh/{n}")
        if arm != "flood" or mesh is None:
            continue
        def cell(row: dict[str, Any]) -> str:
            return (f"{row['full_p50_ms']['mean']:g} ms ({row['full_p50_vs_base']}×), "
                    f"{row['bytes_per_op_per_golem']['mean']:g} B ({row['bytes_vs_base']}×), "
                    f"hops {row['hops_mean']['mean']:g}")
        rows.append((f"{profile}/{n}: full p50 (×), bytes/op/golem (×), hops — flood | mesh",
                     f"{cell(flood)} | {cell(mesh)}"))
    if rows:
        print_table(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    def ints(s: str) -> list[int]:
        return [int(x) for x in s.split(",")]

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", type=ints, default=[5, 10, 20, 50, 100, 200])
    ap.add_argument("--profiles", type=lambda s: s.split(","), default=["loopback", "wan"])
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--rate", type=float, default=10.0, help="warnings written per second, clade-wide")
    ap.add_argument("--loss", type=float, default=0.01, help="probability a frame is lost")
    ap.add_argument("--hop-cpu-ms", type=float, default=3.0,
                    help="modelled py-libp2p CPU per message copy handled (half on send, half on receipt)")
    ap.add_argument("--hop-wait-ms", type=float, default=8.0,
                    help="modelled py-libp2p/trio delay per frame that is not CPU (stream hand-offs, scheduling)")
    ap.add_argument("--partition", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--neighbours", type=int, default=12, help="[p2p] neighbours: connections each golem keeps")
    ap.add_argument("--rotate-s", type=float, default=60.0, help="[p2p] rotate_s: one neighbour swapped this often")
    ap.add_argument("--sync-interval-s", type=float, default=30.0,
                    help="[p2p] sync_interval_s: anti-entropy with the next neighbour in turn")
    ap.add_argument("--partition-s", type=float, default=30.0,
                    help="simulated seconds the partition lasts (at least the writes and 3 s): longer than the "
                         "pulls a new connection runs (6 s), so the heal is the neighbourhood's, not their tail")
    ap.add_argument("--heal-s", type=float, default=900.0,
                    help="simulated seconds after the heal to wait for convergence at most")
    ap.add_argument("--degree", type=int, default=D,
                    help="GossipSub mesh degree D (the daemon's: 6; a what-if: D_lo = D - 2, D_hi = max(12, 2D))")
    ap.add_argument("--arms", type=lambda s: s.split(","), default=["flood"],
                    help="flood (own messages to every neighbour: the daemon) and/or mesh (py-libp2p's "
                         "GossipSub: to the mesh only); both run on one world per seed")
    ap.add_argument("--history", type=int, default=1,
                    help="warnings every golem wrote before the run, held by every golem (contexts: a row per golem)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20_261_128)
    ap.add_argument("--out", type=Path, default=None)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    res = run(args)
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    report(res)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    emit("scale", res, also_to=None if args.out is None else args.out / "scale.json")
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
