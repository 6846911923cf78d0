"""Causal contexts reconciled by their difference, not sent whole (sync v2; pure).

Sync v1 sends the asker's whole context in every `want` and the responder's whole context in
every `end`: a row per writer each way, ~57 bytes a row. In a clade where every golem writes,
a pull that finds nothing costs two rows per golem, and a healed partition of n golems
costs O(n²) bytes. Sync v2 names a writer by an 8-byte *tag* (BLAKE2b of its peer id, keyed
with a nonce the asker draws for each want: a member cannot grind a peer id whose tag
collides with another's) and sends:

- a small context (at most ROWS_AT_MOST writers) whole, as tagged rows (~16 bytes a row);
- a larger one as fingerprints of `bucket_count(writers)` buckets (≤ 2 bytes a writer); the
  responder names the buckets whose fingerprints differ from its own (`differing`), and only
  those buckets' rows cross (`Tagged.rows_in`). A bucket that is equal on both sides holds
  the same rows on both, so the responder knows the asker's rows there: its own.

`asker_view` rebuilds, on the responder, the asker's context as far as the responder can name
its writers (exact for every writer the responder has; the asker's writers it lacks are kept
as tags). The responder answers with the rows where its context differs from that view
(`diff_rows`), and `responder_context` rebuilds the responder's whole context on the asker. A
pull that finds the contexts equal costs the fingerprints one way and an empty list back; a
heal costs what differs.

>>> from crdt.context import CausalContext
>>> asker = CausalContext({"12D3KooWA": 5, "12D3KooWB": 2})
>>> responder = CausalContext({"12D3KooWA": 7, "12D3KooWB": 2, "12D3KooWC": 1})
>>> nonce = bytes(8)
>>> sent = Tagged.of(asker, nonce)
>>> view = asker_view(Tagged.of(responder, nonce), rows=sent.rows_in(None), asked=None)
>>> view.context == CausalContext({"12D3KooWA": 5, "12D3KooWB": 2})
True
>>> diff = diff_rows(responder, view)
>>> len(diff)   # A's row and C's: B is equal
2
>>> responder_context(sent, diff) == responder
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .body import check_peer_id
from .context import CausalContext
from .errors import InvalidValue, RemoteProtocolError

__all__ = [
    "MAX_BUCKETS", "NONCE_BYTES", "ROWS_AT_MOST", "TAG_BYTES", "AskerView", "Tagged", "TaggedRow", "WireRow",
    "asker_view", "bucket_count", "bucket_of", "check_buckets", "decode_rows", "decode_tagged_rows", "diff_rows",
    "differing", "encode_rows", "responder_context",
]

TAG_BYTES = 8
NONCE_BYTES = 8
ROWS_AT_MOST = 64  # a context of at most this many writers crosses whole (one round trip, ~1 KiB)
ROWS_PER_BUCKET = 8  # otherwise a bucket per ~8 writers: a differing writer brings ~8 rows along
MAX_BUCKETS = 4096
_MAX_VV = 1 << 63

TaggedRow = tuple[bytes, int, tuple[int, ...]]
"""(tag, vv, cloud): one writer's row as the asker sends it."""

WireRow = tuple[bytes | str, int, tuple[int, ...]]
"""(tag or peer id, vv, cloud): one row of the responder's answer; a peer id where the asker
cannot know the writer (it had no row of it)."""


def tag_of(writer: str, nonce: bytes) -> bytes:
    """The writer's name for one want: 8 bytes of BLAKE2b keyed with the want's nonce."""
    return hashlib.blake2b(writer.encode(), digest_size=TAG_BYTES, key=nonce).digest()


def bucket_count(writers: int) -> int:
    """The buckets a context of `writers` rows is fingerprinted in: the power of two at or
    above writers / ROWS_PER_BUCKET, at most MAX_BUCKETS."""
    want = max(1, -(-writers // ROWS_PER_BUCKET))
    return min(MAX_BUCKETS, 1 << (want - 1).bit_length())


def bucket_of(tag: bytes, buckets: int) -> int:
    return int.from_bytes(tag[:4], "big") & (buckets - 1)


def check_buckets(buckets: object) -> int:
    """A peer's bucket count: a power of two in 1..MAX_BUCKETS; raises `RemoteProtocolError`."""
    if type(buckets) is not int or not 1 <= buckets <= MAX_BUCKETS or buckets & (buckets - 1):
        raise RemoteProtocolError("malformed", f"bucket count must be a power of two ≤ {MAX_BUCKETS}")
    return buckets


@dataclass(slots=True)
class Tagged:
    """A context seen through one nonce: its rows by tag, and each tag's writer."""

    nonce: bytes
    rows: dict[bytes, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    writers: dict[bytes, str] = field(default_factory=dict)

    @classmethod
    def of(cls, context: CausalContext, nonce: bytes) -> Tagged:
        out = cls(nonce)
        for writer, vv, cloud in context.to_rows():
            tag = tag_of(writer, nonce)
            out.rows[tag] = (vv, tuple(cloud))
            out.writers[tag] = writer
        return out

    def fingerprints(self, buckets: int) -> list[bytes]:
        """One 8-byte fingerprint per bucket: BLAKE2b over the bucket's rows in tag order."""
        hashes = [hashlib.blake2b(digest_size=8, key=self.nonce) for _ in range(buckets)]
        for tag in sorted(self.rows):
            vv, cloud = self.rows[tag]
            hashes[bucket_of(tag, buckets)].update(
                tag + vv.to_bytes(8, "big") + len(cloud).to_bytes(4, "big")
                + b"".join(seq.to_bytes(8, "big") for seq in cloud))
        return [h.digest() for h in hashes]

    def rows_in(self, asked: Iterable[int] | None, buckets: int = 1) -> list[TaggedRow]:
        """The rows of the `asked` buckets (all of them when None), in tag order."""
        chosen = None if asked is None else set(asked)
        return [(tag, vv, cloud) for tag, (vv, cloud) in sorted(self.rows.items())
                if chosen is None or bucket_of(tag, buckets) in chosen]


def differing(own: Tagged, fingerprints: Sequence[bytes]) -> list[int]:
    """The buckets whose fingerprint differs from ours (same nonce, same bucket count)."""
    mine = own.fingerprints(len(fingerprints))
    return [i for i, (a, b) in enumerate(zip(mine, fingerprints, strict=True)) if a != b]


@dataclass(slots=True)
class AskerView:
    """The asker's context as the responder can name it: `context` (exact for every writer the
    responder has), `unknown` (the asker's rows of writers the responder has none of, by tag)
    and `known` (every writer whose tag the asker can resolve: it had a row of it)."""

    context: CausalContext
    unknown: dict[bytes, tuple[int, tuple[int, ...]]]
    known: set[str]
    own: Tagged


def asker_view(own: Tagged, *, rows: Sequence[TaggedRow], asked: Sequence[int] | None,
               buckets: int = 1) -> AskerView:
    """Rebuild the asker's context from its `rows`: all of them (`asked` None), or those of the
    `asked` buckets, the rest being equal to ours (`own`, tagged with the asker's nonce)."""
    sent = {tag: (vv, cloud) for tag, vv, cloud in rows}
    chosen = None if asked is None else set(asked)
    out: list[tuple[str, int, tuple[int, ...]]] = []
    known: set[str] = set()
    for tag, writer in own.writers.items():
        if chosen is not None and bucket_of(tag, buckets) not in chosen:
            vv, cloud = own.rows[tag]  # an equal bucket: the asker's row is ours
        elif tag in sent:
            vv, cloud = sent[tag]
        else:
            continue  # the asker has no row of this writer
        out.append((writer, vv, cloud))
        known.add(writer)
    unknown = {tag: row for tag, row in sent.items() if tag not in own.writers}
    return AskerView(CausalContext.from_rows(out), unknown, known, own)


def diff_rows(ours: CausalContext, view: AskerView) -> list[WireRow]:
    """Our rows that differ from the asker's (by tag where it knows the writer, by peer id
    where it does not), and an empty row for each of its writers we have none of."""
    theirs = {writer: (vv, tuple(cloud)) for writer, vv, cloud in view.context.to_rows()}
    out: list[WireRow] = []
    named: set[bytes] = set()  # the tags of what we name (a writer we lacked at the want may have come since)
    for writer, vv, cloud in ours.to_rows():
        row = (vv, tuple(cloud))
        if theirs.get(writer) == row:
            continue
        tag = tag_of(writer, view.own.nonce)
        named.add(tag)
        out.append((tag if writer in view.known else writer, vv, row[1]))
    out.extend((tag, 0, ()) for tag in view.unknown if tag not in named)  # (a context never loses a writer)
    return out


def responder_context(sent: Tagged, diff: Iterable[WireRow]) -> CausalContext:
    """The responder's context, on the asker: what we sent, each row of `diff` replacing ours
    (a tag we cannot resolve is skipped: it names nothing we had)."""
    rows: dict[str, tuple[int, tuple[int, ...]]] = {sent.writers[tag]: row for tag, row in sent.rows.items()}
    for name, vv, cloud in diff:
        writer = sent.writers.get(name) if isinstance(name, bytes) else name
        if writer is None:
            continue
        if vv or cloud:
            rows[writer] = (vv, cloud)
        else:
            rows.pop(writer, None)
    return CausalContext.from_rows((w, vv, cloud) for w, (vv, cloud) in rows.items())


# -- wire form (msgpack-ready lists) ------------------------------------------------------------


def encode_rows(rows: Iterable[WireRow] | Iterable[TaggedRow]) -> list[list[object]]:
    return [[name, vv, list(cloud)] for name, vv, cloud in rows]


def decode_rows(raw: object, *, names: bool, max_rows: int, max_cloud: int) -> list[WireRow]:
    """Parse rows from decoded msgpack: a tag (8 bytes) or, with `names`, a peer id; vv; an
    ascending cloud above vv. Raises `RemoteProtocolError` (malformed, oversized) for anything
    else, a repeated name, or more than `max_rows` rows / `max_cloud` cloud seqs in all."""
    if not isinstance(raw, list) or len(raw) > max_rows:
        raise RemoteProtocolError("malformed", f"rows must be a list of at most {max_rows}")
    out: list[WireRow] = []
    seen: set[bytes | str] = set()
    cloud_total = 0
    for row in raw:
        if not isinstance(row, list) or len(row) != 3:
            raise RemoteProtocolError("malformed", "a row is [tag or writer, vv, cloud]")
        name, vv, cloud = row
        if isinstance(name, str) and names:
            try:
                check_peer_id("row writer", name)
            except InvalidValue as exc:
                raise RemoteProtocolError("malformed", str(exc)) from None
        elif not (isinstance(name, bytes) and len(name) == TAG_BYTES):
            raise RemoteProtocolError("malformed", f"a row's tag must be {TAG_BYTES} bytes")
        if name in seen:
            raise RemoteProtocolError("malformed", "a writer's row appears twice")
        seen.add(name)
        if type(vv) is not int or not 0 <= vv < _MAX_VV or not isinstance(cloud, list):
            raise RemoteProtocolError("malformed", "a row's vv or cloud has the wrong type")
        cloud_total += len(cloud)
        if cloud_total > max_cloud:
            raise RemoteProtocolError("oversized", f"row clouds exceed {max_cloud} seqs")
        last = vv
        for seq in cloud:
            if type(seq) is not int or not last < seq < _MAX_VV:
                raise RemoteProtocolError("malformed", "a row's cloud must ascend above its vv")
            last = seq
        out.append((name, vv, tuple(cloud)))
    return out


def decode_tagged_rows(raw: object, *, max_rows: int, max_cloud: int) -> list[TaggedRow]:
    """`decode_rows` of rows named by tag only (the asker's)."""
    return [(name, vv, cloud) for name, vv, cloud in decode_rows(raw, names=False, max_rows=max_rows,
                                                                 max_cloud=max_cloud) if isinstance(name, bytes)]
