"""A py-libp2p host and GossipSub router configured as docs/design/libp2p.md explains.

- identity: the golem's Ed25519 seed (stable peer id across restarts);
- security: Noise only (the default list also accepts plaintext); muxer: Yamux only;
- one connection per peer (else every dial waits 250 ms), health pings so hung peers are noticed;
- GossipSub v1.1 only (v1.2 costs ~60x the CPU here), heartbeat 1 s, no adaptive gossip,
  spam protection off (it silently drops above 10 msg/s, our own publishes included):
  every message is checked by our validator instead;
- flood publishing of our own messages (`flood.FloodPublishGossipSub`: v1.1's, which
  py-libp2p lacks): a golem's own op goes to every admitted neighbour in the topic, not
  just its mesh of 6; forwarded ones keep the mesh;
- Pubsub behind the membership gate (`gate.GatedPubsub`): nothing exchanged with a peer
  before its hello proves it a member;
- no auto-connector: `min_connections=0` does not turn it off (docs/design/libp2p.md, pitfall 17; it would
  dial every peer in the peerstore, refused ones too), so `disable_auto_connector` does;
- an inbound connection gives back its slot when it closes (`release_inbound_slots`):
  py-libp2p 0.8.1 holds each one until the whole swarm stops, so after 300 inbound
  connections in a daemon's life (a stranger scan, or siblings restarting) it refused every
  new one, siblings included, and kept each closed connection's handler in memory.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import multiaddr
import multiaddr.exceptions
from libp2p import new_host
from libp2p.abc import IHost
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.network.config import ConnectionConfig
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux

from crypto import Identity

from .flood import FloodPublishGossipSub
from .gate import GatedPubsub, MemberGate
from .peer_records import install as install_record_checks

__all__ = ["GOSSIP_MAX_BYTES", "InboundClosed", "build_host", "build_pubsub", "disable_auto_connector",
           "parse_multiaddr", "release_inbound_slots"]

GOSSIP_MAX_BYTES = 1024 * 1024 + 64 * 1024  # one sealed 1 MiB batch plus RPC framing


def parse_multiaddr(text: str) -> multiaddr.Multiaddr:
    """Parse a multiaddr; raises `ValueError` naming it."""
    try:
        return multiaddr.Multiaddr(text)
    except (ValueError, LookupError, TypeError, multiaddr.exceptions.Error) as exc:  # its parse and lookup errors
        raise ValueError(f"{text!r} is not a multiaddr ({exc})") from None


def build_host(identity: Identity, *, mdns: bool) -> IHost:
    key_pair = create_new_key_pair(identity.seed)
    security: Any = {TProtocol(NOISE_PROTOCOL_ID): NoiseTransport(
        key_pair, noise_privkey=create_x25519_key_pair().private_key)}
    connections = ConnectionConfig(
        max_connections_per_peer=1,
        min_connections=0,  # no auto-connector: it dials every peer in the peerstore, refused ones too
        low_watermark=0,
        enable_health_monitoring=True,
        health_initial_delay=10.0,
        health_check_interval=10.0,
        ping_timeout=5.0,
        abort_connection_on_ping_failure=True,
    )
    host = new_host(key_pair=key_pair, sec_opt=security, muxer_opt={TProtocol(YAMUX_PROTOCOL_ID): Yamux},
                    connection_config=connections, enable_mDNS=mdns)
    disable_auto_connector(host)
    release_inbound_slots(host)
    return host


class InboundClosed(Exception):
    """An inbound connection closed: ends py-libp2p's handler for it, which gives back its slot."""


def release_inbound_slots(host: IHost) -> None:
    """Make py-libp2p's per-connection inbound handler end when its connection closes.

    After upgrading an inbound connection the swarm's handler waits for the swarm itself to
    finish, holding one of its `max_connections` inbound slots (and the handler's memory)
    for good. Here the upgrade step waits for *its* connection to close instead, then raises
    `InboundClosed`, which the handler treats as a finished connection (it closes the raw
    socket, already closed, and releases the slot)."""
    swarm: Any = host.get_network()
    upgrade = getattr(swarm, "upgrade_inbound_raw_conn", None)
    if upgrade is None:
        return

    async def upgrade_and_hold(raw_conn: Any, maddr: Any) -> Any:
        muxed = await upgrade(raw_conn, maddr)
        conn = next((c for c in swarm.get_connections(muxed.peer_id) if c.muxed_conn is muxed), None)
        if conn is not None:
            await conn.event_closed.wait()
        raise InboundClosed(f"inbound connection from {muxed.peer_id} closed")

    swarm.upgrade_inbound_raw_conn = upgrade_and_hold


async def _never_connect() -> None:
    return None


def disable_auto_connector(host: IHost) -> None:
    """Keep the swarm's auto-connector from dialing anyone: its target is (low + high
    watermark) / 2 whatever `min_connections` says, and lowering the high watermark would make
    the pruner close our siblings' connections instead. Every dial here is `Dialing`'s."""
    connector = getattr(host.get_network(), "auto_connector", None)
    if connector is not None:
        connector.maybe_connect = _never_connect


def build_pubsub(host: IHost, gate: MemberGate, *, wait_s: float,
                 counters: Counter[str] | None = None) -> tuple[FloodPublishGossipSub, GatedPubsub]:
    install_record_checks()  # a peer record checked once, not on every RPC (peer_records.py)
    router = FloodPublishGossipSub(
        protocols=[PROTOCOL_ID_V11],
        degree=6, degree_low=4, degree_high=12,
        heartbeat_interval=1,
        adaptive_gossip_enabled=False,
        spam_protection_enabled=False,
    )
    pubsub = GatedPubsub(host, router, strict_signing=True, seen_ttl=600, validation_timeout=10.0,
                         max_inbound_rpc_size=GOSSIP_MAX_BYTES, gate=gate, wait_s=wait_s, counters=counters)
    return router, pubsub
