"""Identity keys: file mode enforcement, peer ids equal to py-libp2p's, signatures."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crypto import BadSignature, Identity, InvalidPeerId, KeyFileError, UnsafeKeyFile, public_key_of, verify


@pytest.mark.parametrize("seed", [bytes(32), b"\x01" * 32, bytes(range(32))])
def test_peer_id_equals_libp2p(seed: bytes) -> None:
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.id import ID

    expected = ID.from_pubkey(create_new_key_pair(seed).public_key).to_base58()
    assert Identity(seed).peer_id == expected
    assert expected.startswith("12D3KooW")


def test_save_load_round_trip_mode_0600(tmp_path: Path) -> None:
    ident = Identity.generate()
    path = tmp_path / "identity.key"
    ident.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Identity.load(path).peer_id == ident.peer_id
    with pytest.raises(KeyFileError, match="already exists"):
        Identity.generate().save(path)
    assert Identity.load(path).peer_id == ident.peer_id


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_load_refuses_group_or_world_access(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "identity.key"
    Identity.generate().save(path)
    os.chmod(path, mode)
    with pytest.raises(UnsafeKeyFile, match=f"chmod 600 {path}"):
        Identity.load(path)


def test_load_refuses_wrong_size_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "identity.key"
    with pytest.raises(KeyFileError, match="clade init"):
        Identity.load(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"x" * 33)
    os.close(fd)
    with pytest.raises(KeyFileError, match="33 bytes"):
        Identity.load(path)


def test_sign_and_verify_from_peer_id_alone() -> None:
    ident = Identity.generate()
    sig = ident.sign(b"op bytes")
    verify(ident.peer_id, b"op bytes", sig)
    assert public_key_of(ident.peer_id) == ident.public_key
    with pytest.raises(BadSignature):
        verify(ident.peer_id, b"op bytez", sig)
    with pytest.raises(BadSignature):
        verify(Identity.generate().peer_id, b"op bytes", sig)
    with pytest.raises(BadSignature):
        verify(ident.peer_id, b"op bytes", sig[:10])


@pytest.mark.parametrize("bad", ["", "not-base58-0OIl", "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N", "12D3Koo"])
def test_public_key_of_rejects_non_ed25519_ids(bad: str) -> None:
    with pytest.raises(InvalidPeerId):
        public_key_of(bad)
