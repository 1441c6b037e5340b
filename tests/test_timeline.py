"""A window's share of a client's bins (pure): only the bins the window can touch are
looked at, and the shares equal a walk over every bin (brute force)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.timeline import ClientTimeline, _fractions, overlap

T0 = 1_800_000_000_000


def every_bin(timeline: ClientTimeline, window: tuple[int, int]) -> list[tuple[int, float]]:
    out = []
    for i, (b0, b1) in enumerate(timeline.bins()):
        part = overlap((b0, b1), window)
        if part:
            out.append((i, part / (b1 - b0)))
    return out


@given(
    start=st.integers(0, 5_000),
    length=st.integers(1, 20_000),
    width=st.sampled_from([1, 7, 500, 1000]),
    w0=st.integers(-3_000, 25_000),
    w_len=st.integers(0, 25_000),
)
def test_window_shares_equal_a_walk_over_every_bin(
    start: int, length: int, width: int, w0: int, w_len: int
) -> None:
    tl = ClientTimeline(start_ms=T0 + start, end_ms=T0 + start + length, bin_ms=width)
    window = (T0 + w0, T0 + w0 + w_len)
    assert _fractions(tl, window) == every_bin(tl, window)
