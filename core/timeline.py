"""One client's measured period, second by second: I/Os, bytes and the latency histogram
per 1 s bin (pure).

A timeline is what a client's fio logs (or DiskSpd's per-interval counts) say, re-binned
onto the client's own grid of 1 s bins that starts at its measured start. Every figure of
a window is then computed by interval overlap, in milliseconds: a bin that lies partly
inside a window contributes the part of its I/Os (and histogram counts) that falls inside,
on the assumption that I/O was spread evenly over the bin. Nothing is ever keyed by the
nearest second.

It sits below the engines, which build a client's timeline from fio's logs or DiskSpd's
buckets, and below the analysis, which reads windows of it (core.analysis.aggregate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.models import Direction, DirectionResult

BIN_MS = 1000
DIRECTIONS: tuple[Direction, ...] = ("read", "write")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HistInterval(_Frozen):
    """One fio histogram log line: the completions of [start_ms, end_ms), by bucket."""

    start_ms: int
    end_ms: int
    counts: dict[str, float] = Field(description="bucket value in ns -> completions")


class DirectionTimeline(_Frozen):
    """One direction of a client, per bin of its grid."""

    ios: list[float] = Field(description="I/Os completed in each bin")
    bytes: list[float] = Field(description="bytes moved in each bin")
    hist: list[dict[str, float]] | None = Field(
        None,
        description="per bin, completion-latency histogram as fio's json+ bins: "
        "bucket value in ns -> count (fractions where a log interval straddles bins)",
    )
    hist_rows: list[HistInterval] | None = Field(
        None,
        description="fio's (completion-latency) histogram log lines as they are, so a "
        "window's histogram is their exact overlap with it (bins split a line between "
        "seconds)",
    )
    lat_rows: list[HistInterval] | None = Field(
        None,
        description="total-latency histogram of each interval between fio's status outputs "
        "(core.engines.fio_status), read like hist_rows",
    )


class ClientTimeline(_Frozen):
    """A client's measured period on its own grid: bin i covers
    [start_ms + i*bin_ms, start_ms + (i+1)*bin_ms), clipped at end_ms."""

    v: int = 1
    start_ms: int
    end_ms: int
    bin_ms: int = BIN_MS
    read: DirectionTimeline | None = None
    write: DirectionTimeline | None = None

    def direction(self, d: Direction) -> DirectionTimeline | None:
        return self.read if d == "read" else self.write

    def bins(self) -> list[tuple[int, int]]:
        """(start, end) of every bin, in Unix ms."""
        out = []
        t = self.start_ms
        while t < self.end_ms:
            out.append((t, min(t + self.bin_ms, self.end_ms)))
            t += self.bin_ms
        return out


@dataclass(frozen=True)
class ClientSample:
    """One client's measured figures, from a stored Result or an offline fio output."""

    client: int
    dirs: Mapping[Direction, DirectionResult]  # whole-run figures, fio's own
    timeline: ClientTimeline | None = None
    agent_id: str | None = None
    outstanding_ios: int | None = None  # from core.analysis.concurrency.outstanding_ios
    rate_cap_iops: float | None = None  # this client's IOPS cap (fio rate_iops), if any
    start_skew_ms: float | None = None  # measured I/O start minus the step's instant
    has_bins: bool = True


Window = tuple[int, int]  # [start, end) in Unix ms


class _PerSecond(Protocol):
    @property
    def iops(self) -> float: ...
    @property
    def bw_bytes(self) -> float: ...


def overlap(a: Window, b: Window) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def common_window(timelines: Sequence[ClientTimeline]) -> Window | None:
    """From the latest client start to the earliest client end, in ms: only there were
    all clients loading the target. None when they never all ran at once."""
    if not timelines:
        return None
    start = max(t.start_ms for t in timelines)
    end = min(t.end_ms for t in timelines)
    return (start, end) if end > start else None


def _fractions(timeline: ClientTimeline, window: Window) -> list[tuple[int, float]]:
    """(bin index, share of that bin inside the window) for bins touching it. Only the
    bins the window can touch are looked at: the per-second series asks once per second,
    and walking every bin each time made a 600 s step quadratic."""
    start, end, width = timeline.start_ms, timeline.end_ms, timeline.bin_ms
    lo = max(0, (window[0] - start) // width)
    hi = min(-(-(end - start) // width), -(-(window[1] - start) // width))
    out = []
    for i in range(lo, hi):
        b0 = start + i * width
        b1 = min(b0 + width, end)
        part = overlap((b0, b1), window)
        if part:
            out.append((i, part / (b1 - b0)))
    return out


def totals_in(timeline: ClientTimeline, d: Direction, window: Window) -> tuple[float, float]:
    """(I/Os, bytes) of one direction inside the window."""
    dt = timeline.direction(d)
    if dt is None:
        return 0.0, 0.0
    parts = _fractions(timeline, window)
    ios = sum(dt.ios[i] * f for i, f in parts if i < len(dt.ios))
    nbytes = sum(dt.bytes[i] * f for i, f in parts if i < len(dt.bytes))
    return ios, nbytes


LatencyKind = Literal["lat", "clat"]  # total, completion (fio's names)


def histogram_in(
    timeline: ClientTimeline, d: Direction, window: Window, kind: LatencyKind = "clat"
) -> dict[int, float]:
    """The latency histogram (bucket value ns -> count) of the I/Os inside the window:
    completion latency (``clat``, fio's histogram log) or total latency (``lat``)."""
    dt = timeline.direction(d)
    out: dict[int, float] = {}
    rows = None if dt is None else dt.lat_rows if kind == "lat" else dt.hist_rows
    if kind == "lat" and rows is None:
        return out
    if rows is not None:
        # Each line spread evenly over its own interval, the part inside the window: the
        # same reading as the I/O counts, without a second spreading into 1 s bins.
        for row in rows:
            share = overlap((row.start_ms, row.end_ms), window) / (row.end_ms - row.start_ms)
            if share:
                for k, v in row.counts.items():
                    out[int(k)] = out.get(int(k), 0.0) + v * share
        return out
    if dt is None or dt.hist is None:
        return out
    for i, f in _fractions(timeline, window):
        if i >= len(dt.hist):
            continue
        for k, v in dt.hist[i].items():
            out[int(k)] = out.get(int(k), 0.0) + v * f
    return out


def has_histograms(timeline: ClientTimeline, d: Direction, kind: LatencyKind = "clat") -> bool:
    dt = timeline.direction(d)
    if dt is None:
        return False
    if kind == "lat":
        return dt.lat_rows is not None
    return dt.hist is not None or dt.hist_rows is not None


def seconds_of(window: Window) -> list[Window]:
    """The window cut into 1 s intervals from its start, as shown to people: a remainder of
    half a second or more is a point of its own, a shorter one joins the last second (a
    few ms of stamp drift must not become a point of its own)."""
    start, end = window
    cuts = list(range(start, end, BIN_MS))
    if len(cuts) > 1 and end - cuts[-1] < BIN_MS // 2:
        cuts.pop()
    return [(a, b) for a, b in zip(cuts, [*cuts[1:], end], strict=True)]


def per_second(
    timelines: Iterable[ClientTimeline], d: Direction, window: Window
) -> list[dict[str, float]]:
    """The clients' summed IOPS and bytes per second in each second of the window
    (``seconds_of``), stamped with the second's end."""
    rows = []
    tls = list(timelines)
    for part in seconds_of(window):
        seconds = (part[1] - part[0]) / 1000
        ios = nbytes = 0.0
        for tl in tls:
            i, b = totals_in(tl, d, part)
            ios += i
            nbytes += b
        rows.append({"t_ms": float(part[1]), "iops": ios / seconds, "bw_bytes": nbytes / seconds})
    return rows


def rebin(
    intervals: Iterable[tuple[int, int, float]], start_ms: int, end_ms: int, bin_ms: int = BIN_MS
) -> list[float]:
    """Spread each (start, end, amount) evenly over its interval and sum it into the grid
    of ``bin_ms`` bins from ``start_ms`` to ``end_ms`` (parts outside are dropped)."""
    n = max(0, -(-(end_ms - start_ms) // bin_ms))
    out = [0.0] * n
    for a, b, amount in intervals:
        if b <= a or not amount:
            continue
        first = max(0, (max(a, start_ms) - start_ms) // bin_ms)
        last = min(n - 1, (min(b, end_ms) - 1 - start_ms) // bin_ms)
        for i in range(int(first), int(last) + 1):
            b0 = start_ms + i * bin_ms
            part = overlap((a, b), (b0, min(b0 + bin_ms, end_ms)))
            if part:
                out[i] += amount * part / (b - a)
    return out


def timeline_from_seconds(
    start_ms: int, end_ms: int, series: Mapping[Direction, Sequence[_PerSecond]]
) -> ClientTimeline | None:
    """A timeline from consecutive 1 s rates (DiskSpd's ``-D1000`` buckets), the first
    starting at ``start_ms``."""
    if end_ms <= start_ms or not any(series.values()):
        return None
    dirs = {
        d: DirectionTimeline(
            ios=[p.iops for p in points], bytes=[p.bw_bytes for p in points], hist=None
        )
        for d, points in series.items()
        if points
    }
    return ClientTimeline(start_ms=start_ms, end_ms=end_ms, **dirs)
