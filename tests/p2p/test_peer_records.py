"""Signed peer records on pubsub RPCs (daemon/p2p/peer_records.py): a record accepted from a
peer is not parsed, verified and stored again for every RPC that repeats it; anything else is
checked in full by py-libp2p's own function, and refusals are never remembered.

Real hosts (not listening), real Ed25519 keys and real signed envelopes; the clock is a list
the test moves."""

from __future__ import annotations

from typing import Any

import libp2p.pubsub.gossipsub as gossipsub_module
import libp2p.pubsub.pubsub as pubsub_module
from libp2p import new_host
from libp2p.abc import IHost
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.peer.id import ID
from libp2p.peer.peerstore import create_signed_peer_record, env_to_send_in_RPC
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.utils import maybe_consume_signed_record
from multiaddr import Multiaddr

from daemon.p2p import peer_records
from daemon.p2p.peer_records import OwnRecord, RecordCheck


class _Counted:
    """py-libp2p's `maybe_consume_signed_record`, counting the calls that reach it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, msg: Any, host: IHost, peer_id: ID) -> bool:
        self.calls += 1
        return maybe_consume_signed_record(msg, host, peer_id)


def _sender(port: int = 4001) -> tuple[ID, Any, bytes]:
    keys = create_new_key_pair()
    peer = ID.from_pubkey(keys.public_key)
    env = create_signed_peer_record(peer, [Multiaddr(f"/ip4/127.0.0.1/tcp/{port}")], keys.private_key)
    return peer, keys, env.marshal_envelope()


def _rpc(record: bytes) -> rpc_pb2.RPC:
    rpc = rpc_pb2.RPC()
    rpc.senderRecord = record
    return rpc


def test_a_repeated_record_is_checked_once_and_stored_then_again_after_the_recheck_period() -> None:
    host = new_host(key_pair=create_new_key_pair())
    peer, _, record = _sender()
    now = [100.0]
    counted = _Counted()
    check = RecordCheck(counted, clock=lambda: now[0], recheck_s=60.0)

    assert check.consume(_rpc(record), host, peer)
    assert counted.calls == 1
    assert host.get_peerstore().get_peer_record(peer) is not None  # stored by py-libp2p's function
    assert [str(a) for a in host.get_peerstore().addrs(peer)] == ["/ip4/127.0.0.1/tcp/4001"]
    for _ in range(5):
        assert check.consume(_rpc(record), host, peer)
    assert counted.calls == 1  # the same bytes from the same peer: not parsed, verified or stored again
    now[0] += 60.0
    assert check.consume(_rpc(record), host, peer)
    assert counted.calls == 2  # stored afresh once the recheck period has passed
    assert check.consume(rpc_pb2.RPC(), host, peer)  # no record: accepted, nothing to check
    assert counted.calls == 2


def test_other_bytes_a_forged_record_and_another_host_are_checked_in_full() -> None:
    host, other_host = new_host(key_pair=create_new_key_pair()), new_host(key_pair=create_new_key_pair())
    peer, keys, record = _sender()
    counted = _Counted()
    check = RecordCheck(counted, clock=lambda: 0.0)
    assert check.consume(_rpc(record), host, peer)

    # the peer's newer record (another address): checked and stored
    newer = create_signed_peer_record(peer, [Multiaddr("/ip4/127.0.0.1/tcp/4002")], keys.private_key)
    assert check.consume(_rpc(newer.marshal_envelope()), host, peer)
    assert counted.calls == 2
    assert [str(a) for a in host.get_peerstore().addrs(peer)] == ["/ip4/127.0.0.1/tcp/4002"]

    # a record whose signature does not hold: refused every time, never remembered
    forged = bytearray(newer.marshal_envelope())
    forged[-1] ^= 0x01
    for _ in range(2):
        assert not check.consume(_rpc(bytes(forged)), host, peer)
    assert counted.calls == 4

    # another peer's record sent by this peer: refused (py-libp2p's peer id check)
    stranger, _, strangers_record = _sender(4003)
    assert stranger != peer
    assert not check.consume(_rpc(strangers_record), host, peer)
    assert counted.calls == 5

    # after a refusal, the record accepted before is checked in full again
    assert check.consume(_rpc(newer.marshal_envelope()), host, peer)
    assert counted.calls == 6

    # the same record reaching another host in the process: that host stores it too
    assert check.consume(_rpc(record), other_host, peer)
    assert counted.calls == 7
    assert other_host.get_peerstore().get_peer_record(peer) is not None


def test_remembered_peers_are_bounded() -> None:
    host = new_host(key_pair=create_new_key_pair())
    counted = _Counted()
    check = RecordCheck(counted, clock=lambda: 0.0, peers_kept=2)
    senders = [_sender(4100 + i) for i in range(3)]
    for peer, _, record in senders:
        assert check.consume(_rpc(record), host, peer)
    first, _, first_record = senders[0]
    assert check.consume(_rpc(first_record), host, first)
    assert counted.calls == 4  # the oldest peer was forgotten: checked again
    last, _, last_record = senders[2]
    assert check.consume(_rpc(last_record), host, last)
    assert counted.calls == 4


def test_own_record_is_built_at_most_once_per_period_and_is_py_libp2ps() -> None:
    host = new_host(key_pair=create_new_key_pair(), listen_addrs=[Multiaddr("/ip4/127.0.0.1/tcp/0")])
    built: list[bytes] = []

    def issue(h: IHost) -> tuple[bytes, bool]:
        record, fresh = env_to_send_in_RPC(h)
        built.append(record)
        return record, fresh

    now = [0.0]
    own = OwnRecord(issue, clock=lambda: now[0], recheck_s=1.0)
    first, _ = own.current(host)
    assert own.current(host) == (first, False)
    assert len(built) == 1
    now[0] += 1.0
    assert own.current(host)[0] == first  # addresses unchanged: py-libp2p's cached record again
    assert len(built) == 2
    assert first == env_to_send_in_RPC(host)[0]


def test_install_puts_the_checks_where_pubsub_and_gossipsub_look_them_up_and_uninstall_restores() -> None:
    peer_records.uninstall()
    try:
        peer_records.install()
        consume = pubsub_module.maybe_consume_signed_record  # type: ignore[attr-defined]
        assert consume is not maybe_consume_signed_record
        assert gossipsub_module.maybe_consume_signed_record == consume  # type: ignore[attr-defined]  # one bound method
        assert pubsub_module.env_to_send_in_RPC == gossipsub_module.env_to_send_in_RPC  # type: ignore[attr-defined]
        assert pubsub_module.env_to_send_in_RPC is not env_to_send_in_RPC  # type: ignore[attr-defined]
        peer_records.install()  # idempotent: the same checks stay
        assert pubsub_module.maybe_consume_signed_record == consume  # type: ignore[attr-defined]
    finally:
        peer_records.uninstall()
    assert pubsub_module.maybe_consume_signed_record is maybe_consume_signed_record  # type: ignore[attr-defined]
    assert gossipsub_module.env_to_send_in_RPC is env_to_send_in_RPC  # type: ignore[attr-defined]
    peer_records.install()  # as the daemon leaves it (build_pubsub installs them)
