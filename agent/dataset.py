"""A read-only target's data set, checked before the start barrier.

On a read-only mount (the work item names its data set) the agent lays out, creates,
extends and writes nothing: its jobs read the data set's files as they are. So before it
reports ready it checks that every file this client will read is there, inside the mount, a
regular file of at least the job's size, and fully allocated; otherwise the item fails at
once (permanently: no retry can make the files appear) saying which file and why. A read of
a hole or of a missing block would be answered without touching the storage, and fio would
lay out (unlink, then rewrite) a file shorter than the job's size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from agent.layout import ItemFailed, first_hole
from core.engines.fio_job import check_path
from core.models import DataSet, WorkItem
from core.runs.guardrails import writes

MAX_LISTED = 3  # problems named in the failure message (the rest are counted)


def read_only_files(
    item: WorkItem, mount_path: Callable[[str], str], work_dir: Path
) -> dict[str, list[str]]:
    """Per read-only mount of ``item``, the files its jobs read (job j: the j-th), as real
    absolute paths. Raises ItemFailed (permanent) when the item would write there, its
    work directory lies on such a mount, or a file is not what the data set promises."""
    if not item.datasets:
        return {}
    names = ", ".join(item.datasets)
    if item.fill or writes(item.workload):
        what = "fill" if item.fill else f"rw={item.workload.rw}"
        raise ItemFailed(f"refusing to write on read-only target {names} ({what})", permanent=True)
    if item.engine != "fio":
        raise ItemFailed(
            f"target {names} is read-only: its data set is read with fio only", permanent=True
        )
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    work = os.path.realpath(work_dir)
    for alias, dataset in item.datasets.items():
        root = os.path.realpath(mount_path(alias))
        if _inside(work, root):
            raise ItemFailed(
                f"the agent's work directory {work_dir} is on read-only target {alias}",
                permanent=True,
            )
        found[alias] = _client_files(item, alias, dataset, root, problems)
    if problems:
        more = len(problems) - MAX_LISTED
        listed = "; ".join(problems[:MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")
        raise ItemFailed(
            f"read-only target data set not usable (nothing was written): {listed}",
            permanent=True,
        )
    return found


def _client_files(
    item: WorkItem, alias: str, dataset: DataSet, root: str, problems: list[str]
) -> list[str]:
    numjobs = item.workload.numjobs
    first = dataset.first_file(item.client, numjobs)
    if first + numjobs > dataset.files:
        problems.append(
            f"{alias}: the data set holds {dataset.files} files; client {item.client} with "
            f"{numjobs} jobs reads files {first} to {first + numjobs - 1}"
        )
        return []
    files = []
    for index in range(first, first + numjobs):
        relative = dataset.file_path(index)
        problem = file_problem(root, relative, item.workload.size_bytes)
        if problem:
            problems.append(f"{alias}: {relative} {problem}")
        files.append(os.path.realpath(os.path.join(root, relative)))
    return files


def file_problem(root: str, relative: str, size: int) -> str | None:
    """Why ``root/relative`` cannot be read for ``size`` bytes as real data, or None.

    Fully allocated means both: no hole before ``size`` (lseek SEEK_HOLE, on filesystems
    that report holes) and at least ``size`` bytes allocated (st_blocks, which also gives
    away a sparse file where SEEK_HOLE reports all data, e.g. over NFSv3)."""
    real = os.path.realpath(os.path.join(root, relative))
    if not _inside(real, root):
        return f"leads out of the mount (to {real})"
    try:
        check_path(real)
    except ValueError as e:
        return str(e)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"cannot be read: {e.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size < size:
        return f"holds {st.st_size:,} bytes; the job reads {size:,}"
    hole = first_hole(real, size)
    if hole is not None:
        return f"has a hole at byte {hole:,}: a read there would measure no storage"
    if st.st_blocks * 512 < size:
        return f"is sparse: {st.st_blocks * 512:,} bytes allocated of the {size:,} the job reads"
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
