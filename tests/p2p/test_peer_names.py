"""peer_names: a raw peer id's base58 name and a name's ID, remembered, equal to what py-libp2p
computes every time."""

from __future__ import annotations

from libp2p.peer.id import ID

from crypto import Identity
from daemon.p2p.links import parse_peer_id
from daemon.p2p.peer_names import NAMES_KEPT, base58_of, id_of, name_of


def test_names_are_libp2ps_own_and_remembered() -> None:
    name = Identity(b"\x41" * 32).peer_id
    raw = ID.from_base58(name).to_bytes()
    base58_of.cache_clear()
    assert base58_of(raw) == ID(raw).to_base58() == name
    assert base58_of(bytes(raw)) == name and base58_of.cache_info().hits == 1
    assert name_of(ID(raw)) == name
    parsed = id_of(name)
    assert parsed == ID.from_base58(name) and parsed is id_of(name) and parse_peer_id(name) == parsed


def test_a_name_that_does_not_parse_is_none() -> None:
    assert id_of("not base58: 0OIl") is None
    assert parse_peer_id("not base58: 0OIl") is None


def test_the_caches_are_bounded() -> None:
    base58_of.cache_clear()
    for i in range(NAMES_KEPT + 10):
        base58_of(b"\x00\x24" + i.to_bytes(34, "big"))
    assert base58_of.cache_info().currsize == NAMES_KEPT
    assert id_of.cache_info().maxsize == NAMES_KEPT
