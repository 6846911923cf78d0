"""Logging: JSON lines on stderr (journald-friendly) or a readable format on a terminal.

Quiet by default (warnings and errors); `--log-level` or `[log] level` raise it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["JsonFormatter", "setup_logging"]

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def setup_logging(level: str = "warning", *, json_lines: bool | None = None) -> None:
    """Configure the root logger once (idempotent)."""
    use_json = not sys.stderr.isatty() if json_lines is None else json_lines
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else logging.Formatter(
        "%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("hypercorn.access", "hypercorn.error", "multipart"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    quiet_libp2p(root.level)


def quiet_libp2p(level: int | None = None) -> None:
    """Route libp2p's logs through our handler, silent unless we run at debug level.

    py-libp2p detaches its logger on import (no handler, no propagation), so its errors
    reach stderr unformatted via logging's last resort, e.g. one line per failed redial;
    the p2p service counts and reports those itself. Call again after importing libp2p.
    """
    level = logging.getLogger().level if level is None else level
    roots = ("libp2p", "zeroconf", "multiaddr")
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in roots and name not in roots:
            child = logging.getLogger(name)
            child.handlers.clear()
            child.propagate = True
            child.setLevel(logging.NOTSET)  # some set their own level (e.g. info): inherit ours
    for name in roots:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.DEBUG if level <= logging.DEBUG else logging.CRITICAL)
