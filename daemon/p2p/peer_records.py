"""Signed peer records on pubsub RPCs: checked once per record and peer, not once per RPC.

py-libp2p 0.8.1 puts the sender's signed peer record (an envelope of its listen addresses,
signed with its key) on every pubsub RPC: each forwarded message, each duplicate, each control
message. The receiver parses and verifies it for every RPC (an Ed25519 verification), and for
an RPC with control messages a second time, and then clears and re-adds that peer's addresses
in its peerstore (`libp2p.pubsub.utils.maybe_consume_signed_record`, called by
`Pubsub.continuously_read_stream` and `GossipSub.handle_rpc`). The sender, for every RPC,
rebuilds its listen addresses, parses the addresses out of its cached record to compare them,
and serialises the record again (`libp2p.peer.peerstore.env_to_send_in_RPC`). Measured on a
sibling of a 5-golem clade receiving warnings at 10/s (py-spy, bench_clade --profile): 47 of
its ~580 busy samples, ~8 % of its CPU, the same record checked and built over and over.

`RecordCheck.consume(msg, host, peer_id)` keeps `maybe_consume_signed_record`'s contract
(True when the RPC has no record, or its record is valid, is that peer's, is not older than
the one held, and was stored; False otherwise), except that a record byte-identical to the one
last accepted from the same peer by the same host less than `RECHECK_S` ago is accepted again without being
parsed, verified or stored once more: storing it again would set the addresses it already set.
Every record is stored afresh at least every `RECHECK_S`, far inside its addresses' TTL (7,200
s). A record that was refused is never remembered, and any other bytes are checked in full, so
a peer gains nothing by sending others. At most `PEERS_KEPT` peers are remembered per host.

`OwnRecord.current(host)` is `env_to_send_in_RPC(host)[0]`, computed again at most every
`OWN_RECHECK_S`: after the listen addresses change, RPCs carry the previous record for up to
that long (a receiver then holds the old addresses until the next RPC).

`install()` puts both in place of py-libp2p's functions where pubsub and GossipSub look them up
(module globals, read at each call). It is idempotent; `uninstall()` restores py-libp2p's.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import libp2p.pubsub.gossipsub as _gossipsub
import libp2p.pubsub.pubsub as _pubsub
from libp2p.abc import IHost
from libp2p.peer.id import ID
from libp2p.peer.peerstore import env_to_send_in_RPC
from libp2p.pubsub.utils import maybe_consume_signed_record

__all__ = ["OWN_RECHECK_S", "PEERS_KEPT", "RECHECK_S", "OwnRecord", "RecordCheck", "install", "uninstall"]

RECHECK_S = 60.0
OWN_RECHECK_S = 1.0
PEERS_KEPT = 1024

Consume = Callable[[Any, IHost, ID], bool]
Issue = Callable[[IHost], tuple[bytes, bool]]


class RecordCheck:
    """`maybe_consume_signed_record` that remembers what it accepted (the module docstring)."""

    def __init__(self, consume: Consume = maybe_consume_signed_record, *,
                 clock: Callable[[], float] = time.monotonic, recheck_s: float = RECHECK_S,
                 peers_kept: int = PEERS_KEPT) -> None:
        self._consume = consume
        self._clock = clock
        self._recheck_s = recheck_s
        self._peers_kept = peers_kept
        self._by_host: weakref.WeakKeyDictionary[IHost, OrderedDict[ID, tuple[bytes, float]]] = (
            weakref.WeakKeyDictionary())

    def consume(self, msg: Any, host: IHost, peer_id: ID) -> bool:
        if not msg.HasField("senderRecord"):
            return True
        record = bytes(msg.senderRecord)
        now = self._clock()
        accepted = self._by_host.get(host)
        if accepted is None:
            accepted = self._by_host[host] = OrderedDict()
        seen = accepted.get(peer_id)
        if seen is not None and seen[0] == record and now - seen[1] < self._recheck_s:
            return True
        ok = self._consume(msg, host, peer_id)
        if ok:
            accepted[peer_id] = (record, now)
            accepted.move_to_end(peer_id)
            while len(accepted) > self._peers_kept:
                accepted.popitem(last=False)
        else:
            accepted.pop(peer_id, None)
        return ok


class OwnRecord:
    """`env_to_send_in_RPC` computed at most every `OWN_RECHECK_S` (the module docstring)."""

    def __init__(self, issue: Issue = env_to_send_in_RPC, *, clock: Callable[[], float] = time.monotonic,
                 recheck_s: float = OWN_RECHECK_S) -> None:
        self._issue = issue
        self._clock = clock
        self._recheck_s = recheck_s
        self._last: weakref.WeakKeyDictionary[IHost, tuple[bytes, float]] = weakref.WeakKeyDictionary()

    def current(self, host: IHost) -> tuple[bytes, bool]:
        now = self._clock()
        last = self._last.get(host)
        if last is not None and now - last[1] < self._recheck_s:
            return last[0], False
        record, fresh = self._issue(host)
        self._last[host] = (record, now)
        return record, fresh


_SITES = (_pubsub, _gossipsub)  # the modules that look the two functions up at each call
_CONSUME, _ISSUE = "maybe_consume_signed_record", "env_to_send_in_RPC"


def install() -> None:
    """Use a `RecordCheck` and an `OwnRecord` in py-libp2p's pubsub and GossipSub from now on."""
    if getattr(_pubsub, _CONSUME) is not maybe_consume_signed_record:
        return
    check, own = RecordCheck(), OwnRecord()
    for module in _SITES:
        setattr(module, _CONSUME, check.consume)
        setattr(module, _ISSUE, own.current)


def uninstall() -> None:
    """Put py-libp2p's own functions back."""
    for module in _SITES:
        setattr(module, _CONSUME, maybe_consume_signed_record)
        setattr(module, _ISSUE, env_to_send_in_RPC)
