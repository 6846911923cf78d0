"""Boot from the Styx archive: an heir fetches its predecessor's latest testament archive from
Styx's vault layer, verifies it, and inherits it at the archive's weight.

    download       GET the vault listing of PREDECESSOR, then its latest `testament-<ms>.archive`
                   (archive.py); the caller charges the transfer like an upload (metering.py)
    open_archive   the owner's certificate first (signed by this heir's own owner key, for this
                   clade, naming PREDECESSOR, valid when the testament was written), then the
                   testament (decrypted with the clade keys, its signature checked by the golem's
                   key, every entry's ops by their authors' keys: curator/bequest.py)
    inherit        the same selection and import as `clade inherit FILE`, with `via_archive`: an
                   heir holds an entry at min(original, 0.3 × 0.85^(N−1)) instead of 0.4

Anything wrong — no archive, a tampered or truncated one, another clade's, a stranger's
certificate, a testament of another golem — raises `BootError` saying what, before anything
is imported. `clade inherit --from-styx PREDECESSOR` and `POST /v1/inherit` (a golem runtime at
birth) both run these three steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crypto.errors import CryptoError
from crypto.membership import Certificate, Membership, RevocationList
from crypto.vault import VaultKeys
from daemon.grimoire.curator.bequest import InheritReport, inherit, open_testament
from daemon.grimoire.curator.testament import TestamentDocument, TestamentError

from . import archive
from .vault import VaultPushError, fetch, list_vault

if TYPE_CHECKING:
    from daemon.config import StyxConfig
    from daemon.grimoire import Grimoire

    from .policy import Budget

__all__ = ["BootError", "download", "download_within", "inherit_archive", "open_archive", "write_archive"]


def write_archive(testament_file: Path, certificate: bytes, *, created_ms: int) -> Path:
    """The archive of a testament file and the golem's membership certificate, written beside
    the testament as `testament-<created_ms>.archive` (atomically); what is uploaded to the vault."""
    out = testament_file.parent / archive.archive_name(created_ms)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(archive.pack(certificate, testament_file.read_bytes()))
    tmp.replace(out)
    return out


class BootError(Exception):
    """The archive could not be fetched or trusted; the message says why. Nothing was imported."""


def download(config: StyxConfig, predecessor: str, *, max_bytes: int = archive.MAX_ARCHIVE_BYTES
             ) -> tuple[str, bytes]:
    """(name, bytes) of `predecessor`'s latest testament archive in Styx's vault (blocking), of
    at most `max_bytes` (what the month's budget affords, `Budget.affordable_bytes`).
    Raises `BootError`."""
    if config.url is None:
        raise BootError("no Styx to fetch from: set [styx] url (or CLADE_STYX__URL)")
    if not config.vault_enabled:
        raise BootError("Styx's vault layer is off ([styx] vault_enabled = false)")
    url, token = str(config.url), config.bearer()
    base_s, cap_s = config.backoff_base_s, config.backoff_cap_s
    try:
        name = archive.latest(list_vault(url=url, token=token, peer=predecessor, timeout_s=config.timeout_s,
                                         base_s=base_s, cap_s=cap_s))
        if name is None:
            raise BootError(f"Styx's vault holds no testament archive of {predecessor}")
        data = fetch(url=url, token=token, peer=predecessor, name=name,
                     max_bytes=min(max_bytes, archive.MAX_ARCHIVE_BYTES), timeout_s=max(60.0, config.timeout_s),
                     base_s=base_s, cap_s=cap_s)
    except VaultPushError as exc:
        hint = "" if max_bytes >= archive.MAX_ARCHIVE_BYTES else (
            f" (the month's remaining Styx budget pays for {max_bytes // (1024 * 1024)} MiB at most: "
            "raise [styx.budget] monthly)")
        raise BootError(f"{exc}{hint}") from None
    return name, data


def download_within(config: StyxConfig, predecessor: str, budget: Budget, *, month: str) -> tuple[str, bytes]:
    """`download`, bounded to what `budget` still pays for this month (`Budget.affordable_bytes`);
    the caller charges the real size once it arrived. Raises `VaultPushError` when not even one
    started MiB fits (nothing fetched), `BootError` as `download`."""
    most = budget.affordable_bytes(archive.MAX_ARCHIVE_BYTES, month=month)
    if most == 0:
        raise VaultPushError(f"the monthly Styx budget is reached ({budget.spent_month:.4f} of "
                             f"{budget.monthly:g} USD): nothing was fetched")
    return download(config, predecessor, max_bytes=most)


def open_archive(data: bytes, *, predecessor: str, membership: Membership, keys: VaultKeys,
                 revocations: RevocationList | None = None) -> TestamentDocument:
    """The verified testament inside an archive: the owner's certificate of `predecessor`, not
    revoked by `revocations` (the owner's list this golem holds: a revoked golem's knowledge is
    not inherited, however it died), and the testament it signs. Raises `BootError` (nothing else)."""
    try:
        cert_bytes, testament_file = archive.unpack(data)
        cert = Certificate.from_bytes(cert_bytes)
        # signature, clade and revocation now; the time is checked against the testament's, once it is read
        cert.verify(membership.owner_public_key, membership.clade_id, now=cert.not_before, revocations=revocations)
    except (archive.ArchiveError, CryptoError) as exc:
        raise BootError(f"the archive of {predecessor} cannot be trusted: {exc}") from None
    if cert.peer_id != predecessor:
        raise BootError(f"the archive under {predecessor} carries the certificate of {cert.peer_id}")
    try:
        doc = open_testament(testament_file, keys, what=f"the testament archive of {predecessor}")
    except TestamentError as exc:
        raise BootError(str(exc)) from None
    if doc.golem != predecessor:
        raise BootError(f"the archive under {predecessor} holds the testament of {doc.golem}")
    if not cert.not_before <= doc.created_ms // 1000 < cert.not_after:
        raise BootError(f"the testament of {predecessor} was written outside its membership certificate's validity")
    return doc


def inherit_archive(store: Grimoire, doc: TestamentDocument, *, clade_id: str, local_replica: str,
                    now_ms: int) -> InheritReport:
    """Import a verified archive's testament at the archive's weight (`via_archive`)."""
    try:
        return inherit(store, doc, clade_id=clade_id, local_replica=local_replica, now_ms=now_ms, via_archive=True)
    except TestamentError as exc:
        raise BootError(str(exc)) from None
