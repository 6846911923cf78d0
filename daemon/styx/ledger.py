"""What Styx calls cost, per calendar month (UTC), in grimoire.db: the monthly budget survives restarts.

The spend is the Grimoire's (daemon/grimoire/styx_store.py: `styx_record_spend`, `styx_charge`,
`styx_spent`, `styx_spend_summary`; the pusher records a call's cost with its outcome, in one
transaction). Months are `YYYY-MM` of the wall clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["month_of"]


def month_of(wall_ms: int) -> str:
    """The calendar month (UTC) of a wall-clock time, as `YYYY-MM`."""
    return datetime.fromtimestamp(wall_ms / 1000, UTC).strftime("%Y-%m")
