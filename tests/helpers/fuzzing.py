"""Shared by the decoder fuzz tests (tests/p2p/test_fuzz_p2p.py, tests/crypto/test_fuzz_crypto.py): mutation
strategies, an in-memory clade, and the rule that only a decoder's documented error may escape.

Every decoder a peer or a file can reach is fuzzed under hostile bytes. For each: arbitrary
bytes; mutated valid encodings (bit flips, overwritten, inserted, deleted and appended bytes);
truncation at every length; and, where the content is signed or sealed, structure-aware
garbage under a *valid* signature or clade key, so the checks behind the signature are
reached too: Hypothesis edits anywhere in the decoded structure (`tree_mutated`) and an
exhaustive edit of every field to every msgpack type (`every_edit`). A mutated encoding that
still decodes must decode to the original (signatures and AEAD leave no other way through).

Decoders (reachable from → the only error that may escape):

- `daemon.p2p.frames.read_frame` (every libp2p stream) → RemoteProtocolError; EOFError at a clean end
- `daemon.p2p.messages.decode` (hello and sync frames) → RemoteProtocolError
- `crypto.open_envelope` (GossipSub messages) → EnvelopeError
- `daemon.p2p.gossip.GossipCodec.open` (GossipSub messages, the whole check) → RemoteProtocolError
- `Certificate.from_bytes` + `verify` (a hello; inside envelopes and bundles) → MembershipError
- `RevocationList.from_bytes` + `verify` (a hello; `revocations.bin`) → MembershipError
- `Membership.from_bytes` (`membership.cert`) → MembershipError
- `AdmissionBundle.open` (`clade join BUNDLE`) → MembershipError
- `RotationBundle.open` (`clade join ROTATION_BUNDLE`) → MembershipError, and
  `KeyRing.from_bytes` (`clade.keys`) → KeyFileError: in tests/crypto/test_rotation_keys.py
- `crypto.vault.read_header`, `DecryptingReader` (`clade restore` / `backup verify`) → VaultError

The delta codec (`crdt.decode_delta`) has its own file, tests/crdt/test_crdt_codec_fuzz.py; here
it is reached through `GossipCodec.open` with member-sealed garbage.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgpack
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from crypto import (
    Certificate,
    Identity,
    Membership,
    OwnerKey,
    RevocationList,
)
from tests.helpers.crdt_sim import IDENTITIES

# derandomize: the same examples on every run (a shared CI machine must not find a new one
# by luck); the budget keeps each fuzz file well under a minute on two shared cores.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

NOW = 1_800_000_000
NOW_MS = NOW * 1000
OWNER = OwnerKey(b"\x21" * 32, "alpha", b"\x22" * 32)
GOLEM = Identity(b"\x07" * 32)
STRANGER = Identity(b"\x08" * 32)
CERT = Certificate.issue(OWNER, GOLEM.peer_id, generation=1, not_before=NOW - 60, not_after=NOW + 86_400)
MEMBERSHIP = Membership(certificate=CERT, owner_public_key=OWNER.public_key, clade_name=OWNER.clade_name)
REVOCATIONS = RevocationList.issue(OWNER, version=3, revoked=[STRANGER.peer_id], issued_at=NOW)


T = TypeVar("T")


# -- mutation ----------------------------------------------------------------------------------

@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """`valid` with 1..8 edits: a flipped bit, an overwritten, inserted or deleted byte, a tail."""
    message = bytearray(valid)
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["flip", "set", "insert", "delete", "extend"]))
        if action == "extend" or not message:
            message += draw(st.binary(min_size=1, max_size=16))
            continue
        pos = draw(st.integers(0, len(message) - 1))
        if action == "flip":
            message[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            message[pos] = draw(st.integers(0, 255))
        elif action == "insert":
            message[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            del message[pos]
    return bytes(message)


def mutations_of(*valid: bytes) -> st.SearchStrategy[bytes]:
    return st.sampled_from(valid).flatmap(mutated)


def truncations(valid: bytes) -> Iterator[bytes]:
    """Every strict prefix, and the valid encoding with one extra byte."""
    for cut in range(len(valid)):
        yield valid[:cut]
    yield valid + b"\x00"


# Leaves include the sizes and values the decoders single out (16-byte ids, 32-byte keys,
# 64-byte signatures, a real peer id, the edges of the integer ranges).
msgpack_leaves = (
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.floats() | st.binary(max_size=40)
    | st.text(max_size=40)
    | st.sampled_from([bytes(16), bytes(32), bytes(64), "", 0, 1, -1, 2**31, 2**63, 2**64 - 1, -(2**63),
                       IDENTITIES[0].peer_id, "clade.cert", "clade"])
)
msgpack_values = st.recursive(msgpack_leaves, lambda children: st.lists(children, max_size=6), max_leaves=20)


def _lists(value: object) -> Iterator[list[object]]:
    if isinstance(value, list):
        yield value
        for item in value:
            yield from _lists(item)


@st.composite
def tree_mutated(draw: st.DrawFn, valid: object) -> object:
    """Structure-aware: the decoded `valid` with 1..3 edits, each in a list node drawn
    uniformly (the top level, a context row, the recipients, …): an item replaced by any
    msgpack value, removed, or a new one inserted. So every field and every nested row meets
    every type and a wrong count."""
    value = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(list(_lists(value))))
        action = draw(st.sampled_from(["replace", "replace", "drop", "insert"]) if node else st.just("insert"))
        index = draw(st.integers(0, len(node) - (0 if action == "insert" else 1)))
        if action == "replace":
            node[index] = draw(msgpack_values)
        elif action == "drop":
            del node[index]
        else:
            node.insert(index, draw(msgpack_values))
    return value


# One representative of every msgpack type and of the sizes and values decoders single out.
SAMPLES: list[object] = [None, True, False, 0, 1, -1, 2**31, 2**63, 2**64 - 1, -(2**63), 1.5, "", "x" * 300,
                         IDENTITIES[0].peer_id, b"", bytes(16), bytes(32), bytes(64), [], [[]], [b"x"], ["x"], [1]]


def _list_paths(value: object, prefix: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    if isinstance(value, list):
        yield prefix
        for i, item in enumerate(value):
            yield from _list_paths(item, (*prefix, i))


def every_edit(valid: object) -> Iterator[object]:
    """Exhaustively, `valid` with one item of one list node (any depth) replaced by each of
    SAMPLES, or removed, or with one SAMPLE inserted anywhere: every field meets every type."""
    for path in _list_paths(valid):
        size = len(_at(valid, path))
        for index in range(size + 1):
            edits: list[tuple[str, object]] = [("insert", sample) for sample in SAMPLES]
            if index < size:
                edits += [("drop", None)] + [("replace", sample) for sample in SAMPLES]
            for action, sample in edits:
                value = copy.deepcopy(valid)
                node = _at(value, path)
                if action == "replace":
                    node[index] = sample
                elif action == "drop":
                    del node[index]
                else:
                    node.insert(index, sample)
                yield value


def _at(value: object, path: tuple[int, ...]) -> list[object]:
    for i in path:
        assert isinstance(value, list)
        value = value[i]
    assert isinstance(value, list)
    return value


def fields_of(data: bytes) -> list[object]:
    value = msgpack.unpackb(data, raw=False)
    assert isinstance(value, list)
    return value


def packable(value: object) -> bytes | None:
    try:
        return bytes(msgpack.packb(value, use_bin_type=True))
    except (OverflowError, ValueError):
        return None


def only(error: type[BaseException] | tuple[type[BaseException], ...], decode: Callable[[], T]) -> T | None:
    """Run `decode`; return its value, or None if it raised `error`. Anything else fails the test."""
    try:
        return decode()
    except error:
        return None


def refused(error: type[BaseException], check: Callable[[], None]) -> bool:
    """True if `check` raised `error`, False if it passed. Anything else fails the test."""
    try:
        check()
    except error:
        return True
    return False
