"""Instants as documents store them, from the clock the caller was given (pure).

Every stored ``*_at`` (a run's ``created_at``, an item's ``claimed_at``, a regression's
``detected_at``, ...) is written by ``iso_ms`` from the service's injected clock, so a test
or the deterministic simulation that moves the clock moves these stamps with it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_ms(now_ms: int) -> str:
    """``now_ms`` (Unix ms) in UTC, ISO 8601 to the millisecond with a ``Z``:
    ``2026-11-26T14:27:00.123Z``. Exact: integer milliseconds, no float seconds between."""
    at = _EPOCH + timedelta(milliseconds=now_ms)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
