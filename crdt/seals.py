"""Seals: one writer signature over a block of its ops, so catch-up checks one per block.

Checking an op's Ed25519 signature is most of what a caught-up op costs (~72 µs of ~130 µs:
bench_catchup_ceiling), so two cores bound catch-up near 10,000 ops/s. A *seal* is the writer's
signature over the leaves of one block of its seqs:

    block b      = seqs b·BLOCK_OPS + 1 … (b + 1)·BLOCK_OPS   (256 seqs)
    leaf(op)     = BLAKE2b-128(DOMAIN ‖ signed ‖ signature)   (the op as it crosses, exactly)
    leaves       = leaf of each seq of the block in order; 16 zero bytes for a seq the writer
                   no longer holds (its slot was written again) or never issued
    seal         = Ed25519 by the writer over SEAL_DOMAIN ‖ msgpack([1, b, leaves])

A writer seals each of its blocks once it is complete (the store does it in the write that
completes it). A seal travels with the writer's ops in sync v3's deltas (`crdt.codec`) and is
kept by whoever receives it, so a relay serves it too. A receiver checks a seal's signature
once and then takes every op of that writer whose leaf is among the seal's leaves as signed by
the writer without checking the op's own signature: the leaf is a 128-bit hash of the op's
exact bytes (its signature included), which no relay can match with other bytes. An op no seal
covers has its signature checked as before. A zero leaf matches nothing.

The op's own signature still crosses and is stored: daemons before sync v3, and gossip, check
it. A writer that sealed an op whose own signature is bad gains nothing: its op is refused by
those daemons (`bad_signature`), as it would be without seals. Pure: signing and verifying are
injected, as in `crdt.ops`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgpack

from .errors import RemoteProtocolError
from .ops import DOMAIN, SIGNATURE_BYTES, Signer, Verifier

__all__ = ["BLOCK_OPS", "EMPTY_LEAF", "LEAF_BYTES", "SEAL_DOMAIN", "SEAL_WIRE_BYTES", "Seal", "SealTally", "SealedOps",
           "block_of", "block_seqs", "decode_seals", "leaf", "make_seal", "sealed_verifier"]

BLOCK_OPS = 256
LEAF_BYTES = 16
EMPTY_LEAF = bytes(LEAF_BYTES)
SEAL_DOMAIN = b"clade.seal.v1\x00"
SEAL_VERSION = 1
SEAL_WIRE_BYTES = BLOCK_OPS * LEAF_BYTES + 64 + 16  # a seal in a delta: leaves, signature, block and framing
MAX_BLOCK = (1 << 55) - 1  # a seq is below 2**63


def leaf(signed: bytes, signature: bytes) -> bytes:
    """An op's leaf: BLAKE2b-128 of its signed bytes and signature as they cross."""
    return hashlib.blake2b(DOMAIN + signed + signature, digest_size=LEAF_BYTES).digest()


def _leaf_of_message(message: bytes, signature: bytes) -> bytes:
    """`leaf` from the message a `Verifier` is given (DOMAIN ‖ signed): no copy of `signed`."""
    return hashlib.blake2b(message + signature, digest_size=LEAF_BYTES).digest()


def block_of(seq: int) -> int:
    """The block holding `seq` (seqs start at 1)."""
    return (seq - 1) // BLOCK_OPS


def block_seqs(block: int) -> range:
    """The seqs of `block`, in order."""
    return range(block * BLOCK_OPS + 1, (block + 1) * BLOCK_OPS + 1)


@dataclass(frozen=True, slots=True)
class Seal:
    """A writer's signature over one block's leaves (`leaves`: BLOCK_OPS × LEAF_BYTES bytes)."""

    writer: str
    block: int
    leaves: bytes
    signature: bytes

    def message(self) -> bytes:
        return SEAL_DOMAIN + msgpack.packb([SEAL_VERSION, self.block, self.leaves], use_bin_type=True)

    def check(self, verify: Verifier) -> bool:
        """True iff the writer signed these leaves for this block."""
        return verify(self.writer, self.message(), self.signature)

    def to_wire(self) -> list[object]:
        return [self.block, self.leaves, self.signature]


def make_seal(writer: str, block: int, leaves_by_seq: Mapping[int, bytes], sign: Signer) -> Seal:
    """Seal `block` of `writer` over the leaves it holds (`leaves_by_seq`: seq → leaf; a seq of
    the block missing from it gets EMPTY_LEAF)."""
    if not 0 <= block <= MAX_BLOCK:
        raise ValueError(f"block {block} out of range")
    leaves = b"".join(leaves_by_seq.get(seq, EMPTY_LEAF) for seq in block_seqs(block))
    unsigned = Seal(writer, block, leaves, b"")
    return Seal(writer, block, leaves, sign(unsigned.message()))


def decode_seals(writer: str, raw: object, *, limit: int) -> list[Seal]:
    """A delta group's seals as they came, `[[block, leaves, signature], …]`, shapes checked,
    signatures not yet (`Seal.check`). Raises `RemoteProtocolError("malformed")`."""
    if not isinstance(raw, list) or len(raw) > limit:
        raise RemoteProtocolError("malformed", f"seals must be a list of at most {limit}")
    seals: list[Seal] = []
    blocks: set[int] = set()
    for item in raw:
        if not isinstance(item, list) or len(item) != 3:
            raise RemoteProtocolError("malformed", "a seal is [block, leaves, signature]")
        block, leaves, signature = item
        if type(block) is not int or not 0 <= block <= MAX_BLOCK or block in blocks:
            raise RemoteProtocolError("malformed", f"seal block {block!r} is not a new block number")
        if not isinstance(leaves, bytes) or len(leaves) != BLOCK_OPS * LEAF_BYTES:
            raise RemoteProtocolError("malformed", f"a seal's leaves are {BLOCK_OPS * LEAF_BYTES} bytes")
        if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
            raise RemoteProtocolError("malformed", f"a seal's signature is {SIGNATURE_BYTES} bytes")
        blocks.add(block)
        seals.append(Seal(writer, block, leaves, signature))
    return seals


class SealedOps:
    """The leaves of checked seals, by writer: which ops they vouch for. One serves a whole
    catch-up round: a seal that came with an earlier delta of the round vouches for the ops of
    the later ones too (the responder sends each seal once a round)."""

    def __init__(self, seals: Iterable[Seal] = ()) -> None:
        self._leaves: dict[bytes, str] = {}
        for seal in seals:
            self.add(seal)

    def add(self, seal: Seal) -> None:
        """Add a seal whose signature was checked (`Seal.check`)."""
        view = memoryview(seal.leaves)
        for at in range(0, len(view), LEAF_BYTES):
            piece = bytes(view[at:at + LEAF_BYTES])
            if piece != EMPTY_LEAF:
                self._leaves[piece] = seal.writer

    def __len__(self) -> int:
        return len(self._leaves)

    def covers(self, writer: str, message: bytes, signature: bytes) -> bool:
        """True iff a checked seal of `writer` holds this op's leaf (`message`: DOMAIN ‖ signed)."""
        return self._leaves.get(_leaf_of_message(message, signature)) == writer


class SealTally:
    """How many ops seals vouched for (verifier threads share one)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        return self._count


def sealed_verifier(sealed: SealedOps, verify: Verifier, tally: SealTally | None = None) -> Verifier:
    """A `Verifier` that takes an op a seal covers as signed (counted in `tally`), and checks any
    other with `verify`."""

    def check(writer: str, message: bytes, signature: bytes) -> bool:
        if type(signature) is bytes and len(sealed) and sealed.covers(writer, message, signature):
            if tally is not None:
                tally.add()
            return True
        return verify(writer, message, signature)

    return check
