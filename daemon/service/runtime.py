"""`clade run`: one trio process supervising the daemon's services.

    store (writer thread) → control API (unix socket, optional TCP) → READY=1
    services: curator ticker, backup scheduler, watchdog, STATUS (+ p2p and Styx later)

A service that crashes is logged with its traceback and restarted with exponential
backoff (1 s … 60 s); a fatal error (store unreadable, identity unsafe) stops the daemon
with a clear message and exit code 1. SIGTERM/SIGINT: STOPPING=1, stop accepting
requests, let in-flight ones finish (5 s grace), checkpoint the WAL, exit 0. SIGHUP:
RELOADING=1, reload config.toml (an invalid file is refused and the old config kept) and
the clade keys (a rotation bundle joined meanwhile is used at once), READY=1.
WATCHDOG=1 is sent at half of `$WATCHDOG_USEC` only while the writer thread answers a
trivial query in time.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from crypto import CryptoError
from daemon.config import Config, load_config
from daemon.datadir import DataDir
from daemon.errors import ConfigError, DaemonError
from daemon.grimoire import atomic_write
from daemon.grimoire.storage_faults import sole_cause, storage_refusal
from daemon.native_memory import limit_arenas, pin_mmap_threshold
from daemon.presence import DaemonLock, DataDirLocked, recorded_pid
from daemon.service.backup_schedule import run_backups
from daemon.service.clock import Clock
from daemon.service.heap import freeze_startup
from daemon.service.logs import quiet_libp2p, setup_logging
from daemon.service.notify import Notifier, watchdog_interval
from daemon.service.state import DaemonState
from daemon.service.trust_watch import trust_watch_service
from daemon.styx.outbox import writer_for
from daemon.styx.policy import budget_for
from daemon.styx.pusher import Pusher

__all__ = ["FatalError", "run_daemon", "socket_path"]

log = logging.getLogger("clade.daemon")
GRACE_SECONDS = 5.0
EMBED_IDLE_SECONDS = 2.0
EMBED_COALESCE_SECONDS = 1.0
EMBED_DEFER_SECONDS = 10.0  # a catch-up round being joined holds the backlog back this long at most
BACKOFF_MAX = 60.0
_E = TypeVar("_E", bound=BaseException)


class FatalError(DaemonError):
    """The daemon cannot go on (store unreadable, identity unsafe): stop with exit code 1."""


def socket_path(data: DataDir) -> Path:
    """`$RUNTIME_DIRECTORY/clade.sock` under systemd, else `$DATA/clade.sock`."""
    runtime = os.environ.get("RUNTIME_DIRECTORY")
    path = Path(runtime.split(":")[0]) / "clade.sock" if runtime else data.root / "clade.sock"
    return path.absolute()  # run.json is read by clients in other working directories


ApiFactory = Callable[[DaemonState, str | None], tuple[Any, Any | None]]
"""The control API's ASGI apps for one daemon's state: the one for the unix socket, and (given the
TCP bearer token) the one for the TCP listener, else None. `daemon.api.app.listener_apps` is it;
the caller (`clade run`) passes it in, so this room does not import the API that imports it."""


class DaemonRuntime:
    """One running daemon: opens the store, serves the control API, supervises the services."""

    def __init__(self, data: DataDir, config_path: Path, notifier: Notifier, api: ApiFactory,
                 p2p_overrides: dict[str, Any] | None = None) -> None:
        self.data = data
        self.api = api
        self.config_path = config_path
        self.notifier = notifier
        self.p2p_overrides = p2p_overrides or {}
        self.stop = trio.Event()
        self.fatal: str | None = None
        self.state: DaemonState | None = None
        self.stopped_by = "shutdown"

    # -- services ----------------------------------------------------------------------

    async def supervise(self, name: str, service: Callable[[], Awaitable[None]]) -> None:
        """Run `service` forever, restarting it with backoff when it crashes."""
        delay = 1.0
        while not self.stop.is_set():
            started = trio.current_time()
            try:
                await service()
                return
            except FatalError as exc:
                self.fatal = str(exc)
                log.error("%s failed fatally: %s", name, exc)
                self.stop.set()
                return
            except Exception as exc:
                assert self.state is not None
                refusal = storage_refusal(sole_cause(exc))
                if refusal is not None:  # the storage's fault, not the service's: said, not a traceback
                    self.state.counters[f"service_{name}_storage_refused"] += 1
                    log.warning("service %s paused: %s; retrying in %.0f s", name, refusal.detail, delay)
                else:
                    self.state.counters[f"service_{name}_crashes"] += 1
                    log.error("service %s crashed; restarting in %.0f s", name, delay, exc_info=exc)
                self.state.publish("error", {"service": name, "error": str(exc)})
            if trio.current_time() - started > 5 * BACKOFF_MAX:
                delay = 1.0
            with trio.move_on_after(delay):
                await self.stop.wait()
            delay = min(BACKOFF_MAX, delay * 2)

    async def curator_service(self) -> None:
        assert self.state is not None
        while True:
            config = self.state.config.curator
            pace = await self.state.on_reader(lambda r: r.vitality().curator_period_factor)
            with trio.move_on_after(config.tick_seconds * config.cycle_ticks * pace):  # the phase's pace
                await self.stop.wait()
                return
            await self.state.curator_cycle()

    @staticmethod
    def start_styx(state: DaemonState, config: Config, golem: str) -> None:
        """Hook the outbox into the store and make the pusher (its task starts with the services)."""
        styx = config.styx
        if not styx.url:
            raise FatalError("[styx] enabled is true but url is not set (CLADE_STYX__URL or [styx] url)")
        try:
            token = styx.bearer()
        except DaemonError as exc:
            raise FatalError(str(exc)) from None
        state.store.outbox = writer_for(styx)
        budget = budget_for(styx)
        budget.reserve_share = state.store.vitality().reserve_share  # the phase's share (PUT /v1/vitality moves it)
        state.styx = Pusher(state.on_writer, url=styx.url, token=token, golem=golem, wall_ms=state.now_ms,
                            batch=styx.batch, base_s=styx.backoff_base_s, cap_s=styx.backoff_cap_s,
                            timeout_s=styx.timeout_s, budget=budget, on_event=state.publish,
                            outbox_warn=styx.outbox_warn)

    async def styx_service(self) -> None:
        """Drain the Styx outbox until the daemon stops (state.styx is set when [styx] is enabled)."""
        assert self.state is not None and self.state.styx is not None
        await self.state.styx.run()

    async def embedder_service(self) -> None:
        """Work through entries without vectors in batches: at once while batches come back
        full (a backlog), after `EMBED_COALESCE_SECONDS` when one was partial (entries trickling
        in from gossip embed together, ~5x cheaper each than one by one), after
        `EMBED_IDLE_SECONDS` when there was nothing; never while a catch-up round is being
        joined (for up to `EMBED_DEFER_SECONDS` at a time: the join has the cores first). A
        search embeds its own tail meanwhile."""
        assert self.state is not None
        while not self.stop.is_set():
            await self.state.ingest_idle(at_most_s=EMBED_DEFER_SECONDS)
            done = await self.state.embed_backlog()
            if done >= self.state.backlog_batch():
                await trio.sleep(0)  # let requests in between batches
                continue
            with trio.move_on_after(EMBED_COALESCE_SECONDS if done else EMBED_IDLE_SECONDS):
                await self.stop.wait()

    async def backup_service(self) -> None:
        assert self.state is not None
        state = self.state

        async def scheduled() -> None:
            if self.data.membership_path.exists():
                await state.backup(include_identity=False)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.upkeep.vault_pushes.run)  # the vault uploads, behind the backups (vault_push.py)
            await run_backups(state.backup_schedule, interval_s=lambda: state.config.backup.interval_hours * 3600,
                              backup=scheduled, stop=self.stop)
            nursery.cancel_scope.cancel()

    async def p2p_service(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The libp2p node, rebuilt from scratch each time the supervisor restarts it."""
        from daemon.p2p.node import P2PNode  # importing libp2p takes ~1 s: only when sync runs

        quiet_libp2p()

        assert self.state is not None
        state = self.state
        try:
            joined = self.data.load_keys()
        except CryptoError as exc:
            raise FatalError(f"clade keys: {exc}") from None
        if joined is None:
            log.info("not a member of a clade: sync is off (run `clade join BUNDLE`, then restart)")
            task_status.started()
            return
        membership, keyring = joined
        state.peering.adopt(membership, keyring)
        try:
            revocations = self.data.load_revocations(membership)
        except CryptoError as exc:
            raise FatalError(f"{self.data.revocations_path}: {exc}; remove it or install a valid list") from None
        config = state.config.p2p
        try:
            node = P2PNode(state, identity=state.identity, membership=membership,
                           keyring=lambda: state.keys or keyring, key_grace_ms=state.key_grace_ms,
                           revocations=revocations, persist_revocations=self.data.install_revocations,
                           known_path=self.data.root / "peers.json", listen=config.listen,
                           bootstrap=config.bootstrap, mdns=config.mdns, sync_interval_s=config.sync_interval_s,
                           max_skew_ms=config.max_skew_ms, neighbours=config.neighbours,
                           rotate_s=config.rotate_s)
        except ValueError as exc:
            raise FatalError(f"p2p: {exc}") from None
        state.p2p = node
        try:
            await node.run(task_status=task_status)
        finally:
            state.p2p = None

    async def watchdog_service(self, interval: float | None) -> None:
        assert self.state is not None
        period = interval if interval is not None else 30.0
        while not self.stop.is_set():
            healthy = False
            with trio.move_on_after(max(period, 0.05)):
                await self.state.on_writer(lambda s: s.schema_version)  # the writer thread answers
                healthy = True
            if healthy:
                fields: dict[str, str | int] = {"STATUS": await self.status_line()}
                if interval is not None:
                    fields["WATCHDOG"] = 1
                self.notifier.send(**fields)
            else:
                log.warning("watchdog: the store did not answer within %.1f s; not petting the watchdog", period)
            with trio.move_on_after(period):
                await self.stop.wait()

    async def status_line(self) -> str:
        assert self.state is not None
        counts = await self.state.on_writer(lambda s: s.counts())
        last = self.state.last_curator
        cycle = "never" if last is None else time.strftime("%H:%M:%S", time.gmtime(last["at_ms"] / 1000))
        return f"{counts.entries - counts.archived} entries, {len(self.state.peers())} peers, curator {cycle}"

    async def signal_service(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    await self.reload()
                    continue
                self.stopped_by = signal.Signals(signum).name
                log.warning("received %s: stopping", self.stopped_by)
                self.stop.set()
                return

    async def reload(self) -> None:
        assert self.state is not None
        self.notifier.send(RELOADING=1, MONOTONIC_USEC=int(time.monotonic() * 1e6))
        try:
            fresh = self.load_config()
        except ConfigError as exc:
            log.error("reload refused, keeping the running config: %s", exc)
            self.state.publish("error", {"service": "reload", "error": str(exc)})
            self.notifier.send(READY=1, STATUS=f"reload refused: {exc}")
            return
        changed = _diff(self.state.config.model_dump(), fresh.model_dump())
        self.state.config = fresh
        setup_logging(fresh.log.level)
        log.warning("config reloaded; changed: %s", ", ".join(changed) or "nothing")
        self.state.publish("config_reloaded", {"changed": changed})
        if self.data.membership_path.exists():  # a rotation bundle joined while we ran
            try:
                await self.state.reload_keys()
            except (CryptoError, DaemonError) as exc:
                log.error("clade keys not reloaded, keeping the running ones: %s", exc)
                self.state.publish("error", {"service": "reload", "error": str(exc)})
        self.notifier.send(READY=1, STATUS=await self.status_line())

    def load_config(self) -> Config:
        """config.toml and the environment, then `clade run --listen/--bootstrap/--no-mdns`."""
        config = load_config(self.config_path)
        if self.p2p_overrides:
            config.p2p = config.p2p.model_copy(update=self.p2p_overrides)
        return config

    # -- the API -------------------------------------------------------------------------

    async def serve_api(self, app: Any, bind: str, umask: int | None,
                        task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        config = HypercornConfig()
        config.bind = [bind]
        config.umask = umask
        config.graceful_timeout = GRACE_SECONDS
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        await serve(app, config, shutdown_trigger=self.stop.wait, task_status=task_status)

    async def start_tcp_api(self, servers: trio.Nursery, app: Any, port: int) -> None:
        """The optional TCP listener; a port that cannot be bound is fatal, said in one line."""
        bind = f"127.0.0.1:{port}"
        try:
            await servers.start(self.serve_api, app, bind, None)
        except (OSError, BaseExceptionGroup) as exc:  # hypercorn raises bind errors from its nurseries
            error = _sole(exc, OSError)
            if error is None:
                raise
            raise FatalError(f"api.tcp_port: cannot listen on {bind}: {error.strerror or error}; "
                             "stop what listens there or choose another port ([api] tcp_port)") from None

    # -- main ------------------------------------------------------------------------------

    async def main(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # The data dir's lock, then a live daemon is looked for, before the store is opened:
        # opening migrates the schema, which must never happen under a running daemon (an
        # older one may not take the lock: run.json still names it).
        try:
            lock = DaemonLock.acquire(self.data.root, self.data.run_path)
        except DataDirLocked as exc:
            raise FatalError(str(exc)) from None
        except OSError as exc:
            refusal = storage_refusal(exc)
            what = f"; {refusal.detail.split(': ', 1)[0]}: fix it and start again (systemd restarts the service)" \
                if refusal is not None else ""
            raise FatalError(f"cannot lock {self.data.root}: {exc.strerror or exc}{what}") from None
        try:
            await self._main_locked(task_status)
        finally:
            lock.release()

    async def _main_locked(self, task_status: Any) -> None:
        other = recorded_pid(self.data.run_path, ignore_self=True)
        if other is not None:
            raise FatalError(f"another clade daemon (pid {other}) runs on {self.data.root}: "
                             "stop it first (or use another --data-dir)")
        try:
            identity = self.data.load_identity()
            config = self.load_config()
            clock = Clock.of_trio()
            store = self.data.open_store(config, identity=identity, wall_ms=clock.now_ms)
        except (CryptoError, DaemonError) as exc:
            raise FatalError(str(exc)) from None
        state = self.state = DaemonState(data=self.data, config=config, identity=identity, store=store, clock=clock)
        sock = socket_path(self.data)
        owns_files = False  # never remove another daemon's socket or run.json
        try:
            if config.styx.enabled:
                self.start_styx(state, config, identity.peer_id)
            if len(os.fsencode(sock)) > 107:
                raise FatalError(f"socket path {sock} is longer than the 107 bytes a unix socket allows; "
                                 "use a shorter data dir or set RUNTIME_DIRECTORY")
            owns_files = True
            sock.unlink(missing_ok=True)  # stale socket of a daemon that died
            tcp_token = _tcp_token(config) if config.api.tcp_port is not None else None
            local_app, tcp_app = self.api(state, tcp_token)
            async with trio.open_nursery() as services:
                services.start_soon(self.signal_service)
                # The API servers get their own nursery: it ends once hypercorn has drained
                # in-flight requests after `stop` (its shutdown trigger).
                async with trio.open_nursery() as servers:
                    await servers.start(self.serve_api, local_app, f"unix:{sock}", 0o117)
                    os.chmod(sock, 0o660)
                    if tcp_app is not None and config.api.tcp_port is not None:
                        await self.start_tcp_api(servers, tcp_app, config.api.tcp_port)
                    atomic_write(self.data.run_path, json.dumps(
                        {"pid": os.getpid(), "socket": str(sock), "started_ms": state.now_ms()}).encode(), mode=0o600)
                    services.start_soon(self.supervise, "curator", self.curator_service)
                    services.start_soon(self.supervise, "backup", self.backup_service)
                    services.start_soon(self.supervise, "embedder", self.embedder_service)
                    services.start_soon(self.supervise, "trust", lambda: trust_watch_service(state, self.stop))
                    if config.p2p.enabled:
                        services.start_soon(self.supervise, "p2p", self.p2p_service)
                    if config.styx.enabled:
                        services.start_soon(self.supervise, "styx", self.styx_service)
                    services.start_soon(self.supervise, "watchdog",
                                        lambda: self.watchdog_service(watchdog_interval()))
                    status = await self.status_line()
                    freeze_startup()  # full collections skip what startup built (heap.py)
                    self.notifier.send(READY=1, STATUS=status)
                    print(json.dumps({"event": "ready", "peer_id": identity.peer_id, "socket": str(sock),
                                      "pid": os.getpid(), "status": status}), file=sys.stderr, flush=True)
                    task_status.started()
                    await self.stop.wait()
                    self.notifier.send(STOPPING=1, STATUS="stopping")
                services.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(store.checkpoint)
            if self.state is not None:
                self.state.close_readers()
            store.close()
            if owns_files:
                self.data.run_path.unlink(missing_ok=True)
                sock.unlink(missing_ok=True)


def _tcp_token(config: Config) -> str:
    """The bearer token the TCP listener requires; no token is fatal (no open listener)."""
    token = config.api.secret_token()
    if not token:
        raise FatalError("api.tcp_port is set but api.token is not set: refusing an open listener; "
                         "set [api] token (or CLADE_API__TOKEN), or remove [api] tcp_port")
    return token


def _sole(exc: BaseException, kind: type[_E]) -> _E | None:
    """`exc` itself, or the first leaf of a (nested) exception group made only of `kind`s; else None.

    trio's nurseries wrap an error raised inside them in groups, one per nursery; a fatal
    start-up error must still reach the operator as its one line, not as nested tracebacks."""
    if isinstance(exc, kind):
        return exc
    if not isinstance(exc, BaseExceptionGroup):
        return None
    matched, rest = exc.split(kind)
    if matched is None or rest is not None:
        return None
    found: BaseException = matched
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found if isinstance(found, kind) else None


def _diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}")
    return out


def run_daemon(data: DataDir, *, api: ApiFactory, config_path: Path | None = None, log_level: str | None = None,
               p2p_overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run until stopped; returns a summary. Raises `FatalError` (exit 1) on fatal errors.

    `api` makes the control API's apps (`daemon.api.app.listener_apps`).

    `p2p_overrides` (from `clade run --listen/--bootstrap/--no-mdns`) replace those keys of
    the `[p2p]` section, also across SIGHUP reloads.
    """
    limit_arenas()  # before the store, p2p and worker threads allocate (daemon/native_memory.py)
    pin_mmap_threshold()
    path = config_path or data.config_path
    daemon = DaemonRuntime(data, path, Notifier(), api, p2p_overrides)
    try:
        config = daemon.load_config()
        if p2p_overrides:
            Config.model_validate(config.model_dump())  # overrides must pass the same checks
    except (ConfigError, ValueError) as exc:
        raise FatalError(str(exc)) from None
    if config.api.tcp_port is not None:
        _tcp_token(config)  # before anything is opened
    setup_logging(log_level or config.log.level)
    try:
        trio.run(daemon.main)
    except BaseExceptionGroup as group:
        fatal = _sole(group, FatalError)
        if fatal is None:
            raise
        raise fatal from None
    finally:
        daemon.notifier.close()
    if daemon.fatal:
        raise FatalError(daemon.fatal)
    return {"stopped_by": daemon.stopped_by, "peer_id": daemon.state.identity.peer_id if daemon.state else None}
