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
from typing import Any, Protocol

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
from core.models.stored import Run, Step
from core.runs.metadata import request_errors

MAX_TOTAL_STEPS = 64


def plan_steps(request: RunRequest, base: Workload) -> list[dict[str, Any]]:
    """The step specifications of a run (without ids): stored as step documents."""
    meta_errors = request_errors(request, base)
    if meta_errors:
        raise ValidationFailed(meta_errors)
    points: list[dict[str, Any]] = []
    sweep = request.sweep
    if isinstance(sweep, FieldSweep):
        for i, value in enumerate(sweep.values):
            w = _swept(base, {sweep.field: value}, f"sweep.values.{i}")
            points.append(
                {"mode": "measure", "point": f"{sweep.field}={value}", "workload": w.model_dump()}
            )
    elif isinstance(sweep, GridSweep):
        outer, inner = sweep.grid[1], sweep.grid[0]  # the first field varies fastest
        for j, b in enumerate(outer.values):
            for i, a in enumerate(inner.values):
                where = f"sweep.grid.0.values.{i}"
                w = _swept(base, {inner.field: a}, where)
                w = _swept(w, {outer.field: b}, f"sweep.grid.1.values.{j}")
                label = f"{inner.field}={a},{outer.field}={b}"
                points.append({"mode": "measure", "point": label, "workload": w.model_dump()})
    elif isinstance(sweep, RateSweep):
        points.append({"mode": "rate-max", "point": "max", "workload": base.model_dump()})
        for pct in sweep.rate_pct:
            points.append(
                {"mode": "rate", "point": f"rate={pct}%", "rate_pct": pct, "workload": None}
            )
    elif request.target_iops:
        probe = base.model_copy(update={"numjobs": 1, "iodepth": 1, "rate_iops": None})
        points.append({"mode": "probe", "point": "probe 1x1", "workload": probe.model_dump()})
        points.append(
            {
                "mode": "sized",
                "point": f"target {request.target_iops} IOPS",
                "target_iops": request.target_iops,
                "workload": None,
            }
        )
    elif base.metadata is not None:
        points += metadata_points(base)
    else:
        points.append({"mode": "measure", "point": "", "workload": base.model_dump()})

    steps: list[dict[str, Any]] = []
    for clients in request.client_steps:
        ref: int | None = None
        for point, rep in _order(points, request.repetitions, phases=base.metadata is not None):
            spec = {
                **point,
                "step": len(steps),
                "clients": clients,
                "repetition": rep,
                "discarded": request.discard_first and rep == 0 and request.repetitions > 1,
                "ref_step": ref if point["workload"] is None else None,
            }
            steps.append(spec)
            if point["mode"] in ("rate-max", "probe"):
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


def _swept(base: Workload, change: Mapping[str, Any], field: str) -> Workload:
    """``base`` with one swept field set; a value the workload refuses names its place."""
    try:
        return Workload.model_validate({**base.model_dump(), **change})
    except ValidationError as e:
        msg = "; ".join(str(x["msg"]) for x in e.errors())
        raise ValidationFailed([FieldError(field, msg)]) from None


def metadata_points(base: Workload) -> list[dict[str, Any]]:
    """One measured step per metadata phase, in order: each its own figures and window."""
    md = base.metadata
    assert md is not None
    return [
        {
            "mode": "measure",
            "point": op,
            "workload": base.model_copy(
                update={"metadata": md.model_copy(update={"op": op})}
            ).model_dump(),
        }
        for op in md.ops
    ]


def _order(
    points: list[dict[str, Any]], repetitions: int, *, phases: bool
) -> list[tuple[dict[str, Any], int]]:
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


def resolve_dynamic(
    spec: Mapping[str, Any],
    base: Workload,
    ref_aggregate: Reference,
    *,
    engine: Engine = "fio",
    mounts: int = 1,
    files_per_target: int = 1,
) -> Workload:
    """The workload of a rate-curve or target_iops step, from its reference step. A sized
    step's outstanding I/Os are spread over every client, mount and file it loads."""
    clients = int(spec["clients"])
    if spec["mode"] == "rate":
        per_client = ref_aggregate.total_iops * spec["rate_pct"] / 100 / clients
        return base.model_copy(update={"rate_iops": max(1, round(per_client))})
    if spec["mode"] == "sized":
        lat = ref_aggregate.mean_latency_s
        shape = shape_for(
            outstanding_for(spec["target_iops"], lat),
            clients,
            engine=engine,
            ioengine=base.ioengine,
            mounts=mounts,
            files_per_target=files_per_target,
        )
        return base.model_copy(update=shape)
    raise ValueError(f"step mode {spec['mode']!r} is not resolved dynamically")


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
