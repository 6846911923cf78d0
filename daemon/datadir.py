"""The data directory: where each file lives, and `clade init`.

```
$DATA/  config.toml  identity.key  grimoire.db  episodes/  PLAYBOOK.md  embedder/  backups/
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crypto import CryptoError, Identity, Membership, RevocationList
from crypto.keyfile import read_secret, write_public, write_secret
from crypto.membership import CLADE_KEY_BYTES
from daemon.config import DEFAULT_CONFIG_TOML, Config, load_config
from daemon.errors import UsageError
from daemon.grimoire import DEFAULT_PLAYBOOK, EpisodeLog, Grimoire, atomic_write, wall_clock_ms

__all__ = ["DATA_DIR_ENV", "DEFAULT_DATA_DIR", "DataDir", "InitReport"]

DEFAULT_DATA_DIR = Path(".clade")
DATA_DIR_ENV = "CLADE_DATA_DIR"


@dataclass(frozen=True, slots=True)
class InitReport:
    peer_id: str
    created: list[str]
    replaced_identity: Path | None


@dataclass(frozen=True, slots=True)
class DataDir:
    """Paths inside one data directory (nothing is touched until a method is called)."""

    root: Path

    @classmethod
    def resolve(cls, given: str | None, env: Mapping[str, str] | None = None) -> DataDir:
        """`--data-dir` if given, else `$CLADE_DATA_DIR`, else `./.clade`."""
        env = os.environ if env is None else env
        raw = given or env.get(DATA_DIR_ENV) or str(DEFAULT_DATA_DIR)
        return cls(Path(raw).expanduser())

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    @property
    def identity_path(self) -> Path:
        return self.root / "identity.key"

    @property
    def db_path(self) -> Path:
        return self.root / "grimoire.db"

    @property
    def episodes_path(self) -> Path:
        return self.root / "episodes"

    @property
    def playbook_path(self) -> Path:
        return self.root / "PLAYBOOK.md"

    @property
    def membership_path(self) -> Path:
        return self.root / "membership.cert"

    @property
    def clade_key_path(self) -> Path:
        return self.root / "clade.key"

    @property
    def revocations_path(self) -> Path:
        return self.root / "revocations.bin"

    @property
    def backups_path(self) -> Path:
        return self.root / "backups"

    @property
    def run_path(self) -> Path:
        return self.root / "run.json"

    def load_membership(self) -> tuple[Membership, bytes] | None:
        """(membership, clade key) if this golem has joined a clade, else None."""
        if not self.membership_path.exists():
            return None
        membership = Membership.from_bytes(self.membership_path.read_bytes())
        return membership, read_secret(self.clade_key_path, CLADE_KEY_BYTES, "clade key")

    def install_membership(self, membership: Membership, clade_key: bytes) -> None:
        """Write `membership.cert` and `clade.key` (0600): what `clade join` installs."""
        write_secret(self.clade_key_path, clade_key, overwrite=True)
        write_public(self.membership_path, membership.to_bytes(), overwrite=True)

    def load_revocations(self, membership: Membership) -> RevocationList | None:
        """The installed revocation list, checked against the owner; None if there is none.

        Raises `CryptoError` for a file that is corrupt or not the owner's."""
        if not self.revocations_path.exists():
            return None
        revocations = RevocationList.from_bytes(self.revocations_path.read_bytes())
        revocations.verify(membership.owner_public_key, membership.clade_id)
        return revocations

    def check_revocations(self, raw: bytes) -> RevocationList:
        """Parse a revocation list and check it is this clade owner's; raises `UsageError`."""
        joined = self.load_membership()
        if joined is None:
            raise UsageError("this golem has not joined a clade (clade join BUNDLE)")
        membership = joined[0]
        try:
            revocations = RevocationList.from_bytes(raw)
            revocations.verify(membership.owner_public_key, membership.clade_id)
        except CryptoError as exc:
            raise UsageError(f"revocation list refused: {exc}") from None
        return revocations

    def install_revocations(self, revocations: RevocationList) -> bool:
        """Persist a (verified) list if it is newer than the installed one; True if it was."""
        try:
            current = RevocationList.from_bytes(self.revocations_path.read_bytes())
        except FileNotFoundError:
            current = None
        except CryptoError:
            current = None  # an unreadable file is replaced by a valid newer list
        if not revocations.replaces(current):
            return False
        atomic_write(self.revocations_path, revocations.to_bytes())
        return True

    def load_config(self) -> Config:
        return load_config(self.config_path)

    def load_identity(self) -> Identity:
        """The golem's identity; refuses a key file that group or others can read."""
        return Identity.load(self.identity_path)

    def open_store(self, config: Config | None = None, *, identity: Identity | None = None) -> Grimoire:
        """Open grimoire.db; with the identity, also sign ops for entries older than schema v3."""
        config = config or self.load_config()
        store = Grimoire.open(self.db_path, busy_timeout_ms=config.store.busy_timeout_ms)
        if identity is not None:
            try:
                store.backfill_ops(identity)
            except BaseException:
                store.close()
                raise
        return store

    def open_episodes(self) -> EpisodeLog:
        return EpisodeLog(self.episodes_path)

    def init(self, *, force: bool = False) -> InitReport:
        """Create whatever is missing; an existing identity is replaced only with `force`
        (the old key is kept beside it as `identity.key.replaced-<unix time>`)."""
        created: list[str] = []
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"{self.root} exists and is not a directory")
        if not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True)
            created.append(str(self.root))
        replaced: Path | None = None
        if self.identity_path.exists():
            if not force:
                old = self.load_identity()
                raise UsageError(
                    f"{self.identity_path} already holds identity {old.peer_id}; "
                    "pass --force to replace it with a new one"
                )
            replaced = self.identity_path.with_name(f"identity.key.replaced-{wall_clock_ms() // 1000}")
            os.link(self.identity_path, replaced)
        identity = Identity.generate()
        identity.save(self.identity_path, overwrite=force)
        created.append(str(self.identity_path))
        if not self.config_path.exists():
            atomic_write(self.config_path, DEFAULT_CONFIG_TOML.encode(), mode=0o600)
            created.append(str(self.config_path))
        if not self.db_path.exists():
            Grimoire.open(self.db_path, create=True).close()
            created.append(str(self.db_path))
        if not self.episodes_path.exists():
            EpisodeLog(self.episodes_path, create=True)
            created.append(str(self.episodes_path))
        if not self.playbook_path.exists():
            atomic_write(self.playbook_path, DEFAULT_PLAYBOOK.encode())
            created.append(str(self.playbook_path))
        return InitReport(peer_id=identity.peer_id, created=created, replaced_identity=replaced)
