"""The base58 name of a raw libp2p peer id, remembered.

Every GossipSub message names its publisher as raw bytes (`msg.from_id`), and py-libp2p makes a
new `ID` of them for each message, so its base58 string (which `ID` keeps per object) was
encoded again for every message: ~19 µs each, two or three times per message (the gate, the
validator, the probe reader). The name is a pure function of the bytes, so it is remembered
for the last `NAMES_KEPT` distinct ids (a few per member; bounded against a stranger's
made-up ids). The other way, `id_of` parses a base58 name into its `ID` (~21 µs), which the
gate did for every message (`MemberGate.admitted` looks up the peer's connections by `ID`).
"""

from __future__ import annotations

from functools import lru_cache

from libp2p.peer.id import ID

__all__ = ["NAMES_KEPT", "base58_of", "id_of", "name_of"]

NAMES_KEPT = 1024


@lru_cache(maxsize=NAMES_KEPT)
def base58_of(raw: bytes) -> str:
    """`ID(raw).to_base58()`: the same string, computed once per distinct `raw` while remembered."""
    return ID(raw).to_base58()


def name_of(peer_id: ID) -> str:
    """`peer_id.to_base58()`, through `base58_of` (an `ID` made for one message is not reused)."""
    return base58_of(peer_id.to_bytes())


@lru_cache(maxsize=NAMES_KEPT)
def id_of(name: str) -> ID | None:
    """`ID.from_base58(name)`, None if it does not parse; remembered per distinct `name` (the
    `ID` returned is shared: callers must not change it, as nothing in py-libp2p does)."""
    try:
        return ID.from_base58(name)
    except ValueError:
        return None
