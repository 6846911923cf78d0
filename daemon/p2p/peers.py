"""What this golem knows of each peer: addresses, membership, traffic, sync position.

Pure bookkeeping (no I/O): the node updates it, `clade peers` and `GET /v1/peers` read it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PeerBook", "PeerRecord", "redial_delay"]

REDIAL_BASE_S = 0.5
REDIAL_CAP_S = 30.0


def redial_delay(failures: int, rng: random.Random) -> float:
    """Capped exponential backoff with jitter: 0.5 s, 1 s, 2 s … 30 s, each × U(0.5, 1)."""
    return float(min(REDIAL_CAP_S, REDIAL_BASE_S * 2 ** min(failures, 16)) * rng.uniform(0.5, 1.0))


@dataclass
class PeerRecord:
    peer_id: str
    addrs: list[str] = field(default_factory=list)
    connected: bool = False
    member: bool = False
    last_seen_ms: int | None = None
    behind: int | None = None  # ops the peer has that we lack and it would send us (`crdt.withheld.gap`)
    ahead: int | None = None  # ops we have that the peer lacks and we would send it
    withheld: int | None = None  # dots one of us has seen and the other not, whose ops never cross
    rtt_ms: float | None = None
    msgs_in: int = 0
    msgs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    refused: str | None = None  # why the last membership check failed
    hold_until: float = 0.0  # trio.current_time(): do not dial (and drop inbound) before this
    blacklisted: bool = False  # GossipSub refuses it (held or revoked)
    learned: bool = False  # named by a sibling or mDNS, never admitted yet (bounded, evictable)
    failures: int = 0  # consecutive failed dials
    next_dial: float = 0.0  # trio.current_time(): do not redial before this
    dial: bool = False  # a sibling we keep a connection to (bootstrap, seen member)
    last_sync_ms: int | None = None
    sync_protocol: str | None = None  # the anti-entropy protocol of our last sync with it (either way)

    def note_rtt(self, sample_ms: float) -> None:
        self.rtt_ms = sample_ms if self.rtt_ms is None else round(0.7 * self.rtt_ms + 0.3 * sample_ms, 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id, "addrs": list(self.addrs), "connected": self.connected,
            "member": self.member, "last_seen": self.last_seen_ms, "behind": self.behind, "ahead": self.ahead,
            "withheld": self.withheld,
            "rtt_ms": None if self.rtt_ms is None else round(self.rtt_ms, 3),
            "msgs_in": self.msgs_in, "msgs_out": self.msgs_out, "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out, "refused": self.refused, "last_sync": self.last_sync_ms,
            "sync_protocol": self.sync_protocol,
        }


class PeerBook:
    """Every peer this golem has heard of, bounded. Members, siblings to dial (bootstraps,
    known and learned ones) are kept up to `MAX_PEERS`; *strangers* (peers that connected
    but never proved membership, refused and held ones included) are kept apart, at most
    `MAX_STRANGERS`, the least recently active dropped first, so a scanner cannot grow the
    book (or `GET /v1/peers`). `on_evict` hears of each stranger dropped."""

    MAX_PEERS = 1024
    MAX_STRANGERS = 256

    def __init__(self, on_evict: Callable[[PeerRecord], None] | None = None) -> None:
        self._peers: dict[str, PeerRecord] = {}  # least recently touched first
        self.on_evict = on_evict

    def get(self, peer_id: str) -> PeerRecord:
        record = self._peers.get(peer_id)
        if record is None:
            if len(self._peers) >= self.MAX_PEERS:  # strangers and never-admitted learned addresses go
                self._evict(len(self._peers) // 10, lambda r: not r.member and (not r.dial or r.learned))
            if self.strangers() >= self.MAX_STRANGERS:
                self._evict(1, self.is_stranger)
            record = self._peers[peer_id] = PeerRecord(peer_id)
        else:  # recently used: last in line for eviction
            self._peers[peer_id] = self._peers.pop(peer_id)
        return record

    def find(self, peer_id: str) -> PeerRecord | None:
        return self._peers.get(peer_id)

    @staticmethod
    def is_stranger(record: PeerRecord) -> bool:
        """Never proved membership and not a sibling we dial (nor a learned candidate)."""
        return not record.member and not record.dial and not record.learned

    def strangers(self) -> int:
        return sum(1 for r in self._peers.values() if self.is_stranger(r))

    def _evict(self, count: int, evictable: Callable[[PeerRecord], bool]) -> None:
        """Drop up to `count` evictable records not connected, least recently touched first."""
        victims = [r for r in self._peers.values() if not r.connected and evictable(r)][: max(1, count)]
        for record in victims:
            del self._peers[record.peer_id]
            if self.on_evict is not None:
                self.on_evict(record)

    def add_addr(self, peer_id: str, addr: str) -> PeerRecord:
        record = self.get(peer_id)
        if addr not in record.addrs:
            record.addrs = [addr, *record.addrs][:8]
        return record

    def note_traffic(self, peer_id: str, *, now_ms: int, sent: int = 0, received: int = 0, msgs_out: int = 0,
                     msgs_in: int = 0) -> None:
        """Count bytes and messages exchanged with a peer (one message each way unless told);
        anything received also marks it seen at `now_ms`."""
        record = self.get(peer_id)
        record.bytes_out += sent
        record.bytes_in += received
        record.msgs_out += msgs_out or (1 if sent else 0)
        record.msgs_in += msgs_in or (1 if received else 0)
        if received:
            record.last_seen_ms = now_ms

    def candidates(self) -> int:
        """Learned addresses not admitted yet (peer exchange and mDNS are capped by this)."""
        return sum(1 for r in self._peers.values() if r.learned and not r.member)

    def all(self) -> list[PeerRecord]:
        return sorted(self._peers.values(), key=lambda r: (not r.connected, r.peer_id))

    def members(self) -> list[PeerRecord]:
        return [r for r in self._peers.values() if r.member and r.connected]
