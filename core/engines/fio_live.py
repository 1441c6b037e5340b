"""fio's status outputs, read while it runs, into live samples (pure).

With ``--status-interval`` fio writes its whole JSON output every interval, each cumulative
since the measured start (core.engines.fio_status). The difference of two consecutive
outputs is what fio counted in between: per direction, ``total_ios`` and ``io_bytes`` (the
counters its final iops and bandwidth come from) and, from ``lat_ns``' count and mean,
the mean total latency of the interval's completions ((mean2*N2 - mean1*N1) / (N2 - N1):
fio keeps the mean of all samples, so mean*N is their sum).

A status output's ``io_bytes`` and ``total_ios`` are not read at one moment: fio copies each
job's bytes, then waits for the job to post its rusage (stat.c, ``__show_running_run_stats``),
and only then reads its I/O counts and stamps ``timestamp_ms``. A second's bytes thus count a
slightly earlier second than its I/Os (a live test saw 395 I/Os' worth against 400 at 400
IOPS). Where every I/O is one block size (the project's jobs: one ``bs``), a sample's bytes
are its I/Os times that size, so the two agree; they still add up to fio's final bytes.

A sample's interval is timed by fio's own clock of the measured period, each direction's
``runtime`` (ms since its counters started), not by the outputs' stamps: fio stops its I/O
at the end of its runtime, and its last status output usually comes after that, as the job
winds down (3 of 3 runs of a 6 s job here, unloaded: up to 32 ms later; 8 of 10 under CPU
load: 20-60 ms). Stamp to stamp, that last second divided its I/Os by time fio was no longer
measuring, and read low (a live test saw 372.8 IOPS against a cap of 400; fio's runtime
said 397 I/Os in 1000 ms where the stamps said 1060 ms). The interval ends at the wall-clock
instant of fio's counters' start (the first measured output's stamp less its runtime) plus
its runtime; an fio that writes no runtime is timed by its stamps.

Outputs before the measured start (fio waits at its gate, then the ramp) are not counted:
fio resets its counters when the ramp ends, and records no latency during it, so an output
with I/Os but no latency sample is still in the ramp whatever the clocks say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.models import Direction
from core.models.live import MAX_INTERVAL_MS, LiveDirection, LiveSample

DIRECTIONS: tuple[Direction, ...] = ("read", "write")
# A status output this soon after the previous one (fio's final output, a few ms after the
# last status output) is not a sample of its own: a 20 ms interval's rate is noise. It is
# folded into the next interval instead, if any.
MIN_INTERVAL_MS = 500


@dataclass(frozen=True)
class Count:
    """One direction's cumulative counters in one status output."""

    ios: int = 0
    bytes: int = 0
    lat_n: int = 0
    lat_sum_ns: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    t_ms: int
    counts: Mapping[Direction, Count]
    # fio's measured time so far: the longest ``runtime`` of any job and direction (ms);
    # None from an fio that writes none.
    run_ms: int | None = None

    @property
    def in_ramp(self) -> bool:
        return any(c.ios > 0 and c.lat_n == 0 for c in self.counts.values())


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def snapshot(doc: Mapping[str, Any]) -> Snapshot | None:
    """A status output's counters, summed over its jobs (one with group_reporting); None
    for an object that is no fio output (no ``timestamp_ms``)."""
    t = doc.get("timestamp_ms")
    jobs = doc.get("jobs")
    if not isinstance(t, int) or not isinstance(jobs, list):
        return None
    counts: dict[Direction, Count] = {}
    runtimes: list[int] = []
    for d in DIRECTIONS:
        ios = total = n = 0
        lat_sum = 0.0
        for job in jobs:
            part = job.get(d) if isinstance(job, Mapping) else None
            if not isinstance(part, Mapping):
                continue
            found = part.get("lat_ns")
            lat: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            if isinstance(part.get("runtime"), int):
                runtimes.append(part["runtime"])
            ios += int(_num(part.get("total_ios")))
            total += int(_num(part.get("io_bytes")))
            # Older fio has no N: its completions are then its I/Os.
            job_n = int(_num(lat.get("N", part.get("total_ios"))))
            n += job_n
            lat_sum += _num(lat.get("mean")) * job_n
        counts[d] = Count(ios, total, n, lat_sum)
    return Snapshot(t, counts, max(runtimes) if runtimes else None)


def _direction(now: Count, then: Count, io_size: int | None) -> LiveDirection:
    n = now.lat_n - then.lat_n
    mean = (now.lat_sum_ns - then.lat_sum_ns) / n if n > 0 else None
    ios = now.ios - then.ios
    return LiveDirection(
        ios=ios,
        bytes=ios * io_size if io_size is not None else now.bytes - then.bytes,
        lat_mean_ns=None if mean is None else max(0.0, round(mean, 1)),
    )


class LiveSampler:
    """One client's status outputs, in order, into samples of the measured period that
    begins at ``measured_from_ms`` (Unix ms: the gate's release plus the ramp). ``io_size``:
    the one size of every I/O, if the job has one (its bytes are then I/Os times it)."""

    def __init__(
        self,
        measured_from_ms: int,
        min_interval_ms: int = MIN_INTERVAL_MS,
        io_size: int | None = None,
    ) -> None:
        self._since_ms = measured_from_ms
        self._io_size = io_size
        self._then: Mapping[Direction, Count] = {}
        self._then_run_ms = 0  # fio's runtime at ``_then`` (0: its counters' start)
        self._origin_ms = 0  # Unix ms of fio's counters' start, on its runtime clock
        self._min_ms = min_interval_ms
        self._seen: set[Direction] = set()

    def _interval(self, snap: Snapshot) -> tuple[int, int]:
        """The interval since the last sample, as Unix ms (start, end): on fio's runtime
        clock where it has one (see the module's note), else from stamp to stamp."""
        if snap.run_ms is None:
            return self._since_ms, snap.t_ms
        if not self._then:  # its counters' start (after a reset: a gap fio did not count)
            self._origin_ms, self._then_run_ms = snap.t_ms - snap.run_ms, 0
        return self._origin_ms + self._then_run_ms, self._origin_ms + snap.run_ms

    def _in_ramp(self, snap: Snapshot) -> bool:
        """Whether this output is still fio's ramp: it says so by its latency, or, as the
        first output counted, its runtime counts from before the measured start (the
        job's, not the counters': an fio that writes no lat_ns.N has no latency to tell
        its ramp by)."""
        if snap.in_ramp:
            return True
        if self._then or snap.run_ms is None:
            return False
        return snap.t_ms - snap.run_ms < self._since_ms - self._min_ms

    def add(self, doc: Mapping[str, Any]) -> LiveSample | None:
        snap = snapshot(doc)
        if snap is None or snap.t_ms <= self._since_ms:
            return None
        zero = Count()
        if any(c.ios < self._then.get(d, zero).ios for d, c in snap.counts.items()):
            self._then = {}  # fio reset its counters after all: count from zero again
        if self._in_ramp(snap):
            self._since_ms, self._then = snap.t_ms, {}  # the ramp ends after this output
            return None
        start, end = self._interval(snap)
        dur = end - start
        if dur < self._min_ms:
            return None
        then, size = self._then, self._io_size
        parts = {d: _direction(c, then.get(d, zero), size) for d, c in snap.counts.items()}
        self._seen |= {d for d, c in snap.counts.items() if c.ios > 0}
        self._since_ms, self._then = end, snap.counts
        self._then_run_ms = snap.run_ms or 0
        return LiveSample(
            end_ms=end,
            dur_ms=min(dur, MAX_INTERVAL_MS),
            read=parts["read"] if "read" in self._seen else None,
            write=parts["write"] if "write" in self._seen else None,
        )
