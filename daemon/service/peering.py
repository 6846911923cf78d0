"""The daemon's side of the clade: the running p2p node, the clade keys, the revocations.

The runtime sets `p2p` while sync runs (joined, `p2p.enabled`) and `keys` when the p2p service
starts; `reload_keys` replaces them. The operator's peer commands (`clade peers`, `connect`,
`disconnect`, `sync`) go through here and say what to do when sync is off.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import trio

from crypto import CryptoError, KeyRing, Membership
from daemon.config import Config, check_multiaddr
from daemon.datadir import DataDir
from daemon.errors import NotFound, UsageError
from daemon.p2p.ports import P2PControl

__all__ = ["Peering"]

log = logging.getLogger("clade.state")


class Peering:
    """The p2p node as the daemon sees it (None while sync is off), the keys gossip uses."""

    def __init__(self, data: DataDir, *, config: Callable[[], Config], counters: Counter[str],
                 publish: Callable[[str, dict[str, Any]], None]) -> None:
        self.data = data
        self.config = config
        self.counters = counters
        self.publish = publish
        self.p2p: P2PControl | None = None  # the running p2p node (set by the runtime while sync runs)
        self.keys: KeyRing | None = None  # the clade keys gossip uses (set by the p2p service, replaced by reload_keys)
        self._membership: Membership | None = None  # read once (`membership`), replaced by reload_keys
        self._membership_read = False

    def membership(self) -> Membership | None:
        """This golem's membership certificate, read from the data dir once and kept (None before
        joining, or if it cannot be read: logged once, and the daemon answers as an unjoined
        golem rather than failing every digest); `reload_keys` (SIGHUP, `clade keys reload`)
        reads it again."""
        if not self._membership_read:
            try:
                joined = self.data.load_membership()
            except CryptoError as exc:
                log.error("membership certificate unreadable (%s): answering as a golem outside any clade "
                          "until `clade keys reload` or SIGHUP reads a valid one", exc)
                joined = None
            self._membership = None if joined is None else joined[0]
            self._membership_read = True
        return self._membership

    def adopt(self, membership: Membership, keys: KeyRing) -> None:
        """The membership and keys the p2p service read at start."""
        self._membership, self._membership_read, self.keys = membership, True, keys

    def local_write(self) -> None:
        """Own ops were committed: the p2p publisher gossips those that cross at once (no-op while sync is off)."""
        if self.p2p is not None:
            self.p2p.local_write()

    def peers(self) -> list[dict[str, Any]]:
        """Every peer the p2p service knows (empty while sync is off)."""
        return [] if self.p2p is None else self.p2p.peers()

    def node(self) -> P2PControl:
        """The running p2p node; raises `UsageError` while sync is off."""
        if self.p2p is None:
            raise UsageError("sync is off: this golem has not joined a clade, or p2p.enabled is false")
        return self.p2p

    def connect_peer(self, addr: str) -> dict[str, Any]:
        """Dial `addr` (a `/…/p2p/PEERID` multiaddr) and keep it as a bootstrap; `UsageError` if malformed."""
        try:
            check_multiaddr(addr, peer=True)
            peer_id = self.node().add_bootstrap(addr)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return {"peer_id": peer_id, "dialing": addr}

    async def disconnect_peer(self, peer_id: str, *, hold_s: float) -> dict[str, Any]:
        """Drop a known peer and do not redial it for `hold_s`; `NotFound` for an unknown one."""
        node = self.node()
        if not any(p["peer_id"] == peer_id for p in node.peers()):
            raise NotFound(f"no known peer {peer_id!r} (see `clade peers`)")
        await node.disconnect(peer_id, hold_s=hold_s)
        return {"peer_id": peer_id, "held_s": hold_s}

    async def sync_now(self, peer_id: str | None) -> dict[str, Any]:
        """Run anti-entropy now with one sibling or every connected one; returns what each brought."""
        node = self.node()
        siblings = node.siblings()
        targets = [peer_id] if peer_id else siblings
        results = []
        for target in targets:
            if target not in siblings:
                raise UsageError(f"{target} is not a connected sibling (see `clade peers`)")
            results.append(await node.sync_with(target) or {"peer_id": target, "error": "sync failed; see the log"})
        return {"synced": results}

    def key_grace_ms(self) -> int:
        """How long gossip sealed with a superseded clade key is still accepted (`p2p.key_grace_s`)."""
        return int(self.config().p2p.key_grace_s * 1000)

    async def reload_keys(self) -> dict[str, Any]:
        """Re-read the clade keys from the data dir (after `clade join` of a rotation bundle, or
        `clade keys --drop-before`): gossip is sealed with the newest epoch from now on.

        Raises `UsageError` before joining, for an unreadable keyring or one of another clade
        than the running one (switching clades needs a restart)."""
        try:
            joined = await trio.to_thread.run_sync(self.data.load_keys)
        except CryptoError as exc:
            raise UsageError(f"clade keys not reloaded: {exc}") from None
        if joined is None:
            raise UsageError("this golem has not joined a clade (clade join BUNDLE)")
        ring = joined[1]
        previous = self.keys
        if previous is not None and previous.clade_id != ring.clade_id:
            raise UsageError(f"the data dir now names clade {ring.clade_id}, the daemon runs {previous.clade_id}: "
                             "restart it to switch clades")
        self.keys = ring
        self._membership, self._membership_read = joined[0], True
        changed = previous is None or previous.epochs != ring.epochs
        doc = {"epoch": ring.current.epoch, "epochs": ring.epochs,
               "previous_epoch": None if previous is None else previous.current.epoch, "changed": changed}
        if changed:
            self.counters["keys_reloaded"] += 1
            log.warning("clade keys reloaded: sealing with epoch %d (held: %s)", ring.current.epoch,
                        ", ".join(map(str, ring.epochs)))
        self.publish("keys_reloaded", doc)
        return doc

    async def install_revocations(self, data: bytes) -> dict[str, Any]:
        """Adopt an owner-signed revocation list (newer than ours): persisted, revoked peers dropped."""
        revocations = self.data.check_revocations(data)
        if self.p2p is not None:
            adopted = await self.p2p.adopt_revocations(revocations)
        else:
            adopted = await trio.to_thread.run_sync(self.data.install_revocations, revocations)
        return {"version": revocations.version, "revoked": sorted(revocations.revoked), "adopted": adopted}
