"""The node's side of anti-entropy (`sync_state` is the protocol, `sync` its trio loop):
pull from a sibling on every new connection and every `sync_interval_s` (the connected
siblings in turn), out of turn from a sibling whose gossip was refused for its time
(`pull_soon`), and answer siblings' pulls from a read snapshot, through the promotion gate.

`CatchUp` owns the sync side of the peer book (`behind`, `ahead`, `withheld`,
`last_sync_ms`, the round-trip estimate from a quick sync) and the set of siblings it is
pulling from (one
pull per sibling at a time). Its ticker sleeps on the trio clock. Failures are counted by
kind: `sync_refused_by_peer`, `sync_rejected_<reason>` (the peer broke the protocol),
`sync_failed` / `sync_serve_failed` (the link died or timed out); anything else is a bug,
logged with its traceback as `internal_errors`.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import sqlite3
from typing import Any

import trio

from crdt import ApplyReport, CausalContext, Delta, RemoteProtocolError
from crdt.codec import encode_delta
from crdt.replica import MAX_BATCH_BYTES
from crdt.withheld import gap
from crypto.identity import signature_ok
from daemon.errors import StoreError
from daemon.grimoire import Grimoire
from daemon.grimoire.ingest import FrameReport, RoundJoin
from daemon.grimoire.seal_store import SEALED_OPS_BYTES, SEALS_PER_DELTA

from . import messages
from .errors import SyncRefused
from .frames import close_quietly, encode_frame
from .links import TRANSPORT_ERRORS
from .neighbourhood import PartnerCycle, PromptedPulls
from .part import NodePart
from .peers import PeerBook, PeerRecord
from .ports import DaemonPort, Links, Stream, announce_received, internal_error
from .sync import ROUND_DELTAS, PullResult, pull, serve

__all__ = ["SYNC_PROTOCOL", "SYNC_PROTOCOLS", "SYNC_V2_PROTOCOL", "SYNC_V3_PROTOCOL", "CatchUp"]

log = logging.getLogger("clade.p2p")

SYNC_PROTOCOL = "/clade/sync/1.0.0"  # contexts whole: still served, for daemons before sync v2
SYNC_V2_PROTOCOL = "/clade/sync/2.0.0"  # contexts reconciled by their difference (crdt.summary)
SYNC_V3_PROTOCOL = "/clade/sync/3.0.0"  # v2 whose deltas carry seals (crdt.seals): a signature check a block
SYNC_PROTOCOLS = (SYNC_V3_PROTOCOL, SYNC_V2_PROTOCOL, SYNC_PROTOCOL)  # what a pull offers, most preferred first
_VERSIONS = {SYNC_PROTOCOL: 1, SYNC_V2_PROTOCOL: 2, SYNC_V3_PROTOCOL: 3}
_PROTOCOLS = {v: p for p, v in _VERSIONS.items()}
SEALS_ASKED = 128  # seals answering a want's asks, in one delta of no op (~540 kB)
STORE_ERRORS = (sqlite3.Error, StoreError, OSError)  # the store could not answer (disk, lock)
# A round's first delta is small: the asker starts verifying and joining it (two verifier pieces
# of `ingest.PIECE_OPS`) while the rest of the round is still read and sent, instead of waiting
# for a whole 4,096-op delta to be extracted and cross first.
FIRST_DELTA_OPS = 512
_WAKE = ""  # on the prompt channel: not a sibling, a new owed pull to wait for
OWED_RETRY_S = 1.0  # a prompted pull that met a pull from the same sibling running looks again this much later


class CatchUp(NodePart):
    """Anti-entropy with the siblings (see the module docstring); `Syncer` for admission."""

    def __init__(self, daemon: DaemonPort, links: Links, book: PeerBook, *, me: str, max_skew_ms: int,
                 sync_interval_s: float, rng: random.Random) -> None:
        super().__init__(daemon, links, book)
        self.me = me
        self.max_skew_ms = max_skew_ms
        self.sync_interval_s = sync_interval_s
        self.rng = rng
        self._syncing: set[str] = set()  # siblings a pull is running from
        self._partners = PartnerCycle(rng)
        self._prompted = PromptedPulls()
        self._prompt_send, self._prompt_receive = trio.open_memory_channel[str](64)
        # (writer, sibling) → the writer's complete blocks when that sibling had none of the
        # seals we asked of it: not asked of it again until the writer completes another block.
        self._seals_in_vain: dict[tuple[str, str], int] = {}

    @property
    def syncing(self) -> frozenset[str]:
        """The siblings a pull is running from now (the neighbourhood drops them last)."""
        return frozenset(self._syncing)

    async def run(self) -> None:
        """Every `sync_interval_s` (× U(0.8, 1.2)), pull from the next connected sibling in
        turn (`neighbourhood.PartnerCycle`: each once per cycle, shuffled per cycle); and
        whenever asked, from a sibling out of turn (`pull_soon`)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._prompted_pulls)
            while True:
                await trio.sleep(self.sync_interval_s * self.rng.uniform(0.8, 1.2))
                partner = self._partners.next([r.peer_id for r in self.book.members()
                                               if r.peer_id not in self._syncing])
                if partner is not None:
                    await self.sync_with(partner)

    def pull_soon(self, peer_id: str) -> None:
        """Pull from `peer_id` now, out of its turn, if it is a member (at most once per
        `neighbourhood.PROMPT_GAP_S`; a prompt within the gap is owed, and pulled when the gap
        ends): Broadcast refused its gossip for the time the message carries, so it holds ops
        we lack, which a pull (no wall clock in it) brings."""
        record = self.book.find(peer_id)
        if record is None or not record.member:
            return
        owed = self._prompted.next_owed()
        if self._prompted.due(peer_id, trio.current_time()):
            self._prompt(peer_id)
        elif self._prompted.next_owed() != owed:
            self._prompt(_WAKE)  # an owed pull came due earlier: the loop looks at the time again

    def _prompt(self, peer_id: str) -> None:
        try:
            self._prompt_send.send_nowait(peer_id)
        except trio.WouldBlock:  # 64 waiting already: the regular turns bring the rest
            self.counters["sync_prompts_dropped"] += 1

    async def _prompted_pulls(self) -> None:
        """Run the prompted pulls as they come, and the owed ones (`PromptedPulls`) when due."""
        while True:
            due = self._prompted.next_owed()
            prompted: str | None = None
            with trio.move_on_at(math.inf if due is None else due):
                prompted = await self._prompt_receive.receive()
            if prompted == _WAKE:
                continue
            for peer_id in [prompted] if prompted is not None else self._prompted.take_owed(trio.current_time()):
                self.counters["sync_pulls_prompted"] += 1
                if peer_id in self._syncing:  # a pull from it is running, begun maybe before what prompted this
                    self._prompted.owe(peer_id, trio.current_time() + OWED_RETRY_S)
                    continue
                await self.sync_with(peer_id)

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        """Pull everything `peer_id` has that we lack; a summary, or None if it could not run
        (not a member, already pulling from it, or it failed: counted and logged)."""
        record = self.book.get(peer_id)
        if peer_id in self._syncing or not record.member:
            return None
        self._syncing.add(peer_id)
        stream: Stream | None = None
        started = trio.current_time()
        try:
            stream, protocol = await self.links.open_stream_of(peer_id, SYNC_PROTOCOLS)
            record.sync_protocol = protocol  # a sibling still on v1 shows here (upgrading a clade)
            version = _VERSIONS[protocol]
            asks = await self._seal_asks(peer_id) if version >= 3 else []
            result = await pull(stream, local_context=self._local_context,
                                apply=functools.partial(self._apply_sync_round, sender=peer_id, sealed=version >= 3),
                                version=version, seal_asks=tuple((w, first) for w, first, _ in asks))
            if asks:
                await self._note_seals_in_vain(peer_id, asks)
        except SyncRefused as exc:
            self.counters["sync_refused_by_peer"] += 1
            log.warning("sync with %s refused: %s", peer_id, exc)
            return None
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync with %s aborted: %s", peer_id, exc)
            return None
        except TRANSPORT_ERRORS as exc:  # a dropped connection ends the sync; the next one resumes
            self.counters["sync_failed"] += 1
            log.info("sync with %s cut short: %r", peer_id, exc)
            return None
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, not blamed on the peer
            internal_error(self.counters, "sync with %s", peer_id)
            return None
        finally:
            self._syncing.discard(peer_id)
            if stream is not None:
                await close_quietly(stream)
        self.book.note_traffic(peer_id, sent=result.bytes_out, received=result.bytes_in, msgs_out=result.rounds,
                               msgs_in=result.rounds + result.deltas, now_ms=self.daemon.now_ms())
        self._count_traffic(sent=result.bytes_out, received=result.bytes_in, msgs_out=result.rounds,
                            msgs_in=result.rounds + result.deltas)
        if result.rounds == 1 and not result.deltas and result.first_round_ms is not None:
            record.note_rtt(result.first_round_ms)
        if result.remote_context is not None:
            await self._note_gap(record, result)
        record.last_sync_ms = self.daemon.now_ms()
        report = result.report  # already counted and announced, delta by delta (`_count_joined`)
        self.counters["sync_pulls"] += 1
        summary = {"peer_id": peer_id, "rounds": result.rounds, "deltas": result.deltas, "applied": report.applied,
                   "rejected": dict(report.rejected), "bytes_in": result.bytes_in,
                   "seconds": round(trio.current_time() - started, 3)}
        if report.applied:
            log.info("synced from %s: %d ops in %d rounds", peer_id, report.applied, result.rounds)
        self.daemon.publish("sync_complete", summary)
        return summary

    async def _seal_asks(self, peer_id: str) -> list[tuple[str, int, int]]:
        """Whose seals we lack and have not asked `peer_id` for in vain (`seal_store.seal_asks`)."""
        def skip(writer: str, complete: int) -> bool:
            return self._seals_in_vain.get((writer, peer_id)) == complete
        try:
            return await self.daemon.on_reader(lambda s: s.seal_asks(self.me, skip))
        except STORE_ERRORS as exc:
            log.warning("reading which seals we lack failed: %r", exc)
            return []

    async def _note_seals_in_vain(self, peer_id: str, asked: list[tuple[str, int, int]]) -> None:
        """After a pull: a writer whose seals we still lack from the same block was asked in vain."""
        try:
            after = {w: first for w, first, _ in await self.daemon.on_reader(lambda s: s.seal_asks(self.me,
                                                                                                 lambda *_: False))}
        except STORE_ERRORS:
            return
        if len(self._seals_in_vain) > 65_536:  # bounded: forgetting only means asking again
            self._seals_in_vain.clear()
        for writer, first, complete in asked:
            if after.get(writer) == first:
                self._seals_in_vain[(writer, peer_id)] = complete

    async def _note_gap(self, record: PeerRecord, result: PullResult) -> None:
        """Set `behind`, `ahead`, `withheld` from a pull (`crdt.withheld.gap`). What we would send
        it is counted on a reader, and only when it lacks anything at all; if the store cannot
        say, every dot it lacks counts as `ahead` (as before withheld dots were told apart)."""
        remote, me = result.remote_context, self.me
        assert remote is not None
        local = await self._local_context()
        lacking = remote.missing_count(local)
        sendable = 0
        if lacking:
            try:
                sendable = await self.daemon.on_reader(lambda s: s.sendable_count(remote, gate=s.sync_gate(me)))
            except STORE_ERRORS as exc:
                log.warning("counting the ops %s lacks failed: %r", record.peer_id, exc)
                sendable = lacking
        figures = gap(local, remote, complete=result.complete, refused=sum(result.report.rejected.values()),
                      sendable=sendable)
        record.behind, record.ahead, record.withheld = figures.behind, figures.ahead, figures.withheld

    def _count_traffic(self, *, sent: int, received: int, msgs_out: int, msgs_in: int) -> None:
        """Sync traffic in the daemon's counters (the operator's rates, tui/), apart from gossip's."""
        self.counters["sync_msgs_out"] += msgs_out
        self.counters["sync_msgs_in"] += msgs_in
        self.counters["sync_bytes_out"] += sent
        self.counters["sync_bytes_in"] += received

    async def _local_context(self) -> CausalContext:
        return await self.daemon.on_writer(lambda s: s.causal_context())

    async def _apply_sync_round(self, arrivals: trio.MemoryReceiveChannel[bytes], *, sender: str,
                                sealed: bool = False) -> ApplyReport:
        """Join a round's deltas as they arrive (`ingest.RoundJoin`): each is handed to the
        verifier threads the moment it arrives, even while the store's writer thread joins an
        earlier one, and the writer joins whatever has arrived. The writer never waits for the
        network: an empty round never reaches it, and a slow sibling holds a reader, not the
        writer. The backlog embedder holds back meanwhile (`DaemonPort.ingesting`). As each delta
        commits: its ops counted (`sync_ops_applied`, `sync_rejected_<reason>`),
        `entries_received` and `sync_progress` published, so a round cut short is accounted
        for as far as it was joined."""
        token = trio.lowlevel.current_trio_token()

        def committed(frame: FrameReport) -> None:  # on the writer thread
            trio.from_thread.run_sync(self._count_joined, frame, sender, trio_token=token)

        total = ApplyReport()
        round_join: RoundJoin | None = None
        arrived = trio.Event()
        all_arrived = False
        failure: Exception | None = None

        async def feed() -> None:  # as the reader hands each delta over
            nonlocal round_join, all_arrived  # `arrived` is read afresh: the loop below replaces it
            async for frame in arrivals:
                if round_join is None:  # the threads start with the round's first delta
                    round_join = RoundJoin(signature_ok, local_replica=self.me, max_skew_ms=self.max_skew_ms,
                                           sender=sender, on_frame=committed, sealed=sealed)
                round_join.add(frame)
                arrived.set()
            all_arrived = True
            arrived.set()

        try:
            with self.daemon.ingesting():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(feed)
                    try:
                        while not all_arrived or (round_join is not None and round_join.pending):
                            await arrived.wait()
                            arrived = trio.Event()  # set again by a delta arriving while the writer joins
                            if round_join is not None and round_join.pending:
                                for frame in await self.daemon.on_writer(round_join.join_added):
                                    total.add(frame.report)
                    except Exception as exc:  # noqa: BLE001 - raised below, unwrapped
                        failure = exc
                        nursery.cancel_scope.cancel()
        finally:
            if round_join is not None:  # no join is running: `daemon.on_writer` returns only once its thread has
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(round_join.close)
        if failure is not None:
            raise failure
        return total

    def _count_joined(self, frame: FrameReport, sender: str) -> None:
        report = frame.report
        self.counters["sync_ops_applied"] += report.applied
        self.counters["sync_ops_sealed"] += frame.sealed_ops
        self.counters["sync_seals_received"] += frame.seals
        for reason, n in report.rejected.items():
            self.counters[f"sync_rejected_{reason}"] += n
        if report.applied:
            announce_received(self.daemon, sender, report, via="sync")
        self.daemon.publish("sync_progress", {"peer_id": sender, "applied": report.applied, "bytes": frame.size})

    async def serve_sync(self, stream: Stream, peer_id: str, *, version: int = 2) -> None:
        """Answer a sibling's pull on `stream` (the node's stream handler: `version` 3 on
        SYNC_V3_PROTOCOL, 2 on SYNC_V2_PROTOCOL, 1 on SYNC_PROTOCOL). Never raises."""
        record = self.book.get(peer_id)
        try:
            if not record.member:
                self.counters["sync_refused_not_member"] += 1
                await stream.write(encode_frame(messages.encode(
                    messages.Refused("not_a_member", "say hello with a valid certificate first"), version)))
                return
            record.sync_protocol = _PROTOCOLS[version]

            def on_round(remote: CausalContext, local: CausalContext, more: bool) -> None:
                self.counters["sync_rounds_served"] += 1
                # What we hold that the asker lacks, until this round lands (all we would send if
                # not `more`). `behind` is left to our own pulls from it: only a pull tells the ops
                # it would send us from the dots of its private ops (`crdt.withheld.gap`).
                record.ahead = remote.missing_count(local) if more else 0

            sealed = version >= 3
            figures = await serve(stream, extract=functools.partial(self._extract, sealed=sealed), on_round=on_round,
                                  local_context=self._local_context, version=version,
                                  extract_seals=self._extract_seals if sealed else None)
            self.book.note_traffic(peer_id, sent=figures.bytes_out, received=figures.bytes_in,
                                   msgs_out=figures.rounds, msgs_in=figures.rounds, now_ms=self.daemon.now_ms())
            self._count_traffic(sent=figures.bytes_out, received=figures.bytes_in, msgs_out=figures.rounds,
                                msgs_in=figures.rounds)
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync request from %s refused: %s", peer_id, exc)
        except TRANSPORT_ERRORS as exc:
            self.counters["sync_serve_failed"] += 1
            log.debug("serving sync to %s failed: %r", peer_id, exc)
        except Exception:  # noqa: BLE001 - a bug: never let it reach the host (docs/design/libp2p.md, pitfall 8)
            internal_error(self.counters, "serving sync to %s", peer_id)
        finally:
            await close_quietly(stream)

    async def _extract(self, peer: CausalContext, send: trio.MemorySendChannel[bytes], *,
                       sealed: bool = False) -> tuple[bool, CausalContext]:
        """Extract a round for `peer` from a read snapshot (writes go on meanwhile), handing
        each delta to `send` as soon as it is encoded, so the first is on the wire while the
        next is read; whether there are more, and our context. `sealed` (sync v3): each delta
        carries the seals we hold of the blocks it brings most of (`Grimoire.seals_covering`)."""
        me = self.me
        token = trio.lowlevel.current_trio_token()

        def run(store: Grimoire) -> tuple[bool, CausalContext]:
            deltas = store.iter_deltas(peer, gate=store.sync_gate(me), first_max_ops=FIRST_DELTA_OPS,
                                       max_bytes=SEALED_OPS_BYTES if sealed else MAX_BATCH_BYTES)
            sent = 0
            more = False
            sealed_blocks: set[tuple[str, int]] = set()  # each seal once a round: the asker keeps it for the round
            try:
                for delta in deltas:
                    if sent == ROUND_DELTAS:
                        more = True
                        break
                    seals = store.seals_covering(delta.ops, limit=SEALS_PER_DELTA, sent=sealed_blocks) \
                        if sealed else None
                    sealed_blocks.update((s.writer, s.block) for s in seals or ())
                    trio.from_thread.run(send.send, encode_delta(delta, seals), trio_token=token)
                    sent += 1
            finally:
                deltas.close()  # ends the read snapshot
            return more, store.causal_context()

        return await self.daemon.on_reader(run)

    async def _extract_seals(self, asks: tuple[tuple[str, int], ...], send: trio.MemorySendChannel[bytes]) -> None:
        """Sync v3: the seals a want asked for that we hold, as one delta of no op (none if we
        hold none of them)."""
        seals = await self.daemon.on_reader(lambda s: s.seals_after(asks, limit=SEALS_ASKED))
        if seals:
            self.counters["sync_seals_served"] += len(seals)
            await send.send(encode_delta(Delta((), CausalContext()), seals))
