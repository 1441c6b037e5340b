"""The clock fio times with on this host, asked of fio once per agent process, so that every
job the agent writes names it (``clocksource``, core.engines.fio_job.ClockSource).

Left to pick, fio decides at every start, and where the CPU's TSC is invariant it first
tests the TSC (fio's gettime.c, fio_monotonic_clocktest: a second calibration, 50 spins of
1.28 ms, then the TSC read on every CPU at once): about 60 of the 140 ms of CPU a fio takes
to start here (fio-3.33, 2026-11-27; 32 agents start theirs together on 2 cores before the
step can start). Named in the job, the test is skipped and
the clock named is used, so naming the clock fio picks keeps what it measures and saves
the test. fio says what it picked with ``--debug=time`` ("gettime: clocksource=N", its
gettime.h numbering), which this reads from a job parsed and not run.
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess

from core.engines.fio_job import ClockSource

log = logging.getLogger(__name__)
PICKED = re.compile(r"gettime: clocksource=(\d+)")
# fio's gettime.h: enum fio_cs { CS_GTOD = 1, CS_CGETTIME, CS_CPUCLOCK, CS_INVAL }
BY_NUMBER: dict[int, ClockSource] = {1: "gettimeofday", 2: "clock_gettime", 3: "cpu"}


def picked(said: str) -> ClockSource | None:
    """The clock fio's ``--debug=time`` output says it picked (its last word on it)."""
    found = PICKED.findall(said)
    return BY_NUMBER.get(int(found[-1])) if found else None


@functools.cache
def fio_clock(binary: str) -> ClockSource | None:
    """The clock ``binary`` picks on this host; None when fio cannot say (not found, no
    debug output): then the jobs name none and fio picks at each start, as before."""
    argv = [binary, "--debug=time", "--parse-only", "--name=clock", "--filename=/dev/null"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.info("fio's clock not known (%s): fio picks it at each start", e)
        return None
    clock = picked(done.stdout + done.stderr) if done.returncode == 0 else None
    log.info("fio's clock on this host: %s", clock or "not said, fio picks it at each start")
    return clock
