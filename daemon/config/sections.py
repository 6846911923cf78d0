"""The sections of the daemon's own plumbing — [store], [p2p], [api], [backup], [death], [log],
[tui] — and `Section`, the base of every section: unknown keys are refused (a typo must not
silently fall back to a default) and assignments are validated."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

__all__ = ["ApiConfig", "BackupConfig", "DeathConfig", "LogConfig", "P2PConfig", "Section", "StoreConfig", "TuiConfig",
           "check_multiaddr"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StoreConfig(Section):
    busy_timeout_ms: int = Field(10_000, ge=100, le=600_000, description="how long a writer waits for the lock")


class P2PConfig(Section):
    enabled: bool = Field(True, description="sync with siblings (needs a clade membership)")
    listen: list[str] = Field(default_factory=lambda: ["/ip4/0.0.0.0/tcp/4001"], max_length=16)
    bootstrap: list[str] = Field(default_factory=list, max_length=256,
                                 description="siblings to dial: /ip4/…/tcp/…/p2p/PEERID")
    mdns: bool = True
    sync_interval_s: float = Field(30.0, ge=1.0, le=3600.0,
                                   description="anti-entropy with the next connected sibling in turn")
    neighbours: int = Field(12, ge=2, le=64,
                            description="siblings kept connected (a random set, rotated); the hard cap is a "
                                        "third more, at least 2 (12: 16)")
    rotate_s: float = Field(60.0, ge=5.0, le=86_400.0,
                            description="swap one random neighbour for another sibling this often")
    max_skew_ms: int = Field(60_000, ge=1_000, le=86_400_000, description="refuse ops stamped further ahead")
    key_grace_s: float = Field(86_400.0, ge=0.0, le=30 * 86_400.0,
                               description="after installing a rotated clade key, keep accepting gossip sealed "
                                           "with the previous one for this long (siblings not rotated yet)")

    @field_validator("listen", "bootstrap")
    @classmethod
    def _addrs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for addr in value:  # a bootstrap address names the sibling: it ends in /p2p/PEERID
            check_multiaddr(addr, peer=info.field_name == "bootstrap")
        return value


def check_multiaddr(text: str, *, peer: bool) -> str:
    """Raise `ValueError` unless `text` is a TCP multiaddr (ending in /p2p/PEERID if `peer`)."""
    import multiaddr  # cheap (~20 ms); libp2p itself is imported only by the p2p service

    try:
        addr = multiaddr.Multiaddr(text)
    except Exception as exc:  # noqa: BLE001 - the parser raises several types
        raise ValueError(f"{text!r} is not a multiaddr: {exc}") from None
    protocols = [p.name for p in addr.protocols()]
    if "tcp" not in protocols:
        raise ValueError(f"{text!r} has no /tcp/PORT (clade speaks TCP)")
    if peer and protocols[-1] != "p2p":
        raise ValueError(f"{text!r} must end in /p2p/PEERID (the sibling's peer id)")
    if not peer and "p2p" in protocols:
        raise ValueError(f"{text!r}: a listen address has no /p2p/ part")
    return text


class ApiConfig(Section):
    tcp_port: int | None = Field(None, ge=1, le=65_535, description="also listen on 127.0.0.1:PORT (needs token)")
    token: SecretStr | None = Field(None, min_length=32, description="bearer token for the TCP listener "
                                    "(or CLADE_API__TOKEN); shown as ********, never logged")

    def secret_token(self) -> str | None:
        """The bearer token's text: only for the listener's check and the client's header."""
        return None if self.token is None else self.token.get_secret_value()


class BackupConfig(Section):
    keep: int = Field(7, ge=1, le=1000)
    interval_hours: float = Field(24.0, gt=0)
    share_with_clade: bool = Field(False, description="also seal backups to the clade key: any member (a "
                                                      "compromised one too) can then read this golem's soma — "
                                                      "private entries, outcomes, episodes, config; off: the "
                                                      "owner and this golem only")


class TuiConfig(Section):
    """`clade tui`: its keys (binding id -> keys, Textual's keymap) and its colours."""

    keymap: dict[str, str] = Field(default_factory=dict, max_length=64,
                                   description='binding id -> comma-separated keys, e.g. {"quit" = "x,ctrl+q"}; '
                                               "`?` in the TUI lists the ids")
    theme: Literal["auto", "truecolor", "256", "16", "mono"] = Field(
        "auto", description="auto: from $COLORTERM/$TERM (truecolor, 256 or 16 colours; NO_COLOR: mono)")
    poll_s: float = Field(1.0, ge=0.2, le=60.0, description="how often the status, peers and stats are read")

    @field_validator("keymap")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for binding_id, keys in value.items():
            if not binding_id.strip() or not keys.strip() or len(keys) > 100:
                raise ValueError(f"{binding_id!r} = {keys!r}: name a binding id and 1..100 characters of keys")
        return value


class DeathConfig(Section):
    """`POST /v1/death` (`clade die`): who hears of it besides the clade and Styx."""

    webhook: str | None = Field(None, max_length=500, pattern=r"^https?://[^\s]+$",
                                description="POST a JSON notice here when the golem dies")
    webhook_timeout_s: float = Field(5.0, gt=0, le=60, description="one attempt at most this long")
    webhook_attempts: int = Field(3, ge=1, le=10, description="then the step is recorded failed")
    webhook_backoff_s: float = Field(1.0, ge=0, le=60, description="wait before attempt n+1: this × 2^(n-1)")


class LogConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "warning"
