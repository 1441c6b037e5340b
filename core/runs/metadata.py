"""Metadata runs at intake (pure): what a request may combine with metadata phases, and the
size of the tree each role may create.

A metadata run creates ``files_per_dir`` files in each job's leaf directory on each mount,
per client, then deletes them. The tree is the run's own (like the files a read lays
out), so a runner may run one, but its size is capped by role: a runner's 100,000 files
per client (400,000 over its 4 clients) take a few seconds to create on a premium share;
ten million would keep a share busy for an hour and leave that many files behind if the
run were cut short.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.engines.fio_metadata import files_per_client
from core.errors import FieldError
from core.models import RunRequest, Workload
from core.models.planned import KnownWorkloads
from core.models.state import ItemState
from core.models.stored import Item

RUNNER_FILES = 100_000
ENGINEER_FILES = 4_000_000
ADMIN_FILES = 64_000_000


def ends_later_phases(base: Workload, items: Iterable[Item]) -> bool:
    """A metadata phase works on the tree the one before made: once a client's phase has
    failed, no later phase runs (a delete after a failed create would measure the remains
    of a half-made tree, and store them as a result)."""
    return base.metadata is not None and any(i.state == ItemState.FAILED for i in items)


def creates_files(workload: Workload) -> bool:
    return workload.metadata is not None


def request_errors(request: RunRequest, base: Workload) -> list[FieldError]:
    """Metadata phases run on fio's file engines, one step per phase, as they are."""
    if base.metadata is None:
        return []
    errors = []
    if request.engine != "fio":
        errors.append(
            FieldError("engine", "DiskSpd has no metadata mode: metadata phases run on fio")
        )
    if request.sweep is not None:
        errors.append(FieldError("sweep", "metadata phases are steps already: no sweep"))
    if request.target_iops is not None:
        errors.append(FieldError("target_iops", "not with metadata phases"))
    if request.fill:
        errors.append(FieldError("fill", "a metadata run creates its own tree: nothing to fill"))
    return errors


def tree_size_errors(
    request: RunRequest, measured: KnownWorkloads, role: str, cap: int
) -> list[FieldError]:
    """Each step's tree (files per client) against the role's cap, naming
    ``workload.metadata.files_per_dir`` when one job's directory is over it already, else
    ``workload.numjobs``."""
    mounts = len(request.all_targets)
    for _, w in measured:
        files = files_per_client(w, mounts)
        if w.metadata is None or files <= cap:
            continue
        one_job = w.metadata.files_per_dir * mounts
        field = "workload.metadata.files_per_dir" if one_job > cap else "workload.numjobs"
        return [
            FieldError(
                field,
                f"the tree is {w.metadata.files_per_dir:,} files x {w.numjobs} jobs x "
                f"{mounts} mount{'s' if mounts > 1 else ''} = {files:,} files per client; "
                f"role {role} may create {cap:,} at most",
            )
        ]
    return []
