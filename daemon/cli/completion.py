"""`clade completion bash|zsh` and `clade manpage`: shell completion (shtab) and the man page,
both generated from the CLI's own argparse parser (`daemon.cli.main.build_parser`).

`systemd/install.sh` writes them where bash-completion, zsh and man look.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from daemon.cli.render import renders
from daemon.datadir import DataDir

__all__ = ["completion_script", "man_page", "register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]
SHELLS = ("bash", "zsh")
# Arguments completed as paths (shtab's FILE / DIRECTORY), wherever they appear.
_DIRS = {"data_dir"}
_FILES = {"config", "socket", "bundle", "path", "file", "out", "output", "identity", "lessons"}
_MAN_EXTRA = (
    ("Exit status", "0 success; 2 bad usage or input (nothing written); 1 any other failure. Errors are one line "
                    "on stderr naming the bad value and what is allowed."),
    ("Environment", "CLADE_DATA_DIR: the data directory when --data-dir is not given (else ./.clade). "
                    "CLADE_<SECTION>__<KEY>: overrides a config.toml setting, e.g. CLADE_STYX__URL."),
    ("Files", "$DATA/config.toml (configuration), $DATA/run.json (the running daemon's socket), "
              "$DATA/backups/ (encrypted backups), $DATA/PLAYBOOK.md (the curated playbook)."),
    ("See also", "clade --help, clade COMMAND --help; the docs/ pages of the clade source tree (make docs)."),
)


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser],
             whole: Callable[[], argparse.ArgumentParser]) -> None:
    """Add `completion` and `manpage`; `whole` builds the entire `clade` parser they describe
    (`daemon.cli.main.build_parser`, passed in: this module does not import the one that imports it)."""
    p = command("completion", cmd_completion, "print the shell completion script for bash or zsh")
    p.add_argument("shell", choices=SHELLS, help="the shell: bash or zsh")
    p.set_defaults(whole_parser=whole)
    command("manpage", cmd_manpage, "print the clade(1) man page (roff)").set_defaults(whole_parser=whole)


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    """Complete path-like arguments as files or directories (shtab reads `action.complete`)."""
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_paths(sub)
        elif action.dest in _DIRS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.dest in _FILES:
            action.complete = shtab.FILE  # type: ignore[attr-defined]


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` (the whole `clade` parser) for `shell` (bash or zsh)."""
    import shtab

    _mark_paths(parser)
    return str(shtab.complete(parser, shell=shell))


def man_page(parser: argparse.ArgumentParser, *, date: str | None = None) -> str:
    """The clade(1) man page (roff) of `parser` (the whole `clade` parser)."""
    from daemon.cli.manpage import manpage

    try:
        version = metadata.version("clade")
    except metadata.PackageNotFoundError:
        version = "dev"
    return manpage(parser, date=date or datetime.now(UTC).strftime("%Y-%m-%d"), source=f"clade {version}",
                   extra=_MAN_EXTRA)


def _raw(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    sys.stdout.write(str(doc["text"]))


@renders(_raw)
def cmd_completion(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return {"shell": args.shell, "text": completion_script(args.whole_parser(), args.shell)}


@renders(_raw)
def cmd_manpage(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    return {"text": man_page(args.whole_parser())}
