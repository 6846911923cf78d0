"""Pure CRDT core of clade: clocks, entry bodies, causal contexts, signed slot ops,
join, delta-interval extraction and the wire codec.

No I/O, no trio, no sqlite: a state machine driven with plain values (h11 style).
Signing and verifying are injected functions (see `crypto`).
"""

from .body import Category, EntryBody, EntryTraits, Kind, Origin, Pad, Sensitivity
from .codec import decode_delta, encode_delta
from .context import CausalContext, Dot
from .errors import CrdtError, InvalidValue, RemoteProtocolError
from .hlc import HybridClock, Timestamp
from .mutators import Mutator
from .ops import (
    AuthorValue,
    EndorseValue,
    EvidenceValue,
    Op,
    Signer,
    SlotKind,
    Status,
    Verifier,
    make_op,
    open_op,
    open_stored_op,
)
from .replica import (
    ApplyReport,
    Backend,
    Delta,
    DeltaJoin,
    Gate,
    MemoryBackend,
    Outcome,
    apply_delta,
    apply_op,
    bodies_first,
    digest,
    extract_deltas,
    join,
    may_cross,
)

__all__ = [
    "ApplyReport",
    "AuthorValue",
    "Backend",
    "Category",
    "CausalContext",
    "CrdtError",
    "Delta",
    "DeltaJoin",
    "Dot",
    "EndorseValue",
    "EntryBody",
    "EntryTraits",
    "EvidenceValue",
    "Gate",
    "HybridClock",
    "InvalidValue",
    "Kind",
    "MemoryBackend",
    "Mutator",
    "Op",
    "Origin",
    "Outcome",
    "Pad",
    "RemoteProtocolError",
    "Sensitivity",
    "Signer",
    "SlotKind",
    "Status",
    "Timestamp",
    "Verifier",
    "apply_delta",
    "apply_op",
    "bodies_first",
    "decode_delta",
    "digest",
    "encode_delta",
    "extract_deltas",
    "join",
    "make_op",
    "may_cross",
    "open_op",
    "open_stored_op",
]
