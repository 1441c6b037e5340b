"""Turn a typed Workload into a fio job file.

The agent never passes user text to fio: every value written here comes from a bounded,
typed field, and the only path is the mount directory the agent was configured with.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from core.models import Workload

# fio treats ':' in directory= as a list separator and '\n' would end the option line.
_FORBIDDEN_IN_PATH = (":", "\n", "\r", "\0", "$", ";")


def check_path(path: str) -> str:
    p = PurePosixPath(path)
    if not p.is_absolute():
        raise ValueError(f"fio data directory must be absolute: {path!r}")
    if any(c in path for c in _FORBIDDEN_IN_PATH):
        raise ValueError(f"fio data directory has a character fio would misread: {path!r}")
    return str(p)


def job_file(workload: Workload, *, directory: str, log_prefix: str, jobname: str = "bench") -> str:
    """A fio job: time-based, per-job files under ``directory``, 1 s IOPS/bandwidth logs.

    ``log_unix_epoch`` stamps log lines with Unix ms so clients on different machines can be
    lined up second by second (fio HOWTO, "log_unix_epoch"); ``log_avg_msec=1000`` averages
    each line over one second instead of logging every I/O.
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
        ("directory", check_path(directory)),
        ("log_avg_msec", 1000),
        ("log_unix_epoch", 1),
        ("write_iops_log", check_path(log_prefix)),
        ("write_bw_log", check_path(log_prefix)),
    ]
    if w.rw in ("rw", "randrw"):
        opts.append(("rwmixread", w.rwmixread))
    lines = ["[global]", *(f"{k}={v}" for k, v in opts), f"[{jobname}]", ""]
    return "\n".join(lines)
