"""Vault transfers charged and capped without a daemon (`clade backup --push`, `clade testament
--push`, `clade inherit --from-styx`): the month's spend is the store's ledger, as a daemon's.

A transfer costs `[styx.prices] per_upload` + `per_mib` for each started MiB
(`Budget.transfer_cost`). It is refused, before any byte moves, when it would take the month
past `[styx.budget] monthly`; otherwise it is recorded (whether or not it then succeeds: the
budget errs on the side of spending less). The per-tick cap does not apply: a file cannot be
split, and a backup larger than a tick's budget could otherwise never leave.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from daemon.grimoire.styx_store import Spend

from . import ledger
from .policy import upload_cost
from .vault import VaultPushError, push_backup

if TYPE_CHECKING:
    from daemon.config import StyxConfig
    from daemon.grimoire import Grimoire

__all__ = ["charge_transfer", "push_metered"]


def charge_transfer(store: Grimoire, config: StyxConfig, size: int, *, now_ms: int) -> float:
    """Record one vault transfer of `size` bytes in the month's spend and return its cost.
    Raises `VaultPushError` (nothing recorded) when it would pass the monthly cap."""
    cost = upload_cost(config, size)
    month = ledger.month_of(now_ms)
    monthly = config.budget.monthly
    spent = store.styx_charge(Spend(month, cost, calls=1), cap=monthly)
    if spent is not None and monthly is not None:
        raise VaultPushError(f"the monthly Styx budget is reached ({spent:.4f} of {monthly:g} USD; this transfer "
                             f"costs {cost:.4f}): nothing was transferred; raise [styx.budget] monthly")
    return cost


def push_metered(store: Grimoire, config: StyxConfig, path: Path, *, peer: str, now_ms: int) -> dict[str, object]:
    """Charge, then upload `path` to the vault layer (blocking). Raises `VaultPushError`."""
    if not config.url:
        raise VaultPushError("no Styx to upload to: set [styx] url (or CLADE_STYX__URL)")
    cost = charge_transfer(store, config, path.stat().st_size, now_ms=now_ms)
    pushed = push_backup(path, url=str(config.url), token=config.bearer(), peer=peer,
                         timeout_s=max(60.0, config.timeout_s), base_s=config.backoff_base_s,
                         cap_s=config.backoff_cap_s)
    return {**pushed, "usd": round(cost, 6)}
