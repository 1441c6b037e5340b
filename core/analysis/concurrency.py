"""How many I/Os a client keeps in flight, and the job shape that keeps a given number
(pure). One definition, used by planning (``target_iops``, ``benchctl plan``), by Little's
law on results, and for both engines.

- fio: one job section per mount, ``numjobs`` jobs each; an asynchronous engine keeps
  ``iodepth`` I/Os in flight per job, a synchronous one a single I/O (fio HOWTO,
  "iodepth": "Note that increasing iodepth beyond 1 will not affect synchronous
  ioengines").
- fio metadata phases (filecreate, filestat, filedelete: synchronous engines, FIO_SYNCIO):
  one operation per job, whatever ``iodepth`` says.
- DiskSpd: ``-t`` threads per target file and ``-o`` outstanding I/Os per thread per file
  (DiskSpd's usage text), over ``files_per_target`` files on each mount.
"""

from __future__ import annotations

import math

from core.models import MAX_IODEPTH, MAX_NUMJOBS, Engine, Workload

ASYNC_ENGINES = ("libaio", "io_uring", "posixaio")
MAX_DEPTH_PER_JOB = 32  # deeper queues per thread buy little and hide latency


def queue_units(engine: Engine, mounts: int, files_per_target: int = 1) -> int:
    """The independent queues a client runs its jobs on: fio sections (one per mount), or
    DiskSpd target files (files per mount x mounts)."""
    return mounts * (files_per_target if engine == "diskspd" else 1)


def _depth(engine: Engine, workload: Workload) -> int:
    if workload.metadata is not None:
        return 1  # fio's file engines are synchronous: one operation per job at a time
    if engine == "diskspd" or workload.ioengine in ASYNC_ENGINES:
        return workload.iodepth
    return 1


def outstanding_ios(
    engine: Engine, workload: Workload, mounts: int, files_per_target: int = 1
) -> int:
    """I/Os one client keeps in flight."""
    return (
        queue_units(engine, mounts, files_per_target) * workload.numjobs * _depth(engine, workload)
    )


def shape_for(
    outstanding: int,
    clients: int,
    *,
    engine: Engine,
    ioengine: str,
    mounts: int,
    files_per_target: int = 1,
) -> dict[str, int]:
    """``numjobs`` and ``iodepth`` that keep at least ``outstanding`` I/Os in flight over
    ``clients`` clients, each loading ``mounts`` mounts (and DiskSpd's files on each):
    the smallest whole shape per queue, one deep queue per job where the engine is
    asynchronous, else one I/O per job. Beyond what a workload may hold (``numjobs`` and
    ``iodepth`` bounds) the shape stops at the bounds."""
    units = clients * queue_units(engine, mounts, files_per_target)
    per_unit = max(1, math.ceil(outstanding / units))
    if engine == "diskspd" or ioengine in ASYNC_ENGINES:
        jobs = min(MAX_NUMJOBS, math.ceil(per_unit / MAX_DEPTH_PER_JOB))
        return {"numjobs": jobs, "iodepth": min(MAX_IODEPTH, math.ceil(per_unit / jobs))}
    return {"numjobs": min(MAX_NUMJOBS, per_unit), "iodepth": 1}
