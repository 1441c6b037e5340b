"""Who may run what, where (pure).

A caller has a role; each role caps the clients, the measured duration of a run and the
working set a client lays out, and says whether it may write. A target may be marked
read-only (a production volume someone else's data lives on): runs there only read a data
set prepared beforehand, named by the registry (core.runs.readonly).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import FieldError, Forbidden
from core.limits.facts import DeclaredLimits, TargetFacts
from core.models import POOL_PATTERN, Alias, DataSet, RunRequest, Workload
from core.models.planned import KnownWorkloads, PlannedStep
from core.runs.metadata import (
    ADMIN_FILES,
    ENGINEER_FILES,
    RUNNER_FILES,
    creates_files,
    tree_size_errors,
)
from core.runs.readonly import read_only_errors
from core.runs.working_set import GIB, TIB, working_set_errors

DOORS: tuple[str, ...] = (
    "api",
    "pipeline",
    "cli",
    "schedule",
    "bot-teams",
    "bot-webhook",
    "bot-m365",
)
WRITE_RW = frozenset({"write", "randwrite", "rw", "randrw"})


@dataclass(frozen=True)
class RoleLimits:
    max_clients: int  # 0: may not start runs
    max_duration_s: int  # ramp + measured seconds over all steps (repetitions are steps)
    writes: bool
    manage: bool  # schedules, regression triage
    max_working_set: int = 0  # bytes one client's files hold: size x files (working_set)
    max_files: int = 0  # files one client's metadata tree holds (core.runs.metadata)


# Chat users get small, read-only runs; pipelines and engineers the published scale-out
# sizes (up to 24 clients); admins the service's ceiling.
# Working sets (per client): even a read lays its files out first, a write of the whole
# working set, so a runner's is small: 16 GiB, 64 GiB over its 4 clients, laid out in about
# a minute at 250 MiB/s. Engineers run the published methods on up to 6 mounts per client
# (the ANF scripts' 6 volumes per VM): ANF's Vdbench shape is 25 x 10 GiB per volume
# (1.5 TiB on 6), the managed-disk fio shape 16 x 50 GiB per disk (4.7 TiB on 6): 8 TiB.
# Admins 64 TiB. 256 jobs x 16 TiB (4 PiB, the run that filled a mount) is refused to all.
ROLES: dict[str, RoleLimits] = {
    "reader": RoleLimits(max_clients=0, max_duration_s=0, writes=False, manage=False),
    "runner": RoleLimits(
        max_clients=4,
        max_duration_s=600,
        writes=False,
        manage=False,
        max_working_set=16 * GIB,
        max_files=RUNNER_FILES,
    ),
    "engineer": RoleLimits(
        max_clients=24,
        max_duration_s=4 * 3600,
        writes=True,
        manage=True,
        max_working_set=8 * TIB,
        max_files=ENGINEER_FILES,
    ),
    "admin": RoleLimits(
        max_clients=1000,
        max_duration_s=24 * 3600,
        writes=True,
        manage=True,
        max_working_set=64 * TIB,
        max_files=ADMIN_FILES,
    ),
}
ROLE_ORDER = ("reader", "runner", "engineer", "admin")
AGENT_ROLE = "agent"  # agents call the agent protocol only


@dataclass(frozen=True)
class Caller:
    name: str  # who asked: a user principal name, an API key's name, "schedule:<id>", ...
    role: str
    door: str = "api"
    is_agent: bool = False

    @property
    def limits(self) -> RoleLimits:
        return ROLES.get(self.role, ROLES["reader"])

    def as_doc(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role, "door": self.door}


LOCAL_CALLER = Caller(name="local", role="admin", door="api")


def best_role(names: list[str], default: str) -> str:
    """The highest of the roles in a token (``Bench.Engineer`` or ``engineer``)."""
    found = {n.split(".")[-1].lower() for n in names} & set(ROLE_ORDER)
    return max(found, key=ROLE_ORDER.index) if found else default


class TargetInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alias: Alias
    pool: str = Field("default", pattern=POOL_PATTERN)
    read_only: bool = False
    description: str = Field("", max_length=200)
    # What bounds the target (core.limits): limits declared outright, or the facts they
    # follow from under the published catalogue.
    limits: DeclaredLimits | None = None
    facts: TargetFacts | None = None
    dataset: DataSet | None = Field(
        None, description="read-only targets: the prepared files runs read (never written)"
    )

    @model_validator(mode="after")
    def _dataset_is_read_only(self) -> TargetInfo:
        if self.dataset is not None and not self.read_only:
            raise ValueError(f"target {self.alias}: a dataset is for read-only targets")
        return self


def _problems(index: int, e: ValidationError) -> str:
    return "; ".join(
        f"BENCH_TARGETS[{index}]."
        + ".".join(str(p) for p in err["loc"] if p not in _UNION_TAGS)
        + f": {err['msg']}"
        for err in e.errors()
    )


# pydantic names the branch of a tagged union in an error's location; people name fields.
_UNION_TAGS = {"anf", "azure-files-premium", "managed-disk"}


def parse_targets(text: str) -> list[TargetInfo]:
    """BENCH_TARGETS: a JSON list of {alias, pool, read_only, description, limits, facts}.
    A bad entry is a ValueError naming the entry and the field."""
    if not text.strip():
        return []
    try:
        data: Any = json.loads(text)
    except ValueError as e:
        raise ValueError(f"BENCH_TARGETS is not JSON: {e}") from None
    if not isinstance(data, list):
        raise ValueError("BENCH_TARGETS is not a JSON list of targets")
    targets = []
    for i, entry in enumerate(data):
        try:
            targets.append(TargetInfo.model_validate(entry))
        except ValidationError as e:
            raise ValueError(_problems(i, e)) from None
    return targets


def writes(workload: Workload) -> bool:
    mixed_reads_only = workload.rw in ("rw", "randrw") and workload.rwmixread == 100
    return workload.rw in WRITE_RW and not mixed_reads_only


def check_run(
    request: RunRequest,
    steps: list[PlannedStep],
    base: Workload,
    fill: bool,
    caller: Caller,
    targets: list[TargetInfo],
) -> None:
    """Raise Forbidden naming each limit the request crosses."""
    limits = caller.limits
    errors: list[FieldError] = []
    if limits.max_clients == 0:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not start runs")])
    most = max(s.clients for s in steps)
    if most > limits.max_clients:
        errors.append(
            FieldError("clients", f"role {caller.role} may use at most {limits.max_clients}")
        )
    per_step = [s.workload or base for s in steps]
    duration = sum(w.ramp_time + w.runtime for w in per_step)  # repetitions are steps
    if duration > limits.max_duration_s:
        errors.append(
            FieldError(
                "workload.runtime",
                f"the run lasts {duration} s; role {caller.role} may run "
                f"{limits.max_duration_s} s at most",
            )
        )
    is_write = fill or any(writes(w) for w in per_step)
    if is_write and not limits.writes:
        errors.append(
            FieldError(
                "workload.rw" if not fill else "fill",
                f"role {caller.role} may not run write tests",
            )
        )
    measured = _known_workloads(steps, base)
    errors += working_set_errors(request, measured, caller.role, limits.max_working_set)
    errors += tree_size_errors(request, measured, caller.role, limits.max_files)
    # A metadata run creates and deletes files of its own: a write, wherever it runs.
    errors += read_only_errors(
        request, measured, base, fill, is_write or creates_files(base), _registry(targets)
    )
    if errors:
        raise Forbidden(errors)


def _known_workloads(steps: list[PlannedStep], base: Workload) -> KnownWorkloads:
    """Each step with the workload it will run, where the plan knows it: a rate-curve step
    runs the base workload at a rate; a target_iops step's numjobs is only known once its
    probe has run, so it is left out."""
    known: KnownWorkloads = []
    for s in steps:
        if s.workload is not None:
            known.append((s, s.workload))
        elif s.mode == "rate":
            known.append((s, base))
    return known


def _registry(targets: list[TargetInfo]) -> dict[tuple[str, str], tuple[bool, DataSet | None]]:
    return {(t.pool, t.alias): (t.read_only, t.dataset) for t in targets}


def datasets_for(request: RunRequest, targets: list[TargetInfo]) -> dict[str, DataSet]:
    """The data sets a run reads: its read-only targets' (the run document records them;
    each work item carries them to the agent)."""
    known = {(t.pool, t.alias): t for t in targets}
    return {
        alias: info.dataset
        for alias in request.all_targets
        if (info := known.get((request.pool, alias))) and info.read_only and info.dataset
    }


def unknown_targets(request: RunRequest, targets: list[TargetInfo]) -> list[FieldError]:
    """With a registry configured, runs go only to targets it names."""
    if not targets:
        return []
    known = {(t.pool, t.alias) for t in targets}
    names = ", ".join(sorted(t.alias for t in targets if t.pool == request.pool)) or "none"
    return [
        FieldError(
            "target" if request.target else f"targets.{i}",
            f"no target {alias!r} in pool {request.pool} (known: {names})",
        )
        for i, alias in enumerate(request.all_targets)
        if (request.pool, alias) not in known
    ]
