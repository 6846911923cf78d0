"""Vault uploads: an already-encrypted backup file streamed to `PUT {url}/v1/styx/vault/{peer}/{backup}`.

Retried whole (the file is re-read from its start) on a timeout, a broken connection, 408,
429 or 5xx, after max(Retry-After, full-jitter backoff), up to `attempts` times; any other
4xx stops at once with the server's reason. The backup stays on disk either way.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from .policy import classify

__all__ = ["VaultPushError", "push_backup"]


class VaultPushError(Exception):
    """The upload did not succeed; the message says why and whether retrying can help."""


def push_backup(path: Path, *, url: str, token: str | None, peer: str, timeout_s: float = 60.0, attempts: int = 6,
                base_s: float = 1.0, cap_s: float = 60.0, rng: random.Random | None = None,
                sleep: object = time.sleep) -> dict[str, object]:
    """Upload `path` (blocking). Returns {url, bytes, attempts}; raises `VaultPushError`."""
    rng = rng or random.Random()
    target = f"{url.rstrip('/')}/v1/styx/vault/{quote(peer, safe='')}/{quote(path.name, safe='')}"
    headers = {"Content-Type": "application/octet-stream", **({"Authorization": f"Bearer {token}"} if token else {})}
    size = path.stat().st_size
    last = ""
    with httpx.Client(timeout=timeout_s, verify=True) as client:
        for attempt in range(1, attempts + 1):
            status: int | None = None
            retry_after = None
            try:
                with path.open("rb") as fh:
                    answer = client.put(target, content=fh, headers={**headers, "Content-Length": str(size)})
                status, retry_after = answer.status_code, answer.headers.get("Retry-After")
                last = f"HTTP {status}: {answer.text[:200]}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
            out = classify(status, failures=attempt, rng=rng, retry_after=retry_after, now_s=time.time(), reason=last,
                           base_s=base_s, cap_s=cap_s)
            if out.action == "delivered":
                return {"url": target, "bytes": size, "attempts": attempt}
            if out.action == "park":
                raise VaultPushError(f"Styx refused the backup ({out.reason}); retrying cannot help: check the "
                                     "token and the URL")
            if attempt < attempts:
                sleep(out.delay_s)  # type: ignore[operator]
    raise VaultPushError(f"Styx did not take the backup after {attempts} attempts ({last}); it is kept at {path}")
