"""Is a fio output a measurement? (pure)

A run that fio ended with an error, that did no I/O in a direction it was asked for, that
stopped well short of its runtime or that reports zero latency is not a result, however
plausible its IOPS look: the agent fails the item with these reasons and fio's own message
instead of storing it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping
from typing import Any

from core.engines.fio_metadata import COUNTED, DIRECTION, files_per_client, phase_of
from core.engines.fio_output import DIRECTIONS, jobs_of, percentile_key
from core.models import Direction, Workload

# fio's time_based runtime ends within a few ms of the asked one (measured here: 2,001 ms
# for 2 s, 6,001 ms for 6 s); a run that ended more than 10 % early was stopped by
# something (an error, a signal). Overruns come from I/Os still in flight when the time is
# up: allow 10 % plus 10 s before calling the run something else than what was asked.
SHORT_FRACTION = 0.9
LONG_FRACTION = 1.1
LONG_SLACK_MS = 10_000
MAX_FIO_MESSAGES = 5


def directions_asked(workload: Workload) -> tuple[Direction, ...]:
    """The directions the job must do I/O in: a mix with rwmixread 0 or 100 is one-sided."""
    if workload.rw in ("read", "randread"):
        return ("read",)
    if workload.rw in ("write", "randwrite"):
        return ("write",)
    if workload.rwmixread == 100:
        return ("read",)
    if workload.rwmixread == 0:
        return ("write",)
    return DIRECTIONS


def fio_messages(*texts: str) -> list[str]:
    """fio's own error lines ("fio: ...", as it prints them to stderr or before the JSON in
    --output), deduplicated, in order, the last few."""
    seen: dict[str, None] = {}
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("fio:"):
                seen.setdefault(line, None)
    return list(seen)[-MAX_FIO_MESSAGES:]


def _ss_attained(jobs: Iterable[Mapping[str, Any]]) -> bool:
    # fio's steady-state detection ends the job early once attained (fio HOWTO, "Steady
    # state"): a short runtime is then what was asked for.
    return any(bool(j.get("steadystate", {}).get("attained")) for j in jobs)


def measurement_problems(
    doc: Mapping[str, Any], workload: Workload, *, mounts: int = 1
) -> list[str]:
    """Why this fio JSON document is not a valid measurement of ``workload``; empty when
    it is one. Reads fio's per-job ``error`` (an errno), each direction's ``total_ios``,
    ``runtime`` (ms, excluding ramp_time) and latency stats (ns). A metadata phase has
    checks of its own (``metadata_problems``)."""
    jobs = jobs_of(doc)
    if not jobs:
        return ["fio reported no jobs"]
    problems = _job_errors(jobs)
    if workload.metadata is not None:
        return problems + metadata_problems(jobs, workload, mounts)
    for direction in directions_asked(workload):
        ios = sum(int(j.get(direction, {}).get("total_ios", 0)) for j in jobs)
        if ios == 0:
            problems.append(f"fio did no {direction} I/O (rw={workload.rw})")
    problems += _runtime_problems(jobs, workload)
    problems += _latency_problems(jobs)
    return problems


def _job_errors(jobs: list[Mapping[str, Any]]) -> list[str]:
    problems = []
    for job in jobs:
        error = int(job.get("error", 0))
        if error:
            problems.append(
                f"fio job {job.get('jobname', '?')} ended with error {error} ({os.strerror(error)})"
            )
    return problems


def metadata_problems(jobs: list[Mapping[str, Any]], workload: Workload, mounts: int) -> list[str]:
    """A create or delete phase must have done every file of the tree exactly once (fio
    stops at ``runtime`` otherwise: the phase is then incomplete, not a figure); a stat or
    open phase must have run for its runtime. Every operation must carry its latency
    sample (json+ bins sum to the operations) and the latencies must be non-zero. These
    engines record no ``lat_ns`` (only completion latency), so it is not checked."""
    op = phase_of(workload)
    d = DIRECTION[op]
    ios = sum(int(j.get(d, {}).get("total_ios", 0)) for j in jobs)
    problems = []
    if op in COUNTED:
        expected = files_per_client(workload, mounts)
        if ios != expected:
            problems.append(
                f"fio did {ios:,} {op} operations of the {expected:,} files in the tree"
                f" (runtime {workload.runtime} s is the phase's limit)"
            )
    elif ios == 0:
        problems.append(f"fio did no {op} operation")
    else:
        problems += _runtime_problems(jobs, workload)
    live = [j[d] for j in jobs if int(j.get(d, {}).get("total_ios", 0)) > 0]
    samples = sum(sum(int(v) for v in x.get("clat_ns", {}).get("bins", {}).values()) for x in live)
    if live and samples != ios:
        problems.append(f"fio's latency bins hold {samples:,} samples for {ios:,} {op}s")
    for x in live:
        clat = x.get("clat_ns", {})
        p50 = float(clat.get("percentile", {}).get(percentile_key(50), 0))
        if min(p50, float(clat.get("mean", 0))) <= 0:
            problems.append(f"fio reported zero {op} latency")
            break
    return problems


def _runtime_problems(jobs: list[Mapping[str, Any]], workload: Workload) -> list[str]:
    asked_ms = workload.runtime * 1000
    measured_ms = max(
        (int(j.get(d, {}).get("runtime", 0)) for j in jobs for d in DIRECTIONS), default=0
    )
    if measured_ms < asked_ms * SHORT_FRACTION and not (
        workload.steadystate is not None and _ss_attained(jobs)
    ):
        return [f"fio measured for {measured_ms / 1000:g} s of the {workload.runtime} s asked"]
    if measured_ms > asked_ms * LONG_FRACTION + LONG_SLACK_MS:
        return [f"fio measured for {measured_ms / 1000:g} s, not the {workload.runtime} s asked"]
    return []


def _latency_problems(jobs: list[Mapping[str, Any]]) -> list[str]:
    problems = []
    for direction in DIRECTIONS:
        live = [j[direction] for j in jobs if int(j.get(direction, {}).get("total_ios", 0)) > 0]
        for d in live:
            p50 = float(d.get("clat_ns", {}).get("percentile", {}).get(percentile_key(50), 0))
            lat_mean = float(d.get("lat_ns", {}).get("mean", 0))
            clat_mean = float(d.get("clat_ns", {}).get("mean", 0))
            if min(p50, lat_mean, clat_mean) <= 0:
                problems.append(
                    f"fio reported zero {direction} latency (lat mean {lat_mean:g} ns, "
                    f"clat mean {clat_mean:g} ns, clat p50 {p50:g} ns)"
                )
                break
    return problems


# Errors no retry gets past, on this agent or another of the pool (they mount the same
# target): it is full (ENOSPC: bytes or inodes), over its quota, mounted read-only, or
# refuses the agent (access or permission).
PERMANENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
# fio's words for them (it prints the C library's strerror, as Python's os.strerror), and
# for an ioengine this fio cannot load.
PERMANENT_MARKERS = (*sorted(os.strerror(e) for e in PERMANENT_ERRNOS), "not loadable")


def permanent_failure(messages: Iterable[str]) -> bool:
    return any(marker in m for m in messages for marker in PERMANENT_MARKERS)


def rejection(problems: list[str], messages: list[str]) -> str:
    """The item's failure text: our reasons, then fio's own words."""
    text = "not a valid measurement: " + "; ".join(problems)
    if messages:
        text += ". fio said: " + " | ".join(messages)
    return text
