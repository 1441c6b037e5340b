"""The clock fio times with on this host, asked of fio when an agent process starts, so that
every job the agent writes names it (``clocksource``, core.engines.fio_job.ClockSource).

Left to pick, fio decides at every start, and where the CPU's TSC is invariant it first
tests the TSC (fio's gettime.c, fio_monotonic_clocktest: a second calibration, 50 spins of
1.28 ms, then the TSC read on every CPU at once): about 60 of the 140 ms of CPU a fio takes
to start here (fio-3.33, 2026-11-27; 32 agents start theirs together on 2 cores before the
step can start). Named in the job, the test is skipped and the clock named is used, so
naming a clock fio picks keeps what it measures and saves the test. fio says what it
picked with ``--debug=time`` ("gettime: clocksource=N", its gettime.h numbering), which
this reads from a job parsed and not run.

fio's pick is not always the same on one host: its test wants every TSC read across CPUs
in order, and on a VM whose CPUs' TSCs differ by a cycle or two it fails now and then (on
this machine at 18 of 30 starts, "CPU clock mismatch (diff=2)", 2026-11-29), and fio then
times with clock_gettime. So the CPU clock is named only when fio took it at every one of
ASKS starts; at the first start it did not, the clock it fell back to is named.
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess
from collections.abc import Iterable

from core.engines.fio_job import ClockSource

log = logging.getLogger(__name__)
PICKED = re.compile(r"gettime: clocksource=(\d+)")
# fio's gettime.h: enum fio_cs { CS_GTOD = 1, CS_CGETTIME, CS_CPUCLOCK, CS_INVAL }
BY_NUMBER: dict[int, ClockSource] = {1: "gettimeofday", 2: "clock_gettime", 3: "cpu"}


def picked(said: str) -> ClockSource | None:
    """The clock fio's ``--debug=time`` output says it picked (its last word on it)."""
    found = PICKED.findall(said)
    return BY_NUMBER.get(int(found[-1])) if found else None


# fio's own starts asked before naming the CPU clock: ~140 ms of CPU each, once per agent.
ASKS = 3


def settle(picks: Iterable[ClockSource | None]) -> ClockSource | None:
    """The clock to name from fio's picks at successive starts, read only as far as needed:
    the CPU clock only when fio took it at each of ASKS starts; the first other clock fio
    took (its fallback where its test of the TSC failed); None at the first start that
    said nothing (the jobs then name none, and fio picks at each start)."""
    for n, clock in enumerate(picks, start=1):
        if clock != "cpu" or n == ASKS:
            return clock
    return None


def _ask(binary: str) -> ClockSource | None:
    argv = [binary, "--debug=time", "--parse-only", "--name=clock", "--filename=/dev/null"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.info("fio's clock not known (%s): fio picks it at each start", e)
        return None
    return picked(done.stdout + done.stderr) if done.returncode == 0 else None


@functools.cache
def fio_clock(binary: str) -> ClockSource | None:
    """The clock to name in ``binary``'s jobs on this host (``settle``); None when fio
    cannot say (not found, no debug output): then the jobs name none, as before."""
    clock = settle(_ask(binary) for _ in range(ASKS))
    log.info("fio's clock on this host: %s", clock or "not said, fio picks it at each start")
    return clock
