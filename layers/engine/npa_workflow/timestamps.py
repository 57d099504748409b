"""Timestamps as the ledger, reports and job records write them: ISO-8601 UTC with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    """Now, to the millisecond (job starts and ends a watch tick apart must stay ordered)."""
    return from_epoch(datetime.now(UTC).timestamp())


def from_epoch(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_epoch(value: str | None) -> float | None:
    """Seconds since the epoch, or None for a missing or unreadable timestamp."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
