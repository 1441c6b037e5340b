"""A step as the plan lays it out, before it is stored (core.runs.plan)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from core.models.workload import Workload

PlanMode = Literal["measure", "rate-max", "rate", "probe", "sized"]


class PlanPoint(BaseModel):
    """One point of a sweep: what a step measures, whatever its client count."""

    mode: PlanMode = "measure"
    point: str = ""
    workload: Workload | None = None  # None: a rate-curve or target_iops step, sized later
    rate_pct: int | None = None
    target_iops: int | None = None


class PlannedStep(PlanPoint):
    """A point at one client count and repetition: the fields of a stored step, less ids."""

    step: int
    clients: int
    repetition: int = 0
    discarded: bool = False
    ref_step: int | None = None  # a dynamic step sizes from this step's result


# Each step with the workload it will run, where the plan knows it (core.runs.guardrails).
KnownWorkloads = list[tuple[PlannedStep, Workload]]
