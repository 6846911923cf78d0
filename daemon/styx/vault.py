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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar
from urllib.parse import quote

import httpx

from .policy import classify

__all__ = ["VaultPushError", "fetch", "list_vault", "push_backup"]

T = TypeVar("T")


class VaultPushError(Exception):
    """The upload did not succeed; the message says why and whether retrying can help."""


@dataclass(frozen=True, slots=True)
class _Try(Generic[T]):
    """One try's answer: its HTTP status (None: no answer), Retry-After, a short reason, and
    the call's result when it succeeded (None: it did not)."""

    status: int | None
    retry_after: str | None
    reason: str
    result: T | None = None


def _retried(once: Callable[[], _Try[T]], *, attempts: int, rng: random.Random | None, base_s: float,
             cap_s: float, sleep: object, refused: str, gave_up: Callable[[str], str]) -> T:
    """Call `once` until it returns a result, at most `attempts` times, waiting between tries as
    `policy.classify` says. Raises `VaultPushError`: at an answer retrying cannot help (`refused`
    names what was refused), or `gave_up(last reason)` after the last try."""
    rng = rng or random.Random()
    last = ""
    for attempt in range(1, attempts + 1):
        answer = once()
        if answer.result is not None:
            return answer.result
        last = answer.reason
        out = classify(answer.status, failures=attempt, rng=rng, retry_after=answer.retry_after, now_s=time.time(),
                       reason=last, base_s=base_s, cap_s=cap_s)
        if out.action == "park":
            raise VaultPushError(f"Styx refused the {refused} ({out.reason}); retrying cannot help: check the "
                                 "token and the URL")
        if attempt < attempts:
            sleep(out.delay_s)  # type: ignore[operator]
    raise VaultPushError(gave_up(last))


def push_backup(path: Path, *, url: str, token: str | None, peer: str, timeout_s: float = 60.0, attempts: int = 6,
                base_s: float = 1.0, cap_s: float = 60.0, rng: random.Random | None = None,
                sleep: object = time.sleep) -> dict[str, object]:
    """Upload `path` (blocking). Returns {url, bytes, attempts}; raises `VaultPushError`."""
    target = f"{url.rstrip('/')}/v1/styx/vault/{quote(peer, safe='')}/{quote(path.name, safe='')}"
    size = path.stat().st_size
    headers = {"Content-Type": "application/octet-stream", **({"Authorization": f"Bearer {token}"} if token else {}),
               "Content-Length": str(size)}
    tries = 0

    def put(client: httpx.Client) -> _Try[dict[str, object]]:
        nonlocal tries
        tries += 1
        try:
            with path.open("rb") as fh:
                answer = client.put(target, content=fh, headers=headers)
        except httpx.TransportError as exc:
            return _Try(None, None, f"{type(exc).__name__}: {str(exc)[:200]}")
        done = {"url": target, "bytes": size, "attempts": tries}
        return _Try(answer.status_code, answer.headers.get("Retry-After"), f"HTTP {answer.status_code}: "
                    f"{answer.text[:200]}", done if 200 <= answer.status_code < 300 else None)

    with httpx.Client(timeout=timeout_s, verify=True) as client:
        return _retried(lambda: put(client), attempts=attempts, rng=rng, base_s=base_s, cap_s=cap_s, sleep=sleep,
                        refused="backup", gave_up=lambda last: f"Styx did not take the backup after {attempts} "
                                                               f"attempts ({last}); it is kept at {path}")


def _get(target: str, *, token: str | None, timeout_s: float, attempts: int, base_s: float, cap_s: float,
         max_bytes: int, rng: random.Random | None, sleep: object) -> bytes:
    """One GET, retried like an upload; the body (at most `max_bytes`). Raises `VaultPushError`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(client: httpx.Client) -> _Try[bytes]:
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
                    return _Try(status, retry_after, "", bytes(body))
                answer.read()
                last = f"HTTP {status}: {answer.text[:200]}"
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {str(exc)[:200]}"
        if status == 404:
            raise VaultPushError(f"Styx's vault has no {target.rsplit('/v1/styx/vault/', 1)[-1]} ({last})")
        return _Try(status, retry_after, last)

    with httpx.Client(timeout=timeout_s, verify=True) as client:
        return _retried(lambda: get(client), attempts=attempts, rng=rng, base_s=base_s, cap_s=cap_s, sleep=sleep,
                        refused="download",
                        gave_up=lambda last: f"Styx did not answer {target} after {attempts} attempts ({last})")


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
