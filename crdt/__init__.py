"""Pure CRDT core of clade: clocks, entry bodies, causal contexts, slots, join and codec.

No I/O, no trio, no sqlite: a state machine driven with plain values (h11 style).
"""

from .body import Category, EntryBody, Kind, Origin, Pad, Sensitivity
from .errors import CrdtError, InvalidValue, RemoteProtocolError
from .hlc import HybridClock, Timestamp

__all__ = [
    "Category",
    "CrdtError",
    "EntryBody",
    "HybridClock",
    "InvalidValue",
    "Kind",
    "Origin",
    "Pad",
    "RemoteProtocolError",
    "Sensitivity",
    "Timestamp",
]
