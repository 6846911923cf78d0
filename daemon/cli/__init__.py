"""The `clade` command line: one module per command group, `main` is the entry point."""

from daemon.cli.main import main

__all__ = ["main"]
