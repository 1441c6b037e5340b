"""fio's status output read into total-latency histogram rows (pure).

fio's histogram log holds completion latency only: ``write_hist_log`` "writes an I/O
completion latency histogram file" (fio HOWTO), and stat.c's ``add_clat_sample`` copies
``io_u_plat[FIO_CLAT]`` into each line whatever ``lat_percentiles`` says. Total latency
(submission + completion: what the application waits for an I/O, ``lat_percentiles=1``)
has a json+ histogram of its own, ``lat_ns.bins``, and with ``--status-interval`` fio
writes its whole json+ output every interval while the jobs run, each cumulative since the
measured start. The difference of two consecutive outputs is the completions of that
interval by total latency, in the buckets json+ uses: the total-latency histogram log fio
does not write. The last interval, from the last status output to the end, is the final
output less it (as for the completion histogram, core.engines.fio_logs.FinalOutput).

A status output is a snapshot of counters the jobs keep incrementing, so one may split an
interval a few I/Os differently from the next; the counts still telescope to fio's final
histogram exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engines.fio_output import directions_from_fio
from core.models import Direction
from core.models.result import FioJson
from core.timeline import DIRECTIONS, ClientTimeline, DirectionTimeline, HistInterval

MAX_STATUS_OUTPUTS = 3600  # a long run's status interval grows so its output stays bounded


def status_interval_s(measured_s: int) -> int:
    """1 s, or longer for a run over an hour (the output is a json+ document per interval:
    about 30 kB for one direction)."""
    return max(1, math.ceil(measured_s / MAX_STATUS_OUTPUTS))


@dataclass(frozen=True)
class Snapshot:
    """One status output, reduced to what the rows need: its instant and, per direction,
    the cumulative total-latency histogram (bucket value ns -> completions)."""

    t_ms: int
    bins: Mapping[Direction, Mapping[int, int]]


@dataclass(frozen=True)
class StatusOutput:
    notes: str  # what fio wrote before its first JSON object (its error lines)
    final: FioJson | None  # the last object: fio's final output
    status: list[Snapshot]  # the objects before it, as snapshots


def read_output(text: str) -> StatusOutput:
    """fio's --output with --status-interval: notes, then one JSON object per status output,
    the final output last. Text that does not parse after the last object (fio killed
    while writing) ends the list. Each status object is reduced as it is read, so a long
    run's outputs are never all held at once."""
    start = text.find("{")
    if start < 0:
        return StatusOutput(text, None, [])
    decoder = json.JSONDecoder()
    snapshots: list[Snapshot] = []
    last: FioJson | None = None
    at = start
    while at >= 0:
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            break
        if isinstance(doc, dict):
            if last is not None and "timestamp_ms" in last:
                snapshots.append(Snapshot(int(last["timestamp_ms"]), _lat_bins(last)))
            last = doc
        at = text.find("{", at)
    return StatusOutput(text[:start], last, snapshots)


def _lat_bins(doc: Mapping[str, Any]) -> dict[Direction, dict[int, int]]:
    return {
        d: {int(k): int(v) for k, v in r.lat_bins_ns.items()}
        for d, r in directions_from_fio(doc).items()
    }


def total_latency_rows(
    status: Sequence[Snapshot],
    final: Mapping[str, Any],
    *,
    start_ms: int,
    end_ms: int,
) -> dict[Direction, list[HistInterval]]:
    """Per direction, the total-latency histogram of each interval between status outputs
    inside the measured period ``[start_ms, end_ms]`` (the client's timeline's: fio resets
    its counters when the ramp ends, so outputs before the start are not counted), the last
    interval ending at ``end_ms`` with the final output. Empty without json+ ``lat_ns``
    bins (fio ran without ``lat_percentiles``)."""
    final_bins = _lat_bins(final)
    if not any(final_bins.values()):
        return {}
    snapshots = sorted(
        ((s.t_ms, s.bins) for s in status if start_ms < s.t_ms < end_ms), key=lambda s: s[0]
    )
    snapshots.append((end_ms, final_bins))
    out: dict[Direction, list[HistInterval]] = {d: [] for d in DIRECTIONS if d in final_bins}
    before: Mapping[Direction, Mapping[int, int]] = {}
    begin = start_ms
    for t, bins in snapshots:
        if t <= begin:
            continue
        for d, rows in out.items():
            now, then = bins.get(d, {}), before.get(d, {})
            counts = {str(k): float(v - then.get(k, 0)) for k, v in now.items()}
            counts = {k: v for k, v in counts.items() if v > 0}
            if counts:
                rows.append(HistInterval(start_ms=begin, end_ms=t, counts=counts))
        before, begin = bins, t
    return {d: rows for d, rows in out.items() if rows}


def with_total_latency(
    timeline: ClientTimeline | None, output: StatusOutput
) -> ClientTimeline | None:
    """The timeline with its total-latency rows (none without a final output)."""
    if timeline is None or output.final is None:
        return timeline
    rows = total_latency_rows(
        output.status, output.final, start_ms=timeline.start_ms, end_ms=timeline.end_ms
    )
    update: dict[str, DirectionTimeline] = {}
    for d, mine in rows.items():
        dt = timeline.direction(d)
        if dt is not None:
            update[d] = dt.model_copy(update={"lat_rows": mine})
    return timeline.model_copy(update=update) if update else timeline
