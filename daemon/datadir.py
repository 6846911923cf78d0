"""The data directory: where each file lives, and `clade init`.

```
$DATA/  config.toml  identity.key  grimoire.db  episodes/  PLAYBOOK.md  embedder/  backups/
        membership.cert  clade.key  clade.keys  revocations.bin  (once joined)
```

`clade.key` is the current clade key (32 bytes, 0600); `clade.keys` (0600) is the keyring
of every epoch this golem holds (`crypto.keyring`), written first. A golem that joined
before key rotation existed has only `clade.key`: that is epoch 0.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from crypto import CryptoError, EpochKey, Identity, KeyRing, Membership, RevocationList
from crypto.keyfile import read_secret, read_secret_file, write_public, write_secret
from crypto.keyring import MAX_KEYRING_BYTES
from crypto.membership import CLADE_KEY_BYTES
from daemon.config import DEFAULT_CONFIG_TOML, Config, load_config
from daemon.errors import UsageError
from daemon.grimoire import DEFAULT_PLAYBOOK, EpisodeLog, Grimoire, atomic_write, wall_clock_ms
from daemon.styx.outbox import writer_for

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
    def keyring_path(self) -> Path:
        return self.root / "clade.keys"

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
        """(membership, current clade key) if this golem has joined a clade, else None."""
        joined = self.load_keys()
        return None if joined is None else (joined[0], joined[1].current.key)

    def load_keys(self) -> tuple[Membership, KeyRing] | None:
        """(membership, every clade key held, by epoch) if this golem has joined a clade.

        Raises `CryptoError` (`KeyFileError`, `UnsafeKeyFile`) for a key file that is unsafe
        or corrupt, or a keyring of another clade."""
        if not self.membership_path.exists():
            return None
        membership = Membership.from_bytes(self.membership_path.read_bytes())
        if not self.keyring_path.exists():  # joined before rotation existed: clade.key is epoch 0
            key = read_secret(self.clade_key_path, CLADE_KEY_BYTES, "clade key")
            return membership, KeyRing(membership.clade_id, [EpochKey(epoch=0, installed_ms=0, key=key)])
        ring = KeyRing.from_bytes(read_secret_file(self.keyring_path, MAX_KEYRING_BYTES, "clade keyring"))
        if ring.clade_id != membership.clade_id:
            raise CryptoError(f"{self.keyring_path} holds keys of clade {ring.clade_id}, "
                              f"but membership.cert names {membership.clade_id}")
        return membership, ring

    def save_keyring(self, ring: KeyRing) -> None:
        """Write `clade.keys`, then `clade.key` (its current key): both 0600, durably."""
        write_secret(self.keyring_path, ring.to_bytes(), overwrite=True)
        write_secret(self.clade_key_path, ring.current.key, overwrite=True)

    def install_membership(self, membership: Membership, clade_key: bytes, *, epoch: int = 0,
                           now_ms: int | None = None) -> KeyRing:
        """Write the keyring, `clade.key` and `membership.cert`: what `clade join` of an
        admission bundle installs. Keys held for the same clade are kept (old backups)."""
        key = EpochKey(epoch=epoch, installed_ms=wall_clock_ms() if now_ms is None else now_ms, key=clade_key)
        ring = KeyRing(membership.clade_id, [key])
        try:
            held = self.load_keys()
        except CryptoError:
            held = None  # an unreadable old membership is replaced
        if held is not None and held[1].clade_id == membership.clade_id:
            ring = held[1].with_key(key)
        self.save_keyring(ring)
        write_public(self.membership_path, membership.to_bytes(), overwrite=True)
        return ring

    def install_clade_key(self, epoch: int, clade_key: bytes, *, now_ms: int | None = None) -> tuple[KeyRing, bool]:
        """Add a (rotated) clade key to the keyring; returns (the ring, whether it changed).

        Raises `UsageError` before joining, and for a different key of an epoch already held."""
        joined = self.load_keys()
        if joined is None:
            raise UsageError("this golem has not joined a clade (clade join ADMISSION_BUNDLE first)")
        ring = joined[1]
        held = ring.get(epoch)
        if held is not None:
            if not hmac.compare_digest(held, clade_key):
                raise UsageError(f"this golem already holds a different key for epoch {epoch}")
            return ring, False
        key = EpochKey(epoch=epoch, installed_ms=wall_clock_ms() if now_ms is None else now_ms, key=clade_key)
        ring = ring.with_key(key)
        self.save_keyring(ring)
        return ring, True

    def drop_keys_before(self, epoch: int) -> tuple[KeyRing, list[int]]:
        """Forget the clade keys of epochs below `epoch` (never the current one); returns the
        ring and the epochs dropped. Backups sealed only to those keys no longer open here."""
        joined = self.load_keys()
        if joined is None:
            raise UsageError("this golem has not joined a clade")
        ring = joined[1]
        kept = ring.dropping_before(epoch)
        dropped = [e for e in ring.epochs if e not in kept.epochs]
        if dropped:
            self.save_keyring(kept)
        return kept, dropped

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

    def open_store(self, config: Config | None = None, *, identity: Identity | None = None,
                   wall_ms: Callable[[], int] = wall_clock_ms) -> Grimoire:
        """Open grimoire.db; with the identity, also sign ops for entries older than schema v3.
        `wall_ms`: the clock of the store's hybrid logical clock (the daemon passes its `Clock`).

        With `[styx] enabled`, own writes through this store enter the Styx outbox exactly as
        the daemon's do (a CLI write while no daemon runs is pushed at the daemon's next start)."""
        config = config or self.load_config()
        store = Grimoire.open(self.db_path, busy_timeout_ms=config.store.busy_timeout_ms, wall_ms=wall_ms)
        store.outbox = writer_for(config.styx)
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
