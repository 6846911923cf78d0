"""The node's side of anti-entropy (`sync.py` is the protocol): pull from a sibling on
every new connection and every `sync_interval_s`, and answer siblings' pulls from a read
snapshot, through the promotion gate."""

from __future__ import annotations

import functools
import time
from typing import Any

import trio
from libp2p.abc import INetStream
from libp2p.peer.id import ID

from crdt import ApplyReport, CausalContext, RemoteProtocolError
from crdt.codec import decode_delta, encode_delta
from crypto.identity import signature_ok
from daemon.grimoire import Grimoire

from . import messages
from .core import DIAL_TIMEOUT_S, SYNC_PROTOCOL, NodeCore, log
from .frames import close_quietly, encode_frame
from .sync import ROUND_DELTAS, SyncRefused, pull, serve

__all__ = ["CatchUp"]


class CatchUp(NodeCore):
    async def _anti_entropy(self) -> None:
        while True:
            await trio.sleep(self.sync_interval_s * self.rng.uniform(0.8, 1.2))
            members = [r.peer_id for r in self.book.members() if r.peer_id not in self._syncing]
            if members:
                await self.sync_with(self.rng.choice(members))

    async def sync_with(self, peer_id: str) -> dict[str, Any] | None:
        """Pull everything `peer_id` has that we lack; None if it could not run."""
        record = self.book.get(peer_id)
        if peer_id in self._syncing or not record.member:
            return None
        self._syncing.add(peer_id)
        stream: INetStream | None = None
        started = time.monotonic()
        try:
            with trio.fail_after(DIAL_TIMEOUT_S):
                stream = await self.host.new_stream(ID.from_base58(peer_id), [SYNC_PROTOCOL])
            result = await pull(stream, local_context=self._local_context,
                                apply=functools.partial(self._apply_sync_delta, sender=peer_id))
        except SyncRefused as exc:
            self.counters["sync_refused_by_peer"] += 1
            log.warning("sync with %s refused: %s", peer_id, exc)
            return None
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync with %s aborted: %s", peer_id, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a dropped connection ends the sync; the next one resumes
            self.counters["sync_failed"] += 1
            log.info("sync with %s cut short: %s", peer_id, exc)
            return None
        finally:
            self._syncing.discard(peer_id)
            if stream is not None:
                await close_quietly(stream)
        self._count_traffic(peer_id, sent=result.bytes_out, received=result.bytes_in,
                            msgs_out=result.rounds, msgs_in=result.rounds + result.deltas)
        if result.rounds == 1 and not result.deltas and result.first_round_ms is not None:
            record.note_rtt(result.first_round_ms)
        if result.remote_context is not None:
            local = await self._local_context()
            record.behind = local.missing_count(result.remote_context)
            record.ahead = result.remote_context.missing_count(local)
        record.last_sync_ms = self.state.now_ms()
        report = result.report
        self.counters["sync_pulls"] += 1
        self.counters["sync_ops_applied"] += report.applied
        for reason, n in report.rejected.items():
            self.counters[f"sync_rejected_{reason}"] += n
        summary = {"peer_id": peer_id, "rounds": result.rounds, "deltas": result.deltas, "applied": report.applied,
                   "rejected": dict(report.rejected), "bytes_in": result.bytes_in,
                   "seconds": round(time.monotonic() - started, 3)}
        if report.applied:
            self._announce_received(peer_id, report, via="sync")
            log.info("synced from %s: %d ops in %d rounds", peer_id, report.applied, result.rounds)
        self.state.publish("sync_complete", summary)
        return summary

    async def _local_context(self) -> CausalContext:
        return await self.state.db(lambda s: s.causal_context())

    async def _apply_sync_delta(self, data: bytes, *, sender: str) -> ApplyReport:
        delta, dropped = await trio.to_thread.run_sync(decode_delta, data, signature_ok)
        report = await self.state.db(lambda s: s.apply_delta(delta, rejected=dropped, local_replica=self.me,
                                                             max_skew_ms=self.max_skew_ms, sender=sender))
        self.state.publish("sync_progress", {"peer_id": sender, "applied": report.applied, "bytes": len(data)})
        return report

    async def _sync_handler(self, stream: INetStream) -> None:
        peer_id = stream.muxed_conn.peer_id.to_base58()
        record = self.book.get(peer_id)
        try:
            if not record.member:
                self.counters["sync_refused_not_member"] += 1
                await stream.write(encode_frame(messages.encode(
                    messages.Refused("not_a_member", "say hello with a valid certificate first"))))
                return

            def on_round(remote: CausalContext, local: CausalContext, more: bool) -> None:
                record.behind = local.missing_count(remote)
                # What we hold that the asker lacks, until this round lands (all of it if not `more`).
                record.ahead = remote.missing_count(local) if more else 0

            figures = await serve(stream, extract=self._extract, on_round=on_round, counters=self.counters)
            self._count_traffic(peer_id, sent=figures["bytes_out"], received=figures["bytes_in"],
                                msgs_out=figures["rounds"], msgs_in=figures["rounds"])
        except RemoteProtocolError as exc:
            self.counters[f"sync_rejected_{exc.reason}"] += 1
            log.warning("sync request from %s refused: %s", peer_id, exc)
        except Exception as exc:  # noqa: BLE001 - never let a handler error reach the host
            self.counters["sync_serve_failed"] += 1
            log.debug("serving sync to %s failed: %s", peer_id, exc)
        finally:
            await close_quietly(stream)

    async def _extract(self, peer: CausalContext) -> tuple[list[bytes], bool, CausalContext]:
        def run(store: Grimoire) -> tuple[list[bytes], bool, CausalContext]:
            deltas = store.iter_deltas(peer, gate=store.sync_gate(self.me))
            out: list[bytes] = []
            more = False
            try:
                for delta in deltas:
                    if len(out) == ROUND_DELTAS:
                        more = True
                        break
                    out.append(encode_delta(delta))
            finally:
                deltas.close()  # ends the read snapshot
            return out, more, store.causal_context()

        return await self.state.db(run)
