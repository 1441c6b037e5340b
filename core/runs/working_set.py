"""The working set a run lays out (pure): what one client's files hold, checked against
its caller's role (core.runs.guardrails, ROLES). A read lays its files out too, so this
bounds what any run can write on a mount: the run that filled a mount had 256 jobs x 16 TiB.
"""

from __future__ import annotations

from core.analysis.concurrency import queue_units
from core.catalogue import get_profile
from core.errors import FieldError
from core.models import Engine, RunRequest, Workload
from core.models.planned import KnownWorkloads

GIB, TIB = 1 << 30, 1 << 40


def working_set(engine: Engine, workload: Workload, mounts: int, files_per_target: int = 1) -> int:
    """Bytes one client's files hold: fio gives every job a file of ``size`` on each mount;
    DiskSpd's threads share ``files_per_target`` files of ``size`` on each mount (-t is
    threads per target file, DiskSpd's usage text)."""
    if workload.metadata is not None:
        # A metadata tree: many files of at most 64 KiB (capped by count, core.runs.metadata)
        return (
            workload.numjobs
            * mounts
            * workload.metadata.files_per_dir
            * (workload.metadata.file_size)
        )
    files = queue_units(engine, mounts, files_per_target)
    if engine == "fio":
        files *= workload.numjobs
    return files * workload.size_bytes


def working_set_errors(
    request: RunRequest, measured: KnownWorkloads, role: str, cap: int
) -> list[FieldError]:
    """Every step's working set against the role's cap: ``workload.size`` when one file per
    mount is already over it, else ``workload.numjobs``, the multiplier that takes it over."""
    mounts = len(request.all_targets)
    try:
        per_target = get_profile(request.profile).files_per_target if request.profile else 1
    except KeyError:
        per_target = 1  # an unknown profile is refused (400) before this check
    errors: dict[str, FieldError] = {}
    for spec, w in measured:
        total = working_set(request.engine, w, mounts, per_target)
        if total <= cap or w.metadata is not None:
            continue
        one_job = working_set(
            request.engine, w.model_copy(update={"numjobs": 1}), mounts, per_target
        )
        field = "workload.size" if one_job > cap or request.engine != "fio" else "workload.numjobs"
        files = total // w.size_bytes
        what = f"{files} file{'s' if files > 1 else ''} x {w.size} = {human_bytes(total)}"
        step = f" (step {spec.point})" if spec.point else ""
        errors.setdefault(
            field,
            FieldError(
                field,
                f"the working set is {what} per client{step}; role {role} may use "
                f"{human_bytes(cap)} at most",
            ),
        )
    return list(errors.values())


def human_bytes(n: int) -> str:
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{n:,} B"
