"""What Styx calls cost, per calendar month (UTC), in grimoire.db: the monthly budget survives restarts.

`record` adds one call's cost inside the caller's transaction (the pusher records it with the
call's outcome); `spent` reads a month's total. Months are `YYYY-MM` of the wall clock.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

__all__ = ["month_of", "record", "spent", "summary"]


def month_of(wall_ms: int) -> str:
    """The calendar month (UTC) of a wall-clock time, as `YYYY-MM`."""
    return datetime.fromtimestamp(wall_ms / 1000, UTC).strftime("%Y-%m")


def record(conn: sqlite3.Connection, month: str, usd: float, *, calls: int = 0, items: int = 0,
           queries: int = 0) -> None:
    conn.execute(
        "INSERT INTO styx_spend (month, usd, calls, items, queries) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (month) DO UPDATE SET usd = usd + excluded.usd, calls = calls + excluded.calls, "
        "items = items + excluded.items, queries = queries + excluded.queries",
        (month, float(usd), calls, items, queries))


def spent(conn: sqlite3.Connection, month: str) -> float:
    row = conn.execute("SELECT usd FROM styx_spend WHERE month = ?", (month,)).fetchone()
    return 0.0 if row is None else float(row[0])


def summary(conn: sqlite3.Connection, month: str) -> dict[str, Any]:
    row = conn.execute("SELECT usd, calls, items, queries FROM styx_spend WHERE month = ?", (month,)).fetchone()
    usd, calls, items, queries = row if row is not None else (0.0, 0, 0, 0)
    return {"month": month, "usd": round(float(usd), 6), "calls": int(calls), "items": int(items),
            "queries": int(queries)}
