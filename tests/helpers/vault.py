"""Vault backups for tests: a fixed clade key, a backup of a data dir, its contents, chunk offsets."""

from __future__ import annotations

from pathlib import Path

from crypto.vault import CHUNK_BYTES
from daemon.datadir import DataDir
from daemon.grimoire import read_playbook
from daemon.service.backup import create_backup

CLADE_KEY = bytes(range(32))


def chunk_offsets(sealed: bytes) -> list[int]:
    """Where each ciphertext chunk starts."""
    header_len = int.from_bytes(sealed[9:13], "big")
    start = 9 + 4 + header_len + 24
    return list(range(start, len(sealed), CHUNK_BYTES + _ABYTES))


def backup_of(data: DataDir, **kw: object) -> Path:
    ident = data.load_identity()
    return create_backup(data, clade_keys=[CLADE_KEY], x25519_recipients=[], recipient_names=["test"],
                         golem=ident.peer_id, **kw).path  # type: ignore[arg-type]

_ABYTES = 17


def contents(data: DataDir) -> tuple[object, ...]:
    with data.open_store() as store:
        entries = [e.to_json() for e in store.list_entries(limit=1000, include_archived=True)]
        digest = store.state_digest()
    episodes = [e.to_json() for e in data.open_episodes().scan(limit=None)]
    return entries, digest, episodes, read_playbook(data.playbook_path)
