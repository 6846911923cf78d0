"""`clade tui`: the operator's terminal UI, a Textual app talking only to the daemon's control API.

Modules: `format` (pure: completion %, badges, rates, feed lines), `client` (the API and its
event stream, typed and fault-tolerant), `keys` (every binding, remappable), `themes`
(16/256/truecolor/mono), `widgets` (the panels), `screens`, `app` (`CladeTui`) and `main`
(`run`, used by the CLI).
"""

from tui.app import CladeTui
from tui.client import Endpoint, TuiClient
from tui.main import run

__all__ = ["CladeTui", "Endpoint", "TuiClient", "run"]
