"""Decoders under hostile bytes: only `RemoteProtocolError` may escape, memory stays bounded."""

from __future__ import annotations

import tracemalloc

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crdt import CausalContext, Delta, Kind, RemoteProtocolError, decode_delta, encode_delta, open_op
from crypto import signature_ok
from tests.helpers.crdt_sim import IDENTITIES, SimReplica, gossip

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid_message() -> bytes:
    a, b = SimReplica(IDENTITIES[0]), SimReplica(IDENTITIES[1])
    ops = a.create("Aave utilisation above 90% means withdrawals can stall", Kind.WARNING, tags=("aave",))
    ops += b.create("Uniswap v3 fee tier 5bp is best for stable pairs", Kind.INSIGHT)
    b.receive(gossip(ops))
    ops += b.endorse(ops[0].entry_id, True)
    return encode_delta(Delta(tuple(ops), CausalContext({a.peer_id: 2}, {b.peer_id: [5, 9]})))


VALID = _valid_message()


def _decode(data: bytes) -> None:
    try:
        delta, rejected = decode_delta(data, signature_ok)
    except RemoteProtocolError as exc:
        assert exc.reason in {"malformed", "oversized", "unknown_version"}
        return
    assert len(delta.ops) + sum(rejected.values()) <= 4096


def test_valid_message_decodes_whole() -> None:
    delta, rejected = decode_delta(VALID, signature_ok)
    assert len(delta.ops) == 5 and not rejected


@FUZZ
@given(st.binary(max_size=4096))
def test_arbitrary_bytes(data: bytes) -> None:
    _decode(data)


@FUZZ
@given(st.data())
def test_mutated_valid_message(data: st.DataObject) -> None:
    message = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(message) - 1))
        action = data.draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        if action == "flip":
            message[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "set":
            message[pos] = data.draw(st.integers(0, 255))
        elif action == "insert":
            message[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        elif len(message) > 1:
            del message[pos]
    _decode(bytes(message))


def test_every_truncation() -> None:
    for cut in range(len(VALID)):
        _decode(VALID[:cut])


@FUZZ
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.floats() | st.binary(max_size=70)
    | st.text(max_size=60),
    lambda children: st.lists(children, max_size=8),
    max_leaves=40,
))
def test_well_formed_msgpack_of_wrong_shape(value: object) -> None:
    try:
        data = msgpack.packb(value, use_bin_type=True)
    except (OverflowError, ValueError):
        return
    _decode(data)
    _decode(msgpack.packb([1, value, []], use_bin_type=True))
    _decode(msgpack.packb([1, [[IDENTITIES[0].peer_id, [value]]], []], use_bin_type=True))
    _decode(msgpack.packb([1, [], value], use_bin_type=True))


@FUZZ
@given(st.binary(max_size=9000), st.binary(max_size=80))
def test_open_op_on_garbage(signed: bytes, signature: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        open_op(IDENTITIES[0].peer_id, signed, signature, lambda w, m, s: True)  # even if "verified"


@pytest.mark.parametrize(
    "bomb",
    [
        b"\x93\x01\xdd\xff\xff\xff\xff",  # array32 claiming 4 billion op groups
        b"\x93\x01\x90\xdd\x7f\xff\xff\xff",  # context claiming 2 billion rows
        b"\x93\x01\x91\x92\xa1a\xdd\xff\xff\xff\xff",  # op list claiming 4 billion ops
        b"\xc6\x7f\xff\xff\xff",  # bin32 claiming 2 GiB
        b"\x93\x01\x90\x91\x93\xd9\x04abcd\x01" + b"\xdd\x00\x01\x00\x00" + b"\x01" * 1000,
    ],
)
def test_length_bombs_do_not_allocate(bomb: bytes) -> None:
    tracemalloc.start()
    try:
        _decode(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_max_size_message_stays_bounded() -> None:
    """A 1 MiB message of tiny integers (the worst case for object count) stays bounded."""
    row = [IDENTITIES[0].peer_id, 0, list(range(1, 65_536))]
    data = msgpack.packb([1, [], [row]], use_bin_type=True)
    assert len(data) <= 1024 * 1024
    tracemalloc.start()
    try:
        _decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024
