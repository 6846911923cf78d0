"""The vault layer over HTTP: uploads, and the downloads an heir boots from.

`push_backup` streams an already-encrypted file (a backup, a testament archive) to
`PUT {url}/v1/styx/vault/{peer}/{name}`. Retried whole (the file is re-read from its start)
on a timeout, a broken connection, 408, 429 or 5xx, after max(Retry-After, full-jitter
backoff), up to `attempts` times; any other 4xx stops at once with the server's reason. The
file stays on disk either way.

`list_vault` (`GET {url}/v1/styx/vault/{peer}` → `{"objects": [{"name", "bytes"}…]}`) and
`fetch` (`GET {url}/v1/styx/vault/{peer}/{name}`, at most `max_bytes`) read it back, retried
the same way; they raise `VaultPushError` saying what went wrong. What they return is not
trusted: the caller verifies it (daemon/styx/boot.py).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from .policy import classify

__all__ = ["VaultPushError", "fetch", "list_vault", "push_backup"]


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


def _get(target: str, *, token: str | None, timeout_s: float, attempts: int, base_s: float, cap_s: float,
         max_bytes: int, rng: random.Random | None, sleep: object) -> bytes:
    """One GET, retried like an upload; the body (at most `max_bytes`). Raises `VaultPushError`."""
    rng = rng or random.Random()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    last = ""
    with httpx.Client(timeout=timeout_s, verify=True) as client:
        for attempt in range(1, attempts + 1):
            status: int | None = None
            retry_after = None
            try:
                with client.stream("GET", target, headers=headers) as answer:
                    status, retry_after = answer.status_code, answer.headers.get("Retry-After")
                    if status == 200:
                        body = bytearray()
                        for chunk in answer.iter_bytes():
                            body += chunk
                            if len(body) > max_bytes:
                                raise VaultPushError(f"{target}: the answer is over {max_bytes} bytes; refused")
                        return bytes(body)
                    answer.read()
                    last = f"HTTP {status}: {answer.text[:200]}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
            if status == 404:
                raise VaultPushError(f"Styx's vault has no {target.rsplit('/v1/styx/vault/', 1)[-1]} ({last})")
            out = classify(status, failures=attempt, rng=rng, retry_after=retry_after, now_s=time.time(), reason=last,
                           base_s=base_s, cap_s=cap_s)
            if out.action == "park":
                raise VaultPushError(f"Styx refused the download ({out.reason}); retrying cannot help: check the "
                                     "token and the URL")
            if attempt < attempts:
                sleep(out.delay_s)  # type: ignore[operator]
    raise VaultPushError(f"Styx did not answer {target} after {attempts} attempts ({last})")


def list_vault(*, url: str, token: str | None, peer: str, timeout_s: float = 30.0, attempts: int = 3,
               base_s: float = 1.0, cap_s: float = 60.0, rng: random.Random | None = None,
               sleep: object = time.sleep) -> list[str]:
    """The names of the objects Styx's vault holds for `peer` (blocking). Raises `VaultPushError`."""
    target = f"{url.rstrip('/')}/v1/styx/vault/{quote(peer, safe='')}"
    raw = _get(target, token=token, timeout_s=timeout_s, attempts=attempts, base_s=base_s, cap_s=cap_s,
               max_bytes=4 * 1024 * 1024, rng=rng, sleep=sleep)
    try:
        doc = json.loads(raw)
        return [str(o["name"]) for o in doc["objects"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise VaultPushError(f"Styx's vault listing for {peer} is malformed ({type(exc).__name__})") from None


def fetch(*, url: str, token: str | None, peer: str, name: str, max_bytes: int, timeout_s: float = 60.0,
          attempts: int = 3, base_s: float = 1.0, cap_s: float = 60.0, rng: random.Random | None = None,
          sleep: object = time.sleep) -> bytes:
    """One object of `peer`'s vault (blocking), at most `max_bytes`. Raises `VaultPushError`."""
    target = f"{url.rstrip('/')}/v1/styx/vault/{quote(peer, safe='')}/{quote(name, safe='')}"
    return _get(target, token=token, timeout_s=timeout_s, attempts=attempts, base_s=base_s, cap_s=cap_s,
                max_bytes=max_bytes, rng=rng, sleep=sleep)
