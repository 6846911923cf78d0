"""The `clade` command line: one module per command group, `main` is the entry point."""

from daemon import native_threads

native_threads.pin()  # before anything imports numpy

from daemon.cli.main import main  # noqa: E402

__all__ = ["main"]
