"""A death the clade hears: `POST /v1/death` (`clade die`) on a running daemon.

Runs the steps of daemon/service/death_plan.py in order, each one's outcome recorded in
`<data>/death.json` (written atomically after every step) and answered. A second call resumes:
it runs only what is not `done`. Calls are serialised (one lock per daemon). A step that
raises is recorded `failed` with the error and the next one runs: no golem dies silent.
The webhook is bounded: at most `webhook_attempts` attempts of `webhook_timeout_s` each (a
hard deadline per attempt, whatever the server does), with waits on trio's clock between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
import trio

from crdt import Kind
from daemon.errors import DaemonError
from daemon.grimoire import Grimoire, NewEntry
from daemon.grimoire.curator.bequest import export_testament
from daemon.grimoire.curator.cycle import live_entries
from daemon.grimoire.playbook import atomic_write
from daemon.service.backup import create_backup, default_recipients, report_json
from daemon.service.death_plan import (
    INSIGHT_KINDS,
    DeathRecord,
    DeathStateError,
    InsightCandidate,
    pick_insights,
    webhook_delays,
    webhook_payload,
)
from daemon.styx.boot import write_archive
from daemon.styx.outbox import OutboxWriter, enqueue_entry
from daemon.styx.policy import RETRYABLE_4XX
from daemon.styx.vault import VaultPushError
from daemon.styx.wire import layers_for

if TYPE_CHECKING:
    from crypto import Identity, Membership
    from daemon.config import Config
    from daemon.datadir import DataDir
    from daemon.grimoire import Entry
    from daemon.p2p.ports import P2PControl
    from daemon.styx.pusher import Pusher

__all__ = ["DEATH_FILE", "Daemon", "Death", "death_status", "load_record"]

log = logging.getLogger("clade.death")
DEATH_FILE = "death.json"
Outcome = tuple[str, str]  # (status, detail)
T = TypeVar("T")


class Daemon(Protocol):
    """What a death needs of the daemon (`DaemonState` is one; this module does not import it)."""

    @property
    def data(self) -> DataDir: ...

    @property
    def config(self) -> Config: ...

    @property
    def identity(self) -> Identity: ...

    @property
    def store(self) -> Grimoire: ...

    @property
    def p2p(self) -> P2PControl | None: ...

    @property
    def styx(self) -> Pusher | None: ...

    def now_ms(self) -> int: ...

    def membership(self) -> Membership | None: ...

    def publish(self, event: str, data: dict[str, Any]) -> None: ...

    def local_write(self) -> None: ...

    async def on_writer(self, fn: Callable[[Grimoire], T]) -> T: ...

    async def remember(self, new: NewEntry) -> Entry: ...


def _path(data: DataDir) -> Path:
    return data.root / DEATH_FILE


def load_record(data: DataDir) -> DeathRecord | None:
    """The persisted death record, None while the golem lives. Raises `DaemonError` if unreadable."""
    try:
        raw = _path(data).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DaemonError(f"cannot read {_path(data)}: {exc.strerror}") from None
    try:
        return DeathRecord.from_bytes(raw)
    except DeathStateError as exc:
        raise DaemonError(f"{_path(data)}: {exc}; move it aside to die again") from None


def death_status(data: DataDir) -> dict[str, Any] | None:
    """The `death` field of `/v1/status`: null while alive."""
    try:
        record = load_record(data)
    except DaemonError as exc:
        return {"dead": True, "started_ms": 0, "complete": False, "failed": ["record"], "reflection_id": None,
                "testament_path": None, "error": str(exc)}
    return None if record is None else record.status()


class Death:
    """The death flow of one daemon (`register` of daemon/api/death.py makes one)."""

    def __init__(self, state: Daemon) -> None:
        self.state = state
        self._lock = trio.Lock()
        self._wrote_reflection = False

    async def die(self, reflection: str, cause: str | None) -> dict[str, Any]:
        """Run (or resume) the death; returns `DeathRecord.answer()`. Raises `DaemonError` if the
        persisted record is unreadable."""
        async with self._lock:
            record = await trio.to_thread.run_sync(load_record, self.state.data)
            if record is None:
                record = DeathRecord(started_ms=self.state.now_ms(), cause=cause)
                log.warning("the golem dies%s", f": {cause}" if cause else "")
            self._wrote_reflection = False
            for name in record.pending():
                try:
                    status, detail = await getattr(self, f"_{name}")(record, reflection)
                except Exception as exc:
                    log.warning("death: step %s failed: %s", name, exc, exc_info=not isinstance(exc, DaemonError))
                    status, detail = "failed", f"{type(exc).__name__}: {exc}"
                record.record(name, status, detail, now_ms=self.state.now_ms())
                await trio.to_thread.run_sync(lambda: atomic_write(_path(self.state.data), record.to_bytes(),
                                                                   mode=0o600))
            return record.answer()

    # -- Phase II: the reflection to the clade and Styx, a handful of insights ----------------

    async def _reflection(self, record: DeathRecord, text: str) -> Outcome:
        me, since = self.state.identity.peer_id, record.started_ms

        # written before a crash that lost the record?
        found = await self.state.on_writer(lambda s: s.own_reflection_since(me, since))
        if found is not None:
            record.reflection_id = found
            return "done", f"death reflection {found} (stored earlier)"
        entry = await self.state.remember(NewEntry(kind=Kind.DEATH_REFLECTION, content=text, confidence=0.9,
                                                   importance=1.0, bloodstain=True, tags=("death",)))
        record.reflection_id = entry.id
        self._wrote_reflection = True
        return "done", f"death reflection {entry.id} stored (bloodstained)"

    async def _gossip(self, record: DeathRecord, text: str) -> Outcome:
        if record.reflection_id is None:
            return "skipped", "no reflection stored"
        if self.state.p2p is None:
            return "skipped", "sync is off (no clade, or p2p disabled): siblings get it when this golem syncs again"
        self.state.p2p.local_write()
        return "done", "handed to the p2p publisher: a death_reflection crosses to siblings at once"

    async def _styx(self, record: DeathRecord, text: str) -> Outcome:
        writer = self.state.store.outbox
        if self.state.styx is None or not isinstance(writer, OutboxWriter):
            return "skipped", "Styx is off"
        entry_id, fresh = record.reflection_id, self._wrote_reflection
        if entry_id is None:
            return "skipped", "no reflection stored"

        def queue(store: Grimoire) -> list[str]:
            entry = store.get(entry_id)
            layers = list(layers_for(Kind.DEATH_REFLECTION, entry.body.sensitivity.value, enabled=writer.layers))
            if layers and not fresh:  # written while Styx was off (or before a crash): queue it now
                seq = store.body_seq(entry_id, entry.body.author)
                enqueue_entry(store, writer=entry.body.author, seq=seq, kind="death_reflection", layers=layers,
                              entry=entry.to_json(), created_ms=self.state.now_ms())
            return layers

        layers = await self.state.on_writer(queue)
        if not layers:
            return "skipped", "neither Styx's vault nor its clade layer is enabled"
        self.state.local_write()
        return "done", "queued for Styx's " + " and ".join(
            {"vault": "vault layer (the archive)", "clade": "clade layer (L1)"}[x] for x in layers)

    async def _insights(self, record: DeathRecord, text: str) -> Outcome:
        identity, now = self.state.identity, self.state.now_ms()

        def promote(store: Grimoire) -> list[str]:
            meta = store.own_tallies(identity.peer_id)
            cands = [InsightCandidate(e.id, e.kind, e.local_confidence, e.keep_score(e.local_confidence, now),
                                      meta[e.id][0] == "public", meta[e.id][1], meta[e.id][2], meta[e.id][3])
                     for e in live_entries(store) if e.id in meta and e.kind in INSIGHT_KINDS]
            picked = pick_insights(cands)
            return store.promote(picked, identity, now_ms=now, reason="death")

        promoted = await self.state.on_writer(promote)
        record.promoted = promoted
        if promoted:
            self.state.local_write()
        return "done", f"{len(promoted)} of the golem's best insights promoted to the clade"

    # -- Phase III: the testament and the vault backup ---------------------------------------

    async def _testament(self, record: DeathRecord, text: str) -> Outcome:
        data, identity = self.state.data, self.state.identity
        joined = data.load_membership()
        if joined is None:
            return "skipped", "this golem has not joined a clade: a testament is encrypted to the clade key and owner"
        membership, clade_key = joined
        directory = data.root / "testament"
        directory.mkdir(mode=0o700, exist_ok=True)
        out = directory / f"testament-{record.started_ms}.clade"
        report = await self.state.on_writer(lambda s: export_testament(
            s, identity, clade_id=membership.clade_id, clade_keys=[clade_key],
            x25519_recipients=[membership.owner_x25519_public_key()], out=out, now_ms=self.state.now_ms(),
            reflection_id=record.reflection_id, trust=self.state.config.trust.policy()))
        record.testament_path = report.path
        return "done", f"{report.entries} entries ({report.warnings} warnings), {report.bytes} bytes"

    async def _backup(self, record: DeathRecord, text: str) -> Outcome:
        state = self.state
        clade_keys, publics, names = default_recipients(
            state.data, share_with_clade=state.config.backup.share_with_clade)
        if not publics:
            return "skipped", "this golem has not joined a clade: no one to encrypt the backup to"
        report = await trio.to_thread.run_sync(lambda: create_backup(
            state.data, clade_keys=clade_keys, x25519_recipients=publics, recipient_names=names,
            golem=state.identity.peer_id, keep=state.config.backup.keep, now_ms=state.now_ms()))
        doc = report_json(report)
        state.publish("backup_written", doc)
        record.backup_path = str(report.path)
        return "done", f"{report.bytes} bytes, {report.files} files"

    async def _backup_push(self, record: DeathRecord, text: str) -> Outcome:
        state, styx = self.state, self.state.config.styx
        pusher = state.styx
        if pusher is None or not styx.vault_enabled:
            return "skipped", "Styx's vault layer is off"
        if record.backup_path is None or not Path(record.backup_path).exists():
            return "skipped", "no backup to push"
        path = Path(record.backup_path)
        membership = state.membership()
        try:
            pushed = await pusher.upload(path, peer=state.identity.peer_id, timeout_s=max(60.0, styx.timeout_s),
                                         attempts=3, base_s=styx.backoff_base_s, cap_s=styx.backoff_cap_s,
                                         death=True)  # the ring-fenced reserve pays if the month is spent
            archived = None
            if record.testament_path is not None and membership is not None:  # the archive an heir boots from
                testament_file = Path(record.testament_path)
                packed = write_archive(testament_file, membership.certificate.to_bytes(), created_ms=record.started_ms)
                archived = await pusher.upload(packed, peer=state.identity.peer_id,
                                               timeout_s=max(60.0, styx.timeout_s), attempts=3,
                                               base_s=styx.backoff_base_s, cap_s=styx.backoff_cap_s, death=True)
        except (VaultPushError, OSError) as exc:
            return "failed", str(exc)
        state.publish("backup_pushed", pushed)
        return "done", f"pushed to Styx's vault ({pushed['bytes']} bytes, {pushed['attempts']} attempt(s))" + (
            f"; the testament archive too ({archived['bytes']} bytes)" if archived else "")

    # -- then: the event and the webhook -----------------------------------------------------

    async def _event(self, record: DeathRecord, text: str) -> Outcome:
        self.state.publish("death", {"golem": self.state.identity.peer_id, "cause": record.cause,
                                     "reflection_id": record.reflection_id, "testament_path": record.testament_path,
                                     "promoted": record.promoted})
        return "done", "published on the event hub"

    async def _webhook(self, record: DeathRecord, text: str) -> Outcome:
        cfg = self.state.config.death
        if cfg.webhook is None:
            return "skipped", "no [death] webhook configured"
        membership = self.state.membership()
        clade = None if membership is None else {"name": membership.clade_name, "id": membership.clade_id}
        payload = webhook_payload(record, golem=self.state.identity.peer_id, clade=clade, now_ms=self.state.now_ms())
        delays = webhook_delays(cfg.webhook_attempts, cfg.webhook_backoff_s)
        last = ""
        async with httpx.AsyncClient(timeout=cfg.webhook_timeout_s) as client:
            for attempt in range(1, cfg.webhook_attempts + 1):
                status: int | None = None
                with trio.move_on_after(cfg.webhook_timeout_s) as scope:
                    try:
                        answer = await client.post(cfg.webhook, json=payload)
                        status, last = answer.status_code, f"HTTP {answer.status_code}"
                    except httpx.HTTPError as exc:
                        last = f"{type(exc).__name__}: {str(exc)[:200]}"
                if scope.cancelled_caught:
                    last = f"no answer within {cfg.webhook_timeout_s:g} s"
                if status is not None and 200 <= status < 300:
                    return "done", f"{last} after {attempt} attempt(s)"
                if status is not None and 400 <= status < 500 and status not in RETRYABLE_4XX:
                    return "failed", f"{last}: refused; check the URL (`clade die` again retries it)"
                if attempt <= len(delays):
                    await trio.sleep(delays[attempt - 1])
        return "failed", f"{last} after {cfg.webhook_attempts} attempts (`clade die` again retries it)"

