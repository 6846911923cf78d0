"""Start the TUI for one endpoint (what `clade tui` calls)."""

from __future__ import annotations

from daemon.client import Endpoint
from daemon.config import TuiConfig
from tui.app import CladeTui

__all__ = ["run"]


def run(endpoint: Endpoint, *, config: TuiConfig, read_only: bool = False, theme: str | None = None) -> int:
    """Run the app in this terminal until the operator quits; returns the exit status (0 on `q`)."""
    app = CladeTui(endpoint.transport, read_only=read_only, keymap=config.keymap, theme=theme or config.theme,
                   poll_s=config.poll_s)
    app.run()
    return app.return_code or 0
