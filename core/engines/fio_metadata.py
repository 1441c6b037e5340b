"""fio jobs for metadata phases: create, stat, open and delete of many small files (pure).

fio 3.33's file engines do no data I/O: ``filecreate`` times ``open(O_CREAT|O_RDWR)``,
``filestat`` times ``stat()`` and ``filedelete`` times ``unlink()`` of each file as fio
"opens" it (fio's engines/filecreate.c, filestat.c, filedelete.c), and record that time as
a completion-latency sample of the job's direction (read for ``rw=read``, write for
``rw=write``). So each operation is one I/O in fio's JSON (``total_ios``, ``iops``,
``clat_ns`` and its json+ bins; ``lat_ns`` stays 0) and in the per-second IOPS and
histogram logs, exactly like data I/O: the service's results, timelines and common-window
aggregation take them unchanged. Measured here (fio-3.33): 2 jobs x 500 files, create
``write.total_ios`` 1,000 = the files made, clat ``N`` and the bins' sum 1,000.

Tree: fio creates no directory for ``filename_format`` paths when ``create_on_open`` is set
(it fails with ENOENT), so the agent makes the tree before the start barrier: under the
client's tree root, ``dir_depth - 1`` directory levels, then one leaf directory per job,
``j<job>``, holding that job's ``files_per_dir`` files ``f<n>`` (fio's ``$jobnum`` and
``$filenum``). "open" is ``filecreate`` on the files that exist: an open (timed) and a close
(not timed) per file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

from core.engines.fio_job import (
    JOBS_AS_THREADS,
    ClockSource,
    _job_text,
    check_path,
    clock_option,
    start_fifo_command,
)
from core.models import Direction, Metadata, MetadataOp, Workload

ENGINE: dict[MetadataOp, str] = {
    "create": "filecreate",
    "stat": "filestat",
    "open": "filecreate",
    "delete": "filedelete",
}
# Where fio records each operation's latency: the direction its job's rw names.
DIRECTION: dict[MetadataOp, Direction] = {
    "create": "write",
    "stat": "read",
    "open": "read",
    "delete": "write",
}
# create and delete do each file once; stat and open loop over the files for the runtime.
COUNTED: tuple[MetadataOp, ...] = ("create", "delete")
FILENAME_FORMAT = "j$jobnum/f$filenum"
# fio's accounting needs a non-zero file size (examples/filecreate-ioengine.fio); with
# create_on_open nothing is laid out, and no data I/O is done by these engines.
ACCOUNTING_SIZE = 4096


def phase_of(workload: Workload) -> MetadataOp:
    md = workload.metadata
    if md is None or md.op is None:
        raise ValueError("not a metadata phase: workload.metadata.op is not set")
    return md.op


def parent_dir(root: str, md: Metadata) -> str:
    """The directory above the jobs' leaf directories: ``dir_depth - 1`` levels down."""
    p = PurePosixPath(root)
    for level in range(1, md.dir_depth):
        p = p / f"d{level}"
    return str(p)


def leaf_dirs(root: str, md: Metadata, numjobs: int) -> list[str]:
    parent = parent_dir(root, md)
    return [f"{parent}/j{j}" for j in range(numjobs)]


def tree_files(root: str, md: Metadata, numjobs: int) -> list[str]:
    return [f"{d}/f{n}" for d in leaf_dirs(root, md, numjobs) for n in range(md.files_per_dir)]


def files_per_client(workload: Workload, mounts: int) -> int:
    md = workload.metadata
    return 0 if md is None else md.files_per_dir * workload.numjobs * mounts


def metadata_job_file(
    workload: Workload,
    *,
    roots: Mapping[str, str],
    log_prefix: str,
    start_fifo: str | None = None,
    clocksource: ClockSource | None = None,
) -> str:
    """One section per mount (its alias), ``numjobs`` jobs each, every job on the files of
    its own leaf directory under that mount's tree root; logs and clock as for data jobs."""
    op = phase_of(workload)
    md = workload.metadata
    assert md is not None
    w = workload
    opts: list[tuple[str, str | int]] = [
        ("ioengine", ENGINE[op]),
        ("rw", "write" if DIRECTION[op] == "write" else "read"),
        ("numjobs", w.numjobs),
        ("nrfiles", md.files_per_dir),
        ("openfiles", 1),
        ("filesize", ACCOUNTING_SIZE),
        ("bs", ACCOUNTING_SIZE),
        ("create_on_open", 1),
        ("filename_format", FILENAME_FORMAT),
        ("runtime", w.runtime),
        ("group_reporting", 1),
        JOBS_AS_THREADS,
        ("log_avg_msec", 1000),
        ("log_unix_epoch", 1),
        # No bandwidth log: these engines move no data (fio counts a nominal 4 KiB per
        # operation, which the result does not report as bytes).
        ("write_iops_log", check_path(log_prefix)),
        ("write_hist_log", check_path(log_prefix)),
        ("log_hist_msec", 1000),
        ("log_hist_coarseness", 0),
    ]
    if op != "create":
        opts.append(("allow_file_create", 0))  # a missing file is an error, never made
    if op not in COUNTED:
        opts.append(("time_based", 1))
    if w.rate_iops is not None:
        opts.append(("rate_iops", max(1, round(w.rate_iops / (w.numjobs * len(roots))))))
    if start_fifo is not None:
        opts.append(("exec_prerun", start_fifo_command(start_fifo)))
    opts += clock_option(clocksource)
    dirs = {alias: parent_dir(check_path(root), md) for alias, root in roots.items()}
    return _job_text(opts, dirs)
