"""Stored instants (core.timestamps): one form, exact to the millisecond of the clock given."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from core.timestamps import iso_ms

# 2001 to 2100: the instants a run, an item or a regression can carry.
MS = st.integers(min_value=978_307_200_000, max_value=4_102_444_800_000)


@given(MS)
def test_the_stamp_reads_back_as_the_same_millisecond(now_ms: int) -> None:
    text = iso_ms(now_ms)
    assert text.endswith("Z") and len(text) == len("2026-11-26T14:27:00.123Z")
    back = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert back.tzinfo is not None and back.utcoffset() is not None
    assert round(back.timestamp() * 1000) == now_ms


@given(MS)
def test_the_stamp_is_the_form_the_wall_clock_stamps_had(now_ms: int) -> None:
    # What now_iso wrote before the clock was injected: datetime.now(UTC) to the ms.
    at = datetime.fromtimestamp(now_ms // 1000, UTC).replace(microsecond=now_ms % 1000 * 1000)
    assert iso_ms(now_ms) == at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_known_instant() -> None:
    assert iso_ms(1_795_703_237_123) == "2026-11-26T14:27:17.123Z"
