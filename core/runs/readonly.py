"""Read-only targets are read, never written (pure).

A read-only target is a volume whose data belongs to someone else. Even a read run would
lay its files out there first (fio's create_only pass under ``<mount>/.benchsvc``): a write
of the whole working set. So a run on a read-only target reads a data set prepared
beforehand and named by the target registry, or it does not run: writes and fills are
refused, a target without a data set is refused, and so is a job that would need more or
larger files than the data set holds (a read past the end of a file would make fio extend
it). The agent checks the files again before it starts (agent.dataset).
"""

from __future__ import annotations

from collections.abc import Mapping

from core.errors import FieldError
from core.models import DataSet, RunRequest, Workload
from core.models.planned import KnownWorkloads
from core.units import clients_text

# (pool, alias) -> (read_only, the data set the registry names for it)
Registry = Mapping[tuple[str, str], tuple[bool, DataSet | None]]


def read_only_errors(
    request: RunRequest,
    measured: KnownWorkloads,
    base: Workload,
    fill: bool,
    is_write: bool,
    registry: Registry,
) -> list[FieldError]:
    """One error per read-only target that this run would write on, or that has no data
    set; then each workload field that asks for more than its data set holds."""
    errors: dict[tuple[str, str], FieldError] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault((field, message), FieldError(field, message))

    for i, alias in enumerate(request.all_targets):
        read_only, dataset = registry.get((request.pool, alias), (False, None))
        if not read_only:
            continue
        field = "target" if request.target else f"targets.{i}"
        if is_write:
            if base.metadata is not None:
                add(
                    "workload.metadata",
                    f"target {alias} is read-only: this run creates and deletes files "
                    "(metadata operations); choose a read-write target",
                )
                continue
            what = "fills the working set" if fill else f"writes (rw={base.rw})"
            add(field, f"target {alias} is read-only: this run {what}; choose a read")
            continue
        if dataset is None:
            add(
                field,
                f"target {alias} is read-only and its registry entry names no prepared data "
                "set (dataset): a run would lay out its files there",
            )
            continue
        if request.engine != "fio":
            add(
                "engine",
                f"target {alias} is read-only: its data set is read with fio (DiskSpd lays "
                "out files of its own)",
            )
            continue
        for spec, w in measured:
            for error in dataset_errors(alias, dataset, w, spec.clients):
                add(error.field, error.message)
    return list(errors.values())


def dataset_errors(alias: str, dataset: DataSet, w: Workload, clients: int) -> list[FieldError]:
    """What a step of ``clients`` clients running ``w`` needs beyond ``dataset``: each job
    reads ``size`` bytes of a file of its own (client c, job j: file c x numjobs + j)."""
    errors = []
    if w.size_bytes > dataset.file_size_bytes:
        errors.append(
            FieldError(
                "workload.size",
                f"target {alias}'s data set holds files of {dataset.file_size}; each job "
                f"would read {w.size} of one",
            )
        )
    if w.numjobs > dataset.files:
        errors.append(
            FieldError(
                "workload.numjobs",
                f"target {alias}'s data set holds {dataset.files} files; {w.numjobs} jobs "
                "need one each",
            )
        )
    elif clients * w.numjobs > dataset.files:
        errors.append(
            FieldError(
                "clients",
                f"target {alias}'s data set holds {dataset.files} files; {clients_text(clients)} x "
                f"{w.numjobs} jobs need {clients * w.numjobs} (each client reads its own)",
            )
        )
    return errors
