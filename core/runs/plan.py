"""The plan of steps and work items for a request (pure); ids and keys are core.models.ids.

A run is a list of measured steps run one after another: every client count of the request
times every sweep point, each repeated ``repetitions`` times. Two kinds of step are only
known once an earlier step has run, and are resolved when they are enqueued:
- a rate-curve step runs at a percentage of the IOPS its unthrottled step reached;
- a ``target_iops`` step gets its concurrency from its 1-thread probe's latency
  (Little's law: I/Os in flight = IOPS x latency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from pydantic import ValidationError

from core.analysis.concurrency import shape_for
from core.errors import FieldError, ValidationFailed
from core.models import (
    Engine,
    FieldSweep,
    GridSweep,
    RateSweep,
    RunRequest,
    WorkItem,
    Workload,
)
from core.models.ids import item_id
from core.models.planned import PlannedStep, PlanPoint
from core.models.stored import Run, Step
from core.runs.metadata import request_errors

MAX_TOTAL_STEPS = 64


def plan_steps(request: RunRequest, base: Workload) -> list[PlannedStep]:
    """The step specifications of a run (without ids): stored as step documents."""
    meta_errors = request_errors(request, base)
    if meta_errors:
        raise ValidationFailed(meta_errors)
    points = _points(request, base)
    steps: list[PlannedStep] = []
    for clients in request.client_steps:
        ref: int | None = None
        for point, rep in _order(points, request.repetitions, phases=base.metadata is not None):
            steps.append(
                PlannedStep(
                    **dict(point),
                    step=len(steps),
                    clients=clients,
                    repetition=rep,
                    discarded=request.discard_first and rep == 0 and request.repetitions > 1,
                    ref_step=ref if point.workload is None else None,
                )
            )
            if point.mode in ("rate-max", "probe"):
                ref = len(steps) - 1  # dynamic steps follow their unthrottled/probe step
    if len(steps) > MAX_TOTAL_STEPS:
        raise ValidationFailed(
            [
                FieldError(
                    "sweep",
                    f"{len(steps)} steps (clients x points x repetitions); at most "
                    f"{MAX_TOTAL_STEPS}",
                )
            ]
        )
    return steps


def _points(request: RunRequest, base: Workload) -> list[PlanPoint]:
    """The points of the request's sweep (or its single point), in order."""
    sweep = request.sweep
    if isinstance(sweep, FieldSweep):
        return [
            PlanPoint(
                point=f"{sweep.field}={value}",
                workload=_swept(base, {sweep.field: value}, f"sweep.values.{i}"),
            )
            for i, value in enumerate(sweep.values)
        ]
    if isinstance(sweep, GridSweep):
        return _grid_points(sweep, base)
    if isinstance(sweep, RateSweep):
        return [PlanPoint(mode="rate-max", point="max", workload=base)] + [
            PlanPoint(mode="rate", point=f"rate={pct}%", rate_pct=pct) for pct in sweep.rate_pct
        ]
    if request.target_iops:
        probe = base.model_copy(update={"numjobs": 1, "iodepth": 1, "rate_iops": None})
        return [
            PlanPoint(mode="probe", point="probe 1x1", workload=probe),
            PlanPoint(
                mode="sized",
                point=f"target {request.target_iops} IOPS",
                target_iops=request.target_iops,
            ),
        ]
    if base.metadata is not None:
        return metadata_points(base)
    return [PlanPoint(workload=base)]


def _grid_points(sweep: GridSweep, base: Workload) -> list[PlanPoint]:
    outer, inner = sweep.grid[1], sweep.grid[0]  # the first field varies fastest
    points = []
    for j, b in enumerate(outer.values):
        for i, a in enumerate(inner.values):
            w = _swept(base, {inner.field: a}, f"sweep.grid.0.values.{i}")
            w = _swept(w, {outer.field: b}, f"sweep.grid.1.values.{j}")
            points.append(PlanPoint(point=f"{inner.field}={a},{outer.field}={b}", workload=w))
    return points


def _swept(base: Workload, change: Mapping[str, object], field: str) -> Workload:
    """``base`` with one swept field set; a value the workload refuses names its place."""
    try:
        return Workload.model_validate({**base.model_dump(), **change})
    except ValidationError as e:
        msg = "; ".join(str(x["msg"]) for x in e.errors())
        raise ValidationFailed([FieldError(field, msg)]) from None


def metadata_points(base: Workload) -> list[PlanPoint]:
    """One measured step per metadata phase, in order: each its own figures and window."""
    md = base.metadata
    assert md is not None
    return [
        PlanPoint(
            point=op,
            workload=base.model_copy(update={"metadata": md.model_copy(update={"op": op})}),
        )
        for op in md.ops
    ]


def _order(
    points: list[PlanPoint], repetitions: int, *, phases: bool
) -> list[tuple[PlanPoint, int]]:
    """Each point repeated in place; metadata phases repeat as a whole sequence (a tree is
    created, used and deleted before the next repetition creates it again)."""
    if phases:
        return [(p, rep) for rep in range(repetitions) for p in points]
    return [(p, rep) for p in points for rep in range(repetitions)]


class Reference(Protocol):
    """What a rate-curve or target_iops step takes from its reference step's aggregate
    (core.models.StepFigures)."""

    @property
    def total_iops(self) -> float: ...

    @property
    def mean_latency_s(self) -> float: ...


def outstanding_for(target_iops: float, latency_s: float) -> int:
    """Little's law: I/Os in flight = IOPS x latency (1.3 ms x 3,500 IOPS = 4.55 -> 5)."""
    return max(1, math.ceil(target_iops * latency_s - 1e-9))


class DynamicSpec(Protocol):
    """What sizing a dynamic step reads: a planned step or a stored one."""

    @property
    def mode(self) -> str: ...
    @property
    def clients(self) -> int: ...
    @property
    def rate_pct(self) -> int | None: ...
    @property
    def target_iops(self) -> int | None: ...


def resolve_dynamic(
    spec: DynamicSpec,
    base: Workload,
    ref_aggregate: Reference,
    *,
    engine: Engine = "fio",
    mounts: int = 1,
    files_per_target: int = 1,
) -> Workload:
    """The workload of a rate-curve or target_iops step, from its reference step. A sized
    step's outstanding I/Os are spread over every client, mount and file it loads."""
    clients = spec.clients
    if spec.mode == "rate" and spec.rate_pct is not None:
        per_client = ref_aggregate.total_iops * spec.rate_pct / 100 / clients
        return base.model_copy(update={"rate_iops": max(1, round(per_client))})
    if spec.mode == "sized" and spec.target_iops is not None:
        lat = ref_aggregate.mean_latency_s
        shape = shape_for(
            outstanding_for(spec.target_iops, lat),
            clients,
            engine=engine,
            ioengine=base.ioengine,
            mounts=mounts,
            files_per_target=files_per_target,
        )
        return base.model_copy(update=shape)
    raise ValueError(f"step mode {spec.mode!r} is not resolved dynamically")


def plan_items(run: Run, step: Step, workload: Workload) -> list[WorkItem]:
    """One work item per client of a step; each goes to a distinct agent."""
    return [
        WorkItem(
            run_id=run.id,
            item_id=item_id(run.id, step.step, c),
            step=step.step,
            client=c,
            clients=step.clients,
            pool=run.pool,
            targets=run.targets,
            engine=run.engine,
            workload=workload,
            barrier_timeout_s=run.request.barrier_timeout_s,
            fill=run.fill,
            files_per_target=run.files_per_target,
            cooldown_s=run.cooldown_s,
            datasets=run.datasets,
        )
        for c in range(step.clients)
    ]
