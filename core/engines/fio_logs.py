"""fio's per-interval logs, read as fio means them, into a client's timeline (pure).

IOPS and bandwidth logs (``write_iops_log``/``write_bw_log`` with ``log_avg_msec=1000``):
each line is ``time, value, direction, bs, offset[, prio]``, and its value is the average
rate over the averaging interval that *ends* at its stamp (fio's stat.c ``add_log_sample``
closes a window every ``log_avg_msec`` and stamps it with the time it closed; with
``log_unix_epoch=1`` the stamp is Unix ms). IOPS are I/Os per second, bandwidth KiB/s
(fio HOWTO, "Log File Formats"). A direction that did no I/O in an interval writes no line
for it (``__add_samples`` skips a zero delta), so a missing line is zero I/O. A line closer
than one interval to the previous one (a last, partial window) covers only the time since.

Histogram logs (``write_hist_log`` with ``log_hist_msec=1000``): each line is
``time, direction, bs, count[0], ..., count[N-1]``: the completions of that direction since
the job's previous line, in fio's latency buckets (``iolog.c`` writes the difference of two
snapshots of the job's histogram). Bucket ``i`` stands for ``plat_idx_to_val(i)`` ns, the
same value that keys json+'s ``bins``, so percentiles are read the way fio reads its own
(``core.engines.fio_output.percentile_from_bins``). fio's ``tools/hist/fiologparser_hist.py`` reads
the same rows (tests check our reading against it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engines.fio_output import directions_from_fio
from core.models import Direction
from core.timeline import BIN_MS, DIRECTIONS, ClientTimeline, DirectionTimeline, HistInterval, rebin

LOG_INTERVAL_MS = 1000  # log_avg_msec and log_hist_msec in the jobs the agent writes
FIO_IO_U_PLAT_BITS = 6  # fio's stat.h: 64 buckets per power-of-two group
FIO_IO_U_PLAT_VAL = 1 << FIO_IO_U_PLAT_BITS


class LogError(ValueError):
    """A fio log that is not in the format fio writes."""


@dataclass(frozen=True)
class LogLine:
    t_ms: int
    value: float
    direction: int  # 0 read, 1 write, 2 trim


def parse_log(text: str) -> list[LogLine]:
    """fio log lines ``time, value, direction, bs, offset[, prio]``."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        try:
            rows.append(LogLine(int(parts[0]), float(parts[1]), int(parts[2])))
        except ValueError:
            raise LogError(f"line {n} is not a fio log line: {line[:80]!r}") from None
    return rows


def plat_idx_to_val(idx: int) -> int:
    """fio's stat.c ``plat_idx_to_val``: the value (ns) that bucket ``idx`` stands for,
    the middle of its range, as an integer the way fio computes it."""
    if idx < (FIO_IO_U_PLAT_VAL << 1):
        return idx
    error_bits = (idx >> FIO_IO_U_PLAT_BITS) - 1
    base = 1 << (error_bits + FIO_IO_U_PLAT_BITS)
    k = idx % FIO_IO_U_PLAT_VAL
    return base + int((k + 0.5) * (1 << error_bits))


@dataclass(frozen=True)
class HistRow:
    t_ms: int
    direction: int
    counts: dict[int, int]  # bucket value (ns) -> completions, non-zero only


def parse_hist_log(text: str) -> list[HistRow]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            fields = [int(x) for x in line.replace(" ", "").split(",") if x != ""]
        except ValueError:
            raise LogError(f"line {n} is not a fio histogram log line") from None
        buckets = fields[3:]
        if len(fields) < 4 or len(buckets) % FIO_IO_U_PLAT_VAL:
            # log_hist_coarseness > 0 merges buckets; the agent never sets it.
            raise LogError(f"line {n} has {len(buckets)} buckets: not fio's full histogram")
        counts = {plat_idx_to_val(i): c for i, c in enumerate(buckets) if c}
        rows.append(HistRow(fields[0], fields[1], counts))
    return rows


def _intervals(
    stamps: Sequence[int], interval_ms: int, *, since_previous: bool = False
) -> list[tuple[int, int]]:
    """[start, end) of each line: the interval that ends at its stamp.

    fio measures each rate over the time since its previous sample, so consecutive lines of
    a job tile time: a line covers the time since the previous one (a few ms more or less
    than ``interval_ms`` as stamps drift; less for a last, partial window, which fio's
    ``finalize_logs`` writes at exit). After a gap of more than one and a half intervals
    (an interval with no I/O wrote no line), or for a job's first line, it covers one
    interval. A histogram line
    (``since_previous``) holds every completion since the previous line, however long ago."""
    out = []
    prev: int | None = None
    for t in stamps:
        if prev is None:
            start = t - interval_ms
        elif since_previous or t - prev <= interval_ms * 3 // 2:
            # fio's __add_samples sets its sample time to now after each line, so the next
            # rate is over exactly the time since: stamps that drift 20 ms late under load
            # still tile time (clamping to one interval left 2 % of the I/Os uncounted).
            start = prev
        else:
            start = t - interval_ms
        out.append((start, t))
        prev = t
    return out


def _by_direction(lines: Iterable[LogLine]) -> dict[int, list[LogLine]]:
    out: dict[int, list[LogLine]] = defaultdict(list)
    for line in lines:
        out[line.direction].append(line)
    for rows in out.values():
        rows.sort(key=lambda r: r.t_ms)
    return out


def _period(
    jobs: Sequence[Mapping[int, list[LogLine]]], interval_ms: int, final: FinalOutput | None
) -> tuple[int, int, int] | None:
    """(start, the end of the lines, end) of the measured period; None when there is none
    (see ``timeline_from_logs``)."""
    spans = []
    for job in jobs:
        stamps = [line.t_ms for rows in job.values() for line in rows]
        if stamps:
            spans.append((min(stamps) - interval_ms, max(stamps)))
    if not spans:
        return None
    start, logged_end = max(s for s, _ in spans), min(e for _, e in spans)
    end = logged_end
    if final is not None:
        # Every job ran fio's measured runtime from its own start. fio starts a client's
        # jobs together; their first stamps still differ by a ms of the helper thread's
        # walk, and starting at the latest one cut that ms of the others' I/O.
        start = min(s for s, _ in spans)
        end = max(logged_end, start + final.runtime_ms)
    if end <= start:
        return None
    return start, logged_end, end


def _hist_with_tail(
    rows: list[HistInterval],
    hists: Sequence[Sequence[HistRow]],
    index: int,
    totals: FinalCounts,
    period: tuple[int, int, int],
) -> list[HistInterval]:
    """The histogram intervals, each within the measured period (``_period``: start, the end
    of the lines, end), and the last, partial one fio's final output holds."""
    start, logged_end, end = period
    rows = [_within(row, start, end) for row in rows]
    lasts = [
        max(r.t_ms for r in mine)
        for mine in ([r for r in h if r.direction == index] for h in hists)
        if mine
    ]
    begin = min(min(lasts, default=logged_end), end - 1)
    return [*rows, *_tail_rows(rows, totals.clat_bins, (begin, end))]


def timeline_from_logs(
    iops_logs: Sequence[str],
    bw_logs: Sequence[str],
    hist_logs: Sequence[str] = (),
    *,
    interval_ms: int = LOG_INTERVAL_MS,
    final: FinalOutput | None = None,
) -> ClientTimeline | None:
    """One client's timeline from its jobs' logs (one text per job and log kind).

    The client's measured period runs from the latest job start to the earliest job end
    (one interval before a job's first line to its last line): there every job was logging.
    With fio's final output (``final``) it is the measured runtime from the first job's
    start: the last, partial interval, for which fio writes no line, is what the final
    totals hold beyond the lines (see ``FinalOutput``). None when the logs hold no line at all.
    """
    jobs = [_by_direction(parse_log(text)) for text in iops_logs]
    period = _period(jobs, interval_ms, final)
    if period is None:
        return None
    start, logged_end, end = period
    bw_jobs = [_by_direction(parse_log(text)) for text in bw_logs]
    hists = [parse_hist_log(text) for text in hist_logs]
    dirs: dict[Direction, DirectionTimeline] = {}
    for index, d in enumerate(DIRECTIONS):
        ios = _rate_intervals(jobs, index, interval_ms, scale=1.0)
        nbytes = _rate_intervals(bw_jobs, index, interval_ms, scale=1024.0)  # KiB/s
        rows = _hist_rows(hists, index, interval_ms) if hists else None
        totals = final.dirs.get(d) if final is not None else None
        tail = (min(logged_end, end - 1), end)
        if totals is not None and rows is not None:
            rows = _hist_with_tail(rows, hists, index, totals, (start, logged_end, end))
        if totals is None and not ios and not nbytes:
            continue
        dirs[d] = DirectionTimeline(
            ios=_binned(ios, start, end, totals.ios if totals else None, tail),
            bytes=_binned(nbytes, start, end, totals.bytes if totals else None, tail),
            hist_rows=rows,
        )
    return ClientTimeline(start_ms=start, end_ms=end, bin_ms=BIN_MS, **dirs)


@dataclass(frozen=True)
class FinalCounts:
    """One direction of fio's final output, all of a client's jobs summed."""

    ios: int
    bytes: int
    clat_bins: Mapping[str, int]  # json+ bins: bucket value ns -> completions


@dataclass(frozen=True)
class FinalOutput:
    """What fio's final output says a client did, for the part its logs miss.

    fio writes a log line when a helper thread's sample falls due (stat.c, ``__add_samples``
    every ``log_avg_msec``; a histogram line when an I/O completes a whole ``log_hist_msec``
    after the last one, ``add_clat_sample``); at the end of the job nothing samples the last,
    partial interval, so up to a second of I/O has no line (a 5 s job logs 4 lines). Its
    final output counts every I/O, though: the I/Os and bytes beyond the lines, and its json+
    histogram less the histogram lines (each line is the difference of two snapshots of that
    very histogram, iolog.c), are the last interval's, which ends at the job's start plus its
    measured runtime. Histogram counts are exact; I/Os and bytes also take up the rounding of
    the logged rates (integers, fio's ``delta * 1000 / spent``)."""

    runtime_ms: int  # fio's measured time of the job (the longest direction's ``runtime``)
    dirs: Mapping[Direction, FinalCounts]


def _binned(
    lines: list[tuple[int, int, float]],
    start: int,
    end: int,
    total: float | None,
    tail: tuple[int, int],
) -> list[float]:
    """The lines' amounts on the grid of [start, end) and, with fio's final count
    (``total``), the tail: what fio counted beyond what the lines put in the window. A
    line's amount is its rate times the span between its stamps, and fio measured that rate
    over its own clock's span: on a busy machine they differ by a few ms, and the lines can
    hold more than fio counted (60 I/Os of 179,044 at 60K IOPS). fio's count is the truth:
    then the bins are scaled to it, and the tail is empty."""
    bins = rebin(lines, start, end)
    if total is None:
        return bins
    inside = sum(bins)
    if inside > total > 0:
        return [v * total / inside for v in bins]
    return rebin([*lines, (*tail, total - inside)], start, end)


def _within(row: HistInterval, start: int, end: int) -> HistInterval:
    """A histogram line's span cut to the measured period [start, end). fio writes a
    histogram line when an I/O completes a whole interval after the last line, not on the
    helper thread's tick that stamps the rate lines, so its first line can be stamped before
    the first rate line (16 ms on a busy machine): spread over the second before its stamp,
    part of its completions fell before the period and out of every window. They are
    completions of the job, which ran only in the period."""
    a = min(max(row.start_ms, start), end - 1)
    b = max(min(row.end_ms, end), a + 1)
    if (a, b) == (row.start_ms, row.end_ms):
        return row
    return HistInterval(start_ms=a, end_ms=b, counts=row.counts)


def _tail_rows(
    rows: Sequence[HistInterval], final_bins: Mapping[str, int], tail: tuple[int, int]
) -> list[HistInterval]:
    """The last histogram interval: the final bins less every line."""
    logged: dict[int, float] = defaultdict(float)
    for row in rows:
        for k, v in row.counts.items():
            logged[int(k)] += v
    counts = {
        str(k): float(v) - logged.get(int(k), 0.0)
        for k, v in final_bins.items()
        if float(v) - logged.get(int(k), 0.0) > 0
    }
    return [HistInterval(start_ms=tail[0], end_ms=tail[1], counts=counts)] if counts else []


def _rate_intervals(
    jobs: Sequence[Mapping[int, Sequence[LogLine]]], direction: int, interval_ms: int, scale: float
) -> list[tuple[int, int, float]]:
    """(start, end, amount) per line: rate x interval length."""
    out = []
    for job in jobs:
        rows = job.get(direction, [])
        for (a, b), row in zip(_intervals([r.t_ms for r in rows], interval_ms), rows, strict=True):
            out.append((a, b, row.value * scale * (b - a) / 1000))
    return out


def _hist_rows(
    hists: Sequence[Sequence[HistRow]], direction: int, interval_ms: int
) -> list[HistInterval]:
    """Every job's histogram lines of one direction, each with the interval it covers."""
    out: list[HistInterval] = []
    for rows in hists:
        mine = sorted((r for r in rows if r.direction == direction), key=lambda r: r.t_ms)
        spans = _intervals([r.t_ms for r in mine], interval_ms, since_previous=True)
        for (a, b), row in zip(spans, mine, strict=True):
            if b > a:
                counts = {str(k): float(v) for k, v in row.counts.items()}
                out.append(HistInterval(start_ms=a, end_ms=b, counts=counts))
    return out


def final_output(doc: Mapping[str, Any]) -> FinalOutput:
    """What the logs' last, partial interval is read from (core.engines.fio_logs)."""
    dirs = directions_from_fio(doc)
    return FinalOutput(
        runtime_ms=max((r.runtime_ms for r in dirs.values()), default=0),
        dirs={
            d: FinalCounts(ios=r.total_ios, bytes=r.io_bytes, clat_bins=r.clat_bins_ns)
            for d, r in dirs.items()
        },
    )
