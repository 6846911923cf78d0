"""The `clade` CLI for tests: its result type, and the real console script as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STYX_TOKEN = "s" * 40  # the bearer token of the `styx` fixture's server


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


CliRunner = Callable[..., CliResult]  # the `cli` fixture: run(*args, stdin=bytes | None) -> CliResult


def clade_subprocess(
    args: Sequence[str], *, env: dict[str, str] | None = None, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """Run the real `clade` console script (argv bytes allowed through os.fsencode)."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("clade")), *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
