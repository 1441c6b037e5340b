"""Turn a typed Workload into a fio job file.

The agent never passes user text to fio: every value written here comes from a bounded,
typed field, and the only path is the mount directory the agent was configured with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Literal

from core.models import Workload, check_alias

# fio treats ':' in directory= as a list separator and '\n' would end the option line.
_FORBIDDEN_IN_PATH = (":", "\n", "\r", "\0", "$", ";")


def check_path(path: str) -> str:
    p = PurePosixPath(path)
    if not p.is_absolute():
        raise ValueError(f"fio data directory must be absolute: {path!r}")
    if any(c in path for c in _FORBIDDEN_IN_PATH):
        raise ValueError(f"fio data directory has a character fio would misread: {path!r}")
    return str(p)


# fio forks one process per job unless ``thread`` is set (fio HOWTO, "thread": jobs are
# created with pthread_create instead). As threads, every job lives in the one fio process
# the agent starts, so the kernel's PR_SET_PDEATHSIG on that process (setpriv --pdeathsig)
# ends all of them with the agent; forked job processes would be orphaned and keep loading
# the target.
JOBS_AS_THREADS: tuple[str, int] = ("thread", 1)

# fio's clocks (HOWTO, "clocksource"). Left unnamed, fio picks one at every start: it
# calibrates the CPU's TSC against clock_gettime, and where CPUID says the TSC is invariant
# it also tests it on every CPU at once (gettime.c, fio_clock_init and
# fio_monotonic_clocktest) and takes it if that passes, clock_gettime otherwise. Named,
# fio skips the test (about 60 of a start's 140 ms of CPU here, fio-3.33) and times with the
# clock named; the agent names one fio picks by itself on its host (agent.fio_clock: the
# CPU clock only when fio took it at each of 3 starts), so fio times as a plain fio would.
ClockSource = Literal["gettimeofday", "clock_gettime", "cpu"]

FIFO_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")


def parked_fifo(fifo: str) -> str:
    """The FIFO on which each job's gate says it is there (start_fifo_command)."""
    return f"{fifo}.parked"


def start_fifo_command(fifo: str) -> str:
    """fio's exec_prerun runs just before a job stamps its epoch and starts I/O (fio's
    backend.c, thread_main), after all its start-up. Blocking there on a FIFO that the agent
    writes at the start instant makes the I/O start at that instant, not ~20 ms of process
    start-up later. fio runs it with system(), hence /bin/sh: the text is fixed and the
    path is the agent's own, checked here, never user input.

    First it writes a line to the parked FIFO beside it, which the agent waits on to know
    every job is there (agent.fio_runner) rather than looking every 5 ms (issue 29.3: 32
    agents on 2 cores doing so while 32 fio start up). fio's job files take ";" for the
    start of a comment, hence "|| : &&": the job waits on the start FIFO whether or not
    the line could be written."""
    if not FIFO_PATH.match(fifo):
        raise ValueError(f"start FIFO path has characters a shell could misread: {fifo!r}")
    return f"echo > {parked_fifo(fifo)} || : && read go < {fifo}"


def job_file(
    workload: Workload,
    *,
    directories: Mapping[str, str],
    log_prefix: str,
    start_fifo: str | None = None,
    read_files: Mapping[str, Sequence[str]] | None = None,
    clocksource: ClockSource | None = None,
) -> str:
    """A fio job: time-based, one job section per mount (named by its alias, ``numjobs``
    files each, under that mount's directory), 1 s IOPS/bandwidth and histogram logs.
    A read-only mount's jobs read the files of its data set instead (``read_files``: per
    alias, one existing file per job; see ``_read_only_sections``).

    ``log_unix_epoch`` stamps log lines with Unix ms so clients on different machines can be
    lined up to the millisecond (fio HOWTO, "log_unix_epoch"); ``log_avg_msec=1000``
    averages each line over one second instead of logging every I/O. The histogram log
    (``write_hist_log``, ``log_hist_msec=1000``, full resolution: coarseness 0) gives each
    second's completion-latency buckets, so percentiles can be taken over exactly the
    seconds every client was running. ``group_reporting`` sums all sections into one
    result per direction. Jobs run as threads (see ``JOBS_AS_THREADS``). ``clocksource``:
    the clock fio times with, named (see ``ClockSource``); fio's own pick when None.
    """
    w = workload
    opts: list[tuple[str, str | int]] = [
        ("ioengine", w.ioengine),
        ("direct", int(w.direct)),
        ("rw", w.rw),
        ("bs", w.bs_bytes),
        ("iodepth", w.iodepth),
        ("numjobs", w.numjobs),
        ("size", w.size_bytes),
        ("runtime", w.runtime),
        ("ramp_time", w.ramp_time),
        ("time_based", 1),
        ("group_reporting", 1),
        JOBS_AS_THREADS,
        ("log_avg_msec", 1000),
        ("log_unix_epoch", 1),
        ("write_iops_log", check_path(log_prefix)),
        ("write_bw_log", check_path(log_prefix)),
        ("write_hist_log", check_path(log_prefix)),
        ("log_hist_msec", 1000),
        ("log_hist_coarseness", 0),
        # Total latency's percentiles and json+ histogram beside completion latency's
        # (HOWTO, "lat_percentiles"): what the published methods report (docs/methodology.md).
        ("lat_percentiles", 1),
    ]
    if w.rw in ("rw", "randrw"):
        opts.append(("rwmixread", w.rwmixread))
    if w.rate_iops is not None:
        mounts = len(directories) + len(read_files or {})
        opts.append(("rate_iops", rate_per_job(w, mounts)))
    if w.steadystate is not None:
        ss = w.steadystate
        opts += [
            ("steadystate", f"{ss.metric}:{ss.limit_pct:g}%"),
            ("steadystate_duration", ss.duration_s),
            ("steadystate_ramp_time", ss.ramp_s),
        ]
    if start_fifo is not None:
        opts.append(("exec_prerun", start_fifo_command(start_fifo)))
    opts += clock_option(clocksource)
    sections = _read_only_sections(w, read_files or {})
    return _job_text(opts, directories, sections)


def _read_only_sections(w: Workload, read_files: Mapping[str, Sequence[str]]) -> list[str]:
    """One section per job of a read-only mount, ``[<alias>.<job>]`` (a dot: no alias has
    one, so no name can clash), reading exactly its data set file: ``filename=`` names one
    file for one job (fio HOWTO, "filename"), so ``numjobs=1``. ``allow_file_create=0``:
    fio errors out rather than create a missing file (HOWTO, "allow_file_create"); files
    are not created on open either (``create_on_open`` stays at its default, 0). That alone
    is not enough: a read job whose file is shorter than ``size`` lays it out anew, and fio
    unlinks the file first (filesetup.c, extend_file; fio 3.33 deleted a short data set
    file that way here, then refused to create it). So the agent also runs fio with
    ``--readonly``, which refuses writes, trims and any extend (HOWTO, "--readonly"), and
    checks every file's size beforehand (agent.dataset)."""
    lines = []
    for alias, files in read_files.items():
        if len(files) != w.numjobs:
            raise ValueError(f"{alias}: {len(files)} files for {w.numjobs} jobs")
        for j, path in enumerate(files):
            lines += [
                f"[{check_alias(alias)}.{j}]",
                "numjobs=1",
                f"filename={check_path(path)}",
                "allow_file_create=0",
            ]
    return lines


def _job_text(
    opts: list[tuple[str, str | int]],
    directories: Mapping[str, str],
    sections: Sequence[str] = (),
) -> str:
    """[global] options, then one section per mount named by its alias, then ``sections``."""
    if not directories and not sections:
        raise ValueError("a job needs at least one directory")
    lines = ["[global]", *(f"{k}={v}" for k, v in opts)]
    for alias, directory in directories.items():
        lines += [f"[{check_alias(alias)}]", f"directory={check_path(directory)}"]
    return "\n".join([*lines, *sections, ""])


def clock_option(clocksource: ClockSource | None) -> list[tuple[str, str | int]]:
    """The job's ``clocksource`` line, none when fio is left to pick."""
    return [] if clocksource is None else [("clocksource", clocksource)]


def rate_per_job(w: Workload, sections: int) -> str:
    """fio's rate_iops applies to each job, and to reads and writes separately ("r,w"):
    split the client's total over its jobs, and a mix by its read share."""
    assert w.rate_iops is not None
    per_job = w.rate_iops / (w.numjobs * sections)
    if w.rw in ("rw", "randrw"):
        reads = max(1, round(per_job * w.rwmixread / 100))
        writes = max(1, round(per_job * (100 - w.rwmixread) / 100))
        return f"{reads},{writes}"
    return str(max(1, round(per_job)))


FILL_BS = 64 * 1024  # the ANF method's fill: 64 KiB sequential writes to the end of file


def fill_job_file(
    workload: Workload,
    *,
    directories: Mapping[str, str],
    clocksource: ClockSource | None = None,
) -> str:
    """Writes every file the measured job will use, end to end: same sections, numjobs and
    size, so fio names the files identically (<section>.<job>.0)."""
    opts: list[tuple[str, str | int]] = [
        ("ioengine", workload.ioengine),
        ("direct", int(workload.direct)),
        ("rw", "write"),
        ("bs", FILL_BS if workload.size_bytes >= FILL_BS else workload.bs_bytes),
        ("iodepth", 16),
        ("numjobs", workload.numjobs),
        ("size", workload.size_bytes),
        ("group_reporting", 1),
        JOBS_AS_THREADS,
        *clock_option(clocksource),
    ]
    return _job_text(opts, directories)


def fill_files(workload: Workload, directories: Mapping[str, str]) -> list[str]:
    """The files fio lays out for this job: <directory>/<section>.<job>.0."""
    return [
        f"{d}/{alias}.{j}.0" for alias, d in directories.items() for j in range(workload.numjobs)
    ]
